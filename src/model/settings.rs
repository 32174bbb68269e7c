//! The vocabulary the solver consumes: prescribed motions, load profiles, stiffness
//! scaling, contact settings, and the method, gate and adjoint settings of `[solver]` and
//! `[backward]`. These are plain values; the scene layer deserializes them (their serde
//! attributes are the file format's names and defaults, documented in
//! `docs/scene-format.md`) and validates them (`crate::scene`), the solver reads them.

use serde::{Deserialize, Serialize};

/// `[backward]`: adjoint solver settings (spec §7.6).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackwardSettings {
    /// Relative tolerance on the adjoint residual $\|(A-\Delta A)z-g\|\le\epsilon_r\|g\|+\epsilon_a$.
    /// Default 1e-8 (issue 37): the per-parameter target
    /// $|g_i-g^*_i|\le10^{-3}\max(|g^*_i|,10^{-3}\|g^*\|_\infty)$ against the Newton oracle holds
    /// with a ≥ 10⁴ margin on the shipped scenes with parameters (≤ 9.6e-8), and issue 37's
    /// DiffPD-side-by-side cantilever, 4.3e-3 off at 1e-6, is 1.6e-5 off; +17–24 % adjoint
    /// iterations (docs/BENCHMARKS.md "Backward tolerance", `scripts/backward_tol.py`).
    /// Before issue 37: 1e-6 (issue 14: 1e-4 left 1e-3..2e-3).
    #[serde(default = "d_adjoint_rel")]
    pub rel_tol: f64,
    #[serde(default = "d_abs")]
    pub abs_tol: f64,
    #[serde(default = "d_maxit")]
    pub max_iterations: usize,
    /// Anderson window of the adjoint iteration (spec §7.6: 5).
    #[serde(default = "d_bwin")]
    pub anderson_window: usize,
    /// Prox-Hessian filter in the backward: `"none"` (exact gradient, default), `"clamp"`,
    /// `"abs"`, `"trust_region"` (the paper's adaptive blend, spec Eqs. 23–29).
    #[serde(default)]
    pub filter: HessianFilterMode,
    /// Adjoint solver: `"woodbury"` (default: GMRES right-preconditioned by the persistent
    /// factor $A^{-1}$; with NCP contact on the KKT system with the Woodbury block
    /// preconditioner — the fastest at equal gradient error on the frontier scenes, issue 14),
    /// `"fixed_point"` (DiffPD's iteration + Anderson, GMRES fallback;
    /// with NCP contact the contact-projected iteration), `"gmres"` ($A^{-1}$-preconditioned
    /// GMRES; with NCP contact GMRES on the KKT system, block-Jacobi preconditioned), `"pcg"`
    /// (CG with $A^{-1}$; refused with NCP contact) or `"woodbury"` (GMRES on the contact
    /// KKT system with the Woodbury block preconditioner, Zeng et al. 2026 §4.4).
    #[serde(default)]
    pub method: AdjointMethod,
    /// Restart length of the GMRES fallback of the adjoint solve.
    #[serde(default = "d_restart")]
    pub gmres_restart: usize,
    /// How the PD method solves each frame's adjoint system $Kz=g$, $K=A-\Delta A$, where
    /// the frame has no contact rows and the Hessian is exact (`filter = "none"`):
    /// `"auto"` (the default since issue 37: `"direct"` on the CPU where $K$'s factor fits
    /// the memory budget and the cost model says it pays — measured 1.1–1.6× faster than
    /// GMRES on every frontier scene —, `"gmres"` otherwise, without the hand-over where the
    /// factor does not fit; on a device the device policy of `device_direct_after`;
    /// `crate::solver::auto::choose_adjoint`), `"gmres"` (the Krylov solver of `method`, a
    /// frame handed to the direct solve past 150 iterations — high-contrast meshes need
    /// 1,000–5,000 a frame, a factorization costs about 50–150) or `"direct"` ($K$ assembled
    /// and factored every frame, the Newton baseline's adjoint: exact to round-off).
    #[serde(default)]
    pub adjoint: AdjointSolve,
    /// Deprecated (use `adjoint`): a frame whose $A^{-1}$-preconditioned GMRES has not
    /// converged after this many iterations is solved directly; `0`: never. When set it
    /// overrides `adjoint` (with a warning). Unset by default (150 with `adjoint = "gmres"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct_after: Option<usize>,
    /// The same frames on an accelerator (`--backend cuda` or `emulator`), whose GMRES iteration
    /// costs 10–20× less than on the CPU while the direct solve is the same host
    /// factorization: one GMRES run of at most this many iterations, restarted every
    /// `device_gmres_restart`, toward the direct solve's accuracy (relative residual
    /// $10^{-10}$). Up to `direct_after` iterations it stops at `rel_tol` as the CPU path
    /// does; from there, every 50 iterations, it goes on while the last 50 iterations' rate
    /// projects convergence within this many in all; otherwise the frame is solved directly
    /// (`solver::pd::adjoint::DevicePolicy`). H100, 1M-tet box at restart 50 (session 11):
    /// 641 iterations, 12.3 s, instead of 150 and a 48 s factorization, gradient 4.5e-10
    /// from the direct adjoint's. `0`: as on the CPU. Default 2000.
    #[serde(default = "d_device_direct_after")]
    pub device_direct_after: usize,
    /// The restart length of those frames' GMRES on an accelerator: one run of up to
    /// `device_direct_after` iterations restarted every this many, instead of GMRES
    /// (`gmres_restart`) capped at `direct_after` and continued cycle by cycle. A basis vector
    /// costs the device a few vector passes against two SpMVs over the inverse factor per
    /// iteration, while restarts throw away the spectrum GMRES has found: on the CPU path, to
    /// relative residual 1e-10, the 126k-tet box took 650 iterations at restart 50 and 224 at
    /// 300, the armadillo's two frames 1,700 and 1,650 at 50, 283 and 287 at 300.
    /// Device memory: $(3m+4)\cdot3n\cdot8$ bytes (4 GB at 300 on the 1M-tet box). Default 300.
    #[serde(default = "d_device_restart")]
    pub device_gmres_restart: usize,
    /// Keep every K-th state of the forward and recompute the others in the backward
    /// (1 = keep all; memory per kept frame 48n bytes).
    #[serde(default = "d_one_usize")]
    pub checkpoint_every: usize,
}
fn d_one_usize() -> usize {
    1
}
fn d_bwin() -> usize {
    5
}
fn d_restart() -> usize {
    50
}
/// GMRES iterations after which a frame's adjoint is handed to the direct solve when
/// `adjoint = "auto"` keeps GMRES (and on a device, where the continuation policy starts):
/// the value `direct_after` had by default before issue 37. High-contrast meshes need
/// 1,000–5,000 GMRES iterations a frame (issue 14, armadillo); a factorization costs about as
/// much as 50–150 of them.
pub const DEFAULT_DIRECT_AFTER: usize = 150;
fn d_device_direct_after() -> usize {
    2000
}
fn d_device_restart() -> usize {
    300
}
fn d_adjoint_rel() -> f64 {
    1e-8
}
impl Default for BackwardSettings {
    fn default() -> Self {
        BackwardSettings {
            rel_tol: d_adjoint_rel(),
            abs_tol: d_abs(),
            max_iterations: d_maxit(),
            anderson_window: d_bwin(),
            filter: Default::default(),
            gmres_restart: d_restart(),
            adjoint: AdjointSolve::default(),
            direct_after: None,
            device_direct_after: d_device_direct_after(),
            device_gmres_restart: d_device_restart(),
            checkpoint_every: 1,
            method: Default::default(),
        }
    }
}

