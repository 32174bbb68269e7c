//! Adjoint (reverse-mode) time stepping (spec §2.10, §7): for each step, solve
//! $(A-\Delta A)\,z=g$ on the free DoFs by DiffPD's iteration $z\leftarrow A^{-1}(g+\Delta A z)$
//! on the persistent factor of the forward, accelerated by type-II Anderson (window, guard
//! and regularization as in the forward), then route $z$ into parameter gradients (§7.5).
//!
//! $\Delta A=\sum_s w_sG_s^T\,\partial\mathrm{vec}p_s/\partial\mathrm{vec}F_s\,G_s$ (Eq. 39) is applied
//! matrix-free per sample from the SVD at $x_{t+1}$ (App. A.1), with each sample's own
//! weight $w_s$ (exact on heterogeneous meshes; the reference code's mean weight is not).
//! The Neo-Hookean stretch Jacobian can be filtered (Eqs. 24–25, `HessianFilterMode`).

use crate::cancel::Stage;
use crate::contact::adjoint::ContactAdjoint;
use crate::contact::ContactRecord;
use crate::linalg::krylov::{self, Cancellable, KrylovSpace, KrylovStats};
use crate::material::interleaved::LANES;
use crate::material::neohookean::HessianFilter;
use crate::material::svd;
use crate::material::Linearization;
use crate::model::AdjointMethod;
use crate::model::Model;
use crate::solver::context::{norm, StepContext};
use crate::solver::offload::{MuscleStep, Offload, OffloadError};
use crate::solver::records::config::BackwardConfig;
use crate::solver::records::stats::AdjointStats;
use crate::solver::stages::anderson::TypeII;
use crate::solver::stages::local::{self, CHUNK};
use nalgebra::Matrix3;
use rayon::prelude::*;

/// Local Jacobians of one step, evaluated at $x_{t+1}$.
pub struct StepLinearization<'s> {
    samples: Vec<Linearization>,
    /// Per-sample weighted coefficients of $\Delta A$ (from
    /// [`crate::material::Material::spectral_coefficients`]), computed once per step so that
    /// each product only applies them.
    spectral: Vec<svd::SpectralLinear>,
    /// Muscle fibres at $x_{t+1}$ (spec §3.5).
    pub muscle: crate::solver::muscle::MuscleLin,
    /// Number of samples whose stretch Jacobian the filter changed.
    pub filtered_samples: usize,
    /// Contact block of the step (spec §7.2 step 3), if it had contact candidates.
    pub contact: Option<ContactAdjoint<'s>>,
    /// Scratch of [`StepLinearization::apply`]: one $dp_s$ per sample.
    products: std::sync::Mutex<Vec<Matrix3<f64>>>,
    /// The accelerator's token for this step's $\Delta A$ coefficients
    /// ([`crate::solver::offload::Offload::adjoint_step`]), when the simulator has one.
    pub(in crate::solver) device_step: Option<u64>,
    /// Whether the host holds the samples' linearizations (`false`: computed on the
    /// accelerator only, [`StepLinearization::for_newton`], [`StepLinearization::for_adjoint`]).
    host: bool,
    /// The Hessian filter's $\alpha$ (`HessianFilter::Blend`; 0: none) it was built with.
    pub alpha: f64,
}

impl<'s> StepLinearization<'s> {
    /// Recompute SVDs, projections and stretch Jacobians at `x` (spec §7.2 step 2). With an
    /// accelerator the step's $\Delta A$ is planned on it too; its failure is the error.
    pub fn new(sim: &StepContext, x: &[f64], alpha: f64) -> Result<Self, OffloadError> {
        Self::build(sim, x, alpha, false)
    }

    /// The projected-Newton linearization of the Newton–Krylov phase: [`Self::new`] with the
    /// clamp filter ($\alpha=\tfrac12$), and every sample's $\partial p_s/\partial F$ capped at
    /// its weight in $A$, $w_s(1+\beta_e/h)$ ([`svd::SpectralLinear::capped`]), so each
    /// sample's energy Hessian $w_s(1+\beta_e/h)I-\partial p_s/\partial F$ is positive
    /// semidefinite and $K=A-\Delta A\succeq M/h^2$: the Newton direction is a descent
    /// direction of the step energy wherever the energy is not convex (compressed corotated
    /// samples, whose twist eigenvalue $2w/(\sigma_i+\sigma_j)$ exceeds $w$, buckling).
    pub fn projected(sim: &StepContext, x: &[f64]) -> Result<Self, OffloadError> {
        Self::build(sim, x, 0.5, true)
    }

