//! The accelerator seam of the PD step (spec §6.2, docs/gpu.md): the two costly stages of a
//! PD iteration — the local step with its right-hand-side gather, and the global solve — can
//! be handed to an implementation of [`Offload`] (the GPU backend, `gpu::offload`). The
//! solver defines the contract and knows nothing of devices; the CPU path is the reference.

use crate::linalg::LinearSolver;

/// Stages of a PD iteration an accelerator performs.
pub trait Offload {
    /// Where the work runs (for logs).
    fn describe(&self) -> String;
    /// $b_p=\sum_sG_s^T\mathrm{vec}\,Q_s$ at positions `x` (spec §6.2 steps 6–7; node-major).
    fn local_rhs(&mut self, x: &[f64], bp: &mut [f64]) -> Result<(), String>;
    /// Solve $A x=b$ with the Dirichlet values `xd` (the contract of
    /// [`crate::linalg::LinearSolver::solve`]).
    fn solve(&mut self, b: &[f64], xd: &[f64], x: &mut [f64]) -> Result<(), String>;

    // --- contact and muscles (issue 15): the accelerator's factor for contact, muscle time ---

    /// The accelerator's factor of $A$ as a [`LinearSolver`], if it has one: every
    /// contact-side solve (Delassus columns, matrix-free products, the contact adjoint) then
    /// goes through it instead of the CPU factor ([`crate::solver::Simulator::contact_solver`]).
    fn linear_solver(&self) -> Option<&dyn LinearSolver> {
        None
    }
    /// The time at which the next local steps evaluate muscle activations (the
    /// simulator's `Derived::muscle_time`, set at the start of every step).
    fn set_muscle_time(&mut self, _t: f64) {}
}