#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum StiffnessScaling {
    #[default]
    Amplified,
    Uniform,
}

impl StiffnessScaling {
    /// The element's stiffness-damping coefficient, the one home of the β-scaling rule
    /// (docs/NOTES.md "E_ref"): $\beta_e=\beta_0E_e/E_{ref}$ (amplified: stiffer elements
    /// damp more) or $\beta_e=\beta_0$ (uniform). With $\beta_0=1$ it is the factor
    /// $s_e=\partial\beta_e/\partial\beta_0$ of the β₀ gradient.
    pub fn beta(self, beta0: f64, youngs: f64, e_ref: f64) -> f64 {
        match self {
            StiffnessScaling::Amplified => beta0 * youngs / e_ref,
            StiffnessScaling::Uniform => beta0,
        }
    }

    /// The power of $E_e$ in the damping term $\beta_ew_s$ ($w_s\propto E_e$): 2 amplified,
    /// 1 uniform, so $\partial(\beta_ew_s)/\partial E_e=c_\beta\beta_ew_s/E_e$.
    pub fn beta_weight_power(self) -> f64 {
        match self {
            StiffnessScaling::Amplified => 2.0,
            StiffnessScaling::Uniform => 1.0,
        }
    }
}

/// `[body.material] mass`: how a body's density becomes nodal masses.
#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum MassConvention {
    /// Physical lumping: each element gives ρ·V_e/n_v to each of its n_v nodes
    /// ($m_i=\sum_{e\ni i}\rho V_e/n_v$; the body's total mass is ρ·V).
    #[default]
    Lumped,
    /// DiffPD's convention (a comparison aid): every node of the body gets $\rho\bar V$,
    /// $\bar V$ = the body's mean element rest volume; the total mass is then
    /// $n_{nodes}\rho\bar V$, not ρ·V (more on voxel meshes, which have more nodes than
    /// cells; less on tet meshes, which have about 5–6 tets per node).
    Uniform,
}

