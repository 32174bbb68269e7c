//! Persistent sparse Cholesky factor $P\hat A P^T = LL^T$ (spec Eq. 32) via faer's
//! supernodal/simplicial $LL^T$ with a METIS nested-dissection ordering.
//!
//! Symbolic analysis and numeric factorization are separate (faer's design): the factor is
//! computed once per rollout and reused by every solve of the forward, contact and
//! backward passes (spec §5.4). A supernodal analysis is factored by the tree-parallel
//! left-looking factorization of [`super::supernodal`] (faer's algorithm on faer's analysis,
//! independent subtrees on the pool's threads; the same bits on any thread count). Solves run
//! faer's kernels with `Par::Seq` (measured faster
//! on 2 cores, `dependencies-notes.md` §2.3); on a pool of two threads or more a supernodal
//! factor's two largest independent subtrees are solved at once instead
//! ([`super::tree_solve`], the same bits).
//!
//! Deviation from the paper, stated: the paper applies $\hat A^{-1}$ as two SpMVs with an
//! explicit sparse inverse factor $S=L^{-1}$ (Eq. 33). On the CPU this is slower than the
//! two triangular solves with $L$ (measured in `dependencies-notes.md` §2.4) and needs
//! $O(n^{5/3})$ memory, so the CPU path solves with $L$; the result is the same operator.

use super::simplicial_split::{self, ColumnSplit, Columns, SplitScratch};
use super::supernodal::{self, TreePlan};
use super::tree_solve::{self, TreeSplit};
use super::{CscMatrix, LinalgError};
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::LltRegularization;
use faer::perm::PermRef;
use faer::sparse::linalg::cholesky::supernodal::SupernodalLltRef;
use faer::sparse::linalg::cholesky::{
    factorize_symbolic_cholesky, CholeskySymbolicParams, LltRef, SymbolicCholesky,
    SymbolicCholeskyRaw, SymmetricOrdering,
};
use faer::sparse::linalg::SupernodalThreshold;
use faer::sparse::{SparseColMatRef, SymbolicSparseColMatRef};
use faer::{Conj, MatMut, Par, Side};
use std::sync::Arc;

/// Symbolic analysis of one sparsity pattern under one ordering (elimination tree,
/// supernodes, the structure of $L$): computed once, shared by every numeric
/// factorization of a matrix with that pattern.
#[derive(Clone)]
pub struct SymbolicFactor {
    symbolic: Arc<SymbolicCholesky<usize>>,
    n: usize,
    /// The two-thread split of a supernodal factor's tree ([`super::tree_solve`]).
    split: Option<TreeSplit>,
    /// The two-thread split of a simplicial factor's tree ([`super::simplicial_split`]).
    column_split: Option<Arc<ColumnSplit>>,
    /// The tree-parallel numeric factorization's plan of a supernodal analysis
    /// ([`super::supernodal`]).
    plan: Option<Arc<TreePlan>>,
}

impl SymbolicFactor {
    /// Analyse the pattern of `a` (symmetric, both triangles stored) under the
    /// fill-reducing permutation `perm` (`perm[new] = old`) and its inverse.
    pub fn analyze(a: &CscMatrix, perm: &[usize], iperm: &[usize]) -> Result<Self, LinalgError> {
        let n = a.n;
        let sym = SymbolicSparseColMatRef::new_checked(n, n, &a.col_ptr, None, &a.row_idx);
        let p = PermRef::new_checked(perm, iperm, n);
        let params = CholeskySymbolicParams {
            supernodal_flop_ratio_threshold: SupernodalThreshold::AUTO,
            ..Default::default()
        };
        let symbolic =
            factorize_symbolic_cholesky(sym, Side::Lower, SymmetricOrdering::Custom(p), params)
                .map_err(|e| LinalgError::Symbolic {
                    n,
                    reason: match e {
                        faer::sparse::FaerError::IndexOverflow => "index overflow",
                        faer::sparse::FaerError::OutOfMemory => "out of memory",
                        _ => "unknown faer error",
                    },
                })?;
        let (split, plan, column_split) = match symbolic.raw() {
            SymbolicCholeskyRaw::Supernodal(sup) => {
                let plan = Arc::new(TreePlan::new(sup));
                (TreeSplit::plan(sup, &plan), Some(plan), None)
            }
            SymbolicCholeskyRaw::Simplicial(s) => (
                None,
                None,
                ColumnSplit::plan(s.col_ptr(), s.row_idx()).map(Arc::new),
            ),
        };
        Ok(SymbolicFactor {
            symbolic: Arc::new(symbolic),
            n,
            split,
            column_split,
            plan,
        })
    }

