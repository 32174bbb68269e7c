//! The accelerator seam of the PD step (spec §6.2, docs/gpu.md): the two costly stages of a
//! PD iteration — the local step with its right-hand-side gather, and the global solve — can
//! be handed to an implementation of [`Offload`] (the GPU backend, `gpu::offload`). The
//! solver defines the contract and knows nothing of devices; the CPU path is the reference.
//!
//! The backward (spec §7) uses the same seam for its costly stages: the adjoint's
//! $\Delta A\,z$ product, muscle fibres included (the step's coefficients uploaded once per
//! backward step, one product per Krylov iteration), the $A^{-1}$ solves that precondition it,
//! the Krylov methods' vectors themselves ([`Offload::krylov_space`]) and the per-step
//! parameter-gradient reductions over samples, nodes, loaded nodes and muscle fibres (spec
//! §7.5). Those methods take `&self` (the backward holds the simulator shared). Every stage
//! returns its failure as an [`OffloadError`] to its caller, which ends the step with it
//! (`SolverError::Offload` or `SolverError::AdjointOffload`, naming the frame): no failure is
//! kept aside, and no failed operation hands back NaN.

use super::stages::anderson::AndersonStore;
use crate::linalg::krylov::KrylovSpace;
use crate::linalg::{LinalgError, LinearSolver};
use nalgebra::Matrix3;

/// A failure of an accelerator stage ([`Offload`], [`ResidentPd`], the Krylov space of
/// [`Offload::krylov_space`]). The solver knows nothing of devices: the device's own error
/// travels boxed ([`OffloadError::Device`]; for the GPU backend a `gpu::GpuError`, reachable
/// by `downcast_ref`).
#[derive(Debug, thiserror::Error)]
pub enum OffloadError {
    /// The device failed (a launch, a copy, a compile, a length check).
    #[error(transparent)]
    Device(Box<dyn std::error::Error + Send + Sync>),
    /// A backward stage asked for linearization `token` while `current` is on the device (a
    /// later step was planned in between).
    #[error("{what} asked for linearization {token} while {current} is on the device")]
    Stale {
        what: &'static str,
        token: u64,
        current: u64,
    },
    /// A [`ResidentPd`] method other than [`ResidentPd::begin`] was called before it.
    #[error("resident PD loop used before its step began")]
    NotBegun,
    /// The solver asked for the resident PD loop of an accelerator that has none.
    #[error("the accelerator has no resident PD loop")]
    NoResident,
    /// $\Delta A\,z$ of a linearization that was not planned on this accelerator (built
    /// before it was attached).
    #[error("ΔA·z of a linearization not planned on the accelerator")]
    Unplanned,
    /// The device's local step is not finite where the CPU's reference step is.
    #[error("non-finite local step on the device where the CPU's is finite")]
    NonFiniteLocal,
    /// The accelerator cannot run this model (the reason names the feature).
    #[error("{0}")]
    Unsupported(String),
    /// A solve with the accelerator's factor failed.
    #[error(transparent)]
    Solve(#[from] LinalgError),
}

/// A cancellation inside an accelerated stage travels as the solve's
/// ([`LinalgError::Cancelled`]); the solver's error constructors turn it into
/// `SolverError::Cancelled`.
impl From<crate::cancel::Cancelled> for OffloadError {
    fn from(c: crate::cancel::Cancelled) -> Self {
        OffloadError::Solve(LinalgError::Cancelled(c))
    }
}

/// Stages of a PD iteration an accelerator performs.
pub trait Offload {
    /// Where the work runs (for logs).
    fn describe(&self) -> String;
    /// $b_p=\sum_sG_s^T\mathrm{vec}\,Q_s$ at positions `x` (spec §6.2 steps 6–7; node-major).
    fn local_rhs(&mut self, x: &[f64], bp: &mut [f64]) -> Result<(), OffloadError>;
    /// Solve $A x=b$ with the Dirichlet values `xd` (the contract of
    /// [`crate::linalg::LinearSolver::solve`]).
    fn solve(&mut self, b: &[f64], xd: &[f64], x: &mut [f64]) -> Result<(), OffloadError>;

    // ---- Backward (adjoint) stages (spec §7.2, §7.5) ----