/// Prescribed motion of Dirichlet nodes, relative to their initial positions.
#[derive(Clone, Debug, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum Motion {
    /// Held at the initial position.
    #[default]
    Fixed,
    /// Rotation about `axis` through `center` (default: centroid of the selection) at
    /// `rate` rad/s.
    Rotate {
        axis: [f64; 3],
        #[serde(default)]
        center: Option<[f64; 3]>,
        rate: f64,
    },
    /// Translation at constant `velocity` (m/s).
    Translate { velocity: [f64; 3] },
}

/// Time profile s(t) multiplying a force.
#[derive(Clone, Debug, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum Profile {
    /// s = 1.
    #[default]
    Constant,
    /// s = min(t / duration, 1).
    Ramp { duration: f64 },
    /// s = 1 for start ≤ t < end, else 0.
    Window { start: f64, end: f64 },
    /// Piecewise-linear s(t) through (times\[i\], values\[i\]), constant outside.
    Table { times: Vec<f64>, values: Vec<f64> },
}

impl Profile {
    /// Evaluate s(t).
    pub fn eval(&self, t: f64) -> f64 {
        match self {
            Profile::Constant => 1.0,
            Profile::Ramp { duration } => (t / duration).clamp(0.0, 1.0),
            Profile::Window { start, end } => {
                if t >= *start && t < *end {
                    1.0
                } else {
                    0.0
                }
            }
            Profile::Table { times, values } => {
                if t <= times[0] {
                    return values[0];
                }
                for i in 1..times.len() {
                    if t <= times[i] {
                        let s = (t - times[i - 1]) / (times[i] - times[i - 1]);
                        return values[i - 1] + s * (values[i] - values[i - 1]);
                    }
                }
                *values.last().unwrap_or(&0.0)
            }
        }
    }
}

