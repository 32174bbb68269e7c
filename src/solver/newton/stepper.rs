//! Newton's method as a [`Stepper`] (`solver.method = "newton"`): the step is
//! [`super::step`], the adjoint the direct solve of the step's Hessian
//! ([`super::adjoint::solve_adjoint`]). Its Hessian pattern and symbolic factor are not its
//! own: the simulator shares them with the PD method's direct fallback and direct adjoint
//! (`StepContext::newton_system`, `StepContext::adjoint_system`), so that `auto`'s two methods
//! analyse the pattern once.

use crate::solver::adjoint::backward::StepLinearization;
use crate::solver::context::StepContext;
use crate::solver::records::config::BackwardConfig;
use crate::solver::records::error::SolverError;
use crate::solver::records::stats::{AdjointStats, StepStats};
use crate::solver::stepper::Stepper;

/// Newton's method (state: none beyond the simulator's shared factors).
pub struct NewtonStepper;

impl Stepper for NewtonStepper {
    fn step(
        &mut self,
        sim: &mut StepContext<'_>,
        frame: usize,
        x_t: &[f64],
        v_t: &[f64],
    ) -> Result<(Vec<f64>, StepStats), SolverError> {
        super::step(sim, frame, x_t, v_t)
    }

    fn adjoint(
        &self,
        sim: &StepContext<'_>,
        lin: &StepLinearization,
        (x_next, g): (&[f64], &[f64]),
        cfg: &BackwardConfig,
        frame: usize,
    ) -> Result<(Vec<f64>, AdjointStats), SolverError> {
        super::adjoint::solve_adjoint(sim, lin, x_next, g, cfg, frame)
    }

    /// Newton's adjoint is a direct solve with the Hessian's factor.
    fn adjoint_is_exact(&self, _stats: &AdjointStats) -> bool {
        true
    }
}
