//! The method seam: `Simulator::step` runs the step of the method chosen by
//! `[solver] method` — the PD method (`forward`), Newton (`newton`) or DiffPD's L-BFGS PD
//! (`diffpd`). The backward's counterpart is the dispatch in `rollout::backward`.
//!
//! With `method = "auto"` (`solver::auto`) a step that misses its stopping test is solved
//! again from its start $(x_t, v_t)$ by the other method of the pair (accurate PD, Newton);
//! the step's statistics are the second attempt's, with `retried_from` naming the first.
//! Both minimise the same step energy (Newton's default `newton_energy = "pd"`), so the
//! backward of either method differentiates the step the retry produced.

use super::error::SolverError;
use super::simulator::Simulator;
use super::stats::StepStats;
use super::{diffpd, newton};
use crate::model::{OnNonConvergence, SolverMethod};

impl Simulator<'_> {
    /// One implicit-Euler step producing frame `frame` (1-based) from $(x_t, v_t)$.
    /// Returns $x_{t+1}$ and the step statistics.
    pub fn step(
        &mut self,
        frame: usize,
        x_t: &[f64],
        v_t: &[f64],
    ) -> Result<(Vec<f64>, StepStats), SolverError> {
        let method = self.config.method;
        if self.config.choice.is_none() {
            return self.step_with(method, frame, x_t, v_t);
        }
        // `auto`: the first attempt only reports a miss, the retry follows the scene's rule
        let policy = self.config.on_nonconvergence;
        self.config.on_nonconvergence = OnNonConvergence::Warn;
        let first = self.step_with(method, frame, x_t, v_t);
        self.config.on_nonconvergence = policy;
        let (x, stats) = first?;
        if stats.converged {
            return Ok((x, stats));
        }
        let other = super::auto::other_method(method);
        let (x, mut stats) = self.step_with(other, frame, x_t, v_t)?;
        stats.retried_from = Some(method);
        Ok((x, stats))
    }

    fn step_with(
        &mut self,
        method: SolverMethod,
        frame: usize,
        x_t: &[f64],
        v_t: &[f64],
    ) -> Result<(Vec<f64>, StepStats), SolverError> {
        // Baselines (issue 7): Newton and DiffPD's L-BFGS PD (no contact, no muscles).
        match method {
            SolverMethod::Newton => newton::step(self, frame, x_t, v_t),
            SolverMethod::Diffpd => diffpd::step(self, frame, x_t, v_t),
            // `Auto` never reaches here: `Simulator::with_plan` resolves it
            SolverMethod::Diffphd | SolverMethod::Auto => self.step_pd(frame, x_t, v_t),
        }
    }
}
