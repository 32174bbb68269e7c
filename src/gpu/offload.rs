//! The GPU backend behind the solver's accelerator seam ([`crate::solver::offload::Offload`]):
//! the PD iteration's local step (+ gather, muscles included) and global solve on a
//! [`Device`], and the device factor for every contact-side solve
//! ([`Offload::linear_solver`]: Delassus columns by multi-RHS solves, matrix-free products).
//! The backward's stages too: $\Delta A\,z$ with its muscle term ([`DeviceAdjointProduct`]),
//! the $A^{-1}$ solves on the device factor and the per-step parameter-gradient sums
//! (material, nodal, force-group and muscle-activation terms, [`DeviceParamGradient`]).
//! The Krylov methods' vectors live on the device too ([`Offload::krylov_space`],
//! `gpu::krylov`); the small dense contact block stays on the host (docs/gpu.md).

use super::contact::{DeviceContact, MAX_COLUMN_BYTES};
use super::device::Device;
use super::gradient::DeviceParamGradient;
use super::krylov::{DeviceKrylov, KrylovBuffers};
use super::local::{unsupported, DeviceAdjointProduct, DeviceLocalStep, LocalArrays};
use super::pipeline::SolvePath;
use super::resident::Resident;
use super::system::{GpuSystem, SolveCounts};
use super::GpuError;
use crate::linalg::krylov::KrylovSpace;
use crate::linalg::LinearSolver;
use crate::model::muscle::MuscleGroup;
use crate::solver::anderson::AndersonStore;
use crate::solver::offload::{
    DeviceLinearization, MapNorms, MuscleStep, Offload, OffloadError, ParamStep, ParamSums,
    ResidentPd, ResidentStep,
};
use crate::solver::Simulator;
use nalgebra::Matrix3;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, TryLockError};

/// Device-memory budget of the explicit inverse factor per distinct free set where the device
/// cannot say how much memory it has (the emulator): 1 GiB. Above it the level-scheduled
/// triangular solves run instead (spec §5.2–5.3).
pub const DEFAULT_INVERSE_BUDGET: usize = 1 << 30;

/// The explicit inverse factor's budget on `dev`: a third of its free memory when it can say
/// (the rest is for the rollout's buffers and a second free set), else
/// [`DEFAULT_INVERSE_BUDGET`]. Why so large: the triangular path is one launch per level of
/// $L$ (thousands: the dense separators are chains), measured on an H100 (2026-11-27,
/// 56k-DoF tet box) at 300 ms per one-axis solve against 5.4 ms for the inverse factor's
/// two SpMVs before they were segmented.
pub fn inverse_budget<D: Device>(dev: &D) -> usize {
    dev.free_memory()
        .map_or(DEFAULT_INVERSE_BUDGET, |free| free / 3)
}

/// Local step, global solve and the backward's stages of one simulator on a device.
pub struct DeviceOffload<D: Device> {
    dev: D,
    local: DeviceLocalStep<D>,
    system: GpuSystem<D>,
    /// Muscle groups (for their activations in time) and activations not yet uploaded.
    muscles: Vec<MuscleGroup>,
    pending_activations: Option<Vec<f64>>,
    backward: Mutex<Backward<D>>,
    /// The resident PD loop's buffers (built at its first step).
    resident: Option<Resident<D>>,
    /// The Krylov methods' vectors ([`Offload::krylov_space`]).
    krylov: Mutex<KrylovBuffers<D>>,
    /// A step's contact on the device ([`ResidentPd::contact_begin`], built at its first).
    contact: Option<DeviceContact<D>>,
    /// Positions, per-sample energies and partials of [`Offload::material_energy`].
    energy: Mutex<EnergyBuffers<D>>,
}

/// The backward's device state: the product with the coefficients of step `step` (a counter
/// of [`Offload::adjoint_step`] calls), and the parameter-gradient buffers.
struct Backward<D: Device> {
    product: DeviceAdjointProduct<D>,
    step: u64,
    params: DeviceParamGradient<D>,
}

/// The buffers of [`Offload::material_energy`]: positions (`3n`), one energy per sample, and
/// the first pass's partials.
struct EnergyBuffers<D: Device> {
    x: D::Real,
    e: D::Real,
    partial: D::Real,
}

impl<D: Device> EnergyBuffers<D> {
    fn new(dev: &D, nn: usize, ns: usize) -> Result<Self, GpuError> {
        Ok(EnergyBuffers {
            x: dev.zeros(3 * nn)?,
            e: dev.zeros(ns)?,
            partial: dev.zeros(super::reduce::partials(ns))?,
        })
    }

