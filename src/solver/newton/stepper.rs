//! Newton's method as a [`Stepper`] (`solver.method = "newton"`): the step is
//! [`super::step`], the adjoint the direct solve of the step's Hessian
//! ([`super::adjoint::solve_adjoint`]). Its Hessian pattern and symbolic factor are not its
//! own: the simulator shares them with the PD method's direct fallback and direct adjoint
//! (`Simulator::newton_system`, `Simulator::adjoint_system`), so that `auto`'s two methods
//! analyse the pattern once.

use crate::solver::backward::StepLinearization;
use crate::solver::config::BackwardConfig;
use crate::solver::error::SolverError;
use crate::solver::simulator::Simulator;
use crate::solver::stats::{AdjointStats, StepStats};
use crate::solver::stepper::Stepper;

/// Newton's method (state: none beyond the simulator's shared factors).
pub struct NewtonStepper;

impl Stepper for NewtonStepper {
    fn step(
        &mut self,
        sim: &mut Simulator<'_>,
        frame: usize,
        x_t: &[f64],
        v_t: &[f64],
    ) -> Result<(Vec<f64>, StepStats), SolverError> {
        super::step(sim, frame, x_t, v_t)
    }

    fn adjoint(
        &self,
        sim: &Simulator<'_>,
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
