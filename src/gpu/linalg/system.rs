//! [`GpuSystem`]: the global PD system of [`crate::linalg::GlobalSystem`] (same Dirichlet
//! reduction, same METIS ordering per distinct free set) with its solves on a [`Device`]
//! (spec §5.3). Implements [`LinearSolver`], the seam through which the solver uses it.
//!
//! On the device: the permutation, the triangular solves or the two inverse-factor SpMVs.
//! On the host (to move next): the Dirichlet coupling $b_F-\hat A_{FD}\bar x_D$ and
//! `apply_a`, both $O(\mathrm{nnz}(\hat A))$.

use crate::gpu::linalg::factor::SimplicialFactor;
use crate::gpu::linalg::pipeline::{DeviceFactor, SolvePath};
use crate::gpu::runtime::device::{Arg, Device};
use crate::gpu::runtime::error::GpuError;
use crate::gpu::runtime::kernels::Kernel;
use crate::linalg::{
    AxisDirichlet, CscMatrix, LinalgError, LinearSolver, SparseCholesky, SystemPlan,
};
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// A failure building the device system at the accelerator seam.
impl From<GpuSystemError> for crate::solver::offload::OffloadError {
    fn from(e: GpuSystemError) -> Self {
        crate::solver::offload::OffloadError::Device(Box::new(e))
    }
}

/// The axes sharing one reduced system and the index maps of their block solve on node-major
/// device vectors (`q` axes, `n` free nodes, block entry `t = i * q + c` for axis `axes[c]`):
/// the permuted block is `blk[t] = v[gather[t]]` (the free-DoF gather composed with the
/// factor's permutation), the result goes back by `out[to[t]] = blk[from[t]]` (the inverse
/// permutation composed with the scatter).
pub(crate) struct AxisGroup {
    pub factor: usize,
    pub q: usize,
    pub n: usize,
    pub gather: Vec<usize>,
    pub from: Vec<usize>,
    pub to: Vec<usize>,
}

/// Node-major positions $3i+d$ of the prescribed DoFs of `plan`, axis by axis.
fn prescribed_dofs(plan: &SystemPlan) -> Vec<usize> {
    (0..3)
        .flat_map(|d| plan.prescribed(d).iter().map(move |&i| 3 * i + d))
        .collect()
}

/// Indices as the kernels' `long long`.
pub(crate) fn idx(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}

/// $\hat A$ on the device (symmetric: its CSC arrays are its CSR arrays).
pub(crate) struct Matrix<D: Device> {
    ptr: D::Index,
    col: D::Index,
    val: D::Real,
}

impl<D: Device> Matrix<D> {
    /// Upload the per-axis matrix $\hat A$.
    pub(crate) fn new(dev: &D, a: &CscMatrix) -> Result<Self, GpuError> {
        Ok(Matrix {
            ptr: dev.upload_index(&idx(&a.col_ptr))?,
            col: dev.upload_index(&idx(&a.row_idx))?,
            val: dev.upload(&a.values)?,
        })
    }

    /// `out` $=\hat A\,v$ on the node-major layout (the three axes as a row-interleaved block).
    pub(crate) fn apply(
        &self,
        dev: &D,
        n3: usize,
        v: &D::Real,
        out: &mut D::Real,
    ) -> Result<(), GpuError> {
        dev.launch(
            Kernel::SpmvCsrMulti,
            n3,
            &mut [
                Arg::Int(3),
                Arg::Index(&self.ptr),
                Arg::Index(&self.col),
                Arg::In(&self.val),
                Arg::In(v),
                Arg::Out(out),
            ],
        )
    }
}

/// The prescribed (Dirichlet) DoFs, node-major positions.
pub(crate) struct Prescribed<D: Device> {
    idx: D::Index,
    len: usize,
}

impl<D: Device> Prescribed<D> {
    /// Upload the node-major positions of the prescribed DoFs.
    pub(crate) fn new(dev: &D, pres: &[usize]) -> Result<Self, GpuError> {
        Ok(Prescribed {
            len: pres.len(),
            idx: dev.upload_index(&idx(pres))?,
        })
    }