    /// $\sum_s e_s(x)$: `dphd_pd_energy` per sample, then the two-pass sum of
    /// [`super::reduce::sum`].
    fn sum(&mut self, dev: &D, local: &DeviceLocalStep<D>, x: &[f64]) -> Result<f64, GpuError> {
        dev.write(&mut self.x, x)?;
        local.pd_energy(dev, &self.x, &mut self.e)?;
        super::reduce::sum(dev, (&self.e, local.num_samples()), &mut self.partial)
    }
}

/// A device result as the accelerator seam's.
fn device<T>(r: Result<T, GpuError>) -> Result<T, OffloadError> {
    r.map_err(OffloadError::from)
}

/// Lock, recovering from a poisoned mutex (the state is overwritten by every use).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<D: Device + Clone> DeviceOffload<D> {
    /// Plan once for the simulator's model, weights, matrix and Dirichlet sets.
    pub fn new(dev: D, sim: &Simulator, budget_bytes: usize) -> Result<Self, OffloadError> {
        let model = sim.model;
        if let Some(why) = unsupported(model) {
            return Err(OffloadError::Unsupported(why));
        }
        let arrays = LocalArrays::from_model(model);
        let local =
            DeviceLocalStep::new(&dev, model, &arrays, &sim.derived).map_err(OffloadError::from)?;
        let plan = sim.system.plan().clone();
        let cpu: Vec<_> = (0..plan.num_reduced())
            .map(|k| sim.system.reduced_factor(k).clone())
            .collect();
        let system =
            GpuSystem::with_factors(dev.clone(), sim.system.a.clone(), plan, &cpu, budget_bytes)
                .map_err(OffloadError::from)?;
        let mut product = DeviceAdjointProduct::new(&dev, &arrays).map_err(OffloadError::from)?;
        product
            .plan_muscles(&dev, model)
            .map_err(OffloadError::from)?;
        let backward = Backward {
            product,
            step: 0,
            params: DeviceParamGradient::new(&dev, model, &sim.derived)
                .map_err(OffloadError::from)?,
        };
        let krylov = KrylovBuffers::new(&dev, &system).map_err(OffloadError::from)?;
        let energy = EnergyBuffers::new(&dev, model.num_nodes(), model.num_samples())
            .map_err(OffloadError::from)?;
        Ok(DeviceOffload {
            krylov: Mutex::new(krylov),
            energy: Mutex::new(energy),
            dev,
            local,
            system,
            muscles: model.muscles.clone(),
            pending_activations: None,
            backward: Mutex::new(backward),
            resident: None,
            contact: None,
        })
    }

    /// [`OffloadError::Stale`] unless `token` names the linearization on the device.
    fn current(b: &Backward<D>, token: u64, what: &'static str) -> Result<(), OffloadError> {
        if b.step == token {
            return Ok(());
        }
        Err(OffloadError::Stale {
            what,
            token,
            current: b.step,
        })
    }

    /// The global-solve path of each distinct factor.
    pub fn paths(&self) -> &[SolvePath] {
        &self.system.paths
    }

    /// The device system's solve counters (global, contact and multi-RHS solves).
    pub fn solve_counts(&self) -> Arc<SolveCounts> {
        self.system.counts()
    }
}

impl<D: Device + Clone> Offload for DeviceOffload<D> {
    fn describe(&self) -> String {
        let paths: Vec<String> = self
            .system
            .paths
            .iter()
            .map(|p| match p {
                SolvePath::InverseFactor { nnz_s, bytes } => {
                    format!("explicit inverse factor (nnz(S) {nnz_s}, {bytes} bytes)")
                }
                SolvePath::Triangular { nnz_s, budget_bytes } => format!(
                    "level-scheduled triangular solves (nnz(S) {nnz_s} over the {budget_bytes}-byte budget)"
                ),
            })
            .collect();
        let [host, device] = self.system.setup_seconds;
        format!(
            "{}; global solve: {}; contact solves on the device factor (Delassus columns by multi-RHS solves); local step{}; setup: host factorization {host:.2} s, device factor and self-check {device:.2} s",
            self.dev.name(),
            paths.join(", "),
            if self.muscles.is_empty() { "" } else { " with muscle fibres" }
        )
    }

    fn traffic(&self) -> Option<crate::solver::offload::DeviceTraffic> {
        self.dev.traffic()
    }