    /// Stored values of $L$ the numeric factorization will allocate (known from the
    /// analysis, before any numeric work).
    pub fn nnz_l(&self) -> usize {
        self.symbolic.len_val()
    }

    /// Floating-point operations of one numeric factorization, from the structure of $L$:
    /// $\sum_j c_j^2$ with $c_j$ the count of column $j$ of $L$ (diagonal included), the
    /// leading term of a left- or right-looking sparse Cholesky (George & Liu 1981, §2.2).
    /// Known after the analysis, before any numeric work; deterministic (the ordering is).
    pub fn flops(&self) -> f64 {
        let sq = |c: usize| (c as f64) * (c as f64);
        match self.symbolic.raw() {
            SymbolicCholeskyRaw::Simplicial(s) => {
                // simplicial L stores the diagonal in each column
                s.col_ptr().windows(2).map(|w| sq(w[1] - w[0])).sum()
            }
            SymbolicCholeskyRaw::Supernodal(s) => (0..s.n_supernodes())
                .map(|k| supernodal::supernode_flops(s, k))
                .sum(),
        }
    }

    /// Bytes of the numeric factorization: the values of $L$ (8 each) plus the work space
    /// the factorization allocates while it runs.
    pub fn numeric_bytes(&self) -> u64 {
        let scratch = self
            .symbolic
            .factorize_numeric_llt_scratch::<f64>(Par::Seq, Default::default())
            .size_bytes() as u64;
        (8 * self.nnz_l() as u64).saturating_add(scratch)
    }

    /// Whether two factors share this analysis (the same allocation).
    pub fn same_as(&self, other: &SymbolicFactor) -> bool {
        Arc::ptr_eq(&self.symbolic, &other.symbolic)
    }
}

/// Owned sparse Cholesky factor of an SPD matrix: numeric values on a shared
/// [`SymbolicFactor`].
pub struct SparseCholesky {
    symbolic: SymbolicFactor,
    values: Vec<f64>,
    n: usize,
}

/// Errors on the first non-finite stored entry of `a`, with its row and column.
fn check_finite(a: &CscMatrix) -> Result<(), LinalgError> {
    for j in 0..a.n {
        for k in a.col_ptr[j]..a.col_ptr[j + 1] {
            if !a.values[k].is_finite() {
                return Err(LinalgError::NonFinite {
                    row: a.row_idx[k],
                    col: j,
                });
            }
        }
    }
    Ok(())
}

/// Parallelism of faer's numeric factorization (a simplicial analysis; a supernodal one runs
/// the tree-parallel factorization of [`super::supernodal`], which splits the subtrees and
/// the root's dense kernels over the pool itself): the caller's rayon pool (`--threads`).
fn numeric_par() -> Par {
    match rayon::current_num_threads() {
        0 | 1 => Par::Seq,
        t => Par::rayon(t),
    }
}

/// Numeric $LL^T$ of `a` into `values` with the symbolic analysis `factor` (same pattern):
/// a supernodal analysis by the tree-parallel factorization ([`super::supernodal`]), a
/// simplicial one by faer's.
fn numeric_llt(
    factor: &SymbolicFactor,
    values: &mut [f64],
    a: &CscMatrix,
) -> Result<(), LinalgError> {
    let symbolic = &*factor.symbolic;
    if let (SymbolicCholeskyRaw::Supernodal(sup), Some(plan)) = (symbolic.raw(), &factor.plan) {
        let identity: Vec<usize>;
        let (perm, iperm) = match symbolic.perm() {
            Some(p) => p.arrays(),
            None => {
                identity = (0..a.n).collect();
                (&identity[..], &identity[..])
            }
        };
        let input = supernodal::Input {
            sym: sup,
            plan,
            col_ptr: &a.col_ptr,
            row_idx: &a.row_idx,
            values: &a.values,
            perm,
            iperm,
        };
        return supernodal::factorize(&input, values)
            .map_err(|index| LinalgError::NotPositiveDefinite { index });
    }
    faer_numeric_llt(symbolic, values, a)
}

