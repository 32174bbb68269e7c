//! The dense form of the contact solve (`[contact] solver = "dense"`, or `"auto"` with at
//! most [`super::AUTO_DENSE_ROWS`] rows): the Delassus matrix $W=JA^{-1}J^T$ from one solve
//! per candidate node ([`DenseDelassus`]), and the semismooth Newton iteration on
//! $(DW+E)\Delta\lambda=-\Phi$ with an LU of the coupled rows ([`solve`]). The
//! matrix-free counterpart: [`super::iterative`].
//!
//! Block sparsity: $A$ couples no two bodies, so $A^{-1}$ is block-diagonal by body and
//! $W_{rs}=0$ whenever rows $r$ and $s$ share no free body (a gripper's prescribed nodes are no
//! free body). In a stack of bodies the coupled rows then form a chain of dense blocks (one
//! per contact interface), and the Newton matrix $(DW+E)_{cc}$ is block-tridiagonal. Above
//! [`SPARSE_MIN_ROWS`] coupled rows, when at most [`SPARSE_MAX_DENSITY`] of its entries are
//! structurally non-zero (exact zeros of $W$), it is factored by a sparse LU (faer's
//! supernodal LU with a fill-reducing column ordering), whose cost grows with the interfaces'
//! blocks rather than with the cube of all coupled rows; smaller or denser systems keep the
//! dense LU (bitwise the earlier answers). Both solve the same matrix; the Newton iteration
//! stops on the same exact residual.

use super::lu::{DenseLu, SparseLu};
use super::ncp::{FbParams, Local};
use super::{inf_norm, residual, ContactSet, NewtonCache, SolveInfo, SolveSettings};
use super::{DECOUPLED, REGULARIZATION};
use crate::linalg::{LinalgError, LinearSolver};
use nalgebra::{DMatrix, DVector, Vector3};
use rayon::prelude::*;

/// Coupled Newton systems with fewer rows than this are factored by the dense LU (so small
/// contact sets take exactly the earlier path).
pub const SPARSE_MIN_ROWS: usize = 256;
/// Largest fraction of structurally non-zero entries of the coupled Newton matrix for which
/// it is factored by the sparse LU (denser ones: the dense LU).
pub const SPARSE_MAX_DENSITY: f64 = 0.5;

/// LU factor of a coupled Newton matrix $(DW+E)_{cc}$ (see the module doc).
pub enum NewtonFactor {
    /// Dense LU with partial pivoting.
    Dense(DenseLu),
    /// Sparse LU of the transpose $(DW+E)_{cc}^T$ (assembled row-wise, so its compressed
    /// columns are the matrix's rows), solved transposed.
    Sparse(Box<SparseLu>),
}

impl NewtonFactor {
    /// Overwrite `x` with $(DW+E)_{cc}^{-1}x$.
    fn solve_in_place(&self, x: faer::MatMut<'_, f64>) {
        match self {
            NewtonFactor::Dense(lu) => lu.solve_in_place(x),
            NewtonFactor::Sparse(lu) => lu.solve_transpose_in_place(x),
        }
    }
}

/// $X=A^{-1}J^T$ and $W=JX$ of a contact set (spec §2.9 "Delassus"), dense.
///
/// Axis-decoupled solver ($A=\hat A\otimes I_3$, the PD matrix): one homogeneous solve per
/// distinct candidate node gives $\hat A_d^{-1}e_i$ for the three axes at once; a row with
/// direction $a$ at node $i$ has the column $X_r[3k+d]=a_d(\hat A_d^{-1}e_i)_k$.
/// Axis-coupled solver ([`LinearSolver::axis_coupled`], a Newton Hessian $H$): three solves
/// per node, $c_{i,e}=H^{-1}e_{3i+e}$, and $X_r=\sum_e a_e\,c_{i,e}$.
/// In both cases $W_{rs}=\sum_{(i,\gamma)\in r}\sum_{(k,\eta)\in s}\gamma\eta\,a_r^T(H^{-1})_{ik}a_s$
/// over the row terms (node, coefficient) of [`ContactSet::row_terms`].
pub struct DenseDelassus {
    /// Column index (into `col_nodes`) of every row.
    row_col: Vec<usize>,
    /// Distinct nodes and their solved spikes (node-major, `3n`): one per node
    /// (decoupled) or three, `cols[3c+e]` (coupled).
    col_nodes: Vec<usize>,
    cols: Vec<Vec<f64>>,
    coupled: bool,
    pub w: DMatrix<f64>,
}

