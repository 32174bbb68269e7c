//! The global PD system $A = \hat A\otimes I_3$ with per-axis Dirichlet reduction
//! (spec §4 "Dirichlet DoFs", §5.1–5.3).
//!
//! For axis $d$ with prescribed node set $D_d$ and free set $F_d$:
//! $\hat A_{FF}\,x_F = b_F - \hat A_{FD}\,\bar x_D$, $x_D=\bar x_D$. This is the same
//! solution as the spec's "identity rows" form, with a smaller factor. Axes with identical
//! prescribed sets share one factor (`Arc`), so the usual case factors once. The ordering and
//! symbolic analysis ([`SystemPlan`]) depend only on the pattern and the prescribed sets and
//! are reused across factorizations of new values (loss evaluations).

use super::cholesky::SolveScratch;
use super::{ordering, CscMatrix, LinalgError, LinearSolver, SparseCholesky, SymbolicFactor};
use std::sync::{Arc, Mutex};

/// Prescribed (Dirichlet) node set of one axis.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AxisDirichlet {
    /// Sorted node indices whose coordinate on this axis is prescribed.
    pub nodes: Vec<usize>,
}

struct AxisSystem {
    free: Vec<usize>,
    prescribed: Vec<usize>,
}

/// The solve of one distinct factor: the axes it serves (one pass over the factor for all
/// of them), the coupling $\hat A_{FD}$ of its Dirichlet reduction by free row (so that the
/// Dirichlet values need no full matvec per solve), and reusable work space.
struct ReducedSolve {
    axes: Vec<usize>,
    free: Vec<usize>,
    prescribed: Vec<usize>,
    factor: Arc<SparseCholesky>,
    /// Entries `fd_ptr[k]..fd_ptr[k + 1]` of (`fd_node`, `fd_val`): $\hat A_{ij}$ for free
    /// node `free[k]` = i and prescribed node j.
    fd_ptr: Vec<usize>,
    fd_node: Vec<usize>,
    fd_val: Vec<f64>,
    /// Right-hand sides (column-major, one column per axis) and the factor's solve stack;
    /// a concurrent second solve on the same system allocates its own.
    work: Mutex<(Vec<f64>, SolveScratch)>,
}

impl ReducedSolve {
    fn new(a: &CscMatrix, axes: Vec<usize>, r: &ReducedPlan, factor: Arc<SparseCholesky>) -> Self {
        let (mut fd_ptr, mut fd_node, mut fd_val) = (vec![0], vec![], vec![]);
        for &i in &r.free {
            for k in a.col_ptr[i]..a.col_ptr[i + 1] {
                let j = a.row_idx[k];
                if r.map[j] == usize::MAX {
                    fd_node.push(j);
                    fd_val.push(a.values[k]);
                }
            }
            fd_ptr.push(fd_node.len());
        }
        let work = Mutex::new((
            vec![0.0; r.free.len() * axes.len()],
            factor.solve_scratch(axes.len()),
        ));
        ReducedSolve {
            axes,
            free: r.free.clone(),
            prescribed: r.dirichlet.nodes.clone(),
            factor,
            fd_ptr,
            fd_node,
            fd_val,
            work,
        }
    }

    fn solve(&self, b: &[f64], xd: Option<&[f64]>, x: &mut [f64]) {
        match self.work.try_lock() {
            Ok(mut w) => {
                let (rhs, scratch) = &mut *w;
                self.solve_with(rhs, scratch, b, xd, x, true);
            }
            Err(_) => {
                let (mut rhs, mut scratch) = self.work_space();
                self.solve_with(&mut rhs, &mut scratch, b, xd, x, true);
            }
        }
    }

    /// A right-hand-side buffer and a solve stack of this factor's size.
    fn work_space(&self) -> (Vec<f64>, SolveScratch) {
        (
            vec![0.0; self.free.len() * self.axes.len()],
            self.factor.solve_scratch(self.axes.len()),
        )
    }