    /// `dst` takes the prescribed entries of `src`.
    pub(crate) fn impose(&self, dev: &D, src: &D::Real, dst: &mut D::Real) -> Result<(), GpuError> {
        dev.launch(
            Kernel::CopyAt,
            self.len,
            &mut [Arg::Index(&self.idx), Arg::In(src), Arg::Out(dst)],
        )
    }
}

/// Per-axis device factors of $\hat A_{FF}$ on the free-node maps and orderings of a
/// [`SystemPlan`] (the CPU path's plan, so the ordering is not computed twice).
pub struct GpuSystem<D: Device> {
    dev: D,
    /// Unreduced per-axis matrix $\hat A$.
    pub a: CscMatrix,
    plan: Arc<SystemPlan>,
    /// $\hat A$ on the device (the resident PD iteration's and the Krylov space's SpMV).
    a_dev: Matrix<D>,
    /// The prescribed DoFs on the device.
    pres_dev: Prescribed<D>,
    /// One device factor per distinct reduced system of the plan.
    factors: Vec<Mutex<DeviceFactor<D>>>,
    /// The solve path of each distinct factor, for the run log.
    pub paths: Vec<SolvePath>,
    /// Setup seconds: the host's simplicial factorizations, and the device's part (uploads,
    /// the explicit inverse factor's build, the self-check's solves), summed over the factors.
    pub setup_seconds: [f64; 2],
    counts: Arc<SolveCounts>,
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
        Self::build(dev, a, plan, None, budget_bytes)
    }

    /// As [`GpuSystem::with_plan`] with the CPU path's factors of the plan's reduced systems
    /// (`cpu[k]` of system `k`: [`crate::linalg::GlobalSystem::reduced_factor`]): their $L$
    /// is unpacked instead of factoring again (the host factorization was most of the GPU
    /// path's setup: 27 s of the 1M-tet box's, single-threaded, 2026-11-27).
    pub fn with_factors(
        dev: D,
        a: CscMatrix,
        plan: Arc<SystemPlan>,
        cpu: &[Arc<SparseCholesky>],
        budget_bytes: usize,
    ) -> Result<Self, GpuSystemError> {
        if cpu.len() != plan.num_reduced() {
            return Err(LinalgError::DimensionMismatch {
                expected: plan.num_reduced(),
                found: cpu.len(),
            }
            .into());
        }
        Self::build(dev, a, plan, Some(cpu), budget_bytes)
    }

    fn build(
        dev: D,
        a: CscMatrix,
        plan: Arc<SystemPlan>,
        cpu: Option<&[Arc<SparseCholesky>]>,
        budget_bytes: usize,
    ) -> Result<Self, GpuSystemError> {
        let mut factors = Vec::with_capacity(plan.num_reduced());
        let mut paths = Vec::with_capacity(plan.num_reduced());
        let mut setup_seconds = [0.0; 2];
        for k in 0..plan.num_reduced() {
            let t0 = std::time::Instant::now();
            let (free, map, perm) = plan.reduced(k);
            let mut iperm = vec![0; perm.len()];
            perm.iter()
                .enumerate()
                .for_each(|(new, &old)| iperm[old] = new);
            let sf = match cpu {
                Some(f) if f[k].n() == free.len() => {
                    SimplicialFactor::from_lower(f[k].lower_csc(), perm, &iperm)
                }
                Some(f) => {
                    return Err(LinalgError::DimensionMismatch {
                        expected: free.len(),
                        found: f[k].n(),
                    }
                    .into())
                }
                None => SimplicialFactor::new(&a.submatrix(free, map), perm, &iperm)?,
            };
            let t1 = std::time::Instant::now();
            // each free set's inverse factor also within half of what is free now, so that
            // up to three of them (one per distinct axis free set) cannot exhaust the device
            let budget = dev
                .free_memory()
                .map_or(budget_bytes, |free| budget_bytes.min(free / 2));
            let mut df = DeviceFactor::new(&dev, &sf, budget)?;
            // the self-check downloads its solves, so the device's work is done when it returns
            let rel = df.self_check(&dev)?;
            setup_seconds[0] += (t1 - t0).as_secs_f64();
            setup_seconds[1] += t1.elapsed().as_secs_f64();
            if rel > 1e-10 {
                return Err(GpuSystemError::SelfCheck { rel });
            }
            paths.push(df.path.clone());
            factors.push(Mutex::new(df));
        }
        Ok(GpuSystem {
            a_dev: Matrix::new(&dev, &a)?,
            pres_dev: Prescribed::new(&dev, &prescribed_dofs(&plan))?,
            dev,
            a,
            plan,
            factors,
            paths,
            setup_seconds,
            counts: Arc::default(),
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
        self.counts.single.fetch_add(1, Ordering::Relaxed);
        free.iter()
            .enumerate()
            .for_each(|(j, &i)| out[3 * i + d] = sol[j]);
        for &i in prescribed {
            out[3 * i + d] = xd.map(|v| v[3 * i + d]).unwrap_or(0.0);
        }
        Ok(())
    }

    /// Node-major positions $3i+d$ of axis `d`'s free nodes, in its reduced system's order.
    pub fn axis_free_dofs(&self, d: usize) -> Vec<usize> {
        let (free, _, _) = self.plan.reduced(self.plan.axis_system(d));
        free.iter().map(|&i| 3 * i + d).collect()
    }

    /// Node-major positions of every prescribed DoF.
    pub fn prescribed_dofs(&self) -> Vec<usize> {
        prescribed_dofs(&self.plan)
    }

    /// The axes of each distinct reduced system, with the index maps of their block solve on
    /// node-major device vectors ([`AxisGroup`]).
    pub(crate) fn axis_groups(&self) -> Vec<AxisGroup> {
        (0..self.plan.num_reduced())
            .filter_map(|k| {
                let axes: Vec<usize> = (0..3).filter(|&d| self.plan.axis_system(d) == k).collect();
                let (free, _, perm) = self.plan.reduced(k);
                let (n, q) = (free.len(), axes.len());
                if q == 0 || n == 0 {
                    return None;
                }
                let mut iperm = vec![0; n];
                perm.iter()
                    .enumerate()
                    .for_each(|(new, &old)| iperm[old] = new);
                let dof = |j: usize, c: usize| 3 * free[j] + axes[c];
                let gather = (0..n * q).map(|t| dof(perm[t / q], t % q)).collect();
                let from = (0..n * q).map(|t| iperm[t / q] * q + t % q).collect();
                let to = (0..n * q).map(|t| dof(t / q, t % q)).collect();
                Some(AxisGroup {
                    factor: k,
                    q,
                    n,
                    gather,
                    from,
                    to,
                })
            })
            .collect()
    }

    /// $A_{FF}^{-1}$ of the `q` axes of reduced system `k` at once, in place on their
    /// permuted, row-interleaved block `a` (`b` scratch; counted as `q` axis solves by
    /// `purpose`).
    pub(crate) fn solve_group_device(
        &self,
        (k, q): (usize, usize),
        a: &mut D::Real,
        b: &mut D::Real,
        purpose: DeviceSolve,
    ) -> Result<(), GpuError> {
        let mut f = self.factors[k].lock().unwrap_or_else(|p| p.into_inner());
        f.solve_block_device(&self.dev, q, a, b)?;
        let count = match purpose {
            DeviceSolve::Resident => &self.counts.resident,
            DeviceSolve::Krylov => &self.counts.krylov_axis,
        };
        count.fetch_add(q, Ordering::Relaxed);
        Ok(())
    }

    /// $A_{FF}^{-1}$ of axis `d` in place on a device vector in the order of
    /// [`GpuSystem::axis_free_dofs`] (counted by `purpose`): one axis at a time, the
    /// reference of the block solve (`GpuSystem::solve_group_device`, which the solver uses).
    pub fn solve_axis_device(
        &self,
        d: usize,
        v: &mut D::Real,
        purpose: DeviceSolve,
    ) -> Result<(), GpuError> {
        let k = self.plan.axis_system(d);
        let mut f = self.factors[k].lock().unwrap_or_else(|p| p.into_inner());
        f.solve_device(&self.dev, v)?;
        let count = match purpose {
            DeviceSolve::Resident => &self.counts.resident,
            DeviceSolve::Krylov => &self.counts.krylov_axis,
        };
        count.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// $\hat A$ on the device.
    pub(crate) fn matrix(&self) -> &Matrix<D> {
        &self.a_dev
    }

    /// The prescribed DoFs on the device ([`GpuSystem::prescribed_dofs`]).
    pub(crate) fn prescribed(&self) -> &Prescribed<D> {
        &self.pres_dev
    }

    /// Solve all three axes; device errors are returned (the trait methods panic on them,
    /// which [`GpuSystem::try_solve`] lets callers avoid).
    pub fn try_solve(&self, b: &[f64], xd: Option<&[f64]>, x: &mut [f64]) -> Result<(), GpuError> {
        (0..3).try_for_each(|d| self.solve_axis(d, b, xd, x))
    }
}

// --- multi-RHS solves (the contact Delassus columns, issue 15) ---

/// Device memory of one multi-RHS work buffer (two are live per pass): larger blocks of
/// right-hand sides are solved in several passes.
pub const MULTI_RHS_BYTES: usize = 1 << 28;

/// Who asks for an axis solve on device vectors ([`GpuSystem::solve_axis_device`]), for
/// [`SolveCounts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceSolve {
    /// The resident PD iteration's global solve.
    Resident,
    /// The Krylov methods' preconditioner $A^{-1}$.
    Krylov,
}

/// What a [`GpuSystem`] has solved on its device: shared ([`GpuSystem::counts`]), so a
/// caller can see that solves went through the device after handing the system away.
#[derive(Debug, Default)]
pub struct SolveCounts {
    /// Single-right-hand-side axis solves ([`DeviceFactor::solve`]).
    pub single: AtomicUsize,
    /// Homogeneous solves through [`LinearSolver::solve_homogeneous`] (three axis solves
    /// each): the contact's matrix-free products and adjoint solves (the forward's global
    /// solves come through [`GpuSystem::try_solve`] instead).
    pub homogeneous: AtomicUsize,
    /// Axis solves of the resident PD iteration, on device vectors
    /// ([`GpuSystem::solve_axis_device`]).
    pub resident: AtomicUsize,
    /// Krylov solves (GMRES, PCG) run on device vectors (`gpu::krylov`, one per
    /// `Offload::krylov_space` handed out), and their preconditioner's axis solves.
    pub krylov_solves: AtomicUsize,
    pub krylov_axis: AtomicUsize,
    /// Multi-RHS passes ([`DeviceFactor::solve_many`]) and the axis columns they solved.
    pub multi_passes: AtomicUsize,
    pub multi_columns: AtomicUsize,
}

impl<D: Device> GpuSystem<D> {
    /// The solve counters of this system.
    pub fn counts(&self) -> Arc<SolveCounts> {
        Arc::clone(&self.counts)
    }

    /// Homogeneous solves $A_{FF}z_F=q_F$, $z_D=0$, of every column of `qs` (node-major,
    /// `3n` each): for each distinct reduced system, the axis columns of all right-hand
    /// sides that use it go through [`DeviceFactor::solve_many`] in blocks of at most
    /// [`MULTI_RHS_BYTES`].
    pub fn try_solve_homogeneous_many(&self, qs: &[Vec<f64>]) -> Result<Vec<Vec<f64>>, GpuError> {
        let n = self.a.n;
        let mut zs = vec![vec![0.0; 3 * n]; qs.len()];
        if let Some(q) = qs.iter().find(|q| q.len() != 3 * n) {
            return Err(GpuError::Length {
                expected: 3 * n,
                got: q.len(),
            });
        }
        for sys in 0..self.plan.num_reduced() {
            let (free, _, _) = self.plan.reduced(sys);
            let nf = free.len();
            // (axis, column) pairs solved with this factor
            let items: Vec<(usize, usize)> = (0..3)
                .filter(|&d| self.plan.axis_system(d) == sys)
                .flat_map(|d| (0..qs.len()).map(move |c| (d, c)))
                .collect();
            if nf == 0 || items.is_empty() {
                continue;
            }
            let chunk = (MULTI_RHS_BYTES / (8 * nf)).clamp(1, items.len());
            for block in items.chunks(chunk) {
                let k = block.len();
                let mut rhs = vec![0.0; nf * k];
                for (j, &i) in free.iter().enumerate() {
                    for (c, &(d, col)) in block.iter().enumerate() {
                        rhs[j * k + c] = qs[col][3 * i + d];
                    }
                }
                let sol = {
                    let f = self.factors[sys].lock().unwrap_or_else(|p| p.into_inner());
                    f.solve_many(&self.dev, &rhs, k)?
                };
                for (j, &i) in free.iter().enumerate() {
                    for (c, &(d, col)) in block.iter().enumerate() {
                        zs[col][3 * i + d] = sol[j * k + c];
                    }
                }
                self.counts.multi_passes.fetch_add(1, Ordering::Relaxed);
                self.counts.multi_columns.fetch_add(k, Ordering::Relaxed);
            }
        }
        Ok(zs)
    }
}

impl<D: Device> GpuSystem<D> {
    /// Free nodes of reduced system `k` (its natural order: the rows of a block that
    /// [`GpuSystem::solve_many_device`] takes and returns) and the axes that use it.
    pub(crate) fn reduced_free(&self, k: usize) -> (Vec<usize>, Vec<usize>) {
        let (free, _, _) = self.plan.reduced(k);
        let axes = (0..3).filter(|&d| self.plan.axis_system(d) == k).collect();
        (free.to_vec(), axes)
    }

    /// Wide multi-RHS blocks on the flat copy of $S$ where memory allows
    /// ([`DeviceFactor::enable_wide`]); returns whether every factor has it.
    pub(crate) fn enable_wide_solves(&self) -> Result<bool, GpuError> {
        let mut all = true;
        for f in &self.factors {
            let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
            all &= f.enable_wide(&self.dev)?;
        }
        Ok(all)
    }

    /// Distinct reduced systems.
    pub(crate) fn num_reduced(&self) -> usize {
        self.plan.num_reduced()
    }

    /// $A_{FF}^{-1}$ of reduced system `sys` on a device block of `k` right-hand sides
    /// (rows in [`GpuSystem::reduced_free`] order, row-interleaved) in `a`, returned holding
    /// the solution (`b` scratch): [`DeviceFactor::solve_many_device`], counted as one
    /// multi-RHS pass of `k` columns.
    pub(crate) fn solve_many_device(
        &self,
        (sys, k): (usize, usize),
        a: D::Real,
        b: D::Real,
    ) -> Result<(D::Real, D::Real), GpuError> {
        let out = {
            let f = self.factors[sys].lock().unwrap_or_else(|p| p.into_inner());
            f.solve_many_device(&self.dev, k, a, b)?
        };
        self.counts.multi_passes.fetch_add(1, Ordering::Relaxed);
        self.counts.multi_columns.fetch_add(k, Ordering::Relaxed);
        Ok(out)
    }
}

/// A device failure of the solve `what` as the [`LinearSolver`] seam's error.
fn backend(what: &'static str, e: GpuError) -> LinalgError {
    LinalgError::Backend {
        what,
        error: Box::new(e),
    }
}

impl<D: Device> LinearSolver for GpuSystem<D> {
    fn num_nodes(&self) -> usize {
        self.a.n
    }
    fn solve(&self, b: &[f64], dirichlet_values: &[f64], x: &mut [f64]) -> Result<(), LinalgError> {
        self.try_solve(b, Some(dirichlet_values), x)
            .map_err(|e| backend("GPU global solve", e))
    }
    fn solve_homogeneous(&self, q: &[f64], z: &mut [f64]) -> Result<(), LinalgError> {
        self.counts.homogeneous.fetch_add(1, Ordering::Relaxed);
        self.try_solve(q, None, z)
            .map_err(|e| backend("GPU global solve", e))
    }
    fn solve_homogeneous_many(&self, qs: &[Vec<f64>]) -> Result<Vec<Vec<f64>>, LinalgError> {
        self.try_solve_homogeneous_many(qs)
            .map_err(|e| backend("GPU multi-RHS solve", e))
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