    fn local_rhs(&mut self, x: &[f64], bp: &mut [f64]) -> Result<(), OffloadError> {
        if let Some(act) = self.pending_activations.take() {
            self.local
                .set_activations(&self.dev, &act)
                .map_err(OffloadError::from)?;
        }
        let out = self.local.run(&self.dev, x).map_err(OffloadError::from)?;
        bp.copy_from_slice(&out);
        Ok(())
    }

    fn solve(&mut self, b: &[f64], xd: &[f64], x: &mut [f64]) -> Result<(), OffloadError> {
        self.system
            .try_solve(b, Some(xd), x)
            .map_err(OffloadError::from)
    }

    // ---- Backward (adjoint) stages ----

    fn adjoint_step(
        &self,
        coef: &(dyn Fn(usize) -> [Matrix3<f64>; 5] + Sync),
        muscle: &MuscleStep,
    ) -> Result<u64, OffloadError> {
        let mut b = lock(&self.backward);
        b.step += 1;
        let step = b.step;
        let r = b
            .product
            .set_step(&self.dev, coef)
            .and_then(|_| b.product.set_muscles(&self.dev, muscle).map(|_| step));
        device(r)
    }

    fn linearize_step(
        &self,
        x: &[f64],
        filter: (f64, bool),
        muscle: &MuscleStep,
    ) -> Option<Result<DeviceLinearization, OffloadError>> {
        let mut guard = lock(&self.backward);
        let b = &mut *guard;
        b.step += 1;
        let token = b.step;
        let r = b
            .product
            .set_step_at(&self.dev, &self.local, x, filter)
            .and_then(|filtered_samples| {
                b.product
                    .set_muscles(&self.dev, muscle)
                    .map(|_| DeviceLinearization {
                        token,
                        filtered_samples,
                    })
            });
        Some(device(r))
    }

    fn material_energy(&self, x: &[f64]) -> Option<Result<f64, OffloadError>> {
        let r = lock(&self.energy).sum(&self.dev, &self.local, x);
        Some(device(r))
    }

    fn adjoint_product(&self, token: u64, z: &[f64], out: &mut [f64]) -> Result<(), OffloadError> {
        let mut b = lock(&self.backward);
        Self::current(&b, token, "ΔA·z")?;
        let r = b.product.apply(&self.dev, &self.local, z);
        let v = device(r)?;
        out.copy_from_slice(&v);
        Ok(())
    }

    fn solve_homogeneous(&self, q: &[f64], z: &mut [f64]) -> Result<(), OffloadError> {
        // on the Krylov buffers unless a Krylov solve holds them: then axis by axis
        let buf = match self.krylov.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        };
        if let Some(mut buf) = buf {
            let r = buf.solve_homogeneous(&self.dev, &self.system, q);
            let v = device(r)?;
            if v.len() != z.len() {
                return device(Err(GpuError::Length {
                    expected: v.len(),
                    got: z.len(),
                }));
            }
            z.copy_from_slice(&v);
            return Ok(());
        }
        let r = self.system.try_solve(q, None, z);
        device(r)
    }

    fn param_gradients(&self, step: &ParamStep) -> Result<ParamSums, OffloadError> {
        let mut guard = lock(&self.backward);
        Self::current(&guard, step.token, "the parameter gradients")?;
        let b = &mut *guard;
        let r = b.params.run(&self.dev, &self.local, &b.product, step);
        device(r)
    }

    // --- contact and muscles (issue 15) ---

    fn linear_solver(&self) -> Option<&dyn LinearSolver> {
        Some(&self.system)
    }

    fn set_muscle_time(&mut self, t: f64) {
        if !self.muscles.is_empty() {
            self.pending_activations =
                Some(self.muscles.iter().map(|g| g.activation_at(t)).collect());
        }
    }

    fn resident(&mut self) -> Option<&mut dyn ResidentPd> {
        Some(self)
    }

    fn krylov_space(&self, token: u64) -> Option<Box<dyn KrylovSpace<Error = OffloadError> + '_>> {
        // a second solve while one holds the space (none of the solver's do) takes the host loop
        let buf = match self.krylov.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        let product = move |v: &D::Real, out: &mut D::Real| {
            let mut b = lock(&self.backward);
            Self::current(&b, token, "ΔA·z")?;
            let r = b.product.apply_device(&self.dev, &self.local, v, out);
            device(r)
        };
        let counts = self.system.counts();
        counts.krylov_solves.fetch_add(1, Ordering::Relaxed);
        let on = (&self.dev, &self.system);
        let space = DeviceKrylov::new(on, buf, Box::new(product));
        Some(Box::new(space))
    }
}