    /// Gather the reduced right-hand sides, solve (split over the pool where the factor
    /// splits and `split`, else on this thread: the same bits), scatter.
    fn solve_with(
        &self,
        rhs: &mut [f64],
        scratch: &mut SolveScratch,
        b: &[f64],
        xd: Option<&[f64]>,
        x: &mut [f64],
        split: bool,
    ) {
        let nf = self.free.len();
        for (k, &i) in self.free.iter().enumerate() {
            for (c, &d) in self.axes.iter().enumerate() {
                // rhs_F = b_F - A_FD x_D (the coupling summed first, in node order)
                let mut t = 0.0;
                if let Some(xd) = xd {
                    for e in self.fd_ptr[k]..self.fd_ptr[k + 1] {
                        t += self.fd_val[e] * xd[3 * self.fd_node[e] + d];
                    }
                }
                rhs[c * nf + k] = b[3 * i + d] - t;
            }
        }
        if split {
            self.factor.solve_many_with(rhs, self.axes.len(), scratch);
        } else {
            self.factor.solve_many_seq(rhs, self.axes.len(), scratch);
        }
        for (k, &i) in self.free.iter().enumerate() {
            for (c, &d) in self.axes.iter().enumerate() {
                x[3 * i + d] = rhs[c * nf + k];
            }
        }
        for &j in &self.prescribed {
            for &d in &self.axes {
                x[3 * j + d] = xd.map(|v| v[3 * j + d]).unwrap_or(0.0);
            }
        }
    }
}

/// The Dirichlet reduction of one distinct prescribed set: free nodes, their positions in
/// the reduced matrix, and its ordering and symbolic analysis.
struct ReducedPlan {
    dirichlet: AxisDirichlet,
    free: Vec<usize>,
    /// Node → index in `free` (`usize::MAX` if prescribed).
    map: Vec<usize>,
    /// Nested-dissection permutation (`perm[new] = old`) of the reduced matrix.
    perm: Vec<usize>,
    symbolic: SymbolicFactor,
}

/// The persistent linear-algebra plan of one mesh and Dirichlet pattern: for each distinct
/// prescribed set, the free-node map, the METIS ordering and the symbolic Cholesky
/// analysis of the reduced matrix. Built once ([`SystemPlan::new`]) and shared (`Arc`) by
/// every [`GlobalSystem`] factored on a matrix of that pattern
/// ([`GlobalSystem::with_plan`]), so that a new set of parameter values costs a numeric
/// factorization only.
pub struct SystemPlan {
    n: usize,
    /// Pattern of the unreduced per-axis matrix the plan was built for.
    col_ptr: Vec<usize>,
    row_idx: Vec<usize>,
    dirichlet: [AxisDirichlet; 3],
    /// Index into `reduced` per axis.
    axes: [usize; 3],
    reduced: Vec<ReducedPlan>,
}

impl SystemPlan {
    /// Order (METIS nested dissection) and analyse the free blocks of `a`'s pattern for the
    /// three axes, once per distinct prescribed set.
    pub fn new(a: &CscMatrix, dirichlet: [AxisDirichlet; 3]) -> Result<Self, LinalgError> {
        let n = a.n;
        let mut reduced: Vec<ReducedPlan> = Vec::new();
        let mut axes = [0; 3];
        for (d, set) in dirichlet.iter().enumerate() {
            if let Some(k) = reduced.iter().position(|r| &r.dirichlet == set) {
                axes[d] = k;
                continue;
            }
            let mut is_fixed = vec![false; n];
            for &i in &set.nodes {
                is_fixed[i] = true;
            }
            let free: Vec<usize> = (0..n).filter(|&i| !is_fixed[i]).collect();
            let mut map = vec![usize::MAX; n];
            for (k, &i) in free.iter().enumerate() {
                map[i] = k;
            }
            let sub = a.submatrix(&free, &map);
            let (perm, iperm) = ordering::nested_dissection(&sub)?;
            let symbolic = SymbolicFactor::analyze(&sub, &perm, &iperm)?;
            axes[d] = reduced.len();
            reduced.push(ReducedPlan {
                dirichlet: set.clone(),
                free,
                map,
                perm,
                symbolic,
            });
        }
        Ok(SystemPlan {
            n,
            col_ptr: a.col_ptr.clone(),
            row_idx: a.row_idx.clone(),
            dirichlet,
            axes,
            reduced,
        })
    }