/// `[solver]`
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SolverSettings {
    /// Stopping rule of `method = "diffphd"`: `"accurate"` (default: Anderson-PD until the
    /// dual gate at `rel_tol`, then Newton–Krylov steps preconditioned by the persistent
    /// factor until the force balance $\|b(x)-Ax\|$ has dropped to `residual_tol` times its
    /// value at the start of the step; more PD iterations under the same residual test where
    /// the Newton steps cannot be used or stall) or `"paper"` (the paper's Anderson-PD with
    /// the dual gate alone, spec Eq. 22; `newton_polish` as set). See docs/NOTES.md
    /// "Accuracy of the defaults".
    #[serde(default)]
    pub mode: SolverMode,
    /// `mode = "accurate"`: a step is converged when $\|b(x)-Ax\|_{free}\le$
    /// `residual_tol`$\cdot\|b(x^0)-Ax^0\|_{free}$ (+ a round-off floor of
    /// $2.2\cdot10^{-13}\|b\|$), $x^0$ the step's first iterate ($x_t$ with the Dirichlet
    /// values of $t+h$).
    #[serde(default = "d_residual_tol")]
    pub residual_tol: f64,
    /// PD iteration cap per step (K_max).
    #[serde(default = "d_maxit")]
    pub max_iterations: usize,
    /// Relative tolerance ε_rel of both gates (spec Eq. 22). With `mode = "accurate"` the
    /// gate at which the Newton–Krylov steps take over (default 1e-3; the paper's mode used
    /// 1e-4 before issue 14).
    #[serde(default = "d_rel")]
    pub rel_tol: f64,
    /// Absolute tolerance ε_abs of both gates.
    #[serde(default = "d_abs")]
    pub abs_tol: f64,
    /// What the position gate is relative to: `"displacement"` (default: ‖x_k − x_t‖, the
    /// motion of the step so far, with a round-off floor of 2.2e-12‖x_k‖ for bodies at rest)
    /// or `"position"` (spec Eq. 22: ‖x_k‖, the absolute positions, which loosens with the
    /// body's size and distance from the origin and stops early on small motions). See
    /// docs/NOTES.md "Gate tolerance".
    #[serde(default)]
    pub gate_reference: GateReference,
    /// Anderson window: `"auto"` (5; with `gate_reference = "position"` the paper's rule,
    /// 1 heterogeneous / 5 homogeneous), or N ≥ 0 (0 = plain PD).
    #[serde(default)]
    pub anderson_window: AndersonWindow,
    /// Reliability guard γ_max (spec Eq. 21). Default 1e3, not the spec's 10: for a PD
    /// iteration contracting at rate ρ the secant coefficient is γ ≈ ρ/(ρ−1) (≈ −100 at
    /// ρ = 0.99), so γ_max = 10 disables Anderson exactly where PD is slow (measured: the
    /// guard fired on 98 % of iterations of a ν = 0.45 cantilever; see docs/BENCHMARKS.md).
    #[serde(default = "d_gmax")]
    pub anderson_gamma_max: f64,
    /// Worker threads for element loops (0 = all cores).
    #[serde(default)]
    pub threads: usize,
    /// What a step that misses its stopping test does: `"fail"` (default: the run goes on
    /// to its last frame, then `simulate`/`grad` end with status "incomplete" and exit
    /// code 3, naming the frames), `"error"` (stop at the first such frame, exit 3) or
    /// `"warn"` (log it and end with exit 0, the behaviour before issue 14).
    #[serde(default)]
    pub on_nonconvergence: OnNonConvergence,
    /// Newton polish of each converged step (0 = off): up to this many Newton steps on the
    /// PD objective, $K\delta=b(x)-Ax$ solved by $A^{-1}$-preconditioned GMRES, until
    /// $\|Ax-b(x)\|\le$ `polish_tol`$\cdot\|b(x)\|$. Makes the fixed point accurate to
    /// round-off for finite-difference checks (the PD step underestimates the error by
    /// $1/(1-\rho)$ when PD contracts slowly).
    #[serde(default)]
    pub newton_polish: usize,
    /// `mode = "accurate"`: a step whose Newton–Krylov phase fails (a non-convex step energy:
    /// buckling, snap-through) is finished by Newton's method with a direct solver on the
    /// same PD energy (exact Hessian, shifted where indefinite, `newton_max_iterations`),
    /// before PD goes on under the residual test. Not used while NCP contacts carry load.
    /// Such frames log a `newton` record. See docs/NOTES.md "Accuracy of the defaults".
    #[serde(default = "d_true")]
    pub direct_fallback: bool,
    /// `mode = "accurate"`: trust-region subproblems (accepted or not) of a step's
    /// Newton–Krylov phase before it hands over to `direct_fallback`. Converging phases need
    /// 3–25 (the Plant's buckling frames the most). See docs/NOTES.md "Accuracy of the
    /// defaults".
    #[serde(default = "d_nk_steps")]
    pub newton_krylov_max_steps: usize,
    #[serde(default = "d_polish_tol")]
    pub polish_tol: f64,
    /// Forward/backward method (issue 7 baselines): `"auto"` (the default since issue 37:
    /// accurate PD or Newton by a deterministic rule over the scene's factor fill, stiffness
    /// contrast, stiffness number and contact, `crate::solver::auto`; logged as
    /// `method_reason`; a step that misses its stopping test is retried with the other
    /// method; on a device: PD), `"diffphd"` (PD + Anderson + dual gate), `"diffpd"` (PD with
    /// Liu 2017 L-BFGS acceleration) or `"newton"` (Newton on the implicit-Euler objective,
    /// see `crate::solver::newton`).
    #[serde(default)]
    pub method: SolverMethod,
    /// Energy minimised by `method = "newton"`: `"pd"` (the PD energy the prox defines) or
    /// `"true"` (the hyperelastic energy; forward only).
    #[serde(default)]
    pub newton_energy: NewtonEnergy,
    /// Element Hessian filter of `method = "newton"`: `"none"`, `"clamp"`, `"abs"`,
    /// `"trust_region"`, `"ppn"` (progressive projection, α = 0.5, β = 2).
    #[serde(default)]
    pub newton_filter: NewtonFilter,
    /// Newton iteration cap per step.
    #[serde(default = "d_newton_maxit")]
    pub newton_max_iterations: usize,
    /// Newton stop: $\|\nabla g\|\le$ `newton_tol`$\cdot\|b\|$ on the free DoFs.
    #[serde(default = "d_newton_tol")]
    pub newton_tol: f64,
    /// L-BFGS history of `method = "diffpd"` (Liu 2017 / DiffPD: 10).
    #[serde(default = "d_lbfgs_history")]
    pub lbfgs_history: usize,
    /// How `method = "diffpd"` applies $A^{-1}$ (its L-BFGS initial inverse Hessian, forward
    /// and adjoint): `"cholesky"` (the prefactorized direct solve, DiffPD's own) or
    /// `"schwarz"` (conjugate gradients with the two-level additive Schwarz preconditioner,
    /// Nicolaides coarse space: the CPU stand-in for the paper's MAS baseline,
    /// `crate::linalg::schwarz`).
    #[serde(default)]
    pub diffpd_linear: DiffpdLinear,
}
fn d_residual_tol() -> f64 {
    1e-8
}