impl DenseDelassus {
    /// The dense $W$ of `set` from one multi-RHS solve with `solver` (fails where it does).
    pub fn new(set: &ContactSet, solver: &dyn LinearSolver) -> Result<DenseDelassus, LinalgError> {
        let n = solver.num_nodes();
        let m = set.nrows();
        let coupled = solver.axis_coupled();
        let mut col_nodes: Vec<usize> = (0..m)
            .flat_map(|r| set.row_terms(r))
            .filter(|(_, c)| *c != 0.0)
            .map(|(i, _)| i)
            .collect();
        col_nodes.sort_unstable();
        col_nodes.dedup();
        let col_of = |i: usize| -> usize {
            col_nodes
                .binary_search(&i)
                .expect("col_nodes holds every node of every row term, sorted")
        };
        let row_col: Vec<usize> = set.row_node.iter().map(|&i| col_of(i)).collect();
        // right-hand sides: (node, axes set to 1)
        let spikes: Vec<(usize, [bool; 3])> = if coupled {
            col_nodes
                .iter()
                .flat_map(|&i| (0..3).map(move |e| (i, [e == 0, e == 1, e == 2])))
                .collect()
        } else {
            col_nodes.iter().map(|&i| (i, [true; 3])).collect()
        };
        // one multi-RHS solve with the factor (on a device: one pass for every column)
        let rhs: Vec<Vec<f64>> = spikes
            .par_iter()
            .map(|&(i, axes)| {
                let mut q = vec![0.0; 3 * n];
                for d in 0..3 {
                    if axes[d] {
                        q[3 * i + d] = 1.0;
                    }
                }
                q
            })
            .collect();
        let cols = solver.solve_homogeneous_many(&rhs)?;
        // (H^{-1})_{(i,d),(k,e)} from the stored columns (k = col_nodes[kc]); decoupled
        // solvers are only asked for d == e (the other entries are zero)
        let hinv = |i: usize, d: usize, kc: usize, e: usize| -> f64 {
            if coupled {
                cols[3 * kc + e][3 * i + d]
            } else {
                cols[kc][3 * i + d]
            }
        };
        // terms of every row as (node, column, coefficient)
        let rt: Vec<Vec<(usize, usize, f64)>> = (0..m)
            .map(|r| {
                set.row_terms(r)
                    .iter()
                    .filter(|(_, c)| *c != 0.0)
                    .map(|&(i, c)| (i, col_of(i), c))
                    .collect()
            })
            .collect();
        let mut w = DMatrix::zeros(m, m);
        for r in 0..m {
            let ar = &set.row_dir[r];
            for s in r..m {
                let as_ = &set.row_dir[s];
                let mut v = 0.0;
                for &(ir, _, cr) in &rt[r] {
                    for &(_, cs_col, cs) in &rt[s] {
                        let mut t = 0.0;
                        for d in 0..3 {
                            let es = if coupled { 0..3 } else { d..d + 1 };
                            for e in es {
                                t += ar[d] * as_[e] * hinv(ir, d, cs_col, e);
                            }
                        }
                        v += cr * cs * t;
                    }
                }
                w[(r, s)] = v;
                w[(s, r)] = v;
            }
        }
        Ok(DenseDelassus {
            row_col,
            col_nodes,
            cols,
            coupled,
            w,
        })
    }

    /// `out += X lambda` $=A^{-1}J^T\lambda$.
    pub fn add_x(&self, set: &ContactSet, lambda: &[f64], out: &mut [f64]) {
        let mut f = vec![Vector3::zeros(); self.col_nodes.len()];
        for r in 0..set.nrows() {
            if set.row_tri[r].is_none() {
                f[self.row_col[r]] += set.row_dir[r] * lambda[r];
                continue;
            }
            for (i, c) in set.row_terms(r) {
                if c != 0.0 {
                    let k = self
                        .col_nodes
                        .binary_search(&i)
                        .expect("col_nodes holds every node of every row term, sorted");
                    f[k] += set.row_dir[r] * (c * lambda[r]);
                }
            }
        }
        for (c, fc) in f.iter().enumerate() {
            if fc.norm_squared() == 0.0 {
                continue;
            }
            if self.coupled {
                for e in 0..3 {
                    if fc[e] == 0.0 {
                        continue;
                    }
                    let col = &self.cols[3 * c + e];
                    for (o, v) in out.iter_mut().zip(col) {
                        *o += fc[e] * v;
                    }
                }
            } else {
                let col = &self.cols[c];
                for (k, o) in out.iter_mut().enumerate() {
                    *o += fc[k % 3] * col[k];
                }
            }
        }
    }
}