    /// Estimated bytes a [`GlobalSystem`] factored on this plan allocates, from the
    /// symbolic analysis (before any numeric factorization): per distinct reduced system the
    /// values of $L$ and the factorization's work space ([`SymbolicFactor::numeric_bytes`]),
    /// its reduced matrix (16 bytes per entry: value and row index) and the solve work
    /// vectors; plus three matrices of the unreduced pattern ($\hat A$, $\hat K_\beta$ and
    /// the plan's copy of the pattern, 16 bytes per entry). Not counted: the plan itself,
    /// already allocated.
    pub fn factor_bytes(&self) -> u64 {
        let nnz = self.row_idx.len() as u64;
        let mut total = 3 * 16 * nnz + 3 * 8 * (self.n as u64 + 1);
        for (k, r) in self.reduced.iter().enumerate() {
            let axes = self.axes.iter().filter(|&&a| a == k).count().max(1) as u64;
            let free = r.free.len() as u64;
            // reduced matrix: about the free rows' share of the pattern
            let sub = nnz.saturating_mul(free) / (self.n as u64).max(1);
            total = total
                .saturating_add(r.symbolic.numeric_bytes())
                .saturating_add(16 * sub)
                .saturating_add(8 * free * (2 + axes));
        }
        total
    }

    /// Stored values of $L$ over the distinct reduced systems (from the symbolic analysis;
    /// equals [`GlobalSystem::nnz_factor`] once factored).
    pub fn nnz_factor(&self) -> usize {
        self.reduced.iter().map(|r| r.symbolic.nnz_l()).sum()
    }

    /// Floating-point operations of factoring the three axes' reduced systems, counted per
    /// axis ([`SymbolicFactor::flops`]; axes sharing one analysis count it once each): the
    /// work of three independent scalar factorizations, the unit of the solver's cost model
    /// (`solver::auto`).
    pub fn axis_factor_flops(&self) -> f64 {
        self.axes
            .iter()
            .map(|&k| self.reduced[k].symbolic.flops())
            .sum()
    }

    /// Stored values of $L$ counted per axis (as [`SystemPlan::axis_factor_flops`]): the
    /// entries one PD iteration's three pairs of triangular solves read.
    pub fn axis_nnz_factor(&self) -> usize {
        self.axes
            .iter()
            .map(|&k| self.reduced[k].symbolic.nnz_l())
            .sum()
    }

    /// Free nodes per axis summed over the three axes: the free degrees of freedom.
    pub fn free_dofs(&self) -> usize {
        self.axes.iter().map(|&k| self.reduced[k].free.len()).sum()
    }

    /// Whether a matrix of `a`'s pattern with the prescribed sets `dirichlet` can be
    /// factored on this plan.
    pub fn fits(&self, a: &CscMatrix, dirichlet: &[AxisDirichlet; 3]) -> bool {
        a.n == self.n
            && a.col_ptr == self.col_ptr
            && a.row_idx == self.row_idx
            && &self.dirichlet == dirichlet
    }

    /// Number of distinct reduced systems (1 when the three axes share their Dirichlet set).
    pub fn num_reduced(&self) -> usize {
        self.reduced.len()
    }

    /// Which distinct reduced system serves axis `d`.
    pub fn axis_system(&self, d: usize) -> usize {
        self.axes[d]
    }

    /// Free nodes, node → free-index map (`usize::MAX` if prescribed) and nested-dissection
    /// ordering (`perm[new] = old`) of reduced system `k`.
    pub fn reduced(&self, k: usize) -> (&[usize], &[usize], &[usize]) {
        let r = &self.reduced[k];
        (&r.free, &r.map, &r.perm)
    }

    /// Prescribed nodes of axis `d`.
    pub fn prescribed(&self, d: usize) -> &[usize] {
        &self.dirichlet[d].nodes
    }
}

/// Assembled, factored global system (CPU reference implementation of [`LinearSolver`]).
pub struct GlobalSystem {
    /// Unreduced per-axis matrix $\hat A$ (no Dirichlet treatment).
    pub a: CscMatrix,
    axes: [AxisSystem; 3],
    solves: Vec<ReducedSolve>,
    plan: Arc<SystemPlan>,
    /// Number of stored entries of all distinct factors.
    pub nnz_factor: usize,
    /// Number of distinct numeric factorizations.
    pub num_factors: usize,
}

impl GlobalSystem {
    /// Plan ([`SystemPlan::new`]) and factor the free blocks of `a` for the three axes.
    pub fn new(a: CscMatrix, dirichlet: [AxisDirichlet; 3]) -> Result<Self, LinalgError> {
        let plan = Arc::new(SystemPlan::new(&a, dirichlet)?);
        Self::with_plan(a, plan)
    }