    /// Plan one linearization: upload the per-sample weighted spectral coefficients
    /// `coef(s)` $=\[U,V,W,M,N\]$ of $\Delta A$ (spec App. A.1, Eq. 42) and the muscle fibres'
    /// linearization `muscle` (spec §3.5, App. A.4; empty for a model without muscles).
    /// Returns a token naming this step for [`Offload::adjoint_product`] and
    /// [`Offload::param_gradients`].
    fn adjoint_step(
        &self,
        coef: &(dyn Fn(usize) -> [Matrix3<f64>; 5] + Sync),
        muscle: &MuscleStep,
    ) -> Result<u64, OffloadError>;
    /// Plan one linearization computed on the accelerator at positions `x`: the spectral
    /// coefficients of [`Offload::adjoint_step`] as `StepLinearization::new` computes them with
    /// the Hessian filter `alpha`, or, with `projected`, as `StepLinearization::projected`
    /// (each sample's map capped at its weight in $A$), and the muscle fibres `muscle`.
    /// `None` where the accelerator does not offer it (the caller computes the coefficients
    /// on the host and calls [`Offload::adjoint_step`]). The Newton–Krylov phase's Jacobians
    /// and the backward's steps: only `x` crosses instead of $45$ numbers per sample.
    fn linearize_step(
        &self,
        _x: &[f64],
        _filter: (f64, bool),
        _muscle: &MuscleStep,
    ) -> Option<Result<DeviceLinearization, OffloadError>> {
        None
    }
    /// $\sum_s$ of the samples' PD energies at positions `x` (the material part of the trust
    /// region's objective, `solver::trust_region::pd_energy`; muscles not included), on the
    /// accelerator. `None` where it does not offer it (the host computes it).
    fn material_energy(&self, _x: &[f64]) -> Option<Result<f64, OffloadError>> {
        None
    }
    /// $\Delta A\,z$ of the planned step `token` (all DoFs, Dirichlet rows not zeroed, muscle
    /// terms included: the whole of [`crate::solver::adjoint::backward::StepLinearization::apply`]),
    /// into `out`.
    fn adjoint_product(&self, token: u64, z: &[f64], out: &mut [f64]) -> Result<(), OffloadError>;
    /// $A^{-1}q$ with zero Dirichlet values (the contract of
    /// [`crate::linalg::LinearSolver::solve_homogeneous`]).
    fn solve_homogeneous(&self, q: &[f64], z: &mut [f64]) -> Result<(), OffloadError>;
    /// The per-step parameter-gradient sums of step `step.token` (spec §7.5), see
    /// [`ParamStep`] and [`ParamSums`]: the material terms per element and per body, the
    /// nodal terms (density, mass damping, gravity), the force-group scales and the muscle
    /// activations at the step's time.
    fn param_gradients(&self, step: &ParamStep) -> Result<ParamSums, OffloadError>;

    // --- contact and muscles (issue 15): the accelerator's factor for contact, muscle time ---

    /// The accelerator's factor of $A$ as a [`LinearSolver`], if it has one: every
    /// contact-side solve (Delassus columns, matrix-free products, the contact adjoint) then
    /// goes through it instead of the CPU factor (`StepContext::contact_solver`).
    fn linear_solver(&self) -> Option<&dyn LinearSolver> {
        None
    }
    /// The time at which the next local steps evaluate muscle activations (the
    /// simulator's `Derived::muscle_time`, set at the start of every step).
    fn set_muscle_time(&mut self, _t: f64) {}

    // --- the Krylov methods' vectors (issue 15) ---

    /// The vector space of the Krylov methods on the accelerator for the planned
    /// linearization `token` ([`Offload::adjoint_step`]), if it offers one: slots in device
    /// memory, $K=\hat A-\Delta A$ with the prescribed rows zeroed (the whole of
    /// `backward::apply_k`) as the operator, $A^{-1}$ with zero Dirichlet values as the
    /// preconditioner. GMRES and PCG ([`crate::linalg::krylov`]) then run on it: per solve the
    /// right-hand side and the start go up and the solution comes down, per iteration only the
    /// dot products' scalars cross. A failure is the space's error, returned by the method
    /// that met it like the other backward stages'. `None` (the default, or while another solve holds the
    /// space): the host loop with [`Offload::adjoint_product`] and
    /// [`Offload::solve_homogeneous`].
    fn krylov_space(&self, _token: u64) -> Option<Box<dyn KrylovSpace<Error = OffloadError> + '_>> {
        None
    }

