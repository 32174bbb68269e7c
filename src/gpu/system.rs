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
use crate::linalg::{ordering, AxisDirichlet, CscMatrix, LinalgError, LinearSolver};
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

struct Axis<D: Device> {
    free: Vec<usize>,
    prescribed: Vec<usize>,
    factor: Arc<Mutex<DeviceFactor<D>>>,
}

/// Per-axis device factors of $\hat A_{FF}$.
pub struct GpuSystem<D: Device> {
    dev: D,
    /// Unreduced per-axis matrix $\hat A$.
    pub a: CscMatrix,
    axes: [Axis<D>; 3],
    /// The solve path of each distinct factor, for the run log.
    pub paths: Vec<SolvePath>,
}

impl<D: Device> GpuSystem<D> {
    /// Order, factor and upload the free blocks of `a`; build the explicit inverse factor
    /// where it fits `budget_bytes`, self-checked on first use.
    pub fn new(
        dev: D,
        a: CscMatrix,
        dirichlet: [AxisDirichlet; 3],
        budget_bytes: usize,
    ) -> Result<Self, GpuSystemError> {
        let n = a.n;
        let mut cache: Vec<(AxisDirichlet, Arc<Mutex<DeviceFactor<D>>>)> = Vec::new();
        let mut paths = Vec::new();
        let mut axes = Vec::with_capacity(3);
        for d in &dirichlet {
            let mut fixed = vec![false; n];
            d.nodes.iter().for_each(|&i| fixed[i] = true);
            let free: Vec<usize> = (0..n).filter(|&i| !fixed[i]).collect();
            let factor = match cache.iter().find(|(k, _)| k == d) {
                Some((_, f)) => f.clone(),
                None => {
                    let mut map = vec![usize::MAX; n];
                    free.iter().enumerate().for_each(|(k, &i)| map[i] = k);
                    let sub = a.submatrix(&free, &map);
                    let (p, ip) = ordering::nested_dissection(&sub)?;
                    let sf = SimplicialFactor::new(&sub, &p, &ip)?;
                    let mut df = DeviceFactor::new(&dev, &sf, budget_bytes)?;
                    let rel = df.self_check(&dev)?;
                    if rel > 1e-10 {
                        return Err(GpuSystemError::SelfCheck { rel });
                    }
                    paths.push(df.path.clone());
                    let f = Arc::new(Mutex::new(df));
                    cache.push((d.clone(), f.clone()));
                    f
                }
            };
            axes.push(Axis {
                free,
                prescribed: d.nodes.clone(),
                factor,
            });
        }
        let axes: [Axis<D>; 3] = axes.try_into().map_err(|_| GpuError::NoInverse)?;
        Ok(GpuSystem {
            dev,
            a,
            axes,
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
        let ax = &self.axes[d];
        let n = self.a.n;
        let mut rhs: Vec<f64> = ax.free.iter().map(|&i| b[3 * i + d]).collect();
        if let (Some(xd), false) = (xd, ax.prescribed.is_empty()) {
            let mut col = vec![0.0; n];
            ax.prescribed.iter().for_each(|&i| col[i] = xd[3 * i + d]);
            let mut t = vec![0.0; n];
            self.a.matvec(&col, &mut t);
            ax.free
                .iter()
                .enumerate()
                .for_each(|(k, &i)| rhs[k] -= t[i]);
        }
        let sol = {
            let mut f = ax.factor.lock().unwrap_or_else(|p| p.into_inner());
            f.solve(&self.dev, &rhs)?
        };
        ax.free
            .iter()
            .enumerate()
            .for_each(|(k, &i)| out[3 * i + d] = sol[k]);
        for &i in &ax.prescribed {
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
