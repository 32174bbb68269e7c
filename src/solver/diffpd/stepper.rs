//! DiffPD's L-BFGS PD as a [`Stepper`] (`solver.method = "diffpd"`): its state is the glue
//! contact's active set of the previous step (the warm start of the next); the step is
//! [`super::step`], the adjoint DiffPD's quasi-Newton solve ([`super::solve_adjoint`]) on the
//! step's system with its active nodes pinned ([`Stepper::pinned_nodes`]).

use crate::solver::adjoint::backward::StepLinearization;
use crate::solver::context::StepContext;
use crate::solver::records::config::BackwardConfig;
use crate::solver::records::error::SolverError;
use crate::solver::records::stats::{AdjointStats, StepStats};
use crate::solver::stepper::Stepper;

/// DiffPD's own state.
#[derive(Default)]
pub struct DiffpdStepper {
    /// Active contact set of the previous step (glue contact's warm start).
    active: Vec<usize>,
}

impl Stepper for DiffpdStepper {
    fn step(
        &mut self,
        sim: &mut StepContext<'_>,
        frame: usize,
        x_t: &[f64],
        v_t: &[f64],
    ) -> Result<(Vec<f64>, StepStats), SolverError> {
        let (x, stats) = super::step(sim, &self.active, frame, x_t, v_t)?;
        if let Some(active) = &stats.diffpd_active {
            self.active.clone_from(active);
        }
        Ok((x, stats))
    }

    /// The glue contact's active nodes of the step, held at $x_t$ (extra Dirichlet DoFs).
    fn pinned_nodes(&self, stats: &StepStats) -> Option<Vec<usize>> {
        stats.diffpd_active.clone().filter(|c| !c.is_empty())
    }

    fn adjoint(
        &self,
        sim: &StepContext<'_>,
        lin: &StepLinearization,
        (_, g): (&[f64], &[f64]),
        cfg: &BackwardConfig,
        frame: usize,
    ) -> Result<(Vec<f64>, AdjointStats), SolverError> {
        super::solve_adjoint(sim, lin, g, cfg, frame)
    }
}
