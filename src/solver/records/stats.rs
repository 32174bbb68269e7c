//! Statistics records of a step and of an adjoint solve (what `log.json` and `grad.json`
//! report), shared by every method.

use crate::contact::{ContactRecord, ContactStats};
use crate::solver::stages::gate::GateResiduals;

/// Statistics of one time step (what `log.json` records per frame).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct StepStats {
    pub iterations: usize,
    pub converged: bool,
    /// Gate residuals at exit (≤ 1 means met).
    pub gate: GateResiduals,
    pub anderson_guard_firings: usize,
    pub time_local: f64,
    pub time_global: f64,
    pub time_other: f64,
    /// Newton polish steps taken and the final relative PD residual $\|Ax-b(x)\|/\|b\|$
    /// (only with `newton_polish > 0`).
    pub polish_steps: usize,
    pub polish_residual: f64,
    /// GMRES iterations of the Newton–Krylov steps (`mode = "accurate"`).
    pub polish_gmres_iterations: usize,
    /// `mode = "accurate"`: final force residual $\|b(x)-Ax\|/\|b(x^0)-Ax^0\|$ of the step
    /// (the quantity of the stopping test, `residual_tol`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub residual: Option<f64>,
    /// Trust-region statistics (only when requested, see
    /// [`crate::solver::context::StepContext::compute_tr`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tr: Option<TrStats>,
    /// Contact statistics (scenes with obstacles).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contact: Option<ContactStats>,
    /// Contact tape of the step (NCP model with candidates): what the backward needs
    /// (spec §6.2 step 27).
    #[serde(skip)]
    pub contact_record: Option<Box<ContactRecord>>,
    /// Newton statistics (`method = "newton"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newton: Option<NewtonStats>,
    /// `method = "diffpd"` with obstacles: the active (glued) contact nodes the step was
    /// solved with, pinned at their start-of-step positions (what the backward restricts to).
    #[serde(skip)]
    pub diffpd_active: Option<Vec<usize>>,
    /// `solver.method = "auto"`: the method whose attempt missed the step's stopping test;
    /// the step was then solved from its start by the other method (`solver::stepper::auto`), whose
    /// statistics these are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retried_from: Option<crate::model::SolverMethod>,
    /// `solver.method = "auto"`: the method whose attempt solved the step (the backward
    /// differentiates the step with its linearization and adjoint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<crate::model::SolverMethod>,
    /// `solver.method = "auto"`: the step began with a probe of PD capped at this many
    /// iterations (`solver::auto::FrameRule`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_budget: Option<usize>,
    /// `solver.method = "auto"`, a step solved after a missed attempt (a failed probe or a
    /// retry): the iterations the missed attempts ran (PD iterations with the accurate mode's
    /// GMRES iterations, or Newton iterations), work these statistics do not count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missed_iterations: Option<usize>,
    /// The wall seconds of those missed attempts (`auto`'s overhead over the method that
    /// solved the step, measured in the same run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missed_seconds: Option<f64>,
    /// `method = "diffpd"` with `solver.diffpd_linear = "schwarz"`: the PCG solves of the
    /// step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schwarz: Option<PcgStats>,
}

/// Ratio and blend of one step.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct TrStats {
    pub rho: f64,
    pub alpha: f64,
    pub predicted_decrease: f64,
    pub actual_decrease: f64,
}

/// Newton statistics of one step (written to `log.json` per frame).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct NewtonStats {
    pub iterations: usize,
    pub converged: bool,
    /// Final $\|\nabla g\|/\mathrm{scale}$ on the free DoFs.
    pub relative_gradient: f64,
    /// Armijo halvings summed over the iterations.
    pub line_search_halvings: usize,
    /// Element Hessians eigen-decomposed and projected by the filter, summed over the
    /// iterations (`clamp`/`abs`/`trust_region`: every element every iteration; `ppn`: the
    /// selected ones).
    pub projected_elements: usize,
    /// Of those, elements whose Hessian the projection actually changed.
    pub modified_elements: usize,
    /// Failed (indefinite) factorizations.
    pub indefinite_factorizations: usize,
    /// Diagonal shifts applied (`none` filter on an indefinite Hessian).
    pub regularizations: usize,
    pub factorizations: usize,
    /// [`crate::solver::newton::ROUNDOFF_STOP`] when the step stopped at the round-off floor
    /// instead of the gradient test (`converged` is then true); `None` otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<&'static str>,
    /// The round-off floor $c\,\epsilon\,\||K|\,|x|\|_2/s$ in the units of
    /// `relative_gradient`, at the last iterate where the stop checked it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roundoff_floor: Option<f64>,
}

/// Statistics of one adjoint solve.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct AdjointStats {
    pub frame: usize,
    pub iterations: usize,
    pub converged: bool,
    /// $\|(A-\Delta A)z-g\|/\|g\|$ at exit.
    pub relative_residual: f64,
    pub max_abs_z: f64,
    /// TR blend α used (0 = exact).
    pub alpha: f64,
    pub filtered_samples: usize,
    pub seconds: f64,
    /// `fixed_point`, or `fixed_point+gmres` when the fixed-point iteration diverged or hit
    /// its cap and GMRES (preconditioned by $A^{-1}$) finished the solve.
    pub method: String,
    pub gmres_iterations: usize,
    /// `solver.diffpd_linear = "schwarz"`: the PCG solves that applied $A^{-1}$.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schwarz: Option<PcgStats>,
}

/// The preconditioned-CG solves of `solver.diffpd_linear = "schwarz"` in one step or one
/// adjoint solve (`crate::linalg::schwarz`): how many, their iterations, and how many
/// stopped at the iteration cap above the tolerance (`not_converged`, reported, never
/// silent).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct PcgStats {
    pub solves: usize,
    pub iterations: usize,
    pub max_iterations: usize,
    pub not_converged: usize,
    /// Largest relative residual at exit over the solves.
    pub max_relative_residual: f64,
}

impl PcgStats {
    /// Count one solve.
    pub fn add(&mut self, o: &crate::linalg::schwarz::PcgOutcome) {
        self.solves += 1;
        self.iterations += o.iterations;
        self.max_iterations = self.max_iterations.max(o.iterations);
        self.not_converged += usize::from(!o.converged);
        self.max_relative_residual = self.max_relative_residual.max(o.relative_residual);
    }

    /// Sum of two records.
    pub fn merge(&mut self, o: &PcgStats) {
        self.solves += o.solves;
        self.iterations += o.iterations;
        self.max_iterations = self.max_iterations.max(o.max_iterations);
        self.not_converged += o.not_converged;
        self.max_relative_residual = self.max_relative_residual.max(o.max_relative_residual);
    }
}