/// The dense form of [`super::solve`], iterated to $\|\Phi\|_\infty\le$ `tol`: per Newton iteration
/// the decoupled contacts are eliminated (`eliminate_decoupled`), the coupled rows take a
/// chord or a fresh Newton step (`DenseNewton::coupled_step`), and a full step is
/// line-searched (`DenseNewton::armijo`).
pub fn solve(
    set: &ContactSet,
    del: &DenseDelassus,
    u: &[f64],
    lambda: &mut [f64],
    s: &SolveSettings,
    tol: f64,
    cache: &mut Option<NewtonCache>,
) -> SolveInfo {
    solve_w(set, &del.w, set.delta(u), lambda, s, tol, cache)
}

/// [`solve`] from the Delassus matrix `w` and $\delta_0=Ju-d$ alone (`d0`, one entry per
/// row): what the iteration reads of $u$ and of the columns $X$. The device's contact
/// (docs/gpu.md "Contact on the device") forms $W$ and $\delta_0$ where $X$ and $u$ live.
pub fn solve_w(
    set: &ContactSet,
    w: &DMatrix<f64>,
    d0: Vec<f64>,
    lambda: &mut [f64],
    s: &SolveSettings,
    tol: f64,
    cache: &mut Option<NewtonCache>,
) -> SolveInfo {
    let nt = DenseNewton {
        set,
        w,
        d0: DVector::from_vec(d0),
        fb: &s.fb,
    };
    let mut cur = nt.trial(DVector::from_column_slice(lambda));
    let mut info = SolveInfo::default();
    let t0 = std::time::Instant::now();
    // at least one Newton step unless already within the strict tolerance
    while info.iterations < s.max_newton
        && (inf_norm(&cur.phi) > tol || (info.iterations == 0 && inf_norm(&cur.phi) > s.tolerance))
    {
        if let Err(c) = s
            .cancel
            .poll(crate::cancel::Stage::Contact, info.iterations)
        {
            info.cancelled = Some(c);
            break;
        }
        if s.out_of_time(t0) {
            info.timed_out = true;
            break;
        }
        let locals = set.locals(&cur.delta, cur.lam.as_slice(), &s.fb);
        let mut step = vec![0.0; set.nrows()];
        let coupled = eliminate_decoupled(set, &locals, &mut step);
        match nt.coupled_step(&cur, &locals, &coupled, &mut step, cache, &mut info) {
            CoupledStep::Failed => break,
            CoupledStep::Chord(t) => {
                info.iterations += 1;
                cur = t;
                continue;
            }
            CoupledStep::Newton => {}
        }
        let best = nt.armijo(&cur, DVector::from_vec(step));
        info.iterations += 1;
        if best.n2.partial_cmp(&cur.n2) != Some(std::cmp::Ordering::Less) {
            break;
        }
        cur = best;
    }
    info.residual = inf_norm(&cur.phi);
    lambda.copy_from_slice(cur.lam.as_slice());
    info
}

/// Eliminate the decoupled contacts ($\max|D_j|\le$ [`DECOUPLED`]): their Newton rows read
/// $E_j\Delta\lambda_j=-\Phi_j$, solved here into `step`. Returns the rows of the coupled
/// contacts (and of decoupled ones whose $E_j$ is singular), in row order.
fn eliminate_decoupled(set: &ContactSet, locals: &[Local], step: &mut [f64]) -> Vec<usize> {
    let mut coupled: Vec<usize> = Vec::new();
    for (j, l) in locals.iter().enumerate() {
        let rows = set.rows(j);
        let nr = rows.len();
        let dmax = (0..nr)
            .flat_map(|a| (0..nr).map(move |b| (a, b)))
            .fold(0.0f64, |mx, (a, b)| mx.max(l.d[(a, b)].abs()));
        if dmax > DECOUPLED {
            coupled.extend(rows);
            continue;
        }
        let e = l.e.view((0, 0), (nr, nr)).clone_owned();
        let rhs = -l.phi.rows(0, nr).clone_owned();
        if let Some(x) = e.lu().solve(&rhs) {
            for (a, r) in rows.enumerate() {
                step[r] = x[a];
            }
        } else {
            coupled.extend(rows);
        }
    }
    coupled
}