    fn build(sim: &StepContext, x: &[f64], alpha: f64, psd: bool) -> Result<Self, OffloadError> {
        let model = sim.model;
        let d = &sim.derived;
        let filter = if alpha == 0.0 {
            HessianFilter::None
        } else {
            HessianFilter::Blend(alpha)
        };
        let n = model.num_samples();
        let mut samples = vec![UNSET; n];
        let mut spectral = vec![svd::SpectralLinear::from_coefficients([Matrix3::zeros(); 5]); n];
        samples
            .par_chunks_mut(CHUNK)
            .zip(spectral.par_chunks_mut(CHUNK))
            .enumerate()
            .for_each(|(c, (lins, coefs))| {
                let blocks = lins.chunks_mut(LANES).zip(coefs.chunks_mut(LANES));
                for (b, (lb, cb)) in blocks.enumerate() {
                    let s0 = c * CHUNK + b * LANES;
                    linearize_block(sim, x, s0, filter, lb);
                    for (l, (lin, coef)) in lb.iter().zip(cb).enumerate() {
                        *coef = coefficients(sim, s0 + l, lin, psd);
                    }
                }
            });
        let filtered_samples = samples.iter().filter(|s| s.filtered).count();
        let muscle = crate::solver::muscle::MuscleLin::new(model, x, d.muscle_time);
        let device_step = match sim.accelerator() {
            Some(off) => Some(plan_device_step(off, &spectral, &muscle)?),
            None => None,
        };
        Ok(StepLinearization {
            samples,
            spectral,
            muscle,
            filtered_samples,
            contact: None,
            products: std::sync::Mutex::new(Vec::new()),
            device_step,
            host: true,
            alpha,
        })
    }

    /// The Newton–Krylov phase's Jacobian at `x`: [`StepLinearization::new`] (exact, no
    /// filter) or, with `projected`, [`StepLinearization::projected`]; computed on the
    /// accelerator when the simulator has one that offers it (`on_device`), else on
    /// the host.
    pub fn for_newton(sim: &StepContext, x: &[f64], projected: bool) -> Result<Self, OffloadError> {
        let alpha = if projected { 0.5 } else { 0.0 };
        match Self::on_device(sim, x, (alpha, projected)) {
            Some(lin) => lin,
            None if projected => Self::projected(sim, x),
            None => Self::new(sim, x, 0.0),
        }
    }

    /// The backward step's linearization at $x_{t+1}$ with the Hessian filter `alpha`:
    /// [`StepLinearization::new`], computed on the accelerator when the simulator has one
    /// that offers it (`on_device`; the parameter gradients' material maps are the
    /// accelerator's too, [`crate::solver::adjoint::gradient::ParamConstants`]), else on the host.
    pub fn for_adjoint(sim: &StepContext, x: &[f64], alpha: f64) -> Result<Self, OffloadError> {
        Self::on_device(sim, x, (alpha, false)).unwrap_or_else(|| Self::new(sim, x, alpha))
    }

    /// The linearization at `x` computed on the accelerator
    /// ([`crate::solver::offload::Offload::linearize_step`] with `(alpha, projected)`): the
    /// coefficients never leave the device, and the host keeps only the muscle fibres and
    /// the count of filtered samples. The solvers only apply it ($\Delta A\,v$ through the
    /// accelerator), so the host's per-sample table is not needed;
    /// [`StepLinearization::apply`] of a device-only linearization gives NaN. `None` without
    /// an accelerator or where it does not offer it; `Some(Err)`: the device failed.
    fn on_device(
        sim: &StepContext,
        x: &[f64],
        (alpha, projected): (f64, bool),
    ) -> Option<Result<Self, OffloadError>> {
        let off = sim.accelerator()?;
        let muscle = crate::solver::muscle::MuscleLin::new(sim.model, x, sim.derived.muscle_time);
        let planned = with_fibres(&muscle, |fibres| {
            off.linearize_step(x, (alpha, projected), fibres)
        })?;
        Some(planned.map(|p| StepLinearization {
            samples: Vec::new(),
            spectral: Vec::new(),
            muscle,
            filtered_samples: p.filtered_samples,
            contact: None,
            products: std::sync::Mutex::new(Vec::new()),
            device_step: Some(p.token),
            host: false,
            alpha,
        }))
    }

    /// Add the contact block of the step's tape (spec §7.2 step 3): $X=A^{-1}J^T$ from the
    /// persistent factor and the factored $G_c=WD^T+E^T$ (fails where a solve with the
    /// contact factor does).
    pub fn with_contact(
        mut self,
        sim: &'s StepContext,
        rec: Option<&ContactRecord>,
    ) -> Result<Self, OffloadError> {
        self.contact = match rec.filter(|r| !r.set.is_empty()) {
            Some(r) => Some(ContactAdjoint::new(r, sim.contact_solver())?),
            None => None,
        };
        Ok(self)
    }

    /// The material linearisation of sample `s` (for the parameter gradients).
    pub fn sample(&self, s: usize) -> &Linearization {
        &self.samples[s]
    }

    /// The weighted spectral-map coefficients $\[U,V,W,M,N\]$ of sample `s` (spec App. A.1,
    /// Eq. 42): the local Jacobian of the step is $dp_s = U\,c\,V^T$ with $a=U^TdF\,V$,
    /// $c_{ii}=\sum_kW_{ik}a_{kk}$, $c_{ij}=M_{ij}a_{ij}+N_{ij}a_{ji}$, where $W,M,N$ already
    /// carry the PD weights (terms sharing $U,V$ summed). Used by the device product (`gpu`),
    /// which needs them as plain numbers. Muscles are not included (the device gets them as
    /// [`crate::solver::offload::MuscleStep`]).
    pub fn spectral_coefficients(&self, s: usize) -> [Matrix3<f64>; 5] {
        let c = &self.spectral[s];
        [c.u, c.v, c.w, c.m, c.n]
    }