    // --- the resident PD iteration (issue 15) ---

    /// The PD iteration with its vectors resident on the accelerator ([`ResidentPd`]), if it
    /// offers one: the solver then runs its PD loop (without NCP contact) through it, and per
    /// iteration only norms, Anderson's new dot products and its coefficients cross.
    fn resident(&mut self) -> Option<&mut dyn ResidentPd> {
        None
    }

    // --- what the device did (issue 15: a profile without a profiler) ---

    /// The accelerator's counters since it was built ([`DeviceTraffic`]), if it keeps them;
    /// a span's traffic is the difference of two readings ([`DeviceTraffic::since`]).
    fn traffic(&self) -> Option<DeviceTraffic> {
        None
    }
}

/// What a device did over a span of a run: kernel launches, host↔device copies and the host's
/// wall seconds inside each kind of call. Launches are asynchronous on a GPU, so its
/// `launch_seconds` is the enqueueing and a download waits for every launch queued before it:
/// on a GPU, `download_seconds` holds the device work the host waited for, and the span's wall
/// time less the three is host work during which the device may sit idle. On the emulator a
/// launch runs its items, so `launch_seconds` is the kernels' (host) compute. Every download
/// is a round trip that stalls the launch queue: their count times the device's latency is
/// the floor of a span's time whatever the kernels cost.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct DeviceTraffic {
    pub launches: u64,
    /// Work items over the launches.
    pub items: u64,
    pub launch_seconds: f64,
    pub downloads: u64,
    pub download_bytes: u64,
    pub download_seconds: f64,
    /// Uploads, overwrites and zeroed allocations.
    pub uploads: u64,
    pub upload_bytes: u64,
    pub upload_seconds: f64,
    /// Launches per kernel symbol, most first.
    pub kernels: Vec<(String, u64)>,
}

impl DeviceTraffic {
    /// The traffic between `earlier` and this reading (both of one device).
    pub fn since(&self, earlier: &DeviceTraffic) -> DeviceTraffic {
        let before: std::collections::HashMap<&str, u64> = earlier
            .kernels
            .iter()
            .map(|(k, c)| (k.as_str(), *c))
            .collect();
        let mut kernels: Vec<(String, u64)> = self
            .kernels
            .iter()
            .map(|(k, c)| (k.clone(), c - before.get(k.as_str()).copied().unwrap_or(0)))
            .filter(|(_, c)| *c > 0)
            .collect();
        kernels.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        DeviceTraffic {
            launches: self.launches - earlier.launches,
            items: self.items - earlier.items,
            launch_seconds: self.launch_seconds - earlier.launch_seconds,
            downloads: self.downloads - earlier.downloads,
            download_bytes: self.download_bytes - earlier.download_bytes,
            download_seconds: self.download_seconds - earlier.download_seconds,
            uploads: self.uploads - earlier.uploads,
            upload_bytes: self.upload_bytes - earlier.upload_bytes,
            upload_seconds: self.upload_seconds - earlier.upload_seconds,
            kernels,
        }
    }

    /// One line: counts, bytes and the host's seconds in each kind of call, and the three
    /// most launched kernels.
    pub fn summary(&self) -> String {
        let top: Vec<String> = self
            .kernels
            .iter()
            .take(3)
            .map(|(k, c)| format!("{k} {c}"))
            .collect();
        format!(
            "{} launches ({:.3} s), {} downloads ({:.1} MB, {:.3} s), {} uploads ({:.1} MB, {:.3} s); most launched: {}",
            self.launches,
            self.launch_seconds,
            self.downloads,
            self.download_bytes as f64 / 1e6,
            self.download_seconds,
            self.uploads,
            self.upload_bytes as f64 / 1e6,
            self.upload_seconds,
            top.join(", ")
        )
    }
}