/// faer's numeric $LL^T$ (a simplicial analysis; and the reference of the tree-parallel
/// factorization's tests).
fn faer_numeric_llt(
    symbolic: &SymbolicCholesky<usize>,
    values: &mut [f64],
    a: &CscMatrix,
) -> Result<(), LinalgError> {
    let n = a.n;
    let sym = SymbolicSparseColMatRef::new_checked(n, n, &a.col_ptr, None, &a.row_idx);
    let par = numeric_par();
    let mut mem =
        MemBuffer::new(symbolic.factorize_numeric_llt_scratch::<f64>(par, Default::default()));
    let mat = SparseColMatRef::new(sym, &a.values);
    symbolic
        .factorize_numeric_llt(
            values,
            mat,
            Side::Lower,
            LltRegularization::default(),
            par,
            MemStack::new(&mut mem),
            Default::default(),
        )
        .map_err(|e| match e {
            faer::linalg::solvers::LltError::NonPositivePivot { index } => {
                LinalgError::NotPositiveDefinite { index }
            }
        })?;
    Ok(())
}

impl std::fmt::Debug for SparseCholesky {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SparseCholesky {{ n: {}, nnz(L): {} }}",
            self.n,
            self.values.len()
        )
    }
}

impl SparseCholesky {
    /// Factor `a` (symmetric, both triangles stored) with the fill-reducing permutation
    /// `perm` (`perm[new] = old`) and its inverse.
    pub fn factor(a: &CscMatrix, perm: &[usize], iperm: &[usize]) -> Result<Self, LinalgError> {
        check_finite(a)?;
        let symbolic = SymbolicFactor::analyze(a, perm, iperm)?;
        Self::numeric(&symbolic, a)
    }

    /// Numeric factorization of `a` on an existing analysis of its pattern.
    pub fn numeric(symbolic: &SymbolicFactor, a: &CscMatrix) -> Result<Self, LinalgError> {
        if a.n != symbolic.n {
            return Err(LinalgError::DimensionMismatch {
                expected: symbolic.n,
                found: a.n,
            });
        }
        check_finite(a)?;
        let mut values = vec![0.0; symbolic.symbolic.len_val()];
        numeric_llt(symbolic, &mut values, a)?;
        Ok(SparseCholesky {
            symbolic: symbolic.clone(),
            values,
            n: a.n,
        })
    }

    /// The symbolic analysis this factor was computed on.
    pub fn symbolic(&self) -> &SymbolicFactor {
        &self.symbolic
    }

    /// Numeric refactorization of a matrix with the same sparsity pattern as the one this
    /// factor was built from, reusing the symbolic analysis (ordering, elimination tree,
    /// supernodes). Used by the Newton baseline, whose Hessian pattern never changes.
    pub fn refactor(&mut self, a: &CscMatrix) -> Result<(), LinalgError> {
        let n = a.n;
        if n != self.n {
            return Err(LinalgError::DimensionMismatch {
                expected: self.n,
                found: n,
            });
        }
        check_finite(a)?;
        numeric_llt(&self.symbolic, &mut self.values, a)
    }

    pub fn n(&self) -> usize {
        self.n
    }

    /// Whether faer chose its supernodal factorization for this pattern (else simplicial).
    pub fn is_supernodal(&self) -> bool {
        use faer::sparse::linalg::cholesky::SymbolicCholeskyRaw;
        matches!(
            self.symbolic.symbolic.raw(),
            SymbolicCholeskyRaw::Supernodal(_)
        )
    }

