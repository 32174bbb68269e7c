//! Bilateral attachments (`[[body.attachment]]`, issue 4): selected nodes tied to a target
//! point, or each to its own initial position, optionally moving with a prescribed rigid
//! motion, with compliance $c=1/k$ (m/N per node; $c=0$ is a hard attachment, built as a
//! Dirichlet group).
//!
//! A compliant attachment is the quadratic energy $\tfrac k2\|x_i-p_i(t)\|^2$ per node: a PD
//! term with constant weight $k$ whose projection is the target itself, so it adds $k$ to the
//! diagonal of $A$ (constant: the persistent factor stays valid) and $k\,p_i(t_{n+1})$ to the
//! right-hand side (a moving target only changes the right-hand side; it enters through
//! `Model::external_force`, evaluated at the end of the step). Residual
//! $\mathcal R_x\ni k(x_i-p_i)$, hence (spec §7.5 convention $d\mathcal L/d\theta=-z^T\partial\mathcal R_x/\partial\theta$)
//! $$\frac{d\mathcal L}{dk}=-\sum_iz_i^T(x_{t+1,i}-p_i(t_{n+1})),\qquad
//! \frac{d\mathcal L}{d\tau}=k\sum_iz_i$$
//! for a rigid translation $\tau$ of the target's whole trajectory.

use crate::scene::Motion;
use nalgebra::Vector3;

/// A compliant attachment group.
#[derive(Clone, Debug)]
pub struct AttachmentGroup {
    pub body: usize,
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

/// $\sum_i\tfrac k2\|x_i\|^2$: the quadratic part of the attachment energy (its linear part
/// $-k\,p_i^Tx_i$ enters through the right-hand side / external force).
pub fn quadratic_energy(groups: &[AttachmentGroup], x: &[f64]) -> f64 {
    groups
        .iter()
        .flat_map(|g| g.nodes.iter().map(move |&i| (g.stiffness, i)))
        .map(|(k, i)| 0.5 * k * (0..3).map(|c| x[3 * i + c].powi(2)).sum::<f64>())
        .sum()
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

/// Gradients of one step (end time `t_end`, adjoint `z`, end state `x`):
/// $(d\mathcal L/dk_g,\ d\mathcal L/d\tau_g)$ per group.
pub fn gradients(
    groups: &[AttachmentGroup],
    t_end: f64,
    x: &[f64],
    z: &[f64],
) -> Vec<(f64, [f64; 3])> {
    groups
        .iter()
        .map(|g| {
            let mut dk = 0.0;
            let mut dt = [0.0; 3];
            for (k, &i) in g.nodes.iter().enumerate() {
                let p = g.target(k, t_end);
                for d in 0..3 {
                    dk -= z[3 * i + d] * (x[3 * i + d] - p[d]);
                    dt[d] += g.stiffness * z[3 * i + d];
                }
            }
            (dk, dt)
        })
        .collect()
}