/// A Newton iterate or trial of the dense solve: $\lambda$, $\delta(\lambda)$,
/// $\Phi(\delta,\lambda)$ and $\|\Phi\|^2$.
struct Trial {
    n2: f64,
    lam: DVector<f64>,
    delta: Vec<f64>,
    phi: Vec<f64>,
}

/// How the coupled rows of one dense Newton iteration were stepped.
enum CoupledStep {
    /// A chord step with the cached factor cut $\|\Phi\|^2$ by 3/4: accepted as is.
    Chord(Trial),
    /// `step` holds the full Newton direction (to be line-searched).
    Newton,
    /// The Newton system gave a non-finite step: stop.
    Failed,
}

/// The dense semismooth Newton solve of one contact set: $\delta(\lambda)=\delta_0+W\lambda$
/// with the dense Delassus matrix $W$.
struct DenseNewton<'a> {
    set: &'a ContactSet,
    /// $W$.
    w: &'a DMatrix<f64>,
    /// $\delta_0=Ju-d$.
    d0: DVector<f64>,
    fb: &'a FbParams,
}

impl DenseNewton<'_> {
    /// The trial at `lam`: $\delta=\delta_0+W\lambda$, $\Phi(\delta,\lambda)$, $\|\Phi\|^2$.
    fn trial(&self, lam: DVector<f64>) -> Trial {
        let delta = (&self.d0 + self.w * &lam).as_slice().to_vec();
        let phi = residual(self.set, &delta, lam.as_slice(), self.fb);
        let n2 = phi.iter().map(|v| v * v).sum::<f64>();
        Trial {
            n2,
            lam,
            delta,
            phi,
        }
    }

    /// Step of the coupled rows (`step` holds the decoupled part): with a cached factor of
    /// the same coupled set, first a chord step, accepted when it cuts the residual norm by
    /// half; otherwise a fresh Newton step on $(DW+E)_{cc}\Delta\lambda_c=-\Phi_c-(DW)_{c\cdot}
    /// \Delta\lambda_{\text{decoupled}}$ (factor cached for later chord steps).
    fn coupled_step(
        &self,
        cur: &Trial,
        locals: &[Local],
        coupled: &[usize],
        step: &mut [f64],
        cache: &mut Option<NewtonCache>,
        info: &mut SolveInfo,
    ) -> CoupledStep {
        if coupled.is_empty() {
            return CoupledStep::Newton;
        }
        let mut pos = vec![usize::MAX; self.set.nrows()];
        for (k, &r) in coupled.iter().enumerate() {
            pos[r] = k;
        }
        let rhs = self.coupled_rhs(locals, coupled, &pos, step, &cur.phi);
        if let Some(c) = cache.as_ref().filter(|c| c.coupled == coupled) {
            if let Some(t) = self.chord(&c.lu, &rhs, coupled, step, cur) {
                return CoupledStep::Chord(t);
            }
        }
        let lu = match self.sparse_newton_factor(locals, coupled, &pos) {
            Some(lu) => lu,
            None => NewtonFactor::Dense(DenseLu::new(self.newton_matrix(locals, coupled, &pos))),
        };
        info.factorizations += 1;
        let na = coupled.len();
        let mut x = faer::Mat::from_fn(na, 1, |i, _| rhs[i]);
        lu.solve_in_place(x.as_mut());
        if !(0..na).all(|i| x[(i, 0)].is_finite()) {
            return CoupledStep::Failed;
        }
        for (k, &r) in coupled.iter().enumerate() {
            step[r] = x[(k, 0)];
        }
        *cache = Some(NewtonCache {
            coupled: coupled.to_vec(),
            lu,
        });
        CoupledStep::Newton
    }

    /// Right-hand side $-\Phi_c-(DW\,\Delta\lambda_{\text{decoupled}})_c$ of the coupled rows
    /// (`pos`: position of each row among the coupled ones, `usize::MAX` if decoupled).
    fn coupled_rhs(
        &self,
        locals: &[Local],
        coupled: &[usize],
        pos: &[usize],
        step: &[f64],
        f: &[f64],
    ) -> Vec<f64> {
        // W times the decoupled part of the step, for the coupled rows' right-hand side
        let wd = self.w * DVector::from_column_slice(step);
        let mut rhs = vec![0.0; coupled.len()];
        for (j, l) in locals.iter().enumerate() {
            let rows = self.set.rows(j);
            let r0 = rows.start;
            if pos[r0] == usize::MAX {
                continue;
            }
            for a in 0..rows.len() {
                let cpl: f64 = (0..rows.len()).map(|b| l.d[(a, b)] * wd[r0 + b]).sum();
                rhs[pos[r0 + a]] = -f[r0 + a] - cpl;
            }
        }
        rhs
    }

    /// Chord step: the coupled rows solved with the factor `lu` of an earlier Jacobian;
    /// the trial if it cuts $\|\Phi\|^2$ to at most a quarter.
    fn chord(
        &self,
        lu: &NewtonFactor,
        rhs: &[f64],
        coupled: &[usize],
        step: &[f64],
        cur: &Trial,
    ) -> Option<Trial> {
        let mut x = faer::Mat::from_fn(rhs.len(), 1, |i, _| rhs[i]);
        lu.solve_in_place(x.as_mut());
        let mut st = step.to_vec();
        for (k, &r) in coupled.iter().enumerate() {
            st[r] = x[(k, 0)];
        }
        let t = self.trial(&cur.lam + DVector::from_vec(st));
        (t.n2.is_finite() && t.n2 <= 0.25 * cur.n2).then_some(t)
    }

    /// The Newton matrix $(DW+E)_{cc}$ of the coupled rows, with its diagonal shifted by
    /// [`REGULARIZATION`] times its largest diagonal entry.
    fn newton_matrix(&self, locals: &[Local], coupled: &[usize], pos: &[usize]) -> faer::Mat<f64> {
        let na = coupled.len();
        let mut jac = faer::Mat::<f64>::zeros(na, na);
        for (j, l) in locals.iter().enumerate() {
            let rows = self.set.rows(j);
            let r0 = rows.start;
            if pos[r0] == usize::MAX {
                continue;
            }
            let nr = rows.len();
            for a in 0..nr {
                let ka = pos[r0 + a];
                for (kc, &c) in coupled.iter().enumerate() {
                    let mut v = 0.0;
                    for b in 0..nr {
                        v += l.d[(a, b)] * self.w[(r0 + b, c)];
                    }
                    jac[(ka, kc)] = v;
                }
                for b in 0..nr {
                    jac[(ka, pos[r0 + b])] += l.e[(a, b)];
                }
            }
        }
        // Levenberg–Marquardt-type shift of the step only (the residual is exact):
        // keeps the step bounded when constraints are redundant (a node touching two
        // obstacles whose rows are linearly dependent), negligible otherwise.
        let shift = REGULARIZATION * (0..na).fold(0.0f64, |m, k| m.max(jac[(k, k)].abs()));
        for k in 0..na {
            jac[(k, k)] += shift;
        }
        jac
    }

    /// The sparse LU of $(DW+E)_{cc}$ (same entries and shift as [`Self::newton_matrix`]),
    /// when the system has at least [`SPARSE_MIN_ROWS`] rows and at most
    /// [`SPARSE_MAX_DENSITY`] of its entries are structurally non-zero; `None` otherwise, or
    /// when the sparse factorization fails (the caller then factors densely).
    ///
    /// Pattern: the rows of contact $j$ share one column set, the coupled rows $c$ with
    /// $W_{rc}\ne0$ for some row $r$ of $j$, plus $j$'s own rows (the $E_j$ block).
    fn sparse_newton_factor(
        &self,
        locals: &[Local],
        coupled: &[usize],
        pos: &[usize],
    ) -> Option<NewtonFactor> {
        use faer::sparse::{SparseColMatRef, SymbolicSparseColMatRef};
        let na = coupled.len();
        if na < SPARSE_MIN_ROWS {
            return None;
        }
        let w = self.w;
        // column pattern of every coupled contact, in coupled order (sorted)
        let mut contacts: Vec<(usize, Vec<usize>)> = Vec::new();
        let mut nnz = 0usize;
        let budget = (SPARSE_MAX_DENSITY * (na * na) as f64) as usize;
        for j in 0..locals.len() {
            let rows = self.set.rows(j);
            if pos[rows.start] == usize::MAX {
                continue;
            }
            let cols: Vec<usize> = (0..na)
                .filter(|&kc| {
                    let c = coupled[kc];
                    rows.clone().any(|r| w[(r, c)] != 0.0 || r == c)
                })
                .collect();
            nnz += rows.len() * cols.len();
            if nnz > budget {
                return None;
            }
            contacts.push((j, cols));
        }
        // the transpose, compressed by columns = the Newton matrix by rows (coupled order)
        let mut col_ptr = Vec::with_capacity(na + 1);
        let mut row_idx = Vec::with_capacity(nnz);
        let mut val = Vec::with_capacity(nnz);
        let mut diag = vec![usize::MAX; na];
        col_ptr.push(0usize);
        for (j, cols) in &contacts {
            let l = &locals[*j];
            let rows = self.set.rows(*j);
            let (r0, nr) = (rows.start, rows.len());
            for a in 0..nr {
                let ka = pos[r0 + a];
                for &kc in cols {
                    let c = coupled[kc];
                    let mut v = 0.0;
                    for b in 0..nr {
                        v += l.d[(a, b)] * w[(r0 + b, c)];
                    }
                    if (r0..r0 + nr).contains(&c) {
                        v += l.e[(a, c - r0)];
                    }
                    if kc == ka {
                        diag[ka] = val.len();
                    }
                    row_idx.push(kc);
                    val.push(v);
                }
                col_ptr.push(row_idx.len());
            }
        }
        // coupled rows come in contact order, so the k-th compressed column is row k
        let shift = REGULARIZATION * diag.iter().fold(0.0f64, |m, &p| m.max(val[p].abs()));
        for &p in &diag {
            val[p] += shift;
        }
        let sym = SymbolicSparseColMatRef::new_checked(na, na, &col_ptr, None, &row_idx);
        let mat = SparseColMatRef::new(sym, &val);
        SparseLu::new(mat).map(|lu| NewtonFactor::Sparse(Box::new(lu)))
    }

    /// Armijo backtracking on $\tfrac12\|\Phi\|^2$ along the Newton direction `step`
    /// (slope $-\|\Phi\|^2$): halve $\alpha$ from 1 until
    /// $\|\Phi\|^2\le(1-2\cdot10^{-4}\alpha)\|\Phi_0\|^2$ (at most 30 trials); the best trial.
    fn armijo(&self, cur: &Trial, step: DVector<f64>) -> Trial {
        let mut alpha = 1.0;
        let mut best: Option<Trial> = None;
        for _ in 0..30 {
            let t = self.trial(&cur.lam + &step * alpha);
            let done = t.n2 <= (1.0 - 2e-4 * alpha) * cur.n2;
            if best.as_ref().map(|b| t.n2 < b.n2).unwrap_or(true) {
                best = Some(t);
            }
            if done {
                break;
            }
            alpha *= 0.5;
        }
        best.expect("the Armijo loop runs at least one trial, which sets best")
    }
}