/// The resident loop's state, or the error of using it before [`ResidentPd::begin`].
fn begun<D: Device>(r: &mut Option<Resident<D>>) -> Result<&mut Resident<D>, OffloadError> {
    r.as_mut().ok_or(OffloadError::NotBegun)
}

/// Anderson's vectors on the device (the resident PD loop's history).
impl<D: Device + Clone> AndersonStore for DeviceOffload<D> {
    type Error = OffloadError;

    fn push(&mut self, slot: Option<usize>) -> Result<(), OffloadError> {
        let r = begun(&mut self.resident)?;
        r.push(&self.dev, &self.local, slot)
            .map_err(OffloadError::from)
    }

    fn dots(&mut self, slot: usize, live: &[usize]) -> Result<(Vec<f64>, Vec<f64>), OffloadError> {
        let r = begun(&mut self.resident)?;
        r.dots(&self.dev, slot, live).map_err(OffloadError::from)
    }

    fn mix(&mut self, terms: &[(usize, f64)]) -> Result<(), OffloadError> {
        let r = begun(&mut self.resident)?;
        r.mix(&self.dev, &self.local, terms)
            .map_err(OffloadError::from)
    }
}

impl<D: Device + Clone> ResidentPd for DeviceOffload<D> {
    fn begin(&mut self, step: &ResidentStep) -> Result<(), OffloadError> {
        if let Some(act) = self.pending_activations.take() {
            self.local
                .set_activations(&self.dev, &act)
                .map_err(OffloadError::from)?;
        }
        if self.resident.as_ref().map(|r| r.window()) != Some(step.window) {
            let r = Resident::new(&self.dev, &self.system, step.window);
            self.resident = Some(r.map_err(OffloadError::from)?);
        }
        let r = begun(&mut self.resident)?;
        r.begin((&self.dev, &self.system), &mut self.local, step)
            .map_err(OffloadError::from)
    }

    fn set_x(&mut self, x: &[f64]) -> Result<(), OffloadError> {
        self.dev
            .write(self.local.x_mut(), x)
            .map_err(OffloadError::from)
    }

    fn pd_map(&mut self, residual: bool, floor: bool) -> Result<MapNorms, OffloadError> {
        let r = begun(&mut self.resident)?;
        r.pd_map(&self.dev, &mut self.local, &self.system, (residual, floor))
            .map_err(OffloadError::from)
    }

    fn accept(&mut self) -> Result<(), OffloadError> {
        let r = begun(&mut self.resident)?;
        r.accept((&self.dev, &self.system), &mut self.local)
            .map_err(OffloadError::from)
    }

    fn x(&self) -> Result<Vec<f64>, OffloadError> {
        self.dev
            .download(self.local.x())
            .map_err(OffloadError::from)
    }

    fn xhat(&self) -> Result<Vec<f64>, OffloadError> {
        let r = self.resident.as_ref().ok_or(OffloadError::NotBegun)?;
        r.xhat(&self.dev).map_err(OffloadError::from)
    }

    fn contact_begin(
        &mut self,
        set: &crate::contact::ContactSet,
    ) -> Option<Result<nalgebra::DMatrix<f64>, OffloadError>> {
        if DeviceContact::<D>::columns_bytes(set, 3 * self.system.a.n) > MAX_COLUMN_BYTES {
            return None;
        }
        if self.contact.is_none() {
            match DeviceContact::new(&self.dev, &self.system) {
                Ok(c) => self.contact = Some(c),
                Err(e) => return Some(Err(e.into())),
            }
        }
        let c = self.contact.as_mut()?;
        Some(device(c.begin(&self.dev, &self.system, set)))
    }

    fn contact_delta(&mut self) -> Result<Vec<f64>, OffloadError> {
        let r = begun(&mut self.resident)?;
        let c = self.contact.as_mut().ok_or(OffloadError::NotBegun)?;
        r.map_xhat(&self.dev, &mut self.local, &self.system)?;
        device(c.delta(&self.dev, r.xhat_mut()))
    }

    fn contact_project(
        &mut self,
        lambda: &[f64],
        residual: bool,
        floor: bool,
    ) -> Result<MapNorms, OffloadError> {
        let r = begun(&mut self.resident)?;
        let c = self.contact.as_mut().ok_or(OffloadError::NotBegun)?;
        c.project(&self.dev, lambda, r.xhat_mut())?;
        device(r.map_norms(&self.dev, &mut self.local, &self.system, (residual, floor)))
    }
}