/// `[solver] mode`.
#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, Default, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SolverMode {
    /// Anderson-PD, then Newton–Krylov to the force-balance test `residual_tol`.
    #[default]
    Accurate,
    /// The paper's Anderson-PD with the dual gate (spec Eq. 22) as the only stopping test.
    Paper,
}

fn d_nk_steps() -> usize {
    30
}
fn d_newton_maxit() -> usize {
    100
}
fn d_newton_tol() -> f64 {
    1e-10
}
fn d_lbfgs_history() -> usize {
    10
}

/// `[solver] diffpd_linear`.
#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, Default, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum DiffpdLinear {
    /// The prefactorized sparse Cholesky solve (DiffPD).
    #[default]
    Cholesky,
    /// PCG with the two-level additive Schwarz preconditioner (Nicolaides coarse space).
    Schwarz,
}

/// `[solver] method`.
#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, Default, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SolverMethod {
    Diffphd,
    Diffpd,
    Newton,
    /// Accurate PD or Newton, chosen per scene by a rule over deterministic quantities
    /// (`crate::solver::auto`); resolved when the simulator is built, never stepped as such.
    /// The default (issue 37).
    #[default]
    Auto,
}

impl SolverMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            SolverMethod::Diffphd => "diffphd",
            SolverMethod::Diffpd => "diffpd",
            SolverMethod::Newton => "newton",
            SolverMethod::Auto => "auto",
        }
    }

    /// What one iteration of the method is called in messages: "PD iterations" (diffphd,
    /// diffpd) or "Newton iterations".
    pub fn iterations_name(self) -> &'static str {
        match self {
            SolverMethod::Diffphd | SolverMethod::Diffpd => "PD iterations",
            SolverMethod::Newton => "Newton iterations",
            SolverMethod::Auto => "iterations",
        }
    }

    /// The scene key capping the method's iterations per step.
    pub fn iteration_cap_key(self) -> &'static str {
        match self {
            SolverMethod::Diffphd | SolverMethod::Diffpd => "solver.max_iterations",
            SolverMethod::Newton => "solver.newton_max_iterations",
            SolverMethod::Auto => "solver.method",
        }
    }
}

/// A `solver.method` name that is not one of [`SolverMethod`]'s.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown solver method {0:?} (expected diffphd, diffpd, newton or auto)")]
pub struct UnknownSolverMethod(pub String);

impl std::str::FromStr for SolverMethod {
    type Err = UnknownSolverMethod;
    fn from_str(s: &str) -> Result<Self, UnknownSolverMethod> {
        match s {
            "diffphd" => Ok(SolverMethod::Diffphd),
            "diffpd" => Ok(SolverMethod::Diffpd),
            "newton" => Ok(SolverMethod::Newton),
            "auto" => Ok(SolverMethod::Auto),
            _ => Err(UnknownSolverMethod(s.to_string())),
        }
    }
}

/// `[solver] newton_energy`.
#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, Default, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum NewtonEnergy {
    /// The PD energy (corotated+volume projective energy; NH Moreau envelope).
    #[default]
    Pd,
    /// The true hyperelastic energy (Neo-Hookean Eq. 5; corotated $\mu\|F-R\|^2+\tfrac\lambda2(J-1)^2$).
    True,
}

/// `[solver] newton_filter`.
#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, Default, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum NewtonFilter {
    #[default]
    None,
    Clamp,
    Abs,
    TrustRegion,
    Ppn,
}
fn d_polish_tol() -> f64 {
    1e-13
}
/// Serde default `true` (also used by the scene schema).
pub(crate) fn d_true() -> bool {
    true
}
fn d_maxit() -> usize {
    5000
}
fn d_rel() -> f64 {
    1e-3
}

