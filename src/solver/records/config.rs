//! Resolved settings of the methods: the forward (`[solver]`), Newton and the backward.

use crate::model::{
    AdjointMethod, AndersonWindow, DiffpdLinear, GateReference, HessianFilterMode, NewtonEnergy,
    NewtonFilter, OnNonConvergence, SolverMethod, SolverMode, SolverSettings,
};
use crate::solver::stages::gate::DualGate;

/// Resolved solver settings.
#[derive(Clone, Debug)]
pub struct SolverConfig {
    /// Stopping rule of the PD method (`[solver] mode`).
    pub mode: SolverMode,
    /// Force-balance tolerance of `mode = "accurate"` (relative to the step's first residual).
    pub residual_tol: f64,
    pub max_iterations: usize,
    pub gate: DualGate,
    /// Position gate relative to ‖x_k‖ (spec) or to ‖x_k − x_t‖.
    pub gate_reference: GateReference,
    pub window: usize,
    pub gamma_max: f64,
    pub on_nonconvergence: OnNonConvergence,
    pub newton_polish: usize,
    pub polish_tol: f64,
    /// `[solver] direct_fallback`: Newton with a direct solver where Newton–Krylov fails.
    pub direct_fallback: bool,
    /// `[solver] newton_krylov_max_steps`: subproblems of a Newton–Krylov phase at most.
    pub newton_krylov_max_steps: usize,
    /// `[solver] method` (issue 7 baselines), resolved: never `Auto` once the simulator is
    /// built (`Simulator::with_plan` applies `solver::auto`).
    pub method: SolverMethod,
    /// How `method = "auto"` was resolved (`None` for an explicit method).
    pub choice: Option<crate::solver::auto::MethodChoice>,
    /// Settings of `method = "newton"`.
    pub newton: NewtonConfig,
    /// L-BFGS history of `method = "diffpd"`.
    pub lbfgs_history: usize,
    /// `[solver] diffpd_linear`: how `method = "diffpd"` applies $A^{-1}$.
    pub diffpd_linear: DiffpdLinear,
}

impl SolverConfig {
    /// Resolve `anderson_window = "auto"`. With the spec's position gate, the paper's rule:
    /// 1 on heterogeneous meshes, 5 on homogeneous ones (spec Eq. 21 and §6.6). With the
    /// displacement gate (the default), 5 everywhere. That gate asks for the step to be
    /// resolved, and m = 1 then stalls on stiff heterogeneous meshes. Measured at ε_rel
    /// 1e-4, total PD iterations m = 1 / m = 5: 100× NH tet bands 7744 / 1506, 1000× 8392 /
    /// 2735, 100× corotated cantilever 11452 / 2721, twist_bands_tet 4109 / 871. At 1e-5 the
    /// 100× cantilever with m = 1 hit a 3000 cap on every frame; m = 5 converged in ≤ 1346.
    /// See docs/NOTES.md "Gate tolerance".
    pub fn from_settings(s: &SolverSettings, heterogeneous: bool) -> Self {
        let window = match s.anderson_window {
            AndersonWindow::Auto => {
                if heterogeneous && s.gate_reference == GateReference::Position {
                    1
                } else {
                    5
                }
            }
            AndersonWindow::Fixed(m) => m,
        };
        SolverConfig {
            mode: s.mode,
            residual_tol: s.residual_tol,
            max_iterations: s.max_iterations,
            gate: DualGate {
                rel: s.rel_tol,
                abs: s.abs_tol,
            },
            gate_reference: s.gate_reference,
            window,
            gamma_max: s.anderson_gamma_max,
            on_nonconvergence: s.on_nonconvergence,
            newton_polish: s.newton_polish,
            polish_tol: s.polish_tol,
            direct_fallback: s.direct_fallback,
            newton_krylov_max_steps: s.newton_krylov_max_steps,
            // `auto` is resolved by the simulator, which has the symbolic analysis
            method: match s.method {
                SolverMethod::Auto => SolverMethod::Diffphd,
                m => m,
            },
            choice: None,
            newton: NewtonConfig {
                energy: s.newton_energy,
                filter: s.newton_filter,
                max_iterations: s.newton_max_iterations,
                tol: s.newton_tol,
            },
            lbfgs_history: s.lbfgs_history,
            diffpd_linear: s.diffpd_linear,
        }
    }
}

/// Resolved Newton settings.
#[derive(Clone, Copy, Debug)]
pub struct NewtonConfig {
    pub energy: NewtonEnergy,
    pub filter: NewtonFilter,
    pub max_iterations: usize,
    pub tol: f64,
}

/// Backward settings.
#[derive(Clone, Debug)]
pub struct BackwardConfig {
    pub rel_tol: f64,
    pub abs_tol: f64,
    pub max_iterations: usize,
    pub window: usize,
    pub gamma_max: f64,
    pub filter: HessianFilterMode,
    /// Restart length of the GMRES fallback.
    pub gmres_restart: usize,
    pub method: AdjointMethod,
    /// GMRES iterations after which a frame's adjoint is solved directly (0: never); see
    /// [`crate::model::BackwardSettings::adjoint`].
    pub direct_after: usize,
    /// Solve every eligible frame directly, without a GMRES attempt (`adjoint = "direct"`,
    /// or `"auto"` resolved to it).
    pub direct_first: bool,
    /// The accelerator's cap past `direct_after` (0: as on the CPU); see
    /// [`crate::model::BackwardSettings::device_direct_after`].
    pub device_direct_after: usize,
    /// The accelerator's restart length of those frames' GMRES; see
    /// [`crate::model::BackwardSettings::device_gmres_restart`].
    pub device_gmres_restart: usize,
}

impl BackwardConfig {
    /// Plain $A^{-1}$-preconditioned GMRES (no filter, no Anderson) for the Newton systems
    /// of the forward (`newton_polish`, the accurate mode's Newton–Krylov steps).
    pub fn gmres(rel_tol: f64, max_iterations: usize, restart: usize, gamma_max: f64) -> Self {
        BackwardConfig {
            rel_tol,
            abs_tol: 0.0,
            max_iterations,
            window: 0,
            gamma_max,
            filter: HessianFilterMode::None,
            gmres_restart: restart,
            method: AdjointMethod::Gmres,
            direct_after: 0,
            direct_first: false,
            device_direct_after: 0,
            device_gmres_restart: restart,
        }
    }
}
