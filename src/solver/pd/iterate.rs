//! The PD iteration written once (spec §6.2 steps 4–9): the PD map, the force-balance test of
//! `mode = "accurate"`, Anderson acceleration (Eqs. 18–21) and the dual gate (Eq. 22) in one
//! generic loop, [`pd_iterate`], over a [`PdBackend`] that holds the iteration's vectors and
//! supplies the local step, the global solve, Anderson's storage and the reductions the
//! tests read: [`super::host::HostPd`] (host vectors; its local step and global solve on
//! the attached accelerator's stages where there is one; NCP contact projection) and
//! [`super::resident::ResidentBackend`] (the vectors resident on an accelerator's
//! [`crate::solver::offload::ResidentPd`]: a GPU or its host emulator). The step
//! ([`super::forward`]) picks the backend once per step, so the loop is monomorphised per
//! backend: no dynamic dispatch inside an iteration.

use crate::cancel::Stage;
use crate::contact::{self, ContactSet, ContactStats, Delassus};
use crate::solver::context::StepContext;
use crate::solver::records::error::SolverError;
use crate::solver::records::stats::StepStats;
use crate::solver::stages::anderson::TypeII;
use crate::solver::stages::gate::{DualGate, GateResiduals};
use nalgebra::Matrix3;
use std::time::Instant;

/// What one PD map ([`PdBackend::map`]) leaves for the loop's force-balance test.
#[derive(Clone, Copy, Debug, Default)]
pub(in crate::solver) struct MapOut {
    /// $\|(\hat A g_k)_F\|$, the force residual of $x_k$ on the free DoFs (runs that track it).
    pub(in crate::solver) residual: Option<f64>,
    /// The residual test's round-off floor (asked on the step's first tracked map).
    pub(in crate::solver) floor: f64,
}

