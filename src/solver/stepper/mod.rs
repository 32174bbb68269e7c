//! The method seam: a [`Stepper`] is one time-integration method of the PD model — its
//! forward step, its part of the step's linearization for the adjoint and its adjoint
//! solve — with its own state. [`build`] and [`register`] are the one place that turns
//! `[solver] method` into a stepper, when the simulator is built (and again when `auto`'s
//! choice is revised before the first step, [`Simulator::set_method_choice`]): the PD method
//! ([`crate::solver::pd::stepper`]), Newton ([`crate::solver::newton::stepper`]), DiffPD's
//! L-BFGS PD ([`crate::solver::diffpd::stepper`]), and for `method = "auto"` the composite
//! [`auto::AutoStepper`] that retries a missed step with the other method. What every method
//! shares — the factored PD matrix, the Newton Hessian's pattern and symbolic factor, the
//! step context (forces, contact begin/finish, Dirichlet values) — stays on
//! [`Simulator`].
//!
//! The time loop ([`crate::solver::timeloop`]) calls [`Simulator::step`] once per frame
//! (one dynamic dispatch a frame, none per iteration); the reverse sweep
//! ([`crate::solver::rollout::backward`]) asks the simulator's stepper for the pinned nodes,
//! the linearization and the adjoint of each step.
//!
//! How to add a method: its folder under `solver/` with a type implementing [`Stepper`]
//! (state in its fields), its `SolverMethod` variant and settings (`model::settings`,
//! `solver::config`), and one arm in [`register`]. `explicit_euler.rs` (`#[cfg(test)]`) is
//! the smallest example.

pub mod auto;
#[cfg(test)]
mod explicit_euler;

use super::backward::StepLinearization;
use super::config::{BackwardConfig, SolverConfig};
use super::diffpd::stepper::DiffpdStepper;
use super::error::SolverError;
use super::newton::stepper::NewtonStepper;
use super::offload::OffloadError;
use super::pd::stepper::PdStepper;
use super::simulator::Simulator;
use super::stats::{AdjointStats, StepStats};
use crate::linalg::SystemPlan;
use crate::model::{Model, SolverMethod};

/// One time-integration method with its own state (module docs).
pub trait Stepper: Send + Sync {
    /// One step producing frame `frame` (1-based) from $(x_t, v_t)$: $x_{t+1}$ and the
    /// step's statistics. `sim` supplies the shared step context.
    fn step(
        &mut self,
        sim: &mut Simulator<'_>,
        frame: usize,
        x_t: &[f64],
        v_t: &[f64],
    ) -> Result<(Vec<f64>, StepStats), SolverError>;

    /// Nodes the step recorded in `stats` held at $x_t$ as extra Dirichlet DoFs (DiffPD's
    /// glue contact): the backward linearizes and solves that step's adjoint with them
    /// pinned ([`Simulator::pin_nodes`], $z_C=0$) and routes $(g-Kz)_C$ to $x_{t,C}$.
    /// Default: none.
    fn pinned_nodes(&self, _stats: &StepStats) -> Option<Vec<usize>> {
        None
    }

    /// The linearization of the step at $x_{t+1}$ for the adjoint (spec §7.2 step 2): the
    /// PD Hessian's $\Delta A$ with the backward filter's blend `alpha`, and the contact
    /// block of the step's contact record. Every method built so far minimises the PD step
    /// energy, so they share this default.
    fn linearize<'s>(
        &self,
        sim: &'s Simulator<'_>,
        x_next: &[f64],
        alpha: f64,
        stats: &StepStats,
    ) -> Result<StepLinearization<'s>, OffloadError> {
        StepLinearization::for_adjoint(sim, x_next, alpha)?
            .with_contact(sim, stats.contact_record.as_deref())
    }

    /// The step's adjoint: $z$ with $Kz=g$ (Eq. 41; $K$ the linearization `lin` at
    /// $x_{t+1}$ = `x_next`, on the free DoFs) and its statistics.
    fn adjoint(
        &self,
        sim: &Simulator<'_>,
        lin: &StepLinearization,
        x_next_g: (&[f64], &[f64]),
        cfg: &BackwardConfig,
        frame: usize,
    ) -> Result<(Vec<f64>, AdjointStats), SolverError>;

    /// Whether the adjoint solve that produced `stats` was exact to round-off (a direct
    /// factorization), so that the gradient error estimate skips its residual
    /// ([`super::adjoint::error_estimate`]). Default: the PD adjoint's record says `direct`.
    fn adjoint_is_exact(&self, stats: &AdjointStats) -> bool {
        stats.method.contains("direct")
    }
}

