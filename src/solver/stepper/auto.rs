//! `solver.method = "auto"` as a composite [`Stepper`]: the chosen method
//! ([`crate::solver::auto::choose_method`]) steps every frame; a step that misses its
//! stopping test is solved again from its start $(x_t, v_t)$ by the other method of the
//! pair (accurate PD, Newton); the step's statistics are the second attempt's, with
//! `retried_from` naming the first. Both minimise the same step energy (Newton's default
//! `newton_energy = "pd"`), so the backward differentiates the retried step with the
//! chosen method's linearization and adjoint.

use super::Stepper;
use crate::model::{OnNonConvergence, SolverMethod};
use crate::solver::adjoint::backward::StepLinearization;
use crate::solver::context::StepContext;
use crate::solver::offload::OffloadError;
use crate::solver::records::config::BackwardConfig;
use crate::solver::records::error::SolverError;
use crate::solver::records::stats::{AdjointStats, StepStats};

/// The chosen method and the other one of the pair, each with its own state.
pub struct AutoStepper {
    method: SolverMethod,
    chosen: Box<dyn Stepper>,
    other: Box<dyn Stepper>,
}

impl AutoStepper {
    /// `chosen` is the stepper of `method`, `other` the retry's.
    pub fn new(method: SolverMethod, chosen: Box<dyn Stepper>, other: Box<dyn Stepper>) -> Self {
        AutoStepper {
            method,
            chosen,
            other,
        }
    }
}

impl Stepper for AutoStepper {
    fn step(
        &mut self,
        sim: &mut StepContext<'_>,
        frame: usize,
        x_t: &[f64],
        v_t: &[f64],
    ) -> Result<(Vec<f64>, StepStats), SolverError> {
        // the first attempt only reports a miss, the retry follows the scene's rule
        let policy = sim.config.on_nonconvergence;
        sim.config.on_nonconvergence = OnNonConvergence::Warn;
        let first = self.chosen.step(sim, frame, x_t, v_t);
        sim.config.on_nonconvergence = policy;
        let (x, stats) = first?;
        if stats.converged {
            return Ok((x, stats));
        }
        let (x, mut stats) = self.other.step(sim, frame, x_t, v_t)?;
        stats.retried_from = Some(self.method);
        Ok((x, stats))
    }

    fn pinned_nodes(&self, stats: &StepStats) -> Option<Vec<usize>> {
        self.chosen.pinned_nodes(stats)
    }

    fn linearize<'s>(
        &self,
        sim: &'s StepContext<'_>,
        x_next: &[f64],
        alpha: f64,
        stats: &StepStats,
    ) -> Result<StepLinearization<'s>, OffloadError> {
        self.chosen.linearize(sim, x_next, alpha, stats)
    }

    fn adjoint(
        &self,
        sim: &StepContext<'_>,
        lin: &StepLinearization,
        x_next_g: (&[f64], &[f64]),
        cfg: &BackwardConfig,
        frame: usize,
    ) -> Result<(Vec<f64>, AdjointStats), SolverError> {
        self.chosen.adjoint(sim, lin, x_next_g, cfg, frame)
    }

    fn adjoint_is_exact(&self, stats: &AdjointStats) -> bool {
        self.chosen.adjoint_is_exact(stats)
    }
}