    /// $\Delta A\,z$ (matrix-free, App. A.1), Dirichlet rows not zeroed.
    pub fn apply(&self, model: &Model, z: &[f64], out: &mut [f64]) {
        if !self.host {
            // the coefficients are on the accelerator only: loud, not a silent zero
            out.iter_mut().for_each(|v| *v = f64::NAN);
            return;
        }
        // per-sample products in parallel into a buffer reused across products (no
        // allocation per Krylov iteration), then the scatter as a node-parallel gather in
        // sample order (the same bits on any thread count)
        let mut dps = self.products.lock().unwrap_or_else(|e| e.into_inner());
        self.spectral
            .par_iter()
            .enumerate()
            .map(|(s, lin)| lin.apply(&model.gradient_of(s, z)))
            .collect_into_vec(&mut dps);
        out.iter_mut().for_each(|v| *v = 0.0);
        let dps: &[Matrix3<f64>] = &dps;
        model.gather_gt(|s| dps[s], out);
        self.muscle.apply(model, z, out);
    }
}

/// Plan the accelerator's $\Delta A$ of one step: the spectral coefficients and the muscle
/// fibres' $(a_g,\ell,n)$ once per step ([`Offload::adjoint_step`]); returns its token, or
/// its failure.
fn plan_device_step(
    off: &(dyn Offload + Send + Sync + '_),
    spectral: &[svd::SpectralLinear],
    muscle: &crate::solver::muscle::MuscleLin,
) -> Result<u64, OffloadError> {
    let coef = |s: usize| {
        let c = &spectral[s];
        [c.u, c.v, c.w, c.m, c.n]
    };
    with_fibres(muscle, |fibres| off.adjoint_step(&coef, fibres))
}

/// `f` of the muscle fibres' $(a_g,\ell,n)$ of `muscle` as the accelerator takes them
/// ([`MuscleStep`]).
fn with_fibres<T>(
    muscle: &crate::solver::muscle::MuscleLin,
    f: impl FnOnce(&MuscleStep) -> T,
) -> T {
    let (len, dir) = muscle.fibre_states();
    f(&MuscleStep {
        activations: muscle.activations(),
        len: &len,
        dir: &dir,
    })
}

/// A placeholder of [`StepLinearization`]'s sample table before [`linearize_block`] fills it.
const UNSET: Linearization = Linearization {
    svd: svd::Svd3 {
        u: Matrix3::new(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        sigma: nalgebra::Vector3::new(0.0, 0.0, 0.0),
        v: Matrix3::new(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    },
    w: [0.0; 2],
    star: nalgebra::Vector3::new(0.0, 0.0, 0.0),
    jac: Matrix3::new(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    residual: [Matrix3::new(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0); 2],
    filtered: false,
};

/// The material linearizations of the samples `s0 .. s0 + out.len()` (at most [`LANES`])
/// into `out`: the interleaved kernel ([`crate::material::Material::linearize_lanes`]) on a
/// full block of one law, the exact path (`svd3` and [`crate::material::Material::linearize`])
/// for the lanes it refuses, mixed blocks and the tail.
fn linearize_block(
    sim: &StepContext,
    x: &[f64],
    s0: usize,
    filter: HessianFilter,
    out: &mut [Linearization],
) {
    let (model, d) = (sim.model, &sim.derived);
    let body = |s: usize| model.elem_body[model.samples.elem[s]];
    let fast = match local::uniform_block(model, s0, out.len()) {
        Some(law) => {
            let f = local::block_gradients(model, x, s0);
            law.linearize_lanes(&f, &d.w[s0..s0 + LANES], |l| d.nh[body(s0 + l)], filter)
        }
        None => [None; LANES],
    };
    for (l, lin) in out.iter_mut().enumerate() {
        let s = s0 + l;
        *lin = fast[l].unwrap_or_else(|| {
            let f = model.deformation_gradient(s, x);
            let law = model.bodies[body(s)].model;
            law.linearize(&f, svd::svd3(&f), &d.w[s], &d.nh[body(s)], filter)
        });
    }
}

/// The weighted spectral coefficients of $\Delta A$ of sample `s`
/// ([`crate::material::Material::spectral_coefficients`]), capped at its weight in $A$,
/// $w_s(1+\beta_e/h)$, for the projected Jacobian (`psd`, [`svd::SpectralLinear::capped`]).
fn coefficients(
    sim: &StepContext,
    s: usize,
    lin: &Linearization,
    psd: bool,
) -> svd::SpectralLinear {
    let (model, d) = (sim.model, &sim.derived);
    let e = model.samples.elem[s];
    let law = model.bodies[model.elem_body[e]].model;
    let spectral = svd::SpectralLinear::from_coefficients(law.spectral_coefficients(lin));
    if psd {
        spectral.capped(d.w_total(s) * (1.0 + d.beta[e] / model.h))
    } else {
        spectral
    }
}

/// $\Delta A\,z$ (Dirichlet rows not zeroed): on the accelerator when the simulator has one
/// ([`Offload::adjoint_product`]: spectral and muscle terms, one device product), otherwise
/// [`StepLinearization::apply`]. A device failure is the error, as is a linearization that
/// was not planned on the simulator's accelerator ([`OffloadError::Unplanned`]).
pub fn delta_a(
    sim: &StepContext,
    lin: &StepLinearization,
    z: &[f64],
    out: &mut [f64],
) -> Result<(), OffloadError> {
    let Some(off) = sim.accelerator() else {
        lin.apply(sim.model, z, out);
        return Ok(());
    };
    match lin.device_step {
        Some(token) => off.adjoint_product(token, z, out),
        None => Err(OffloadError::Unplanned),
    }
}

/// $A^{-1}q$ with zero Dirichlet values: on the accelerator's factor when the simulator has
/// one, otherwise the persistent CPU factor. A device failure is the error.
pub fn solve_a(sim: &StepContext, q: &[f64], z: &mut [f64]) -> Result<(), OffloadError> {
    use crate::linalg::LinearSolver;
    match sim.accelerator() {
        Some(off) => off.solve_homogeneous(q, z),
        None => Ok(sim.system.solve_homogeneous(q, z)?),
    }
}

/// Apply $K=A-\Delta A$ on the free DoFs (prescribed entries of input and output are 0);
/// fails where [`delta_a`] does.
pub fn apply_k(
    sim: &StepContext,
    lin: &StepLinearization,
    v: &[f64],
    out: &mut [f64],
) -> Result<(), OffloadError> {
    use crate::linalg::LinearSolver;
    let mut t = vec![0.0; v.len()];
    sim.system.apply_a(v, out);
    delta_a(sim, lin, v, &mut t)?;
    for (o, ti) in out.iter_mut().zip(&t) {
        *o -= ti;
    }
    sim.zero_prescribed(out);
    Ok(())
}

/// The accelerator's [`KrylovSpace`] for `lin`'s step, when the simulator has an accelerator
/// that offers one and the step's $\Delta A$ is planned on it ([`Offload::krylov_space`]).
fn device_space<'a>(
    sim: &'a StepContext,
    lin: &StepLinearization,
) -> Option<Box<dyn KrylovSpace<Error = OffloadError> + 'a>> {
    let token = lin.device_step?;
    sim.accelerator()?.krylov_space(token)
}

/// Solve $Kz=g$ ($z_D=0$) by GMRES right-preconditioned with $A^{-1}$, from `z`: on the
/// accelerator's vectors when it offers a Krylov space (only $g$, $z$ and the dot products'
/// scalars cross), otherwise on the host with [`apply_k`] and [`solve_a`]. The first device
/// failure ends the solve and is returned.
pub fn solve_gmres(
    sim: &StepContext,
    lin: &StepLinearization,
    g: &[f64],
    z: &mut [f64],
    cfg: &BackwardConfig,
) -> Result<KrylovStats, OffloadError> {
    solve_gmres_monitored(sim, lin, g, z, cfg, &mut |_, _| true)
}

/// [`solve_gmres`] under a monitor ([`krylov::gmres_monitored`]: after each iteration
/// `monitor(iterations, estimated relative residual)` says whether to go on).
pub fn solve_gmres_monitored(
    sim: &StepContext,
    lin: &StepLinearization,
    g: &[f64],
    z: &mut [f64],
    cfg: &BackwardConfig,
    monitor: &mut dyn FnMut(usize, f64) -> bool,
) -> Result<KrylovStats, OffloadError> {
    let settings = krylov::GmresSettings {
        restart: cfg.gmres_restart,
        rel_tol: cfg.rel_tol,
        abs_tol: cfg.abs_tol,
        max_iter: cfg.max_iterations,
    };
    if let Some(mut space) = device_space(sim, lin) {
        let mut space = Cancellable::new(space.as_mut(), &sim.cancel);
        return krylov::gmres_monitored(&mut space, g, z, &settings, monitor);
    }
    let mut op = |v: &[f64], out: &mut [f64]| apply_k(sim, lin, v, out);
    let mut pre = |v: &[f64], out: &mut [f64]| solve_a(sim, v, out);
    let mut space = krylov::HostSpace::new(g.len(), &mut op, &mut pre);
    let mut space = Cancellable::new(&mut space, &sim.cancel);
    krylov::gmres_monitored(&mut space, g, z, &settings, monitor)
}

/// The start every step adjoint shares: the clock, the right-hand side $g$ with its
/// prescribed entries zeroed ($z_D=0$), its norm and the statistics record of `method`.
pub(crate) struct AdjointStart {
    pub t0: std::time::Instant,
    pub g: Vec<f64>,
    pub gnorm: f64,
    pub stats: AdjointStats,
}

impl AdjointStart {
    pub(crate) fn new(sim: &StepContext, g: &[f64], frame: usize, method: &str) -> AdjointStart {
        let t0 = std::time::Instant::now();
        let mut gf = g.to_vec();
        sim.zero_prescribed(&mut gf);
        let gnorm = norm(&gf);
        let stats = AdjointStats {
            frame,
            method: method.into(),
            ..Default::default()
        };
        AdjointStart {
            t0,
            g: gf,
            gnorm,
            stats,
        }
    }

    /// With $g_F=0$ the answer $z=0$, converged; `None` otherwise.
    pub(crate) fn zero_answer(&self) -> Option<(Vec<f64>, AdjointStats)> {
        (self.gnorm == 0.0).then(|| {
            let mut stats = self.stats.clone();
            stats.converged = true;
            stats.seconds = self.t0.elapsed().as_secs_f64();
            (vec![0.0; self.g.len()], stats)
        })
    }
}

/// Fixed-point adjoint iterations without halving the residual before GMRES takes over
/// (issue 14: 21,561 fixed-point iterations on one scan-mesh rollout).
pub const FIXED_POINT_STALL: usize = 200;

/// Solve $(A-\Delta A)z=g$ with $z_D=0$ (the adjoint of one step): DiffPD's fixed-point
/// iteration with Anderson acceleration; if it diverges (residual above $10^3\|g\|$) or
/// reaches `max_iterations`, GMRES preconditioned by $A^{-1}$ takes over from the best iterate.
/// The first accelerator failure ends it and is returned.
pub fn solve_adjoint(
    sim: &StepContext,
    lin: &StepLinearization,
    g: &[f64],
    cfg: &BackwardConfig,
    frame: usize,
) -> Result<(Vec<f64>, AdjointStats), OffloadError> {
    let start = AdjointStart::new(sim, g, frame, "fixed_point");
    // a loss on the contact forces is a right-hand side of its own (g_λ): z ≠ 0 with g = 0
    let force_rhs = lin.contact.as_ref().is_some_and(|c| c.has_rhs());
    if let Some(answer) = start.zero_answer().filter(|_| !force_rhs) {
        return Ok(answer);
    }
    let AdjointStart {
        t0,
        g: gf,
        gnorm,
        mut stats,
    } = start;
    if let Some(c) = &lin.contact {
        let pre = match cfg.method {
            AdjointMethod::FixedPoint => {
                return solve_adjoint_contact(sim, lin, c, &gf, cfg, stats, t0)
            }
            AdjointMethod::Gmres => KktPreconditioner::BlockJacobi,
            // Pcg is refused with NCP contact at scene validation; a library caller gets the
            // robust Krylov solve, labelled as such.
            AdjointMethod::Woodbury | AdjointMethod::Pcg => KktPreconditioner::Woodbury,
        };
        return solve_adjoint_kkt(sim, lin, c, (&gf, pre), cfg, (stats, t0));
    }
    let z = match cfg.method {
        AdjointMethod::Gmres | AdjointMethod::Woodbury => {
            adjoint_gmres(sim, lin, &gf, cfg, &mut stats)?
        }
        AdjointMethod::Pcg => adjoint_pcg(sim, lin, &gf, cfg, &mut stats)?,
        AdjointMethod::FixedPoint => adjoint_fixed_point(sim, lin, (&gf, gnorm), cfg, &mut stats)?,
    };
    stats.max_abs_z = z.iter().map(|v| v.abs()).fold(0.0, f64::max);
    stats.filtered_samples = lin.filtered_samples;
    stats.seconds = t0.elapsed().as_secs_f64();
    Ok((z, stats))
}

/// The log's name of the $A^{-1}$-preconditioned GMRES adjoint: `woodbury` (without contact
/// rows, GMRES with $A^{-1}$) or `gmres`.
pub(in crate::solver) fn gmres_method(cfg: &BackwardConfig) -> &'static str {
    if cfg.method == AdjointMethod::Woodbury {
        "woodbury"
    } else {
        "gmres"
    }
}

/// `adjoint = "gmres"` (and `"woodbury"` without contact): GMRES on $Kz=g$ preconditioned by
/// $A^{-1}$ from $z=0$ ([`solve_gmres`]).
fn adjoint_gmres(
    sim: &StepContext,
    lin: &StepLinearization,
    gf: &[f64],
    cfg: &BackwardConfig,
    stats: &mut AdjointStats,
) -> Result<Vec<f64>, OffloadError> {
    let mut z = vec![0.0; gf.len()];
    let st = solve_gmres(sim, lin, gf, &mut z, cfg)?;
    stats.method = gmres_method(cfg).into();
    stats.gmres_iterations = st.iterations;
    stats.iterations = st.iterations;
    stats.converged = st.converged;
    stats.relative_residual = st.relative_residual;
    Ok(z)
}

/// `adjoint = "pcg"`: PCG on $Kz=g$ ([`solve_pcg`]); GMRES finishes from its iterate when it
/// stops unconverged (negative curvature or cap).
fn adjoint_pcg(
    sim: &StepContext,
    lin: &StepLinearization,
    gf: &[f64],
    cfg: &BackwardConfig,
    stats: &mut AdjointStats,
) -> Result<Vec<f64>, OffloadError> {
    let mut z = vec![0.0; gf.len()];
    let (it, conv, rel) = solve_pcg(sim, lin, gf, &mut z, cfg)?;
    stats.method = "pcg".into();
    stats.iterations = it;
    stats.converged = conv;
    stats.relative_residual = rel;
    if !conv {
        let st = solve_gmres(sim, lin, gf, &mut z, cfg)?;
        stats.method = "pcg+gmres".into();
        stats.gmres_iterations = st.iterations;
        stats.converged = st.converged;
        stats.relative_residual = st.relative_residual;
    }
    Ok(z)
}

/// `adjoint = "fixed_point"`: DiffPD's iteration $z\leftarrow A^{-1}(g+\Delta Az)
/// =z+A^{-1}(g-Kz)$ with Anderson acceleration from $z=0$, until
/// $\|Kz-g\|\le\epsilon_r\|g\|+\epsilon_a$; on divergence ($\|Kz-g\|>10^3\|g\|$), on
/// stagnation ([`FIXED_POINT_STALL`]) or at the cap, GMRES takes over from the best iterate.
fn adjoint_fixed_point(
    sim: &StepContext,
    lin: &StepLinearization,
    (gf, gnorm): (&[f64], f64),
    cfg: &BackwardConfig,
    stats: &mut AdjointStats,
) -> Result<Vec<f64>, OffloadError> {
    let n3 = gf.len();
    let mut aa = TypeII::new(cfg.window, cfg.gamma_max);
    let mut z = vec![0.0; n3];
    let mut best = (f64::INFINITY, z.clone());
    let mut best_it = 0;
    let mut kz = vec![0.0; n3];
    let mut u = vec![0.0; n3];
    let mut rel = f64::INFINITY;
    let mut it = 0;
    while it < cfg.max_iterations {
        sim.cancel.poll(Stage::Adjoint, it)?;
        // true residual of the current iterate: K z - g (free DoFs)
        apply_k(sim, lin, &z, &mut kz)?;
        let r = norm(&kz.iter().zip(gf).map(|(a, b)| a - b).collect::<Vec<_>>());
        rel = r / gnorm;
        if rel < 0.5 * best.0 {
            best_it = it;
        }
        if rel < best.0 {
            best = (rel, z.clone());
        }
        if r <= cfg.rel_tol * gnorm + cfg.abs_tol {
            stats.converged = true;
            break;
        }
        // diverging, or stagnating (no halving of the residual in FIXED_POINT_STALL
        // iterations): GMRES takes over from the best iterate
        if !rel.is_finite() || rel > 1e3 || it - best_it >= FIXED_POINT_STALL {
            break;
        }
        // z_hat = A^{-1}(g + ΔA z) = z + A^{-1}(g - K z)
        let q: Vec<f64> = gf.iter().zip(&kz).map(|(a, b)| a - b).collect();
        solve_a(sim, &q, &mut u)?;
        z = aa.step(&z, &u);
        sim.zero_prescribed(&mut z);
        it += 1;
    }
    stats.iterations = it;
    if !stats.converged {
        let mut zg = if best.0.is_finite() && best.0 < 1.0 {
            best.1
        } else {
            vec![0.0; n3]
        };
        let st = solve_gmres(sim, lin, gf, &mut zg, cfg)?;
        stats.method = "fixed_point+gmres".into();
        stats.gmres_iterations = st.iterations;
        stats.converged = st.converged;
        rel = st.relative_residual;
        z = zg;
    }
    stats.relative_residual = rel;
    Ok(z)
}

/// The CG stopping rule of a [`BackwardConfig`] (its tolerances and iteration cap).
fn pcg_settings(cfg: &BackwardConfig) -> krylov::PcgSettings {
    krylov::PcgSettings {
        rel_tol: cfg.rel_tol,
        abs_tol: cfg.abs_tol,
        max_iter: cfg.max_iterations,
    }
}

/// PCG on $Kz=g$ (free DoFs, $z_D=0$) preconditioned by $A^{-1}$ (the persistent factor),
/// from `z` ([`krylov::pcg_in`]; on the accelerator's vectors when it offers a Krylov space,
/// as [`solve_gmres`]). Stops at $\|g-Kz\|\le\epsilon_r\|g\|+\epsilon_a$, on negative curvature or
/// at the cap. Returns (iterations, converged, relative residual), or the first device
/// failure.
pub fn solve_pcg(
    sim: &StepContext,
    lin: &StepLinearization,
    gf: &[f64],
    z: &mut [f64],
    cfg: &BackwardConfig,
) -> Result<(usize, bool, f64), OffloadError> {
    let settings = pcg_settings(cfg);
    let st = match device_space(sim, lin) {
        Some(mut space) => krylov::pcg_in(
            &mut Cancellable::new(space.as_mut(), &sim.cancel),
            gf,
            z,
            &settings,
        )?,
        None => {
            let mut op = |v: &[f64], out: &mut [f64]| apply_k(sim, lin, v, out);
            let mut pre = |v: &[f64], out: &mut [f64]| solve_a(sim, v, out);
            let mut space = krylov::HostSpace::new(gf.len(), &mut op, &mut pre);
            krylov::pcg_in(
                &mut Cancellable::new(&mut space, &sim.cancel),
                gf,
                z,
                &settings,
            )?
        }
    };
    Ok((st.iterations, st.converged, st.relative_residual))
}

/// The trust-region subproblem of the forward's Newton–Krylov phase: Steihaug–Toint CG
/// ([`krylov::steihaug_in`]) on $K\delta=F$ preconditioned by $A^{-1}$, in the region
/// $\|\delta\|_A\le$ `radius` (on the accelerator's vectors when it offers a Krylov space,
/// as [`solve_pcg`]). `delta` is written. The first device failure is the error.
pub fn solve_steihaug(
    sim: &StepContext,
    lin: &StepLinearization,
    f: &[f64],
    delta: &mut [f64],
    radius: f64,
    cfg: &BackwardConfig,
) -> Result<krylov::SteihaugStats, OffloadError> {
    let settings = pcg_settings(cfg);
    match device_space(sim, lin) {
        Some(mut space) => {
            let mut space = Cancellable::new(space.as_mut(), &sim.cancel);
            krylov::steihaug_in(&mut space, f, delta, radius, &settings)
        }
        None => {
            let mut op = |v: &[f64], out: &mut [f64]| apply_k(sim, lin, v, out);
            let mut pre = |v: &[f64], out: &mut [f64]| solve_a(sim, v, out);
            let mut space = krylov::HostSpace::new(f.len(), &mut op, &mut pre);
            krylov::steihaug_in(
                &mut Cancellable::new(&mut space, &sim.cancel),
                f,
                delta,
                radius,
                &settings,
            )
        }
    }
}

/// $w=A^{-1}(g+\Delta Az)=z+A^{-1}(g-Kz)$ and $g-Kz$ (free DoFs).
#[allow(clippy::type_complexity)]
pub(crate) fn global_step(
    sim: &StepContext,
    lin: &StepLinearization,
    gf: &[f64],
    z: &[f64],
) -> Result<(Vec<f64>, Vec<f64>), OffloadError> {
    let mut kz = vec![0.0; z.len()];
    apply_k(sim, lin, z, &mut kz)?;
    let q: Vec<f64> = gf.iter().zip(&kz).map(|(a, b)| a - b).collect();
    let mut u = vec![0.0; z.len()];
    solve_a(sim, &q, &mut u)?;
    let w = z.iter().zip(&u).map(|(a, b)| a + b).collect();
    Ok((w, q))
}

/// The adjoint with a contact block (spec §7.2 step 4): fixed point
/// $z\leftarrow\Pi A^{-1}(g+\Delta Az)$ with the contact projection $\Pi w=w-XD^TG_c^{-1}Jw$
/// ([`ContactAdjoint::project`]), Anderson-accelerated; the stopping test uses the KKT residual
/// $\|g-Kz-J^T\mu\|$ (zero exactly at the fixed point). Fallback: GMRES on the same fixed-point
/// equation $(I-\Pi A^{-1}\Delta A)z=\Pi A^{-1}g$ (the consistent KKT operator reduced to $z$).
fn solve_adjoint_contact(
    sim: &StepContext,
    lin: &StepLinearization,
    c: &ContactAdjoint,
    gf: &[f64],
    cfg: &BackwardConfig,
    mut stats: AdjointStats,
    t0: std::time::Instant,
) -> Result<(Vec<f64>, AdjointStats), OffloadError> {
    let n3 = gf.len();
    // the residual's scale: g and the force g_λ puts on the z rows (a contact-force loss)
    let gnorm = norm(gf) + c.rhs_scale(n3)?;
    let mut aa = TypeII::new(cfg.window, cfg.gamma_max);
    let mut z = vec![0.0; n3];
    let mut best = (f64::INFINITY, z.clone());
    let mut rel = f64::INFINITY;
    let mut it = 0;
    let residual = |q: &[f64], mu: &[f64]| -> f64 {
        let mut r = q.to_vec();
        let neg: Vec<f64> = mu.iter().map(|v| -v).collect();
        c.add_jt(&neg, &mut r);
        sim.zero_prescribed(&mut r);
        norm(&r)
    };
    while it < cfg.max_iterations {
        sim.cancel.poll(Stage::Adjoint, it)?;
        let (mut w, q) = global_step(sim, lin, gf, &z)?;
        let (_, mu) = c.project(&mut w)?;
        let r = residual(&q, &mu);
        rel = r / gnorm;
        if rel < best.0 {
            best = (rel, z.clone());
        }
        if r <= cfg.rel_tol * gnorm + cfg.abs_tol {
            stats.converged = true;
            break;
        }
        if !rel.is_finite() || rel > 1e3 {
            break;
        }
        let gstep: Vec<f64> = w.iter().zip(&z).map(|(a, b)| a - b).collect();
        z = aa.step(&z, &gstep);
        sim.zero_prescribed(&mut z);
        it += 1;
    }
    stats.iterations = it;
    if !stats.converged {
        let mut zg = if best.0.is_finite() && best.0 < 1.0 {
            best.1
        } else {
            vec![0.0; n3]
        };
        let mut op = |v: &[f64], out: &mut [f64]| {
            let mut dv = vec![0.0; n3];
            delta_a(sim, lin, v, &mut dv)?;
            sim.zero_prescribed(&mut dv);
            let mut w = vec![0.0; n3];
            solve_a(sim, &dv, &mut w)?;
            c.project_linear(&mut w)?;
            for i in 0..n3 {
                out[i] = v[i] - w[i];
            }
            Ok(())
        };
        let mut pre = |v: &[f64], out: &mut [f64]| {
            out.copy_from_slice(v);
            Ok(())
        };
        // (I − Π A⁻¹ΔA) z = Π A⁻¹g + z_c: the affine projection of A⁻¹g (g_λ's z_c included)
        let mut rhs = vec![0.0; n3];
        solve_a(sim, gf, &mut rhs)?;
        c.project(&mut rhs)?;
        // the fixed-point residual is A^{-1}-scaled: tighten by the ratio of the norms
        let mut space = krylov::HostSpace::<OffloadError>::new(n3, &mut op, &mut pre);
        let st = krylov::gmres_in(
            &mut Cancellable::new(&mut space, &sim.cancel),
            &rhs,
            &mut zg,
            &crate::linalg::krylov::GmresSettings {
                restart: cfg.gmres_restart,
                rel_tol: cfg.rel_tol * 1e-2,
                abs_tol: 0.0,
                max_iter: cfg.max_iterations,
            },
        )?;
        stats.method = "fixed_point+gmres".into();
        stats.gmres_iterations = st.iterations;
        let (mut w, q) = global_step(sim, lin, gf, &zg)?;
        let (_, mu) = c.project(&mut w)?;
        let r = residual(&q, &mu);
        rel = r / gnorm;
        stats.converged = r <= cfg.rel_tol * gnorm + cfg.abs_tol;
        z = zg;
    }
    stats.relative_residual = rel;
    stats.max_abs_z = z.iter().map(|v| v.abs()).fold(0.0, f64::max);
    stats.filtered_samples = lin.filtered_samples;
    stats.seconds = t0.elapsed().as_secs_f64();
    Ok((z, stats))
}

/// Preconditioner of the contact KKT system ([`solve_adjoint_kkt`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KktPreconditioner {
    /// [`ContactAdjoint::woodbury`]: exact block inverse with $A$ in place of $K$.
    Woodbury,
    /// [`ContactAdjoint::block_jacobi`]: $A^{-1}$ on $z$, $\mathrm{diag}(G_c)^{-1}$ on $\zeta$.
    BlockJacobi,
}