    /// $L$ of $PAP^T=LL^T$ entry by entry, in CSC with each column's rows ascending and the
    /// diagonal first: (column pointers, row indices, values). A supernodal factor's blocks
    /// are unpacked column by column (the relaxed supernodes' explicit zeros included: the
    /// pattern stays the filled graph of a symbolic factorization, so its elimination tree
    /// is the parent of each column's first off-diagonal row). What the GPU path uploads
    /// (`gpu::factor::SimplicialFactor::from_lower`), so it does not factor again.
    pub fn lower_csc(&self) -> (Vec<usize>, Vec<usize>, Vec<f64>) {
        use faer::sparse::linalg::cholesky::SymbolicCholeskyRaw;
        match self.symbolic.symbolic.raw() {
            SymbolicCholeskyRaw::Simplicial(s) => {
                let (ptr, rows) = (s.col_ptr(), s.row_idx());
                let mut col_ptr = vec![0];
                let (mut row_idx, mut values) = (vec![], vec![]);
                for j in 0..self.n {
                    let mut col: Vec<(usize, f64)> = (ptr[j]..ptr[j + 1])
                        .map(|p| (rows[p], self.values[p]))
                        .collect();
                    col.sort_by_key(|e| e.0);
                    row_idx.extend(col.iter().map(|e| e.0));
                    values.extend(col.iter().map(|e| e.1));
                    col_ptr.push(row_idx.len());
                }
                (col_ptr, row_idx, values)
            }
            SymbolicCholeskyRaw::Supernodal(s) => {
                let (rptr, vptr) = (s.col_ptr_for_row_idx(), s.col_ptr_for_val());
                let mut col_ptr = Vec::with_capacity(self.n + 1);
                col_ptr.push(0);
                let mut row_idx = Vec::with_capacity(self.values.len());
                let mut values = Vec::with_capacity(self.values.len());
                for k in 0..s.n_supernodes() {
                    let (start, end) = (s.supernode_begin()[k], s.supernode_end()[k]);
                    let size = end - start;
                    let pattern = &s.row_idx()[rptr[k]..rptr[k + 1]];
                    let nrows = size + pattern.len();
                    let block = &self.values[vptr[k]..vptr[k + 1]];
                    for c in 0..size {
                        // the lower part of the diagonal block, then the rows below it
                        for r in c..size {
                            row_idx.push(start + r);
                            values.push(block[c * nrows + r]);
                        }
                        for (i, &r) in pattern.iter().enumerate() {
                            row_idx.push(r);
                            values.push(block[c * nrows + size + i]);
                        }
                        col_ptr.push(row_idx.len());
                    }
                }
                (col_ptr, row_idx, values)
            }
        }
    }

    /// Stored values of $L$ (a measure of fill).
    pub fn nnz_l(&self) -> usize {
        self.values.len()
    }

    /// The two-thread split of a simplicial factor, where it has one.
    pub fn column_split(&self) -> Option<&ColumnSplit> {
        self.symbolic.column_split.as_deref()
    }

    /// The two-thread tree solve of this factor ([`super::tree_solve`] for a supernodal
    /// factor, [`super::simplicial_split`] for a simplicial one) when the current rayon pool
    /// has two threads or more and the factor's tree splits; it gives the bits of faer's
    /// sequential solve (tests `tree_solve_is_faer_bitwise`,
    /// `column_split_solve_is_faer_bitwise`).
    fn tree_solve(&self, rhs: &mut [f64], k: usize, scratch: Option<&mut SolveScratch>) -> bool {
        if rayon::current_num_threads() < 2 {
            return false;
        }
        let perm = self.symbolic.symbolic.perm().map(|p| p.arrays());
        match self.symbolic.symbolic.raw() {
            SymbolicCholeskyRaw::Supernodal(sup) => {
                let Some(split) = self.symbolic.split.as_ref() else {
                    return false;
                };
                let llt = SupernodalLltRef::new(sup, &self.values);
                tree_solve::solve(llt, perm, split, rhs, k);
                true
            }
            SymbolicCholeskyRaw::Simplicial(s) => {
                let Some(split) = self.symbolic.column_split.as_deref() else {
                    return false;
                };
                let l = Columns {
                    col_ptr: s.col_ptr(),
                    values: &self.values,
                };
                let mut own = None;
                let work = match scratch {
                    Some(sc) => sc.split.get_or_insert_with(|| split.scratch(k)),
                    None => own.insert(split.scratch(k)),
                };
                simplicial_split::solve(l, perm, split, rhs, k, work)
            }
        }
    }

