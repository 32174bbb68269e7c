//! The PD method as a [`Stepper`] (`solver.method = "diffphd"`): its state is the Anderson
//! accelerator of the iteration and the direct-adjoint streak of its backward; the step is
//! `StepContext::step_pd` (`forward`), the adjoint `adjoint::solve` (`pd/adjoint.rs`).

use super::adjoint;
use crate::solver::adjoint::backward::StepLinearization;
use crate::solver::context::StepContext;
use crate::solver::records::config::{BackwardConfig, SolverConfig};
use crate::solver::records::error::SolverError;
use crate::solver::records::stats::{AdjointStats, StepStats};
use crate::solver::stages::anderson::TypeII;
use crate::solver::stepper::Stepper;
use std::sync::atomic::AtomicUsize;

/// The PD method's own state.
pub struct PdStepper {
    /// Anderson accelerator of the PD iteration (reset at every step; its guard counter
    /// runs across steps).
    aa: TypeII,
    /// Consecutive backward frames solved by the direct adjoint (`backward.direct_after`).
    direct_streak: AtomicUsize,
}

impl PdStepper {
    /// The PD stepper of the resolved settings (Anderson window and γ cap).
    pub fn new(config: &SolverConfig) -> Self {
        PdStepper {
            aa: TypeII::new(config.window, config.gamma_max),
            direct_streak: AtomicUsize::new(0),
        }
    }
}

impl Stepper for PdStepper {
    fn step(
        &mut self,
        sim: &mut StepContext<'_>,
        frame: usize,
        x_t: &[f64],
        v_t: &[f64],
    ) -> Result<(Vec<f64>, StepStats), SolverError> {
        sim.step_pd(&mut self.aa, frame, x_t, v_t)
    }

    fn adjoint(
        &self,
        sim: &StepContext<'_>,
        lin: &StepLinearization,
        (x_next, g): (&[f64], &[f64]),
        cfg: &BackwardConfig,
        frame: usize,
    ) -> Result<(Vec<f64>, AdjointStats), SolverError> {
        adjoint::solve(sim, lin, (x_next, g), cfg, frame, &self.direct_streak)
    }
}
