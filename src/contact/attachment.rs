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

pub use crate::model::attachment::{add_rhs, matrix_diagonal, AttachmentGroup};

/// $\sum_i\tfrac k2\|x_i\|^2$: the quadratic part of the attachment energy (its linear part
/// $-k\,p_i^Tx_i$ enters through the right-hand side / external force).
pub fn quadratic_energy(groups: &[AttachmentGroup], x: &[f64]) -> f64 {
    groups
        .iter()
        .flat_map(|g| g.nodes.iter().map(move |&i| (g.stiffness, i)))
        .map(|(k, i)| 0.5 * k * (0..3).map(|c| x[3 * i + c].powi(2)).sum::<f64>())
        .sum()
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
