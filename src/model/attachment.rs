//! Compliant attachments of the model (`[[body.attachment]]` with compliance > 0): nodes
//! tied by springs to targets that follow a prescribed rigid motion. Their matrix diagonal
//! and right-hand side are model quantities; the energy and gradients are
//! `crate::contact::attachment`.

use super::settings::Motion;
use nalgebra::Vector3;

/// A compliant attachment group.
#[derive(Clone, Debug)]
pub struct AttachmentGroup {
    pub body: usize,
    /// Position of the group in its body's `[[body.attachment]]` list.
    pub index: usize,
    pub nodes: Vec<usize>,
    /// Target of every node at $t=0$ (the target point, or the node's initial position).
    pub targets: Vec<[f64; 3]>,
    /// Stiffness $k=1/c$ (N/m per node).
    pub stiffness: f64,
    pub motion: Motion,
    /// Rotation centre of `Rotate`.
    pub center: [f64; 3],
    /// Rigid translation of the target trajectory (m; a differentiable offset, 0 from the
    /// scene).
    pub offset: [f64; 3],
}

impl AttachmentGroup {
    /// Target of node `k` of the group at time `t`.
    pub fn target(&self, k: usize, t: f64) -> Vector3<f64> {
        let p0 = Vector3::from(self.targets[k]);
        let p = match &self.motion {
            Motion::Fixed => p0,
            Motion::Translate { velocity } => p0 + Vector3::from(*velocity) * t,
            Motion::Rotate { axis, rate, .. } => {
                let c = Vector3::from(self.center);
                let rot = nalgebra::Rotation3::from_axis_angle(
                    &nalgebra::Unit::new_normalize(Vector3::from(*axis)),
                    rate * t,
                );
                rot * (p0 - c) + c
            }
        };
        p + Vector3::from(self.offset)
    }
}

/// Diagonal of $A$: $k$ on every attached node (per axis).
pub fn matrix_diagonal(groups: &[AttachmentGroup], n: usize) -> Vec<f64> {
    let mut d = vec![0.0; n];
    for g in groups {
        for &i in &g.nodes {
            d[i] += g.stiffness;
        }
    }
    d
}

/// `f += k p_i(t)` (the attachment's right-hand side, node-major).
pub fn add_rhs(groups: &[AttachmentGroup], t: f64, f: &mut [f64]) {
    for g in groups {
        for (k, &i) in g.nodes.iter().enumerate() {
            let p = g.target(k, t);
            for d in 0..3 {
                f[3 * i + d] += g.stiffness * p[d];
            }
        }
    }
}