/// The constants of one PD step for [`ResidentPd::begin`], in the displacement form of
/// `pd::iterate::StepRhs` (node-major, `3n` each): the PD map is
/// $\hat x=x_t+A^{-1}\big(c_u+b_p(x)-s_t\big)$ with the Dirichlet values $\bar x_D-x_{t,D}$
/// in the solve and $\bar x_D$ imposed on $\hat x$.
pub struct ResidentStep<'a> {
    /// Anderson's window (the history's slots).
    pub window: usize,
    /// The first iterate $x^0$ (Dirichlet values imposed).
    pub x0: &'a [f64],
    /// The step's start $x_t$.
    pub x_t: &'a [f64],
    /// $c_u$.
    pub c: &'a [f64],
    /// $s_t=\sum_sG_s^T\mathrm{vec}\,Q^t_s$ ($b_{p,u}=b_p-s_t$).
    pub st: &'a [f64],
    /// Dirichlet values $\bar x_D$ (prescribed entries read).
    pub xd: &'a [f64],
    /// Dirichlet values relative to $x_t$ (prescribed entries read).
    pub xd_u: &'a [f64],
}

/// The norms of one PD map on the accelerator ([`ResidentPd::pd_map`]) from which the
/// solver's tests are formed (spec Eq. 22, the force-balance test of `mode = "accurate"`).
#[derive(Clone, Copy, Debug)]
pub struct MapNorms {
    /// $\|b_p(x_k)\|$ (not finite: the local step failed).
    pub bp: f64,
    /// $\|g_k\|=\|\hat x-x_k\|$ (not finite: the step diverged).
    pub g: f64,
    /// $\|x_k\|$.
    pub x: f64,
    /// $\|x_k-x_t\|$.
    pub disp: f64,
    /// $\|b_p(x_k)-b_p(x_{k-1})\|$ (the previous map's $b_p$; meaningless on a step's first map).
    pub dbp: f64,
    /// $\|b_p(x_{k-1})\|$.
    pub bp_prev: f64,
    /// $\|(\hat A g_k)_F\|$ when asked: the force residual of $x_k$ on the free DoFs.
    pub residual: Option<f64>,
    /// $\|(\hat Ax_t+c_u+b_{p,u}(x_k))_F\|$ when asked: the reference of the residual floor.
    pub floor_reference: Option<f64>,
}

/// The PD iteration with its vectors on the accelerator (spec §6.2 steps 4–9). The solver
/// keeps the algorithm: it drives Anderson ([`super::stages::anderson::Anderson::advance`], the
/// [`AndersonStore`] being the pair $(x_k,g_k)$ of the last [`ResidentPd::pd_map`] and its
/// history on the device) and decides every test from [`MapNorms`].
pub trait ResidentPd: AndersonStore<Error = OffloadError> {
    /// Upload a step's constants and its first iterate.
    fn begin(&mut self, step: &ResidentStep) -> Result<(), OffloadError>;
    /// Replace the iterate (after a host phase moved it); the previous $b_p$ is kept.
    fn set_x(&mut self, x: &[f64]) -> Result<(), OffloadError>;
    /// The PD map at $x_k$: $b_p(x_k)$, $\hat x$ and $g_k=\hat x-x_k$, and their norms (the
    /// force residual and the floor's reference when asked).
    fn pd_map(&mut self, residual: bool, floor: bool) -> Result<MapNorms, OffloadError>;
    /// After Anderson's mix: $x_{k+1}$ = the mixed iterate with $\bar x_D$ imposed, and
    /// $b_p(x_k)$ becomes the previous $b_p$.
    fn accept(&mut self) -> Result<(), OffloadError>;
    /// The iterate $x_k$.
    fn x(&self) -> Result<Vec<f64>, OffloadError>;
    /// $\hat x$ of the last map.
    fn xhat(&self) -> Result<Vec<f64>, OffloadError>;
}

/// The muscle fibres' linearization of one step at $x_{t+1}$ as plain numbers
/// ([`crate::solver::muscle::MuscleLin`]): every fibre of every group, group-major, each
/// group's samples in model order (`Model::muscles[g].samples`).
pub struct MuscleStep<'a> {
    /// $a_g$ of each group at the step's time.
    pub activations: &'a [f64],
    /// $\ell=\|F_s\mathsf m\|$ per fibre.
    pub len: &'a [f64],
    /// $n=F_s\mathsf m/\ell$ per fibre (3 per fibre; 0 where $\ell\le10^{-300}$).
    pub dir: &'a [f64],
}

