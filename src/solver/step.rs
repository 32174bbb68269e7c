//! The method seam: `Simulator::step` runs the step of the method chosen by
//! `[solver] method` — the PD method (`forward`), Newton (`newton`) or DiffPD's L-BFGS PD
//! (`diffpd`). The backward's counterpart is the dispatch in `rollout::backward`.

use super::error::SolverError;
use super::simulator::Simulator;
use super::stats::StepStats;
use super::{diffpd, newton};
use crate::model::SolverMethod;

impl Simulator<'_> {
    /// One implicit-Euler step producing frame `frame` (1-based) from $(x_t, v_t)$.
    /// Returns $x_{t+1}$ and the step statistics.
    pub fn step(
        &mut self,
        frame: usize,
        x_t: &[f64],
        v_t: &[f64],
    ) -> Result<(Vec<f64>, StepStats), SolverError> {
        // Baselines (issue 7): Newton and DiffPD's L-BFGS PD (no contact, no muscles).
        match self.config.method {
            SolverMethod::Newton => newton::step(self, frame, x_t, v_t),
            SolverMethod::Diffpd => diffpd::step(self, frame, x_t, v_t),
            SolverMethod::Diffphd => self.step_pd(frame, x_t, v_t),
        }
    }
}
