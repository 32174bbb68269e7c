//! The GPU backend behind the solver's accelerator seam ([`crate::solver::offload::Offload`]):
//! the PD iteration's local step (+ gather) and global solve on a [`Device`], and the
//! backward's stages: $\Delta A\,z$ ([`DeviceAdjointProduct`]), the $A^{-1}$ solves on the
//! device factor and the per-sample material gradients ([`DeviceParamGradient`]). Anderson,
//! the gate, the Krylov loops' small dense work and contact stay on the host for now
//! (docs/gpu.md, "Next").

use super::device::Device;
use super::gradient::DeviceParamGradient;
use super::local::{unsupported, DeviceAdjointProduct, DeviceLocalStep, LocalArrays};
use super::pipeline::SolvePath;
use super::system::GpuSystem;
use super::GpuError;
use crate::solver::offload::{Offload, ParamStep, ParamSums};
use crate::solver::Simulator;
use nalgebra::Matrix3;
use std::sync::Mutex;

/// Default device-memory budget of the explicit inverse factor per distinct free set: 1 GiB.
/// Above it the level-scheduled triangular solves run instead (spec §5.2–5.3).
pub const DEFAULT_INVERSE_BUDGET: usize = 1 << 30;

/// Local step, global solve and the backward's stages of one simulator on a device.
pub struct DeviceOffload<D: Device> {
    dev: D,
    local: DeviceLocalStep<D>,
    system: GpuSystem<D>,
    backward: Mutex<Backward<D>>,
    /// First failure of a `&self` stage, for [`Offload::take_error`].
    error: Mutex<Option<String>>,
}

/// The backward's device state: the product with the coefficients of step `step` (a counter
/// of [`Offload::adjoint_step`] calls), and the parameter-gradient buffers.
struct Backward<D: Device> {
    product: DeviceAdjointProduct<D>,
    step: u64,
    params: DeviceParamGradient<D>,
}

/// Lock, recovering from a poisoned mutex (the state is overwritten by every use).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<D: Device + Clone> DeviceOffload<D> {
    /// Plan once for the simulator's model, weights, matrix and Dirichlet sets.
    pub fn new(dev: D, sim: &Simulator, budget_bytes: usize) -> Result<Self, String> {
        let model = sim.model;
        if let Some(why) = unsupported(model) {
            return Err(why);
        }
        let arrays = LocalArrays::from_model(model);
        let local =
            DeviceLocalStep::new(&dev, model, &arrays, &sim.derived).map_err(|e| e.to_string())?;
        let system = GpuSystem::with_plan(
            dev.clone(),
            sim.system.a.clone(),
            sim.system.plan().clone(),
            budget_bytes,
        )
        .map_err(|e| e.to_string())?;
        let backward = Backward {
            product: DeviceAdjointProduct::new(&dev, &arrays).map_err(|e| e.to_string())?,
            step: 0,
            params: DeviceParamGradient::new(&dev, model).map_err(|e| e.to_string())?,
        };
        Ok(DeviceOffload {
            dev,
            local,
            system,
            backward: Mutex::new(backward),
            error: Mutex::new(None),
        })
    }

    /// Keep the first failure for [`Offload::take_error`] and pass it on.
    fn kept<T>(&self, r: Result<T, GpuError>) -> Result<T, String> {
        r.map_err(|e| {
            let msg = e.to_string();
            lock(&self.error).get_or_insert_with(|| msg.clone());
            msg
        })
    }

    /// The global-solve path of each distinct factor.
    pub fn paths(&self) -> &[SolvePath] {
        &self.system.paths
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
        format!("{}; global solve: {}", self.dev.name(), paths.join(", "))
    }

    fn local_rhs(&mut self, x: &[f64], bp: &mut [f64]) -> Result<(), String> {
        let out = self.local.run(&self.dev, x).map_err(|e| e.to_string())?;
        bp.copy_from_slice(&out);
        Ok(())
    }

    fn solve(&mut self, b: &[f64], xd: &[f64], x: &mut [f64]) -> Result<(), String> {
        self.system
            .try_solve(b, Some(xd), x)
            .map_err(|e| e.to_string())
    }

    // ---- Backward (adjoint) stages ----

    fn adjoint_step(
        &self,
        coef: &(dyn Fn(usize) -> [Matrix3<f64>; 5] + Sync),
    ) -> Result<u64, String> {
        let mut b = lock(&self.backward);
        b.step += 1;
        let step = b.step;
        let r = b.product.set_step(&self.dev, coef).map(|_| step);
        self.kept(r)
    }

    fn adjoint_product(&self, token: u64, z: &[f64], out: &mut [f64]) -> Result<(), String> {
        let mut b = lock(&self.backward);
        if b.step != token {
            let msg = format!(
                "ΔA·z asked for linearization {token} while {} is on the device",
                b.step
            );
            lock(&self.error).get_or_insert_with(|| msg.clone());
            return Err(msg);
        }
        let r = b.product.apply(&self.dev, &self.local, z);
        let v = self.kept(r)?;
        out.copy_from_slice(&v);
        Ok(())
    }

    fn solve_homogeneous(&self, q: &[f64], z: &mut [f64]) -> Result<(), String> {
        let r = self.system.try_solve(q, None, z);
        self.kept(r)
    }

    fn param_gradients(&self, step: &ParamStep) -> Result<ParamSums, String> {
        let mut b = lock(&self.backward);
        let r = b.params.run(&self.dev, &self.local, step);
        self.kept(r)
    }

    fn take_error(&self) -> Option<String> {
        lock(&self.error).take()
    }
}
