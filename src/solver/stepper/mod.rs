//! The method seam: a [`Stepper`] is one time-integration method of the PD model — its
//! forward step, its part of the step's linearization for the adjoint and its adjoint
//! solve — with its own state. [`crate::solver::simulator::build`] and [`crate::solver::simulator::register`] are the one
//! place that turns `[solver] method` into a stepper, when the simulator is built (and again
//! when `auto`'s choice is revised before the first step,
//! [`crate::solver::Simulator::set_method_choice`]): the PD method
//! ([`crate::solver::pd::stepper`]), Newton ([`crate::solver::newton::stepper`]), DiffPD's
//! L-BFGS PD ([`crate::solver::diffpd::stepper`]), and for `method = "auto"` the composite
//! [`auto::AutoStepper`] that retries a missed step with the other method. What every method
//! shares — the factored PD matrix, the Newton Hessian's pattern and symbolic factor, the
//! step context (forces, contact begin/finish, Dirichlet values) — is the [`StepContext`]
//! that every method takes; the [`crate::solver::Simulator`] holds it with the stepper, in
//! a slot above the methods (the methods never import the simulator).
//!
//! The time loop ([`crate::solver::timeloop`]) calls [`crate::solver::Simulator::step`] once
//! per frame (one dynamic dispatch a frame, none per iteration); the reverse sweep
//! ([`crate::solver::rollout::backward`]) asks the simulator's stepper for the pinned nodes,
//! the linearization and the adjoint of each step.
//!
//! How to add a method: its folder under `solver/` with a type implementing [`Stepper`]
//! (state in its fields), its `SolverMethod` variant and settings (`model::settings`,
//! `solver::config`), and one arm in [`crate::solver::simulator::register`]. `explicit_euler.rs`
//! (`#[cfg(test)]`) is the smallest example.

pub mod auto;
#[cfg(test)]
mod explicit_euler;

use super::adjoint::backward::StepLinearization;
use super::context::StepContext;
use super::offload::OffloadError;
use super::records::config::BackwardConfig;
use super::records::error::SolverError;
use super::records::stats::{AdjointStats, StepStats};

/// One time-integration method with its own state (module docs).
pub trait Stepper: Send + Sync {
    /// One step producing frame `frame` (1-based) from $(x_t, v_t)$: $x_{t+1}$ and the
    /// step's statistics. `sim` supplies the shared step context.
    fn step(
        &mut self,
        sim: &mut StepContext<'_>,
        frame: usize,
        x_t: &[f64],
        v_t: &[f64],
    ) -> Result<(Vec<f64>, StepStats), SolverError>;

    /// A rollout starts at frame `start`: a method whose per-frame decisions depend on the
    /// frames before (`auto`'s per-frame rule) starts them afresh, so that a rollout is a
    /// function of its start state. Default: nothing.
    fn begin_rollout(&mut self, _start: usize) {}

    /// Nodes the step recorded in `stats` held at $x_t$ as extra Dirichlet DoFs (DiffPD's
    /// glue contact): the backward linearizes and solves that step's adjoint with them
    /// pinned ([`StepContext::pin_nodes`], $z_C=0$) and routes $(g-Kz)_C$ to $x_{t,C}$.
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
        sim: &'s StepContext<'_>,
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
        sim: &StepContext<'_>,
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