#[cfg(test)]
mod tests {
    use super::super::ncp::{local, Coulomb, FbParams};
    use super::*;

    /// Deterministic uniform numbers in [-1, 1) (xorshift).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        }
    }

    /// A stack-like contact system: `groups` interfaces of `per` frictional contacts
    /// (3 rows each); interface g touches bodies g and g+1, so $W=BB^T$ with $B$
    /// block-bidiagonal couples only neighbouring interfaces (block-tridiagonal, as $W$ of a
    /// stack of bodies); `chain = false` gives every row every body (a dense $W$). Half the
    /// contacts are active ($\delta\approx0$, $\lambda>0$: $D_j\ne0$), the rest sliding or
    /// separated with small gaps (all coupled).
    fn system(groups: usize, per: usize, chain: bool) -> (ContactSet, DenseDelassus, Vec<Local>) {
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        let m = 3 * groups * per;
        let cols_per_body = 12;
        let nb = groups + 1;
        let mut b = DMatrix::<f64>::zeros(m, nb * cols_per_body);
        for r in 0..m {
            let g = r / (3 * per);
            for body in 0..nb {
                if chain && body != g && body != g + 1 {
                    continue;
                }
                for k in 0..cols_per_body {
                    b[(r, body * cols_per_body + k)] = 1e-3 * rng.next();
                }
            }
        }
        let mut w = &b * b.transpose();
        for r in 0..m {
            w[(r, r)] += 1e-6;
        }
        let mut set = ContactSet::default();
        set.offset.push(0);
        let fb = FbParams {
            smoothing: 0.0,
            s_floor: 1e-14,
        };
        let mu = Coulomb::constant(0.5);
        let mut locals = Vec::new();
        for j in 0..groups * per {
            set.offset.push(3 * (j + 1));
            let (delta, lambda) = if j % 2 == 0 {
                (
                    [1e-9 * rng.next(), 1e-4 * rng.next(), 1e-4 * rng.next()],
                    [2.0 + rng.next(), 0.3 * rng.next(), 0.3 * rng.next()],
                )
            } else {
                (
                    [
                        1e-5 * (1.5 + rng.next()),
                        1e-4 * rng.next(),
                        1e-4 * rng.next(),
                    ],
                    [0.1 * (1.5 + rng.next()), 0.01, -0.01],
                )
            };
            locals.push(local(&delta, &lambda, 1e-3, &mu, 3, &fb));
        }
        let del = DenseDelassus {
            row_col: Vec::new(),
            col_nodes: Vec::new(),
            cols: Vec::new(),
            coupled: false,
            w,
        };
        (set, del, locals)
    }

    /// The sparse LU of a block-tridiagonal Newton matrix $(DW+E)_{cc}$ (6 interfaces,
    /// 540 rows) solves it as the dense LU does, to 1e-10 relative; a dense $W$ keeps the
    /// dense LU (the density test), and so does a system below [`SPARSE_MIN_ROWS`].
    #[test]
    fn sparse_newton_factor_matches_the_dense_lu_on_a_stack() {
        let fb = FbParams {
            smoothing: 0.0,
            s_floor: 1e-14,
        };
        for (groups, per, chain, sparse) in [
            (6, 30, true, true),
            (6, 30, false, false),
            (2, 20, true, false),
        ] {
            let (set, del, locals) = system(groups, per, chain);
            let m = set.offset[set.offset.len() - 1];
            let nt = DenseNewton {
                set: &set,
                w: &del.w,
                d0: DVector::zeros(m),
                fb: &fb,
            };
            let coupled: Vec<usize> = (0..m).collect();
            let pos = coupled.clone();
            let factor = nt.sparse_newton_factor(&locals, &coupled, &pos);
            assert_eq!(factor.is_some(), sparse, "groups {groups}, chain {chain}");
            let Some(factor) = factor else { continue };
            let density = (0..m)
                .flat_map(|r| (0..m).map(move |c| (r, c)))
                .filter(|&(r, c)| del.w[(r, c)] != 0.0)
                .count() as f64
                / (m * m) as f64;
            assert!(density < 0.5, "density {density}");
            let dense =
                NewtonFactor::Dense(DenseLu::new(nt.newton_matrix(&locals, &coupled, &pos)));
            let mut rng = Rng(7);
            let rhs: Vec<f64> = (0..m).map(|_| rng.next()).collect();
            let mut xs = faer::Mat::from_fn(m, 1, |i, _| rhs[i]);
            let mut xd = xs.clone();
            factor.solve_in_place(xs.as_mut());
            dense.solve_in_place(xd.as_mut());
            let norm = (0..m).map(|i| xd[(i, 0)].abs()).fold(0.0, f64::max);
            let diff = (0..m)
                .map(|i| (xs[(i, 0)] - xd[(i, 0)]).abs())
                .fold(0.0, f64::max);
            assert!(norm > 1.0, "trivial solution: {norm:e}");
            assert!(
                diff <= 1e-10 * norm,
                "sparse vs dense LU: {diff:e} of {norm:e}"
            );
        }
    }
}