    /// Numeric factorization of the free blocks of `a` on an existing plan of its pattern
    /// (no ordering, no symbolic analysis). [`LinalgError::PatternMismatch`] when `a` does
    /// not have the plan's pattern.
    pub fn with_plan(a: CscMatrix, plan: Arc<SystemPlan>) -> Result<Self, LinalgError> {
        if a.n != plan.n || a.col_ptr != plan.col_ptr || a.row_idx != plan.row_idx {
            return Err(LinalgError::PatternMismatch {
                n: a.n,
                nnz: a.row_idx.len(),
            });
        }
        let mut factors = Vec::with_capacity(plan.reduced.len());
        let mut nnz_factor = 0;
        for r in &plan.reduced {
            let sub = a.submatrix(&r.free, &r.map);
            let f = SparseCholesky::numeric(&r.symbolic, &sub).map_err(|e| match e {
                LinalgError::NotPositiveDefinite { index } => {
                    // report the original node of the failing pivot
                    LinalgError::NotPositiveDefinite {
                        index: r.free[r.perm[index.min(r.perm.len() - 1)]],
                    }
                }
                other => other,
            })?;
            nnz_factor += f.nnz_l();
            factors.push(Arc::new(f));
        }
        let axis = |d: usize| AxisSystem {
            free: plan.reduced[plan.axes[d]].free.clone(),
            prescribed: plan.dirichlet[d].nodes.clone(),
        };
        let axes = [axis(0), axis(1), axis(2)];
        let num_factors = factors.len();
        let solves = (0..num_factors)
            .map(|k| {
                let served = (0..3).filter(|&d| plan.axes[d] == k).collect();
                ReducedSolve::new(&a, served, &plan.reduced[k], factors[k].clone())
            })
            .collect();
        Ok(GlobalSystem {
            a,
            axes,
            solves,
            plan,
            nnz_factor,
            num_factors,
        })
    }

    /// The plan this system was factored on.
    /// The factor of distinct reduced system `k` of the plan ([`SystemPlan::reduced`]).
    pub fn reduced_factor(&self, k: usize) -> &Arc<SparseCholesky> {
        &self.solves[k].factor
    }

    pub fn plan(&self) -> &Arc<SystemPlan> {
        &self.plan
    }

    /// All three axes: one pass over each distinct factor for the axes it serves.
    fn solve_all(&self, b: &[f64], xd: Option<&[f64]>, x: &mut [f64]) {
        for r in &self.solves {
            r.solve(b, xd, x);
        }
    }

    /// The factor serving axis `d`.
    #[cfg(test)]
    fn axis_factor(&self, d: usize) -> &SparseCholesky {
        &self.solves[self.plan.axes[d]].factor
    }

    /// Free node indices of axis `d`.
    pub fn free_nodes(&self, d: usize) -> &[usize] {
        &self.axes[d].free
    }
    /// Prescribed node indices of axis `d`.
    pub fn prescribed_nodes(&self, d: usize) -> &[usize] {
        &self.axes[d].prescribed
    }
}