/// Where a step's PD iteration keeps its vectors and runs its stages. The loop
/// ([`pd_iterate`]) owns the algorithm — the tests, Anderson's coefficients, the exits — and
/// a backend supplies, per iteration: the PD map (local step, global solve, on the host the
/// contact projection), Anderson's mix on its own store
/// ([`crate::solver::stages::anderson::AndersonStore`]),
/// and the norms of the dual gate. A backend lives for one step (its previous $b_p$ carries
/// over from one run of iterations to the next).
pub(in crate::solver) trait PdBackend {
    /// Begin a run of iterations from `it.x` ($x^0$ when `it.k == 0`, else the iterate a
    /// host phase left) with Anderson's `window`.
    fn start(
        &mut self,
        ctx: &mut StepContext<'_>,
        frame: usize,
        rhs: &StepRhs,
        it: &PdLoop,
        window: usize,
    ) -> Result<(), SolverError>;
    /// The PD map at $x_k$: $b_p(x_k)$, $\hat x$ (Dirichlet values imposed; contact-projected
    /// with NCP contact) and $g_k=\hat x-x_k$, failing on a non-finite local or global step;
    /// with `tracked` also the force residual (and, on the first tracked map, its floor).
    /// Adds the local and global times to `it.stats`.
    fn map(
        &mut self,
        ctx: &mut StepContext<'_>,
        frame: usize,
        rhs: &StepRhs,
        it: &mut PdLoop,
        tracked: bool,
    ) -> Result<MapOut, SolverError>;
    /// Anderson's next iterate $x_{k+1}$ from $(x_k,g_k)$ on the backend's store, with the
    /// Dirichlet values imposed.
    fn mix(
        &mut self,
        ctx: &mut StepContext<'_>,
        frame: usize,
        aa: &mut TypeII,
        rhs: &StepRhs,
        it: &PdLoop,
    ) -> Result<(), SolverError>;
    /// The dual-gate residuals (spec Eq. 22) of the last map.
    fn gate(&self, ctx: &StepContext<'_>, rhs: &StepRhs, it: &PdLoop) -> GateResiduals;
    /// End of the iteration: $x_{k+1}$ becomes the iterate (`done`: the run ends with it).
    fn accept(&mut self, ctx: &StepContext<'_>, it: &mut PdLoop, done: bool);
    /// End of a run: `it.x` is the iterate.
    fn finish(
        &mut self,
        ctx: &mut StepContext<'_>,
        frame: usize,
        it: &mut PdLoop,
    ) -> Result<(), SolverError>;
}

/// PD iterations (Anderson-accelerated) from `it.x` on `backend` until `stop` says so or the
/// cap (`solver.max_iterations`); `it.x` is the iterate when it returns.
pub(in crate::solver) fn pd_iterate<B: PdBackend>(
    ctx: &mut StepContext<'_>,
    backend: &mut B,
    aa: &mut TypeII,
    frame: usize,
    rhs: &StepRhs,
    it: &mut PdLoop,
    stop: Stop,
) -> Result<Exit, SolverError> {
    backend.start(ctx, frame, rhs, it, aa.window())?;
    let mut exit = Exit::Cap;
    while it.k < ctx.config.max_iterations {
        let k = it.k;
        ctx.cancel
            .poll(Stage::Pd, k)
            .map_err(|c| SolverError::cancelled(frame, c))?;
        let out = backend.map(ctx, frame, rhs, it, stop != Stop::Gate)?;
        let t1 = Instant::now();
        let mut converged = false;
        let mut gate_met = false;
        if let Some(rn) = out.residual {
            // force balance of x_k: b(x_k) + J^T λ − A x_k = A g_k on the free DoFs
            if it.r0.is_none() {
                it.r0 = Some(rn);
                it.floor = out.floor;
            }
            it.residual = rn / it.r0.unwrap_or(1.0).max(f64::MIN_POSITIVE);
            if stop == Stop::Residual && rn <= ctx.residual_target(it) && it.contact_ok {
                converged = true;
            }
        }
        backend.mix(ctx, frame, aa, rhs, it)?;
        if k >= 1 {
            it.last_gate = backend.gate(ctx, rhs, it);
            if stop != Stop::Residual && ctx.gate_or_budget(stop, k, &it.last_gate) && it.contact_ok
            {
                match stop {
                    Stop::Gate => converged = true,
                    _ => gate_met = true,
                }
            }
        }
        backend.accept(ctx, it, converged || gate_met);
        it.stats.time_other += t1.elapsed().as_secs_f64();
        it.k += 1;
        if it.cstats.time_limit_iteration.is_some() {
            // a contact solve out of time ends the step, non-converged
            break;
        }
        if converged {
            exit = Exit::Converged;
            break;
        }
        if gate_met {
            exit = Exit::GateMet;
            break;
        }
    }
    backend.finish(ctx, frame, it)?;
    Ok(exit)
}

impl StepContext<'_> {
    /// `mode = "accurate"`: PD iterations after which the Newton–Krylov phase (and its direct
    /// fallback) takes over even if the dual gate is not met. Converging frames reach the gate
    /// in ≈ 30–130 iterations (the armadillo's 1000× bands ≈ 400); on buckling steps Anderson-PD
    /// wandered for 1,500 iterations before the gate (a 12-hex column at 6 m/s).
    pub const HAND_OVER_AFTER: usize = 100;

    /// The dual gate, or in accurate mode (`Stop::GateThenPolish`) the hand-over budget
    /// [`Self::HAND_OVER_AFTER`] (not for a gate tighter than 1e-5: that is an accuracy
    /// request, e.g. of the gradient checks, and is waited for).
    pub(in crate::solver) fn gate_or_budget(
        &self,
        stop: Stop,
        k: usize,
        gate: &GateResiduals,
    ) -> bool {
        DualGate::met(gate)
            || (stop == Stop::GateThenPolish
                && k + 1 >= Self::HAND_OVER_AFTER
                && self.config.gate.rel >= 1e-5)
    }

    /// Absolute force-balance target of `mode = "accurate"`: `residual_tol`$\cdot\|r^0\|$ + floor.
    pub(in crate::solver) fn residual_target(&self, it: &PdLoop) -> f64 {
        self.config.residual_tol * it.r0.unwrap_or(0.0) + it.floor
    }
}

/// The state of a step's PD iteration, carried across its phases.
pub(in crate::solver) struct PdLoop {
    pub(in crate::solver) x: Vec<f64>,
    pub(in crate::solver) bp: Vec<f64>,
    pub(in crate::solver) bp_prev: Vec<f64>,
    pub(in crate::solver) xhat: Vec<f64>,
    /// PD iterations so far.
    pub(in crate::solver) k: usize,
    pub(in crate::solver) ncp: Option<NcpState>,
    pub(in crate::solver) cstats: ContactStats,
    pub(in crate::solver) stats: StepStats,
    /// The last contact solve met `contact.tolerance` (the gates also require it).
    pub(in crate::solver) contact_ok: bool,
    pub(in crate::solver) newton_cache: Option<contact::NewtonCache>,
    pub(in crate::solver) last_gate: GateResiduals,
    pub(in crate::solver) x_before: Vec<f64>,
    pub(in crate::solver) b_before: Vec<f64>,
    /// Force residual $\|b(x^0)-Ax^0\|$ of the step's first iterate (accurate mode).
    pub(in crate::solver) r0: Option<f64>,
    /// Last force residual relative to `r0`.
    pub(in crate::solver) residual: f64,
    /// Round-off floor of the residual test.
    pub(in crate::solver) floor: f64,
    /// Contact tolerance of the force-balance phase
    /// ([`StepContext::residual_contact_tolerance`]); `None`: `contact.tolerance`.
    pub(in crate::solver) contact_tol: Option<f64>,
}

impl PdLoop {
    /// The state before the first PD iteration from `x` ($x^0$).
    pub(in crate::solver) fn new(
        x: Vec<f64>,
        ncp: Option<NcpState>,
        cstats: ContactStats,
    ) -> PdLoop {
        let n3 = x.len();
        PdLoop {
            x,
            bp: vec![0.0; n3],
            bp_prev: vec![0.0; n3],
            xhat: vec![0.0; n3],
            k: 0,
            ncp,
            cstats,
            stats: StepStats::default(),
            contact_ok: true,
            newton_cache: None,
            last_gate: GateResiduals {
                position: f64::INFINITY,
                projection: f64::INFINITY,
            },
            x_before: Vec::new(),
            b_before: Vec::new(),
            r0: None,
            residual: f64::INFINITY,
            floor: 0.0,
            contact_tol: None,
        }
    }
}

/// What ends a run of PD iterations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::solver) enum Stop {
    /// The dual gate: the step is converged (`mode = "paper"`).
    Gate,
    /// The dual gate hands over to Newton–Krylov (`mode = "accurate"`); the residual is tracked.
    GateThenPolish,
    /// The force-balance test of `mode = "accurate"`.
    Residual,
}

