//! The GPU backend behind the solver's accelerator seam ([`crate::solver::offload::Offload`]):
//! the PD iteration's local step (+ gather) and global solve on a [`Device`]. Anderson, the
//! gate, contact and the backward stay on the host for now (docs/gpu.md, "Next").

use super::device::Device;
use super::local::{unsupported, DeviceLocalStep, LocalArrays};
use super::pipeline::SolvePath;
use super::system::GpuSystem;
use crate::solver::offload::Offload;
use crate::solver::Simulator;

/// Default device-memory budget of the explicit inverse factor per distinct free set: 1 GiB.
/// Above it the level-scheduled triangular solves run instead (spec §5.2–5.3).
pub const DEFAULT_INVERSE_BUDGET: usize = 1 << 30;

/// Local step and global solve of one simulator on a device.
pub struct DeviceOffload<D: Device> {
    dev: D,
    local: DeviceLocalStep<D>,
    system: GpuSystem<D>,
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
        Ok(DeviceOffload { dev, local, system })
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
}
