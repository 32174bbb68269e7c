//! [`GpuSystem`]: the global PD system of [`crate::linalg::GlobalSystem`] (same Dirichlet
//! reduction, same METIS ordering per distinct free set) with its solves on a [`Device`]
//! (spec §5.3). Implements [`LinearSolver`], the seam through which the solver uses it.
//!
//! On the device: the permutation, the triangular solves or the two inverse-factor SpMVs.
//! On the host (to move next): the Dirichlet coupling $b_F-\hat A_{FD}\bar x_D$ and
//! `apply_a`, both $O(\mathrm{nnz}(\hat A))$.

use super::device::Device;
use super::factor::SimplicialFactor;
use super::pipeline::{DeviceFactor, SolvePath};
use super::GpuError;
use crate::linalg::{AxisDirichlet, CscMatrix, LinalgError, LinearSolver, SystemPlan};
use std::sync::{Arc, Mutex};

/// Errors building a [`GpuSystem`].
#[derive(Debug, thiserror::Error)]
pub enum GpuSystemError {
    #[error(transparent)]
    Linalg(#[from] LinalgError),
    #[error(transparent)]
    Device(#[from] GpuError),
    #[error("sparse inverse factor self-check failed: relative difference {rel:e} > 1e-10 (spec §5.2 step 5)")]
    SelfCheck { rel: f64 },
}

/// Per-axis device factors of $\hat A_{FF}$ on the free-node maps and orderings of a
/// [`SystemPlan`] (the CPU path's plan, so the ordering is not computed twice).
pub struct GpuSystem<D: Device> {
    dev: D,
    /// Unreduced per-axis matrix $\hat A$.
    pub a: CscMatrix,
    plan: Arc<SystemPlan>,
    /// One device factor per distinct reduced system of the plan.
    factors: Vec<Mutex<DeviceFactor<D>>>,
    /// The solve path of each distinct factor, for the run log.
    pub paths: Vec<SolvePath>,
}

impl<D: Device> GpuSystem<D> {
    /// Plan (order and analyse), factor and upload the free blocks of `a`; build the explicit
    /// inverse factor where it fits `budget_bytes`, self-checked on first use.
    pub fn new(
        dev: D,
        a: CscMatrix,
        dirichlet: [AxisDirichlet; 3],
        budget_bytes: usize,
    ) -> Result<Self, GpuSystemError> {
        let plan = Arc::new(SystemPlan::new(&a, dirichlet)?);
        Self::with_plan(dev, a, plan, budget_bytes)
    }

    /// As [`GpuSystem::new`] on an existing plan of `a`'s pattern (e.g. the simulator's).
    pub fn with_plan(
        dev: D,
        a: CscMatrix,
        plan: Arc<SystemPlan>,
        budget_bytes: usize,
    ) -> Result<Self, GpuSystemError> {
        let mut factors = Vec::with_capacity(plan.num_reduced());
        let mut paths = Vec::with_capacity(plan.num_reduced());
        for k in 0..plan.num_reduced() {
            let (free, map, perm) = plan.reduced(k);
            let sub = a.submatrix(free, map);
            let mut iperm = vec![0; perm.len()];
            perm.iter()
                .enumerate()
                .for_each(|(new, &old)| iperm[old] = new);
            let sf = SimplicialFactor::new(&sub, perm, &iperm)?;
            let mut df = DeviceFactor::new(&dev, &sf, budget_bytes)?;
            let rel = df.self_check(&dev)?;
            if rel > 1e-10 {
                return Err(GpuSystemError::SelfCheck { rel });
            }
            paths.push(df.path.clone());
            factors.push(Mutex::new(df));
        }
        Ok(GpuSystem {
            dev,
            a,
            plan,
            factors,
            paths,
        })
    }

    fn solve_axis(
        &self,
        d: usize,
        b: &[f64],
        xd: Option<&[f64]>,
        out: &mut [f64],
    ) -> Result<(), GpuError> {
        let k = self.plan.axis_system(d);
        let (free, _, _) = self.plan.reduced(k);
        let prescribed = self.plan.prescribed(d);
        let n = self.a.n;
        let mut rhs: Vec<f64> = free.iter().map(|&i| b[3 * i + d]).collect();
        if let (Some(xd), false) = (xd, prescribed.is_empty()) {
            let mut col = vec![0.0; n];
            prescribed.iter().for_each(|&i| col[i] = xd[3 * i + d]);
            let mut t = vec![0.0; n];
            self.a.matvec(&col, &mut t);
            free.iter().enumerate().for_each(|(j, &i)| rhs[j] -= t[i]);
        }
        let sol = {
            let mut f = self.factors[k].lock().unwrap_or_else(|p| p.into_inner());
            f.solve(&self.dev, &rhs)?
        };
        free.iter()
            .enumerate()
            .for_each(|(j, &i)| out[3 * i + d] = sol[j]);
        for &i in prescribed {
            out[3 * i + d] = xd.map(|v| v[3 * i + d]).unwrap_or(0.0);
        }
        Ok(())
    }

    /// Solve all three axes; device errors are returned (the trait methods panic on them,
    /// which [`GpuSystem::try_solve`] lets callers avoid).
    pub fn try_solve(&self, b: &[f64], xd: Option<&[f64]>, x: &mut [f64]) -> Result<(), GpuError> {
        (0..3).try_for_each(|d| self.solve_axis(d, b, xd, x))
    }
}

impl<D: Device> LinearSolver for GpuSystem<D> {
    fn num_nodes(&self) -> usize {
        self.a.n
    }
    fn solve(&self, b: &[f64], dirichlet_values: &[f64], x: &mut [f64]) {
        if let Err(e) = self.try_solve(b, Some(dirichlet_values), x) {
            panic!("GPU global solve failed: {e}");
        }
    }
    fn solve_homogeneous(&self, q: &[f64], z: &mut [f64]) {
        if let Err(e) = self.try_solve(q, None, z) {
            panic!("GPU global solve failed: {e}");
        }
    }
    fn apply_a(&self, x: &[f64], y: &mut [f64]) {
        let n = self.a.n;
        let mut t = vec![0.0; n];
        for d in 0..3 {
            self.a.matvec_axis(x, d, &mut t);
            (0..n).for_each(|i| y[3 * i + d] = t[i]);
        }
    }
}