/// `[solver] gate_reference`.
#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, Default, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum GateReference {
    Position,
    #[default]
    Displacement,
}
fn d_abs() -> f64 {
    1e-9
}
fn d_gmax() -> f64 {
    1e3
}
impl Default for SolverSettings {
    fn default() -> Self {
        SolverSettings {
            mode: SolverMode::Accurate,
            residual_tol: d_residual_tol(),
            max_iterations: d_maxit(),
            rel_tol: d_rel(),
            abs_tol: d_abs(),
            gate_reference: GateReference::Displacement,
            anderson_window: AndersonWindow::Auto,
            anderson_gamma_max: d_gmax(),
            threads: 0,
            on_nonconvergence: OnNonConvergence::Fail,
            newton_polish: 0,
            direct_fallback: true,
            newton_krylov_max_steps: d_nk_steps(),
            polish_tol: d_polish_tol(),
            method: SolverMethod::Auto,
            newton_energy: NewtonEnergy::Pd,
            newton_filter: NewtonFilter::None,
            newton_max_iterations: d_newton_maxit(),
            newton_tol: d_newton_tol(),
            lbfgs_history: d_lbfgs_history(),
            diffpd_linear: DiffpdLinear::Cholesky,
        }
    }
}

#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, Default, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum OnNonConvergence {
    /// Finish the run, then report it as incomplete (exit 3).
    #[default]
    Fail,
    /// Log and carry on; the run ends as completed (exit 0).
    Warn,
    /// Stop at the first step that missed its test (exit 3).
    Error,
}

/// Anderson window: `"auto"` or a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AndersonWindow {
    #[default]
    Auto,
    Fixed(usize),
}
impl Serialize for AndersonWindow {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            AndersonWindow::Auto => s.serialize_str("auto"),
            AndersonWindow::Fixed(n) => s.serialize_u64(*n as u64),
        }
    }
}
impl schemars::JsonSchema for AndersonWindow {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "AndersonWindow".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Anderson window: \"auto\" or an integer window 0..=64.",
            "anyOf": [
                { "const": "auto" },
                { "type": "integer", "minimum": 0, "maximum": 64 }
            ]
        })
    }
}
impl<'de> Deserialize<'de> for AndersonWindow {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            S(String),
            N(i64),
        }
        match Raw::deserialize(d)? {
            Raw::S(s) if s == "auto" => Ok(AndersonWindow::Auto),
            Raw::N(n) if (0..=64).contains(&n) => Ok(AndersonWindow::Fixed(n as usize)),
            _ => Err(serde::de::Error::custom(
                "expected \"auto\" or an integer window 0..=64",
            )),
        }
    }
}

/// Contact model.
#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ContactModel {
    /// Signorini–Coulomb NCP (Fischer–Burmeister normal, projected friction) solved inside
    /// the PD loop on the persistent factor (spec §2.9).
    #[default]
    Ncp,
    /// DiffPD's explicit penalty contact with Macklin-style capped viscous friction
    /// (`diffpd-notes.md` §1.8).
    Penalty,
}

/// Linear algebra of the NCP contact solve (`[contact] solver`).
#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ContactSolver {
    /// `dense` for steps with few contact rows, `iterative` above (see
    /// `contact::AUTO_DENSE_ROWS`).
    #[default]
    Auto,
    /// Dense Delassus matrix $W=JA^{-1}J^T$ from one solve per contact node and a dense LU of
    /// the coupled Newton rows: exact, cubic in the active set. The accuracy reference.
    Dense,
    /// Matrix-free $W$ (one solve with the persistent factor per product) and a Newton–Krylov
    /// (GMRES) inner solve; the same structure in the adjoint.
    Iterative,
}

/// `[contact.penalty]`: DiffPD's planar penalty law per node,
/// $f_n=k_n(-\min(0,\phi))^{p-1}n$, $f_f=-\min(k_f,\mu|f_n|/(|u_s|+\epsilon_u))u_s$.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PenaltySettings {
    /// Normal stiffness $k_n$ (N/m^(p-1)).
    #[serde(default = "d_pen_k")]
    pub stiffness: f64,
    /// Exponent p (DiffPD's examples use 3: force quadratic in the penetration).
    #[serde(default = "d_pen_p")]
    pub power: f64,
    /// Viscous friction cap $k_f$ (N·s/m).
    #[serde(default = "d_pen_kf")]
    pub friction_viscosity: f64,
    /// Velocity regulariser $\epsilon_u$ (m/s).
    #[serde(default = "d_pen_eps")]
    pub velocity_epsilon: f64,
}
fn d_pen_k() -> f64 {
    1e4
}
fn d_pen_p() -> f64 {
    3.0
}
fn d_pen_kf() -> f64 {
    1e2
}
fn d_pen_eps() -> f64 {
    1e-6
}
impl Default for PenaltySettings {
    fn default() -> Self {
        PenaltySettings {
            stiffness: d_pen_k(),
            power: d_pen_p(),
            friction_viscosity: d_pen_kf(),
            velocity_epsilon: d_pen_eps(),
        }
    }
}