/// The adjoint of a step with NCP contact solved as one linear system in $(z,\zeta)$ (spec
/// §7.2 step 4; Zeng et al. 2026 §4.4): restarted GMRES on
/// $$\begin{bmatrix}K&J^TD^T\\-J&E^T\end{bmatrix}\begin{bmatrix}z\\\zeta\end{bmatrix}=\begin{bmatrix}g\\0\end{bmatrix},
/// \qquad K=A-\Delta A,$$
/// ($\zeta$ on the coupled contacts' rows, $z_D=0$), right-preconditioned by `pre`. With the
/// Woodbury preconditioner the preconditioned operator is $I-\begin{bmatrix}\Delta A\\0\end{bmatrix}P$:
/// the contact stiffness, however large (smoothed FB: $\lambda_n^2/\epsilon^2$), is inverted
/// exactly and only $\Delta A$ is left to the Krylov iteration, as in the contact-free PD
/// adjoint. GMRES's stopping test is on the full KKT residual relative to $\|g\|$; the logged
/// `relative_residual` is the same quantity. `iterations` and `gmres_iterations` both count
/// the GMRES steps (one preconditioner application each).
/// `started`: the step's statistics so far and the time its adjoint solve began.
pub fn solve_adjoint_kkt(
    sim: &StepContext,
    lin: &StepLinearization,
    c: &ContactAdjoint,
    (gf, pre): (&[f64], KktPreconditioner),
    cfg: &BackwardConfig,
    started: (AdjointStats, std::time::Instant),
) -> Result<(Vec<f64>, AdjointStats), OffloadError> {
    let (mut stats, t0) = started;
    let n3 = gf.len();
    let na = c.num_kept();
    let mut b = gf.to_vec();
    // the contact rows' right-hand side: g_λ of a contact-force loss (else 0)
    b.extend(c.rhs_kept());
    debug_assert_eq!(b.len(), n3 + na);
    let mut op = |y: &[f64], out: &mut [f64]| {
        let (z, zeta) = y.split_at(n3);
        let (oz, oc) = out.split_at_mut(n3);
        apply_k(sim, lin, z, oz)?;
        c.apply_kkt(z, zeta, oz, oc);
        sim.zero_prescribed(oz);
        Ok(())
    };
    let mut prec = |r: &[f64], out: &mut [f64]| {
        let (rz, rc) = r.split_at(n3);
        let (oz, oc) = out.split_at_mut(n3);
        let mut rzf = rz.to_vec();
        sim.zero_prescribed(&mut rzf);
        match pre {
            KktPreconditioner::Woodbury => c.woodbury(&sim.system, &rzf, rc, oz, oc)?,
            KktPreconditioner::BlockJacobi => c.block_jacobi(&sim.system, &rzf, rc, oz, oc)?,
        }
        sim.zero_prescribed(oz);
        Ok(())
    };
    let mut y = vec![0.0; n3 + na];
    let mut space = krylov::HostSpace::<OffloadError>::new(n3 + na, &mut op, &mut prec);
    let st = krylov::gmres_in(
        &mut Cancellable::new(&mut space, &sim.cancel),
        &b,
        &mut y,
        &crate::linalg::krylov::GmresSettings {
            restart: cfg.gmres_restart,
            rel_tol: cfg.rel_tol,
            abs_tol: cfg.abs_tol,
            max_iter: cfg.max_iterations,
        },
    )?;
    stats.method = match pre {
        KktPreconditioner::Woodbury => "woodbury".into(),
        KktPreconditioner::BlockJacobi => "gmres_kkt_block_jacobi".into(),
    };
    stats.iterations = st.iterations;
    stats.gmres_iterations = st.iterations;
    stats.converged = st.converged;
    stats.relative_residual = st.relative_residual;
    y.truncate(n3);
    stats.max_abs_z = y.iter().map(|v| v.abs()).fold(0.0, f64::max);
    stats.filtered_samples = lin.filtered_samples;
    stats.seconds = t0.elapsed().as_secs_f64();
    Ok((y, stats))
}