impl LinearSolver for GlobalSystem {
    fn num_nodes(&self) -> usize {
        self.a.n
    }
    fn solve(&self, b: &[f64], dirichlet_values: &[f64], x: &mut [f64]) -> Result<(), LinalgError> {
        self.solve_all(b, Some(dirichlet_values), x);
        Ok(())
    }
    fn solve_homogeneous(&self, q: &[f64], z: &mut [f64]) -> Result<(), LinalgError> {
        self.solve_all(q, None, z);
        Ok(())
    }
    /// The columns in parallel, each solved on its task's thread with that task's work
    /// space (the contact Delassus columns: when the columns already fill the pool, a
    /// further split of each solve, [`super::tree_solve`], only adds joins). The same bits
    /// as [`LinearSolver::solve_homogeneous`] per column.
    fn solve_homogeneous_many(&self, qs: &[Vec<f64>]) -> Result<Vec<Vec<f64>>, LinalgError> {
        use rayon::prelude::*;
        let work = || -> Vec<(Vec<f64>, SolveScratch)> {
            self.solves.iter().map(ReducedSolve::work_space).collect()
        };
        Ok(qs
            .par_iter()
            .map_init(work, |w, q| {
                let mut z = vec![0.0; q.len()];
                for (r, (rhs, scratch)) in self.solves.iter().zip(w.iter_mut()) {
                    r.solve_with(rhs, scratch, q, None, &mut z, false);
                }
                z
            })
            .collect())
    }
    fn apply_a(&self, x: &[f64], y: &mut [f64]) {
        // $\hat A$ is symmetric: row i is column i, so each output node gathers its three
        // axes from one column (no work vector, parallel over nodes).
        use rayon::prelude::*;
        let a = &self.a;
        y[..3 * a.n]
            .par_chunks_mut(3 * 1024)
            .enumerate()
            .for_each(|(c, yc)| {
                for (k, yi) in yc.chunks_mut(3).enumerate() {
                    let i = c * 1024 + k;
                    let mut acc = [0.0; 3];
                    for e in a.col_ptr[i]..a.col_ptr[i + 1] {
                        let (j, v) = (a.row_idx[e], a.values[e]);
                        acc[0] += v * x[3 * j];
                        acc[1] += v * x[3 * j + 1];
                        acc[2] += v * x[3 * j + 2];
                    }
                    yi.copy_from_slice(&acc);
                }
            });
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_matrices::{hex_laplacian, same_bits};
    use super::*;

    /// 1-D chain with springs, mass on the diagonal.
    fn chain(n: usize) -> CscMatrix {
        let conn: Vec<usize> = (0..n - 1).flat_map(|i| [i, i + 1]).collect();
        let ptr: Vec<usize> = (0..n).map(|e| 2 * e).collect();
        let mut a = CscMatrix::pattern_from_elements(n, &conn, &ptr);
        for e in 0..n - 1 {
            a.add(e, e, 1.0);
            a.add(e + 1, e + 1, 1.0);
            a.add(e, e + 1, -1.0);
            a.add(e + 1, e, -1.0);
        }
        a.add_diagonal(&vec![0.1; n]);
        a
    }

    /// The global solve through a simplicial factor large enough for the two-thread split
    /// ([`super::super::simplicial_split`]) gives the same bits on one and two threads, and
    /// solves the system (the Plant's path, at CI size: an 80×40 plate, one edge fixed).
    #[test]
    fn split_global_solve_is_bitwise_across_thread_counts() {
        let a = hex_laplacian([80, 40, 1], 0.5);
        let n = a.n;
        let edge = AxisDirichlet {
            nodes: (0..n).filter(|i| i % 81 == 0).collect(),
        };
        let sys = GlobalSystem::new(a.clone(), [edge.clone(), edge.clone(), edge]).unwrap();
        let f = sys.reduced_factor(0);
        assert!(!f.is_supernodal(), "the plate's factor is supernodal");
        assert!(f.column_split().is_some(), "{} values: no split", f.nnz_l());
        let b: Vec<f64> = (0..3 * n).map(|i| (i as f64 * 0.37).sin()).collect();
        let xd: Vec<f64> = (0..3 * n).map(|i| 1e-3 * (i % 7) as f64).collect();
        let solve = |t: usize| {
            let mut x = vec![0.0; 3 * n];
            crate::linalg::test_matrices::on_threads(t, || sys.solve(&b, &xd, &mut x)).unwrap();
            x
        };
        let (one, two) = (solve(1), solve(2));
        assert!(same_bits(&one, &two));
        let mut ax = vec![0.0; 3 * n];
        sys.apply_a(&two, &mut ax);
        for i in (0..n).filter(|i| i % 81 != 0) {
            for d in 0..3 {
                let r = (ax[3 * i + d] - b[3 * i + d]).abs();
                assert!(r < 1e-10, "row {i} axis {d}: residual {r}");
            }
        }
    }

    #[test]
    fn dirichlet_reduction_satisfies_free_rows() {
        let n = 12;
        let a = chain(n);
        let fixed = AxisDirichlet { nodes: vec![0, 5] };
        let none = AxisDirichlet { nodes: vec![] };
        let sys = GlobalSystem::new(a.clone(), [fixed.clone(), none, fixed]).unwrap();
        assert_eq!(sys.num_factors, 2);
        let b: Vec<f64> = (0..3 * n).map(|i| (i as f64 * 0.37).sin()).collect();
        let mut xd = vec![0.0; 3 * n];
        xd[0] = 0.3;
        xd[3 * 5] = -0.2;
        xd[3 * 5 + 2] = 0.7;
        let mut x = vec![0.0; 3 * n];
        sys.solve(&b, &xd, &mut x).unwrap();
        assert_eq!(x[0], 0.3);
        assert_eq!(x[3 * 5 + 2], 0.7);
        let mut ax = vec![0.0; 3 * n];
        sys.apply_a(&x, &mut ax);
        for i in 0..n {
            for d in 0..3 {
                let prescribed = (d != 1) && (i == 0 || i == 5);
                if !prescribed {
                    assert!(
                        (ax[3 * i + d] - b[3 * i + d]).abs() < 1e-12,
                        "row {i} axis {d}"
                    );
                }
            }
        }
    }

    /// The one-pass multi-axis solve with the precomputed Dirichlet coupling equals three
    /// independent per-axis solves $\hat A_{FF}x_F=b_F-\hat A_{FD}\bar x_D$ (to round-off),
    /// repeated solves reuse the work space with the same result, and `apply_a` equals the
    /// per-axis matvec.
    #[test]
    fn multi_axis_solve_matches_per_axis_solves() {
        let n = 30;
        let a = chain(n);
        let fixed = AxisDirichlet {
            nodes: vec![2, 11, 29],
        };
        let sets = [fixed.clone(), fixed, AxisDirichlet { nodes: vec![7] }];
        let sys = GlobalSystem::new(a.clone(), sets.clone()).unwrap();
        assert_eq!(sys.num_factors, 2);
        let b: Vec<f64> = (0..3 * n).map(|i| (i as f64 * 0.77).sin()).collect();
        let xd: Vec<f64> = (0..3 * n).map(|i| 0.1 + 0.01 * i as f64).collect();
        let mut x = vec![f64::NAN; 3 * n];
        sys.solve(&b, &xd, &mut x).unwrap();
        for (d, set) in sets.iter().enumerate() {
            let mut col = vec![0.0; n];
            for &i in &set.nodes {
                col[i] = xd[3 * i + d];
            }
            let mut t = vec![0.0; n];
            a.matvec(&col, &mut t);
            let free: Vec<usize> = (0..n).filter(|i| !set.nodes.contains(i)).collect();
            let mut rhs: Vec<f64> = free.iter().map(|&i| b[3 * i + d] - t[i]).collect();
            sys.axis_factor(d).solve_in_place(&mut rhs);
            for (k, &i) in free.iter().enumerate() {
                assert!((x[3 * i + d] - rhs[k]).abs() <= 1e-13 * rhs[k].abs().max(1.0));
            }
            for &i in &set.nodes {
                assert_eq!(x[3 * i + d], xd[3 * i + d]);
            }
        }
        let mut again = vec![0.0; 3 * n];
        sys.solve(&b, &xd, &mut again).unwrap();
        assert_eq!(x, again);
        let mut z = vec![f64::NAN; 3 * n];
        sys.solve_homogeneous(&b, &mut z).unwrap();
        assert!(sets[0].nodes.iter().all(|&i| z[3 * i] == 0.0));
        let mut y = vec![0.0; 3 * n];
        sys.apply_a(&x, &mut y);
        for d in 0..3 {
            let mut t = vec![0.0; n];
            a.matvec_axis(&x, d, &mut t);
            for i in 0..n {
                assert!((y[3 * i + d] - t[i]).abs() <= 1e-14 * t[i].abs().max(1.0));
            }
        }
    }

    /// The many-right-hand-side solve (the contact Delassus columns; each column on one
    /// thread) gives each column's `solve_homogeneous` bit for bit, on two and three threads,
    /// with two distinct factors.
    #[test]
    fn many_homogeneous_solves_are_the_single_solves_bitwise() {
        let n = 30;
        let fixed = AxisDirichlet { nodes: vec![2, 11] };
        let sets = [fixed.clone(), AxisDirichlet { nodes: vec![7] }, fixed];
        let sys = GlobalSystem::new(chain(n), sets).unwrap();
        assert_eq!(sys.num_factors, 2);
        let qs: Vec<Vec<f64>> = (0..9)
            .map(|c| {
                (0..3 * n)
                    .map(|i| ((i + 7 * c) as f64 * 0.53).sin())
                    .collect()
            })
            .collect();
        let single: Vec<Vec<f64>> = qs
            .iter()
            .map(|q| {
                let mut z = vec![f64::NAN; 3 * n];
                sys.solve_homogeneous(q, &mut z).unwrap();
                z
            })
            .collect();
        for t in [1, 2, 3] {
            let many =
                crate::linalg::test_matrices::on_threads(t, || sys.solve_homogeneous_many(&qs))
                    .unwrap();
            assert_eq!(many.len(), qs.len());
            for (m, s) in many.iter().zip(&single) {
                assert!(same_bits(m, s));
            }
        }
    }

    /// A second factorization on the plan of the first shares its symbolic analysis, and
    /// its solves are bitwise those of a system planned from scratch; a matrix of another
    /// pattern is refused with a typed error.
    #[test]
    fn plan_is_reused_for_new_values_of_the_same_pattern() {
        let n = 40;
        let fixed = AxisDirichlet { nodes: vec![0, 17] };
        let sets = [fixed.clone(), AxisDirichlet { nodes: vec![] }, fixed];
        let first = GlobalSystem::new(chain(n), sets.clone()).unwrap();
        let mut a2 = chain(n);
        a2.values.iter_mut().for_each(|v| *v *= 3.0);
        a2.add_diagonal(&vec![0.5; n]);
        assert!(first.plan().fits(&a2, &sets));
        let reused = GlobalSystem::with_plan(a2.clone(), first.plan().clone()).unwrap();
        let fresh = GlobalSystem::new(a2, sets).unwrap();
        assert!(Arc::ptr_eq(reused.plan(), first.plan()));
        assert!(!Arc::ptr_eq(fresh.plan(), first.plan()));
        for d in 0..3 {
            let (r, f) = (reused.axis_factor(d), first.axis_factor(d));
            assert!(r.symbolic().same_as(f.symbolic()), "axis {d}");
        }
        let b: Vec<f64> = (0..3 * n).map(|i| (i as f64 * 0.61).cos()).collect();
        let xd: Vec<f64> = (0..3 * n).map(|i| 0.01 * i as f64).collect();
        let (mut x1, mut x2) = (vec![0.0; 3 * n], vec![0.0; 3 * n]);
        reused.solve(&b, &xd, &mut x1).unwrap();
        fresh.solve(&b, &xd, &mut x2).unwrap();
        assert_eq!(x1, x2);
        let other = chain(n + 1);
        let err = GlobalSystem::with_plan(other, first.plan().clone()).err();
        assert!(matches!(
            err,
            Some(LinalgError::PatternMismatch { n: 41, .. })
        ));
    }

    /// The flop estimate is $\sum_jc_j^2$: a dense $k\times k$ block (one element over all
    /// nodes) has column counts $k,k-1,\dots,1$ under any ordering; counted per axis.
    #[test]
    fn factor_flops_of_a_dense_block_are_the_sum_of_squares() {
        let k = 9;
        let conn: Vec<usize> = (0..k).collect();
        let mut a = CscMatrix::pattern_from_elements(k, &conn, &[0, k]);
        for i in 0..k {
            for j in 0..k {
                a.add(i, j, if i == j { k as f64 } else { -0.5 });
            }
        }
        let none = AxisDirichlet { nodes: vec![] };
        let fixed = AxisDirichlet { nodes: vec![0] };
        let plan = SystemPlan::new(&a, [none.clone(), none, fixed]).unwrap();
        let sq = |k: usize| (k * (k + 1) * (2 * k + 1) / 6) as f64;
        assert_eq!(plan.axis_factor_flops(), 2.0 * sq(k) + sq(k - 1));
        assert!(plan.axis_nnz_factor() >= 2 * k * (k + 1) / 2);
        assert_eq!(plan.free_dofs(), 3 * k - 1);
    }

    /// The factor's size is known from the plan (symbolic analysis) before the numeric
    /// factorization, and is what the factorization then allocates (memory guard).
    #[test]
    fn plan_predicts_the_factor_size_before_factoring() {
        let n = 40;
        let a = chain(n);
        let fixed = AxisDirichlet { nodes: vec![0, 7] };
        let none = AxisDirichlet { nodes: vec![] };
        let plan = Arc::new(SystemPlan::new(&a, [fixed.clone(), none, fixed]).unwrap());
        let predicted = plan.nnz_factor();
        let bytes = plan.factor_bytes();
        let sys = GlobalSystem::with_plan(a.clone(), plan).unwrap();
        assert_eq!(predicted, sys.nnz_factor);
        // at least the factor values and the system matrix, and not wildly more
        let floor = 8 * sys.nnz_factor as u64 + 16 * a.row_idx.len() as u64;
        assert!(bytes >= floor && bytes < 100 * floor, "{bytes} vs {floor}");
    }
}