/// `[contact]`
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContactSettings {
    /// `"ncp"` (default) or `"penalty"`.
    #[serde(default)]
    pub model: ContactModel,
    /// Smoothing $2\epsilon^2$ (m²) of the Fischer–Burmeister function (Zeng 2026, spec A.5),
    /// used identically by the forward and the backward. 0 = hard contact.
    #[serde(default)]
    pub smoothing: f64,
    /// Candidate margin (m): a boundary node is a contact candidate of an obstacle when its
    /// signed distance at the step start is below `margin` + $2h\|v_i\|+h^2\|g\|$.
    /// Default: half the median element edge length.
    #[serde(default)]
    pub margin: Option<f64>,
    /// Stop the per-iteration contact Newton solve when $\|\Phi\|_\infty\le$ `tolerance` (m).
    #[serde(default = "d_ctol")]
    pub tolerance: f64,
    /// Newton iteration cap of the contact solve per PD iteration.
    #[serde(default = "d_cnewton")]
    pub max_newton: usize,
    /// Wall-clock guard (s) of one contact solve (one PD iteration's NCP solve, dense or
    /// matrix-free): a last resort only, since where it stops depends on the machine's speed
    /// and load; the deterministic cap is `max_newton`. A solve that hits it stops, the step
    /// ends non-converged and the run reports frame, iteration and the guard, then follows
    /// `solver.on_nonconvergence`.
    #[serde(default = "d_cseconds")]
    pub max_seconds: f64,
    /// Floor of the FB scale $\kappa_j$ (m/N; spec: $r_j\ge10^{-10}$).
    #[serde(default = "d_kfloor")]
    pub scale_floor: f64,
    /// Floor of $s_j=\sqrt{\delta^2+\kappa^2\lambda^2+2\epsilon^2}$ (m; spec: $10^{-14}$).
    #[serde(default = "d_sfloor")]
    pub s_floor: f64,
    /// Penalty model parameters (`model = "penalty"`).
    #[serde(default)]
    pub penalty: PenaltySettings,
    /// Contact between the bodies of the scene: boundary nodes of every body against the
    /// boundary triangles of every other body (NCP model only).
    #[serde(default)]
    pub bodies: bool,
    /// Coulomb coefficient μ of body–body contacts (0 = frictionless); with
    /// `body_static_friction` the dynamic (kinetic) coefficient $\mu_k$.
    #[serde(default)]
    pub body_friction: f64,
    /// Static coefficient $\mu_s\ge$ `body_friction` of body–body contacts (default: equal to
    /// `body_friction`, one coefficient).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_static_friction: Option<f64>,
    /// Transition speed $v_s$ (m/s) of the static-to-dynamic friction law
    /// $\mu=\mu_k+(\mu_s-\mu_k)e^{-(\|v_t\|/v_s)^2}$ (used only where $\mu_s>\mu_k$). Keep it
    /// above the speed $h\,a_k$ dynamic friction lets a body gain in one step, or the implicit
    /// step also admits a sliding solution from rest (docs/contact.md §2a).
    #[serde(default = "d_vslip")]
    pub stick_slip_speed: f64,
    /// `"auto"` (default), `"dense"` or `"iterative"`: how the contact Newton systems and the
    /// contact adjoint are solved (same answers to the contact tolerance).
    #[serde(default)]
    pub solver: ContactSolver,
    /// Contact of each body with itself (with `bodies = true`): node–triangle and edge–edge
    /// between non-adjacent primitives of one body whose surfaces face each other.
    #[serde(default)]
    pub self_contact: bool,
    /// Compliance $c$ (m/N) of every NCP contact row: the complementarity conditions hold for
    /// $\tilde\delta=\delta(x)+c\lambda$ instead of the gap and slip $\delta(x)$, so an
    /// active contact penetrates by $c\lambda_n$ and a sticking one gives elastically by
    /// $c\lambda_t$: a spring of stiffness $1/c$ in series with each contact row
    /// (constraint-force mixing). In the contact space the operator $W=JA^{-1}J^T$ becomes
    /// $W+cI$, positive definite, so the multipliers are unique even where active rows
    /// outnumber the free DoFs they act on (a prescribed gripper, docs/contact.md §2e).
    /// 0 (default) = rigid contact.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub compliance: f64,
}
fn is_zero(v: &f64) -> bool {
    *v == 0.0
}
fn d_vslip() -> f64 {
    0.1
}
fn d_ctol() -> f64 {
    1e-12
}
fn d_cnewton() -> usize {
    50
}
fn d_cseconds() -> f64 {
    600.0
}
fn d_kfloor() -> f64 {
    1e-10
}
fn d_sfloor() -> f64 {
    1e-14
}
impl Default for ContactSettings {
    fn default() -> Self {
        ContactSettings {
            model: ContactModel::Ncp,
            smoothing: 0.0,
            margin: None,
            tolerance: d_ctol(),
            max_newton: d_cnewton(),
            max_seconds: d_cseconds(),
            scale_floor: d_kfloor(),
            s_floor: d_sfloor(),
            penalty: PenaltySettings::default(),
            bodies: false,
            body_friction: 0.0,
            body_static_friction: None,
            stick_slip_speed: d_vslip(),
            solver: ContactSolver::Auto,
            self_contact: false,
            compliance: 0.0,
        }
    }
}

