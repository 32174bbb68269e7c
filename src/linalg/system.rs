//! The global PD system $A = \hat A\otimes I_3$ with per-axis Dirichlet reduction
//! (spec §4 "Dirichlet DoFs", §5.1–5.3).
//!
//! For axis $d$ with prescribed node set $D_d$ and free set $F_d$:
//! $\hat A_{FF}\,x_F = b_F - \hat A_{FD}\,\bar x_D$, $x_D=\bar x_D$. This is the same
//! solution as the spec's "identity rows" form, with a smaller factor. Axes with identical
//! prescribed sets share one factor (`Arc`), so the usual case factors once.

use super::{ordering, CscMatrix, LinalgError, LinearSolver, SparseCholesky};
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

/// Assembled, factored global system (CPU reference implementation of [`LinearSolver`]).
pub struct GlobalSystem {
    /// Unreduced per-axis matrix $\hat A$ (no Dirichlet treatment).
    pub a: CscMatrix,
    axes: [AxisSystem; 3],
    /// Number of stored entries of all distinct factors.
    pub nnz_factor: usize,
    /// Number of distinct numeric factorizations.
    pub num_factors: usize,
}

impl GlobalSystem {
    /// Order (METIS nested dissection) and factor the free blocks of `a` for the three
    /// axes. The ordering is computed per distinct free set.
    pub fn new(a: CscMatrix, dirichlet: [AxisDirichlet; 3]) -> Result<Self, LinalgError> {
        let n = a.n;
        let mut cache: Vec<(AxisDirichlet, Arc<SparseCholesky>)> = Vec::new();
        let mut nnz_factor = 0;
        let mut build = |d: &AxisDirichlet| -> Result<AxisSystem, LinalgError> {
            let mut is_fixed = vec![false; n];
            for &i in &d.nodes {
                is_fixed[i] = true;
            }
            let free: Vec<usize> = (0..n).filter(|&i| !is_fixed[i]).collect();
            let factor = if let Some((_, f)) = cache.iter().find(|(k, _)| k == d) {
                f.clone()
            } else {
                let mut map = vec![usize::MAX; n];
                for (k, &i) in free.iter().enumerate() {
                    map[i] = k;
                }
                let sub = a.submatrix(&free, &map);
                let (p, ip) = ordering::nested_dissection(&sub)?;
                let f = Arc::new(SparseCholesky::factor(&sub, &p, &ip).map_err(|e| match e {
                    LinalgError::NotPositiveDefinite { index } => {
                        // report the original node of the failing pivot
                        LinalgError::NotPositiveDefinite {
                            index: free[p[index.min(p.len() - 1)]],
                        }
                    }
                    other => other,
                })?);
                nnz_factor += f.nnz_l();
                cache.push((d.clone(), f.clone()));
                f
            };
            Ok(AxisSystem {
                free,
                prescribed: d.nodes.clone(),
                factor,
            })
        };
        let ax = build(&dirichlet[0])?;
        let ay = build(&dirichlet[1])?;
        let az = build(&dirichlet[2])?;
        let num_factors = cache.len();
        Ok(GlobalSystem {
            a,
            axes: [ax, ay, az],
            nnz_factor,
            num_factors,
        })
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
}
