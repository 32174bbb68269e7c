//! The global PD system $A = \hat A\otimes I_3$ with per-axis Dirichlet reduction
//! (spec §4 "Dirichlet DoFs", §5.1–5.3).
//!
//! For axis $d$ with prescribed node set $D_d$ and free set $F_d$:
//! $\hat A_{FF}\,x_F = b_F - \hat A_{FD}\,\bar x_D$, $x_D=\bar x_D$. This is the same
//! solution as the spec's "identity rows" form, with a smaller factor. Axes with identical
//! prescribed sets share one factor (`Arc`), so the usual case factors once. The ordering and
//! symbolic analysis ([`SystemPlan`]) depend only on the pattern and the prescribed sets and
//! are reused across factorizations of new values (loss evaluations).

use super::{ordering, CscMatrix, LinalgError, LinearSolver, SparseCholesky, SymbolicFactor};
use std::sync::Arc;

/// Prescribed (Dirichlet) node set of one axis.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AxisDirichlet {
    /// Sorted node indices whose coordinate on this axis is prescribed.
    pub nodes: Vec<usize>,
}

struct AxisSystem {
    free: Vec<usize>,
    prescribed: Vec<usize>,
    factor: Arc<SparseCholesky>,
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
            factor: factors[plan.axes[d]].clone(),
        };
        let axes = [axis(0), axis(1), axis(2)];
        let num_factors = factors.len();
        Ok(GlobalSystem {
            a,
            axes,
            plan,
            nnz_factor,
            num_factors,
        })
    }

    /// The plan this system was factored on.
    pub fn plan(&self) -> &Arc<SystemPlan> {
        &self.plan
    }

    fn solve_axis(&self, d: usize, b: &[f64], xd: Option<&[f64]>, out: &mut [f64]) {
        let ax = &self.axes[d];
        let n = self.a.n;
        let mut rhs: Vec<f64> = ax.free.iter().map(|&i| b[3 * i + d]).collect();
        if let Some(xd) = xd {
            if !ax.prescribed.is_empty() {
                // rhs_F -= A_FD x_D
                let mut col = vec![0.0; n];
                for &i in &ax.prescribed {
                    col[i] = xd[3 * i + d];
                }
                let mut t = vec![0.0; n];
                self.a.matvec(&col, &mut t);
                for (k, &i) in ax.free.iter().enumerate() {
                    rhs[k] -= t[i];
                }
            }
        }
        ax.factor.solve_in_place(&mut rhs);
        for (k, &i) in ax.free.iter().enumerate() {
            out[3 * i + d] = rhs[k];
        }
        for &i in &ax.prescribed {
            out[3 * i + d] = xd.map(|v| v[3 * i + d]).unwrap_or(0.0);
        }
    }

    fn solve_all(&self, b: &[f64], xd: Option<&[f64]>, x: &mut [f64]) {
        // Three independent axis solves; run them concurrently (spec §5.3 "three axes
        // independent"). Each writes a disjoint axis of `x`, collected per axis first.
        let n = self.a.n;
        let mut parts = [vec![0.0; 3 * n], vec![0.0; 3 * n], vec![0.0; 3 * n]];
        {
            let [p0, p1, p2] = &mut parts;
            rayon::join(
                || self.solve_axis(0, b, xd, p0),
                || {
                    rayon::join(
                        || self.solve_axis(1, b, xd, p1),
                        || self.solve_axis(2, b, xd, p2),
                    )
                },
            );
        }
        for i in 0..n {
            for d in 0..3 {
                x[3 * i + d] = parts[d][3 * i + d];
            }
        }
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
    fn solve(&self, b: &[f64], dirichlet_values: &[f64], x: &mut [f64]) {
        self.solve_all(b, Some(dirichlet_values), x)
    }
    fn solve_homogeneous(&self, q: &[f64], z: &mut [f64]) {
        self.solve_all(q, None, z)
    }
    fn apply_a(&self, x: &[f64], y: &mut [f64]) {
        let n = self.a.n;
        let mut t = vec![0.0; n];
        for d in 0..3 {
            self.a.matvec_axis(x, d, &mut t);
            for i in 0..n {
                y[3 * i + d] = t[i];
            }
        }
    }
}

#[cfg(test)]
mod tests {
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
        sys.solve(&b, &xd, &mut x);
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
            let (r, f) = (&reused.axes[d].factor, &first.axes[d].factor);
            assert!(r.symbolic().same_as(f.symbolic()), "axis {d}");
        }
        let b: Vec<f64> = (0..3 * n).map(|i| (i as f64 * 0.61).cos()).collect();
        let xd: Vec<f64> = (0..3 * n).map(|i| 0.01 * i as f64).collect();
        let (mut x1, mut x2) = (vec![0.0; 3 * n], vec![0.0; 3 * n]);
        reused.solve(&b, &xd, &mut x1);
        fresh.solve(&b, &xd, &mut x2);
        assert_eq!(x1, x2);
        let other = chain(n + 1);
        let err = GlobalSystem::with_plan(other, first.plan().clone()).err();
        assert!(matches!(
            err,
            Some(LinalgError::PatternMismatch { n: 41, .. })
        ));
    }
}