/// How the NH prox-map Hessian is filtered in the backward only (spec §2.6, §7.3).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum HessianFilterMode {
    /// Exact implicit-function-theorem Jacobian (α = 0): the true gradient.
    #[default]
    None,
    /// α = ½ (clamp negative eigenvalues of $H_\sigma$ at 0).
    Clamp,
    /// α = 1 (absolute value).
    Abs,
    /// α ∈ {½, 1} per step from the forward's ratio ρ (Eq. 29).
    TrustRegion,
}

/// `[backward] adjoint`: iterative or direct solve of each frame's adjoint system.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AdjointSolve {
    /// Chosen per scene by a deterministic rule (`crate::solver::auto::choose_adjoint`).
    /// The default (issue 37).
    #[default]
    Auto,
    /// The Krylov solver of `backward.method`, handing a frame to the direct solve past
    /// [`DEFAULT_DIRECT_AFTER`] iterations (the safety net for ill-conditioned frames).
    Gmres,
    /// The factored PD Hessian every frame.
    Direct,
}

impl BackwardSettings {
    /// Warnings for deprecated keys that are set (printed by the commands).
    pub fn deprecations(&self) -> Vec<String> {
        match self.direct_after {
            Some(n) => vec![format!(
                "backward.direct_after = {n} is deprecated: use backward.adjoint = \"auto\", \"gmres\" or \"direct\" (direct_after overrides adjoint while it is set)"
            )],
            None => vec![],
        }
    }
}

/// Adjoint linear solver (spec §7.2; issue 7 "adjoint solver choice").
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AdjointMethod {
    /// DiffPD's iteration $z\leftarrow A^{-1}(g+\Delta Az)$ with Anderson acceleration, GMRES
    /// fallback on divergence, on stagnation or at the iteration cap.
    FixedPoint,
    /// GMRES on $K z=g$ right-preconditioned by the persistent factor ($A^{-1}$).
    Gmres,
    /// Preconditioned conjugate gradients on $Kz=g$ with the persistent factor ($A^{-1}$) as
    /// preconditioner; on negative curvature ($p^TKp\le0$, possible with the exact NH Hessian)
    /// or at the cap, GMRES finishes from the current iterate. Not with NCP contact (the
    /// contact KKT system is non-symmetric with friction and a saddle point with hard rows;
    /// scene validation refuses the combination).
    Pcg,
    /// With NCP contact: GMRES on the step's KKT system
    /// $\begin{bmatrix}K&J^TD^T\\-J&E^T\end{bmatrix}\begin{bmatrix}z\\\zeta\end{bmatrix}=\begin{bmatrix}g\\0\end{bmatrix}$
    /// right-preconditioned by its Woodbury block inverse with $A$ for $K$
    /// (`ContactAdjoint::woodbury`, Zeng et al. 2026 §4.4 Eq. 27). Without contact rows the
    /// preconditioner is $A^{-1}$ and this is [`AdjointMethod::Gmres`]. The default.
    #[default]
    Woodbury,
}
