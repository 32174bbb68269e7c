//! `solver.method = "auto"` as a composite [`Stepper`] of the pair accurate PD and Newton:
//! each frame is solved as the per-frame rule ([`crate::solver::auto::FrameRule`]) plans it
//! — by the current method, or by a PD probe capped at a share of a Newton frame's cost —
//! and a step that misses its stopping test is solved again from its start $(x_t, v_t)$ by
//! the other method. The step's statistics are those of the attempt that solved it, with
//! `method` naming it, `retried_from` the method whose attempt missed and `probe_budget`
//! the probe's cap.
//!
//! The backward differentiates each frame with the linearization and adjoint of the method
//! that solved it (both minimise the same step energy with Newton's default
//! `newton_energy = "pd"`, but their adjoint solves differ). The rule's state before each
//! frame is kept per frame, so that the checkpointed backward's recomputation of a segment
//! replays the forward's decisions bit for bit; a rollout from frame `s`
//! ([`Stepper::begin_rollout`]) starts from the rule's initial state.

use super::Stepper;
use crate::model::{OnNonConvergence, SolverMethod};
use crate::solver::adjoint::backward::StepLinearization;
use crate::solver::auto::{frame_cost, FrameOutcome, FramePlan, FrameRule, MethodChoice};
use crate::solver::context::StepContext;
use crate::solver::offload::OffloadError;
use crate::solver::records::config::BackwardConfig;
use crate::solver::records::error::SolverError;
use crate::solver::records::stats::{AdjointStats, StepStats};
use std::time::Instant;

/// The pair's steppers, the rule and the per-frame record of the rollout.
pub struct AutoStepper {
    pd: Box<dyn Stepper>,
    newton: Box<dyn Stepper>,
    /// The rule before the first frame of a rollout.
    initial: FrameRule,
    /// `rules[f]`: the rule after frame `f` (`rules[s]` the start of a rollout from `s`).
    rules: Vec<Option<FrameRule>>,
    /// `solved[f]`: the method that solved frame `f` (the adjoint's router).
    solved: Vec<Option<SolverMethod>>,
}

impl AutoStepper {
    /// The composite of `choice` (the per-scene rule's resolved method and quantities):
    /// `pd` and `newton` are the two methods' steppers.
    pub fn new(choice: &MethodChoice, pd: Box<dyn Stepper>, newton: Box<dyn Stepper>) -> Self {
        AutoStepper {
            pd,
            newton,
            initial: FrameRule::start(choice),
            rules: Vec::new(),
            solved: Vec::new(),
        }
    }

    fn of(&self, method: SolverMethod) -> &dyn Stepper {
        match method {
            SolverMethod::Newton => &*self.newton,
            _ => &*self.pd,
        }
    }

    /// The method that solved frame `frame` (the per-scene choice for a frame not stepped).
    fn solved_by(&self, frame: usize) -> SolverMethod {
        self.solved
            .get(frame)
            .copied()
            .flatten()
            .unwrap_or(self.initial.current)
    }

    /// One attempt of `method` on the step; `cap` replaces PD's iteration cap and `last`
    /// says whether a miss is the frame's (the scene's `on_nonconvergence`) or only reported.
    fn attempt(
        &mut self,
        sim: &mut StepContext<'_>,
        (frame, x_t, v_t): (usize, &[f64], &[f64]),
        method: SolverMethod,
        cap: Option<usize>,
        last: bool,
    ) -> Result<(Vec<f64>, StepStats), SolverError> {
        let (policy, max_iterations) = (sim.config.on_nonconvergence, sim.config.max_iterations);
        if !last {
            sim.config.on_nonconvergence = OnNonConvergence::Warn;
        }
        if let Some(c) = cap {
            sim.config.max_iterations = c.min(max_iterations);
        }
        let stepper = match method {
            SolverMethod::Newton => &mut self.newton,
            _ => &mut self.pd,
        };
        let out = stepper.step(sim, frame, x_t, v_t);
        sim.config.on_nonconvergence = policy;
        sim.config.max_iterations = max_iterations;
        let (x, mut stats) = out?;
        stats.method = Some(method);
        Ok((x, stats))
    }
}

fn set<T>(v: &mut Vec<Option<T>>, i: usize, value: T) {
    if v.len() <= i {
        v.resize_with(i + 1, || None);
    }
    v[i] = Some(value);
}