    /// Solve $A x = b$ in place for one right-hand side.
    pub fn solve_in_place(&self, rhs: &mut [f64]) {
        debug_assert_eq!(rhs.len(), self.n);
        if self.tree_solve(rhs, 1, None) {
            return;
        }
        let symbolic = &self.symbolic.symbolic;
        let llt = LltRef::new(symbolic, &self.values);
        let mut mem = MemBuffer::new(symbolic.solve_in_place_scratch::<f64>(1, Par::Seq));
        let m = MatMut::from_column_major_slice_mut(rhs, self.n, 1);
        llt.solve_in_place_with_conj(Conj::No, m, Par::Seq, MemStack::new(&mut mem));
    }

    /// Solve $A X = B$ in place for `k` right-hand sides stored column-major in `rhs`.
    pub fn solve_many_in_place(&self, rhs: &mut [f64], k: usize) {
        let mut scratch = self.solve_scratch(k);
        self.solve_many_with(rhs, k, &mut scratch);
    }

    /// Work space for solves with up to `k` right-hand sides ([`Self::solve_many_with`]).
    pub fn solve_scratch(&self, k: usize) -> SolveScratch {
        let req = self
            .symbolic
            .symbolic
            .solve_in_place_scratch::<f64>(k, Par::Seq);
        SolveScratch {
            mem: MemBuffer::new(req),
            k,
            split: None,
        }
    }

    /// [`Self::solve_many_in_place`] in a given work space (no allocation when `scratch`
    /// was made for at least `k` right-hand sides): one pass over the factor for all `k`
    /// columns (forward and back substitution).
    pub fn solve_many_with(&self, rhs: &mut [f64], k: usize, scratch: &mut SolveScratch) {
        if !self.tree_solve(rhs, k, Some(scratch)) {
            self.solve_many_seq(rhs, k, scratch);
        }
    }

    /// [`Self::solve_many_with`] on this thread only (no split over the pool; the same bits).
    pub fn solve_many_seq(&self, rhs: &mut [f64], k: usize, scratch: &mut SolveScratch) {
        debug_assert_eq!(rhs.len(), self.n * k);
        if scratch.k < k {
            *scratch = self.solve_scratch(k);
        }
        let llt = LltRef::new(&self.symbolic.symbolic, &self.values);
        let m = MatMut::from_column_major_slice_mut(rhs, self.n, k);
        llt.solve_in_place_with_conj(Conj::No, m, Par::Seq, MemStack::new(&mut scratch.mem));
    }
}

/// Work space of [`SparseCholesky::solve_many_with`] (faer's solve stack).
pub struct SolveScratch {
    mem: MemBuffer,
    k: usize,
    /// The simplicial split solve's rows and border buffers (made at its first use).
    split: Option<SplitScratch>,
}

#[cfg(test)]
mod tests {
    use super::super::ordering::nested_dissection;
    use super::super::test_matrices::{hex_laplacian, same_bits};
    use super::*;

    /// The cube grid with `m` nodes a side.
    fn grid_laplacian(m: usize, shift: f64) -> CscMatrix {
        hex_laplacian([m - 1; 3], shift)
    }

    #[test]
    fn factor_solves_to_round_off() {
        let a = grid_laplacian(7, 0.5);
        let (p, ip) = nested_dissection(&a).unwrap();
        let f = SparseCholesky::factor(&a, &p, &ip).unwrap();
        let xs: Vec<f64> = (0..a.n).map(|i| ((i * 7919) % 13) as f64 - 6.0).collect();
        let mut b = vec![0.0; a.n];
        a.matvec(&xs, &mut b);
        let mut x = b.clone();
        f.solve_in_place(&mut x);
        let err = xs
            .iter()
            .zip(&x)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(err < 1e-10, "solve error {err}");
        // many RHS
        let mut b2 = [b.clone(), b].concat();
        f.solve_many_in_place(&mut b2, 2);
        let err2 = xs
            .iter()
            .zip(&b2[a.n..])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(err2 < 1e-10);
    }