/// Why a run of PD iterations ended.
pub(in crate::solver) enum Exit {
    Converged,
    GateMet,
    Cap,
}

/// The right-hand side of a PD step in displacement form. With $u=x-x_t$, the system
/// $Ax=c+b_p(x)$ ($c$ of [`StepContext::rhs_constant`]) is $Au=c_u+b_{p,u}(x)$ where
/// $c_u=\tfrac1hMv_t+f_{ext}-K_{att}x_t$ and
/// $b_{p,u}(x)=\sum_sG_s^T\mathrm{vec}\big(Q_s(x)-Q^t_s\big)$, $Q^t_s=w_sF_s(x_t)$ (+ the muscle
/// terms $w_m(F_s\mathsf m)\mathsf m^T$): $c-Ax_t=c_u-\sum_sG_s^T\mathrm{vec}\,Q^t_s$ because
/// the inertia, mass-damping and $K_\beta$ terms of $c$ and $A$ cancel exactly and
/// $\hat K x_t=\sum_sw_sG_s^T\mathrm{vec}\,F_s(x_t)$ ($G_sX=I$). Every term is a small
/// difference computed before it meets a stiffness: no $\|A\|\,\|x\|$ round-off, and the
/// elastic part has no net force (it passes through $G_s^T$), so nothing is amplified by
/// the $h^2/m$ of the translational mode.
pub(in crate::solver) struct StepRhs {
    /// Start-of-step positions $x_t$ (the reference of $u$).
    pub(in crate::solver) x_t: Vec<f64>,
    /// $c_u$.
    pub(in crate::solver) c: Vec<f64>,
    /// $Q^t_s$ per sample.
    pub(in crate::solver) qt: Vec<Matrix3<f64>>,
    /// $\sum_sG_s^T\mathrm{vec}\,Q^t_s$ (for an offloaded local step, which returns $b_p$).
    pub(in crate::solver) st: Vec<f64>,
    /// Dirichlet values at the end of the step, absolute ($x$) and relative ($u$).
    pub(in crate::solver) xd: Vec<f64>,
    pub(in crate::solver) xd_u: Vec<f64>,
}

/// The NCP contact state of a PD step: contact set, its Delassus operator, multipliers.
pub(in crate::solver) type NcpState = (ContactSet, Delassus, Vec<f64>);