/// The stepper of `requested` (`[solver] method`) on `model`, whose PD matrix has the
/// symbolic analysis `plan`: `auto` is resolved here by [`super::auto::choose_method`]
/// (recorded in `config.method` and `config.choice`), then [`register`]ed.
pub fn build(
    model: &Model,
    plan: &SystemPlan,
    requested: SolverMethod,
    config: &mut SolverConfig,
) -> Box<dyn Stepper> {
    if requested == SolverMethod::Auto {
        let q = super::auto::MethodQuantities::of(model, plan);
        let choice = super::auto::choose_method(&q);
        config.method = choice.method;
        config.choice = Some(choice);
    }
    register(config)
}

/// The stepper of the resolved settings `config`: the one place that matches
/// `SolverMethod`. With `auto`'s choice (`config.choice`) the composite that retries a
/// missed step with the other method of the pair.
pub fn register(config: &SolverConfig) -> Box<dyn Stepper> {
    let one = |method: SolverMethod| -> Box<dyn Stepper> {
        match method {
            SolverMethod::Newton => Box::new(NewtonStepper),
            SolverMethod::Diffpd => Box::new(DiffpdStepper::default()),
            // `Auto` is resolved before (`SolverConfig::from_settings`, `solver::auto`)
            SolverMethod::Diffphd | SolverMethod::Auto => Box::new(PdStepper::new(config)),
        }
    };
    match &config.choice {
        None => one(config.method),
        Some(_) => {
            let other = super::auto::other_method(config.method);
            Box::new(auto::AutoStepper::new(
                config.method,
                one(config.method),
                one(other),
            ))
        }
    }
}

/// What [`Simulator::step`] leaves in the simulator while its stepper runs: a stepper that
/// reached back into [`Simulator::step`] or the backward would meet this.
struct Detached;

impl Stepper for Detached {
    fn step(
        &mut self,
        _: &mut Simulator<'_>,
        _: usize,
        _: &[f64],
        _: &[f64],
    ) -> Result<(Vec<f64>, StepStats), SolverError> {
        Err(detached())
    }

    fn adjoint(
        &self,
        _: &Simulator<'_>,
        _: &StepLinearization,
        _: (&[f64], &[f64]),
        _: &BackwardConfig,
        _: usize,
    ) -> Result<(Vec<f64>, AdjointStats), SolverError> {
        Err(detached())
    }
}

fn detached() -> SolverError {
    SolverError::Unsupported("a stepper called its own simulator's step".into())
}

impl Simulator<'_> {
    /// One implicit-Euler step producing frame `frame` (1-based) from $(x_t, v_t)$ by the
    /// simulator's method ([`Stepper::step`]). Returns $x_{t+1}$ and the step statistics.
    pub fn step(
        &mut self,
        frame: usize,
        x_t: &[f64],
        v_t: &[f64],
    ) -> Result<(Vec<f64>, StepStats), SolverError> {
        // the stepper leaves the simulator for the step (a zero-sized stand-in: no
        // allocation) so that it can take the simulator mutably
        let mut stepper = std::mem::replace(&mut self.stepper, Box::new(Detached));
        let out = stepper.step(self, frame, x_t, v_t);
        self.stepper = stepper;
        out
    }

    /// The simulator's method.
    pub fn stepper(&self) -> &dyn Stepper {
        &*self.stepper
    }

    /// Use `choice` (`solver.method = "auto"`'s resolved method) from the next step on: the
    /// settings record it and the stepper is registered anew (before the first step; the
    /// device rule and `optimize`'s pinned choice revise the simulator's own).
    pub fn set_method_choice(&mut self, choice: super::auto::MethodChoice) {
        self.config.method = choice.method;
        self.config.choice = Some(choice);
        self.stepper = register(&self.config);
    }
}