/// The iterations an attempt ran: PD iterations (with the accurate mode's GMRES
/// iterations), or Newton iterations.
fn attempt_iterations(stats: &StepStats) -> usize {
    match &stats.newton {
        Some(n) => n.iterations,
        None => stats.iterations + stats.polish_gmres_iterations,
    }
}

fn other(m: SolverMethod) -> SolverMethod {
    crate::solver::auto::other_method(m)
}

impl Stepper for AutoStepper {
    fn step(
        &mut self,
        sim: &mut StepContext<'_>,
        frame: usize,
        x_t: &[f64],
        v_t: &[f64],
    ) -> Result<(Vec<f64>, StepStats), SolverError> {
        let rule = frame
            .checked_sub(1)
            .and_then(|f| self.rules.get(f).copied().flatten())
            .unwrap_or(self.initial);
        let step = (frame, x_t, v_t);
        if sim.accelerator().is_some() {
            // a device attached (also one attached after the per-scene choice): `auto` is
            // PD there, without switching or retries
            let out = self.attempt(sim, step, SolverMethod::Diffphd, None, true)?;
            set(&mut self.rules, frame, rule);
            set(&mut self.solved, frame, SolverMethod::Diffphd);
            return Ok(out);
        }
        let plan = rule.plan(frame);
        // the attempts of the plan: the first ones only report a miss
        let (first, cap) = match plan {
            FramePlan::Current(m) => (m, None),
            FramePlan::ProbePd { budget } => (SolverMethod::Diffphd, Some(budget)),
        };
        let probed = cap.is_some();
        let t_first = Instant::now();
        let (mut x, mut stats) = self.attempt(sim, step, first, cap, false)?;
        if !stats.converged {
            let missed = first;
            let second = other(first);
            // the missed attempt's work, reported with the attempt that replaces it
            let mut missed_work = (attempt_iterations(&stats), t_first.elapsed().as_secs_f64());
            // after a failed probe Newton may still miss: PD without the cap then
            let last = !probed;
            let t_second = Instant::now();
            let (x2, mut s2) = self.attempt(sim, step, second, None, last)?;
            s2.retried_from = Some(missed);
            (x, stats) = (x2, s2);
            if !last && !stats.converged {
                missed_work.0 += attempt_iterations(&stats);
                missed_work.1 += t_second.elapsed().as_secs_f64();
                let (x3, mut s3) = self.attempt(sim, step, SolverMethod::Diffphd, None, true)?;
                s3.retried_from = Some(SolverMethod::Newton);
                (x, stats) = (x3, s3);
            }
            (stats.missed_iterations, stats.missed_seconds) =
                (Some(missed_work.0), Some(missed_work.1));
        }
        if let Some(budget) = cap {
            stats.probe_budget = Some(budget);
        }
        let solved_by = stats.method.unwrap_or(first);
        let outcome = FrameOutcome {
            solved_by,
            probed,
            cost: frame_cost(
                solved_by,
                stats.iterations + stats.polish_gmres_iterations,
                stats.newton.as_ref().map_or(0, |n| n.factorizations),
            ),
            active_contacts: stats.contact.as_ref().map_or(0, |c| c.active),
        };
        set(&mut self.rules, frame, rule.after(frame, &outcome));
        set(&mut self.solved, frame, solved_by);
        Ok((x, stats))
    }

    fn begin_rollout(&mut self, start: usize) {
        self.rules.clear();
        self.solved.clear();
        set(&mut self.rules, start, self.initial);
    }

    fn pinned_nodes(&self, stats: &StepStats) -> Option<Vec<usize>> {
        self.of(stats.method.unwrap_or(self.initial.current))
            .pinned_nodes(stats)
    }

    fn linearize<'s>(
        &self,
        sim: &'s StepContext<'_>,
        x_next: &[f64],
        alpha: f64,
        stats: &StepStats,
    ) -> Result<StepLinearization<'s>, OffloadError> {
        self.of(stats.method.unwrap_or(self.initial.current))
            .linearize(sim, x_next, alpha, stats)
    }

    fn adjoint(
        &self,
        sim: &StepContext<'_>,
        lin: &StepLinearization,
        x_next_g: (&[f64], &[f64]),
        cfg: &BackwardConfig,
        frame: usize,
    ) -> Result<(Vec<f64>, AdjointStats), SolverError> {
        self.of(self.solved_by(frame))
            .adjoint(sim, lin, x_next_g, cfg, frame)
    }

    fn adjoint_is_exact(&self, stats: &AdjointStats) -> bool {
        self.of(self.solved_by(stats.frame)).adjoint_is_exact(stats)
    }
}