/// What the device needs for the parameter gradients of one step (spec §7.5,
/// $d\mathcal L/d\theta=-z^T\partial\mathcal R_x/\partial\theta$). Material terms, per sample $s$
/// with $\hat Z_s=G_sz$ and $\ell_s=-\hat Z_s:G_sv$ ($v=(x_{t+1}-x_t)/h$),
/// $$dE_s=\hat Z_s:G^E_s+a^E_s\ell_s,\quad d\nu_s=\hat Z_s:G^\nu_s+a^\nu_s\ell_s,\quad
/// d\beta_s=a^\beta_s\ell_s,$$
/// the law's parameter gradient written as a linear map of $(\hat Z_s,\ell_s)$
/// ([`crate::material::MaterialModel::param_gradient_linear`]; the accelerator evaluates the
/// maps at `x_next` itself, from `solver::gradient::ParamConstants`). Nodal terms, per node $i$ of
/// body $b$ with $r_i=(x_{t+1}-x_t-hv_t)/h^2+\alpha_iv-g$ (per component):
/// $d\rho_b\mathrel{+}=-(z_i\cdot r_i)\,m_i/\rho_b$, $d\alpha_b\mathrel{+}=-m_i\,z_i\cdot v_i$,
/// $dg\mathrel{+}=m_iz_i$ (masses, $\alpha_i$, $\rho_b$ and $g$ are the accelerator's from
/// its model). Force groups: $ds_g=\sigma_g(t)\sum_{k\in g}f_k\cdot z_{i_k}$. Muscles:
/// $da_g=\sum_{s\in g}w_m(\hat Z_s\mathsf m)\cdot n_s$ with the fibres of
/// [`Offload::adjoint_step`] (or [`Offload::linearize_step`]) `token`.
pub struct ParamStep<'a> {
    /// The token of this step's plan ([`Offload::adjoint_step`] or
    /// [`Offload::linearize_step`]: its muscle linearization).
    pub token: u64,
    /// The step's adjoint $z$ (node-major).
    pub z: &'a [f64],
    /// The step's velocity $(x_{t+1}-x_t)/h$ (node-major).
    pub vel: &'a [f64],
    /// The backward's Hessian filter of the step (`HessianFilter::Blend`'s $\alpha$; 0 for
    /// none): the NH maps $G^\nu_s$ differentiate the prox through the filtered stretch
    /// Jacobian, as `Material::param_gradient_linear` does. The maps themselves are the
    /// accelerator's, at `x_next` (`solver::gradient::ParamConstants`).
    pub alpha: f64,
    /// The step's start $x_t$, $v_t$ and end $x_{t+1}$ (node-major).
    pub x_t: &'a [f64],
    pub v_t: &'a [f64],
    pub x_next: &'a [f64],
    /// $\sigma_g(t)$: each force group's profile at the step's start.
    pub force_profile: &'a [f64],
}

/// A linearization planned on the accelerator ([`Offload::linearize_step`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLinearization {
    /// The token naming it for [`Offload::adjoint_product`], [`Offload::krylov_space`] and
    /// [`Offload::param_gradients`].
    pub token: u64,
    /// Samples whose NH stretch Jacobian the Hessian filter changed (0 without a filter).
    pub filtered_samples: usize,
}

/// Sums of [`Offload::param_gradients`].
#[derive(Clone, Debug, Default)]
pub struct ParamSums {
    /// $\sum_{s\in e}dE_s$ per element.
    pub youngs: Vec<f64>,
    /// $\sum_{s\in b}d\nu_s$ per body.
    pub nu: Vec<f64>,
    /// $\sum_{s\in b}d\beta_s$ per body.
    pub beta0: Vec<f64>,
    /// $\sum_{i\in b}d\rho_i$ per body.
    pub density: Vec<f64>,
    /// $\sum_{i\in b}d\alpha_i$ per body.
    pub alpha: Vec<f64>,
    /// $\sum_im_iz_i$.
    pub gravity: [f64; 3],
    /// $ds_g$ per force group.
    pub force_scale: Vec<f64>,
    /// $d\mathcal L/da_g$ at the step's time per muscle group (before the knot weights).
    pub muscle: Vec<f64>,
}