    /// The determinism contract of the tree-parallel factorization ([`super::supernodal`]):
    /// the factor's values are the same bits with 1, 2, 3, 5 and 8 threads (a 24³ grid: its
    /// subtrees run as tasks, and its top separator is a dense 576-column supernode whose
    /// updates are formed by the pool and whose dense kernels split).
    #[test]
    fn threaded_factorization_is_bitwise_sequential() {
        let a = grid_laplacian(24, 0.5);
        let (p, ip) = nested_dissection(&a).unwrap();
        let symbolic = SymbolicFactor::analyze(&a, &p, &ip).unwrap();
        let with = |t: usize| {
            crate::linalg::test_matrices::on_threads(t, || {
                SparseCholesky::numeric(&symbolic, &a).unwrap()
            })
        };
        let seq = with(1);
        assert!(seq.is_supernodal());
        for t in [2, 3, 5, 8] {
            assert!(
                same_bits(&seq.values, &with(t).values),
                "{t} threads changed the factor's bits"
            );
        }
    }

    /// The tree-parallel factorization ([`super::supernodal`]) is faer's factor to
    /// round-off (a 24³ grid and a 3-D elasticity-like block matrix of a tet box), and
    /// stops at faer's first non-positive pivot on an indefinite matrix.
    #[test]
    fn tree_factorization_matches_faer_to_round_off() {
        let a = grid_laplacian(24, 0.5);
        let (p, ip) = nested_dissection(&a).unwrap();
        let symbolic = SymbolicFactor::analyze(&a, &p, &ip).unwrap();
        let ours = SparseCholesky::numeric(&symbolic, &a).unwrap();
        assert!(ours.is_supernodal());
        let mut theirs = vec![0.0; ours.values.len()];
        faer_numeric_llt(&symbolic.symbolic, &mut theirs, &a).unwrap();
        let scale = theirs.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let err = ours
            .values
            .iter()
            .zip(&theirs)
            .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
        assert!(
            scale > 0.0 && err <= 1e-13 * scale,
            "max |ΔL| {err:e} of {scale:e}"
        );
        // shifted into indefiniteness: the same first failing pivot as faer's
        let mut bad = a.clone();
        bad.add_diagonal(&vec![-3.0; bad.n]);
        let ours = SparseCholesky::numeric(&symbolic, &bad).unwrap_err();
        let mut theirs = vec![0.0; symbolic.nnz_l()];
        let theirs = faer_numeric_llt(&symbolic.symbolic, &mut theirs, &bad).unwrap_err();
        assert!(
            matches!(ours, LinalgError::NotPositiveDefinite { .. }),
            "{ours:?}"
        );
        assert_eq!(format!("{ours:?}"), format!("{theirs:?}"));
    }

    /// The two-thread tree solve ([`super::tree_solve`]) gives faer's sequential bits for
    /// one and three right-hand sides, on 2 and 3 threads (a 24³ grid, whose tree splits
    /// under its top separator).
    #[test]
    fn tree_solve_is_faer_bitwise() {
        let a = grid_laplacian(24, 0.5);
        let (p, ip) = nested_dissection(&a).unwrap();
        let f = SparseCholesky::factor(&a, &p, &ip).unwrap();
        assert!(f.is_supernodal());
        assert!(f.symbolic.split.is_some(), "the grid's tree does not split");
        for k in [1, 3] {
            let b: Vec<f64> = (0..a.n * k).map(|i| (i as f64 * 0.61).sin()).collect();
            let solve = |t: usize| {
                let mut x = b.clone();
                crate::linalg::test_matrices::on_threads(t, || f.solve_many_in_place(&mut x, k));
                x
            };
            let seq = solve(1);
            assert!(seq.iter().zip(&b).any(|(x, y)| x != y));
            for t in [2, 3] {
                assert!(
                    same_bits(&seq, &solve(t)),
                    "k = {k}, {t} threads: the tree solve changed the bits"
                );
            }
        }
    }

