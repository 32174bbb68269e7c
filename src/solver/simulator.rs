//! The simulator: the shared [`StepContext`] (model, derived parameters, the factored PD
//! system, the caches every method shares) and, in a slot above it, the method's
//! [`Stepper`] with its own state, registered once when the simulator is built
//! ([`build`], [`register`]: the one place that turns `[solver] method` into a stepper). The
//! steppers take the context, never the simulator, so this file is the only one that
//! imports both the context and the methods (no import circle between them).
//! The simulator dereferences to its context (its model, settings, attached accelerator, …).

use super::auto::MethodChoice;
use super::context::StepContext;
use super::diffpd::stepper::DiffpdStepper;
use super::newton::stepper::NewtonStepper;
use super::pd::stepper::PdStepper;
use super::records::config::SolverConfig;
use super::records::error::SolverError;
use super::records::stats::StepStats;
use super::stepper::auto::AutoStepper;
use super::stepper::Stepper;
use crate::linalg::SystemPlan;
use crate::model::{Derived, Model, SolverMethod, SolverSettings};
use std::sync::Arc;
use std::time::Instant;

/// The forward simulator: the shared step context and the method's stepper.
pub struct Simulator<'m> {
    ctx: StepContext<'m>,
    /// The method ([`register`]) with its own state.
    pub(crate) stepper: Box<dyn Stepper>,
}

impl<'m> std::ops::Deref for Simulator<'m> {
    type Target = StepContext<'m>;
    fn deref(&self) -> &StepContext<'m> {
        &self.ctx
    }
}

impl<'m> std::ops::DerefMut for Simulator<'m> {
    fn deref_mut(&mut self) -> &mut StepContext<'m> {
        &mut self.ctx
    }
}

impl<'m> Simulator<'m> {
    /// Derive weights, assemble and factor $A$ (spec §6.1 SETUP).
    pub fn new(model: &'m Model, settings: &SolverSettings) -> Result<Self, SolverError> {
        let derived = model.derive(&model.params);
        Self::with_derived(model, derived, settings)
    }

    /// As [`Simulator::new`] with explicitly derived parameters.
    pub fn with_derived(
        model: &'m Model,
        derived: Derived,
        settings: &SolverSettings,
    ) -> Result<Self, SolverError> {
        Self::with_plan(model, derived, settings, None)
    }

    /// The linear-algebra plan of `model`'s PD matrix with `derived` (ordering and symbolic
    /// analysis, no numeric factorization): what [`Simulator::with_plan`] factors on
    /// ([`StepContext::plan`]).
    pub fn plan(model: &Model, derived: &Derived) -> Result<Arc<SystemPlan>, SolverError> {
        StepContext::plan(model, derived)
    }

    /// As [`Simulator::with_derived`], factoring $A$ on `plan` when it fits
    /// ([`StepContext::with_plan`]), then registering the stepper of `settings.method`
    /// (`auto` resolved here, [`build`]).
    pub fn with_plan(
        model: &'m Model,
        derived: Derived,
        settings: &SolverSettings,
        plan: Option<Arc<SystemPlan>>,
    ) -> Result<Self, SolverError> {
        let t0 = Instant::now();
        let mut ctx = StepContext::with_plan(model, derived, settings, plan)?;
        let stepper = build(model, ctx.system.plan(), settings.method, &mut ctx.config);
        ctx.setup_seconds = t0.elapsed().as_secs_f64();
        Ok(Simulator { ctx, stepper })
    }

    /// The shared step context (what the steppers take).
    pub fn context(&self) -> &StepContext<'m> {
        &self.ctx
    }

    /// One implicit-Euler step producing frame `frame` (1-based) from $(x_t, v_t)$ by the
    /// simulator's method ([`Stepper::step`]). Returns $x_{t+1}$ and the step statistics.
    pub fn step(
        &mut self,
        frame: usize,
        x_t: &[f64],
        v_t: &[f64],
    ) -> Result<(Vec<f64>, StepStats), SolverError> {
        self.stepper.step(&mut self.ctx, frame, x_t, v_t)
    }

    /// The simulator's method.
    pub fn stepper(&self) -> &dyn Stepper {
        &*self.stepper
    }

    /// Use `choice` (`solver.method = "auto"`'s resolved method) from the next step on: the
    /// settings record it and the stepper is registered anew (before the first step; the
    /// device rule and `optimize`'s pinned choice revise the simulator's own).
    pub fn set_method_choice(&mut self, choice: MethodChoice) {
        self.ctx.config.method = choice.method;
        self.ctx.config.choice = Some(choice);
        self.stepper = register(&self.ctx.config);
    }

    /// Before a device is attached: a method chosen by `solver.method = "auto"` becomes the
    /// PD method (the device runs PD only; rule 1 of `solver::auto`). Explicit methods are
    /// left as they are (the device refuses them).
    pub fn resolve_for_device(&mut self) {
        if let Some(c) = &self.ctx.config.choice {
            let mut q = c.quantities.clone();
            q.device = true;
            self.set_method_choice(super::auto::choose_method(&q));
        }
    }
}

/// The stepper of `requested` (`[solver] method`) on `model`, whose PD matrix has the
/// symbolic analysis `plan`: `auto` is resolved here by [`crate::solver::auto::choose_method`]
/// (recorded in `config.method` and `config.choice`), then [`register`]ed.
pub fn build(
    model: &Model,
    plan: &SystemPlan,
    requested: SolverMethod,
    config: &mut SolverConfig,
) -> Box<dyn Stepper> {
    if requested == SolverMethod::Auto {
        let q = crate::solver::auto::MethodQuantities::of(model, plan);
        let choice = crate::solver::auto::choose_method(&q);
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
        Some(choice) => Box::new(AutoStepper::new(
            choice,
            one(SolverMethod::Diffphd),
            one(SolverMethod::Newton),
        )),
    }
}
