//! The Newton baseline's linear system: the persistent Hessian pattern, the free-DoF map
//! and the factor whose ordering and symbolic analysis are reused across iterations and
//! steps; the factored Hessian as a [`LinearSolver`] for the contact machinery.

use crate::linalg::{ordering, CscMatrix, LinalgError, LinearSolver, SparseCholesky};
use crate::model::Model;
use crate::solver::records::error::SolverError;

/// Persistent Hessian pattern, free-DoF map and the factor whose symbolic analysis is reused.
pub struct NewtonSystem {
    /// $3n\times3n$ element pattern (unreduced).
    pub(crate) pattern: CscMatrix,
    /// Free DoFs (sorted) and the map DoF → free index (`usize::MAX` if prescribed).
    pub(crate) free: Vec<usize>,
    pub(crate) map: Vec<usize>,
    pub(crate) perm: Option<(Vec<usize>, Vec<usize>)>,
    pub(crate) factor: Option<SparseCholesky>,
    /// Scatter map of the assembly (plan once, execute per Hessian): for element `e` with
    /// `nv` nodes, `slots[slot_ptr[e] + (3a+i)·3nv + 3b+j]` is the position in
    /// `pattern.values` of entry $(3n_a+i, 3n_b+j)$.
    pub(crate) slots: Vec<u32>,
    pub(crate) slot_ptr: Vec<usize>,
    /// Position of the diagonal entry of each DoF.
    pub(crate) diag: Vec<u32>,
}

impl NewtonSystem {
    /// The pattern of `model`'s elements with the prescribed DoFs `prescribed` (sorted
    /// node-major indices) removed.
    pub fn new(model: &Model, prescribed: &[usize]) -> Self {
        let n3 = 3 * model.num_nodes();
        let mut conn = Vec::with_capacity(3 * model.conn.len());
        let mut ptr = vec![0];
        for e in 0..model.num_elements() {
            for &i in model.element(e) {
                conn.extend([3 * i, 3 * i + 1, 3 * i + 2]);
            }
            ptr.push(conn.len());
        }
        let pattern = CscMatrix::pattern_from_elements(n3, &conn, &ptr);
        let mut map = vec![usize::MAX; n3];
        let free: Vec<usize> = (0..n3)
            .filter(|k| prescribed.binary_search(k).is_err())
            .collect();
        for (j, &k) in free.iter().enumerate() {
            map[k] = j;
        }
        let (slots, slot_ptr, diag) = scatter_map(model, &pattern);
        NewtonSystem {
            pattern,
            free,
            map,
            perm: None,
            factor: None,
            slots,
            slot_ptr,
            diag,
        }
    }

    /// Factor the free block of `h` (numeric only after the first call). `Err(index)` on a
    /// non-positive pivot.
    pub(crate) fn factor(&mut self, h: &CscMatrix, shift: f64) -> Result<(), SolverError> {
        let mut sub = h.submatrix(&self.free, &self.map);
        if shift != 0.0 {
            sub.add_diagonal(&vec![shift; sub.n]);
        }
        if self.perm.is_none() {
            self.perm = Some(ordering::nested_dissection(&sub)?);
        }
        let res = match self.factor.as_mut() {
            Some(f) => f.refactor(&sub),
            None => {
                let (p, ip) = self
                    .perm
                    .as_ref()
                    .expect("perm is set just above when it was None");
                SparseCholesky::factor(&sub, p, ip).map(|f| {
                    self.factor = Some(f);
                })
            }
        };
        res.map_err(SolverError::Linalg)
    }

    /// Solve with the current factor: `rhs` full length, prescribed entries ignored; result
    /// has zeros there. [`LinalgError::NotFactored`] before the first successful factor.
    pub(crate) fn solve(&self, rhs: &[f64]) -> Result<Vec<f64>, LinalgError> {
        let mut r: Vec<f64> = self.free.iter().map(|&k| rhs[k]).collect();
        self.factor
            .as_ref()
            .ok_or(LinalgError::NotFactored)?
            .solve_in_place(&mut r);
        let mut out = vec![0.0; rhs.len()];
        for (j, &k) in self.free.iter().enumerate() {
            out[k] = r[j];
        }
        Ok(out)
    }
}

/// A factored Newton Hessian $H$ (free-DoF block) as a [`LinearSolver`], so that the contact
/// machinery built for the PD factor (`Delassus`, `ContactAdjoint`) uses $H^{-1}$.
/// $H$ couples the axes ([`LinearSolver::axis_coupled`]).
pub struct NewtonFactor<'a> {
    pub(crate) sys: &'a NewtonSystem,
    /// The assembled (unreduced) matrix, for [`LinearSolver::apply_a`] and the Dirichlet
    /// coupling of [`LinearSolver::solve`]; `None` when only homogeneous solves are needed.
    pub(crate) k: Option<&'a CscMatrix>,
    pub(crate) n: usize,
}

impl LinearSolver for NewtonFactor<'_> {
    fn num_nodes(&self) -> usize {
        self.n
    }
    /// $x_F=H_{FF}^{-1}(b_F-H_{FD}\bar x_D)$, $x_D=\bar x_D$.
    fn solve(&self, b: &[f64], dirichlet_values: &[f64], x: &mut [f64]) -> Result<(), LinalgError> {
        let mut xd = vec![0.0; b.len()];
        for (k, v) in xd.iter_mut().enumerate() {
            if self.sys.map[k] == usize::MAX {
                *v = dirichlet_values[k];
            }
        }
        let mut r = b.to_vec();
        if let Some(k) = self.k {
            let mut hx = vec![0.0; b.len()];
            k.matvec(&xd, &mut hx);
            r.iter_mut().zip(&hx).for_each(|(a, c)| *a -= c);
        }
        let sol = self.sys.solve(&r)?;
        for (k, v) in x.iter_mut().enumerate() {
            *v = if self.sys.map[k] == usize::MAX {
                xd[k]
            } else {
                sol[k]
            };
        }
        Ok(())
    }
    fn solve_homogeneous(&self, q: &[f64], z: &mut [f64]) -> Result<(), LinalgError> {
        z.copy_from_slice(&self.sys.solve(q)?);
        Ok(())
    }
    fn apply_a(&self, x: &[f64], y: &mut [f64]) {
        match self.k {
            Some(k) => k.matvec(x, y),
            None => y.iter_mut().for_each(|v| *v = 0.0),
        }
    }
    fn axis_coupled(&self) -> bool {
        true
    }
}

/// The assembly's scatter map of [`NewtonSystem`] (element blocks and diagonal).
fn scatter_map(model: &Model, pattern: &CscMatrix) -> (Vec<u32>, Vec<usize>, Vec<u32>) {
    let pos = |r: usize, c: usize| {
        pattern
            .position(r, c)
            .expect("the pattern is assembled from the same elements") as u32
    };
    let mut slots = Vec::new();
    let mut slot_ptr = vec![0];
    for e in 0..model.num_elements() {
        let el = model.element(e);
        for &na in el {
            for i in 0..3 {
                for &nb in el {
                    for j in 0..3 {
                        slots.push(pos(3 * na + i, 3 * nb + j));
                    }
                }
            }
        }
        slot_ptr.push(slots.len());
    }
    let diag = (0..pattern.n).map(|k| pos(k, k)).collect();
    (slots, slot_ptr, diag)
}