    /// The two-thread split of a simplicial factor ([`super::super::simplicial_split`])
    /// gives faer's sequential bits for one to four right-hand sides, on 2 and 3 threads: a
    /// 9³ grid (split under its top separator) and a 6³ grid, whose balanced cut lies
    /// deeper, so the top's sweep interleaves its columns with the border products. A path
    /// has no split.
    #[test]
    fn column_split_solve_is_faer_bitwise() {
        for (m, deeper) in [(9, false), (6, true)] {
            let a = grid_laplacian(m, 0.5);
            let (p, ip) = nested_dissection(&a).unwrap();
            let f = SparseCholesky::factor(&a, &p, &ip).unwrap();
            assert!(!f.is_supernodal());
            let SymbolicCholeskyRaw::Simplicial(s) = f.symbolic.symbolic.raw() else {
                unreachable!()
            };
            let split = ColumnSplit::plan_from(s.col_ptr(), s.row_idx(), 0).expect("no split");
            assert_eq!(split.interleaves(), deeper, "{m}³ grid");
            let l = Columns {
                col_ptr: s.col_ptr(),
                values: &f.values,
            };
            let perm = f.symbolic.symbolic.perm().map(|p| p.arrays());
            for k in 1..=4 {
                let b: Vec<f64> = (0..a.n * k).map(|i| (i as f64 * 0.61).sin()).collect();
                let mut seq = b.clone();
                f.solve_many_seq(&mut seq, k, &mut f.solve_scratch(k));
                assert!(seq.iter().zip(&b).any(|(x, y)| x != y));
                for t in [2, 3] {
                    let mut par = b.clone();
                    let mut work = split.scratch(k);
                    assert!(crate::linalg::test_matrices::on_threads(t, || {
                        simplicial_split::solve(l, perm, &split, &mut par, k, &mut work)
                    }));
                    assert!(
                        same_bits(&seq, &par),
                        "{m}³, k = {k}, {t} threads: the split changed the bits"
                    );
                }
            }
        }
        // a path's elimination tree is a chain: nothing to split
        let n = 50;
        let conn: Vec<usize> = (0..n - 1).flat_map(|i| [i, i + 1]).collect();
        let ptr: Vec<usize> = (0..n).map(|e| 2 * e).collect();
        let mut path = CscMatrix::pattern_from_elements(n, &conn, &ptr);
        for i in 0..n {
            path.add(i, i, 3.0);
        }
        let id: Vec<usize> = (0..n).collect();
        let f = SparseCholesky::factor(&path, &id, &id).unwrap();
        let SymbolicCholeskyRaw::Simplicial(s) = f.symbolic.symbolic.raw() else {
            unreachable!()
        };
        assert!(ColumnSplit::plan_from(s.col_ptr(), s.row_idx(), 0).is_none());
    }

    #[test]
    fn nested_dissection_fill_is_smaller_than_identity() {
        let a = grid_laplacian(9, 0.5);
        let id: Vec<usize> = (0..a.n).collect();
        let f_id = SparseCholesky::factor(&a, &id, &id).unwrap();
        let (p, ip) = nested_dissection(&a).unwrap();
        let f_nd = SparseCholesky::factor(&a, &p, &ip).unwrap();
        assert!(
            f_nd.nnz_l() < f_id.nnz_l(),
            "{} vs {}",
            f_nd.nnz_l(),
            f_id.nnz_l()
        );
    }

    #[test]
    fn indefinite_matrix_is_reported() {
        let mut a = grid_laplacian(4, 0.0);
        let n = a.n;
        a.add_diagonal(&vec![-100.0; n]);
        let id: Vec<usize> = (0..n).collect();
        assert!(matches!(
            SparseCholesky::factor(&a, &id, &id),
            Err(LinalgError::NotPositiveDefinite { .. })
        ));
    }
}
