//! The factor the GPU path applies (spec §2.8, §5.2): a simplicial $LL^T$ of $P\hat AP^T$
//! (up-looking, with the elimination tree), its level schedules for triangular solves on the
//! device, and the symbolic pattern of the sparse inverse factor $S=L^{-1}$ (column $j$ is
//! supported on $j$ and its elimination-tree ancestors, Eq. 32).
//!
//! A simplicial factor is used here (not the CPU path's supernodal one) because the device
//! needs $L$ explicitly, entry by entry; the ordering is the same METIS nested dissection.

use crate::linalg::{CscMatrix, LinalgError};

/// $L$ of $P A P^T = LL^T$ in CSC (rows ascending, diagonal first) with its elimination tree.
#[derive(Clone, Debug)]
pub struct SimplicialFactor {
    pub n: usize,
    /// Column pointers of $L$.
    pub col_ptr: Vec<usize>,
    /// Row indices of $L$ (ascending per column, the diagonal first).
    pub row_idx: Vec<usize>,
    /// Values of $L$.
    pub values: Vec<f64>,
    /// Elimination tree parent (`usize::MAX` at a root).
    pub parent: Vec<usize>,
    /// `perm[new] = old`.
    pub perm: Vec<usize>,
    /// `iperm[old] = new`.
    pub iperm: Vec<usize>,
}

const NONE: usize = usize::MAX;

/// Upper triangle (row ≤ column) of $PAP^T$ as CSC columns, rows ascending.
fn permuted_upper(
    a: &CscMatrix,
    perm: &[usize],
    iperm: &[usize],
) -> (Vec<usize>, Vec<usize>, Vec<f64>) {
    let n = a.n;
    let mut ptr = vec![0usize; n + 1];
    let mut rows = Vec::new();
    let mut vals = Vec::new();
    for (k, &old_col) in perm.iter().enumerate() {
        let mut col: Vec<(usize, f64)> = (a.col_ptr[old_col]..a.col_ptr[old_col + 1])
            .map(|p| (iperm[a.row_idx[p]], a.values[p]))
            .filter(|&(i, _)| i <= k)
            .collect();
        col.sort_by_key(|&(i, _)| i);
        for (i, v) in col {
            rows.push(i);
            vals.push(v);
        }
        ptr[k + 1] = rows.len();
    }
    (ptr, rows, vals)
}

/// Elimination tree of the upper-triangle pattern (path compression through `ancestor`).
fn etree(n: usize, ptr: &[usize], rows: &[usize]) -> Vec<usize> {
    let mut parent = vec![NONE; n];
    let mut ancestor = vec![NONE; n];
    for k in 0..n {
        for &r in &rows[ptr[k]..ptr[k + 1]] {
            let mut i = r;
            while i != NONE && i < k {
                let next = ancestor[i];
                ancestor[i] = k;
                if next == NONE {
                    parent[i] = k;
                }
                i = next;
            }
        }
    }
    parent
}

/// Nonzero pattern of row `k` of $L$ (excluding the diagonal) in topological order
/// (descendants before ancestors), written to `stack[top..]`; returns `top`.
fn ereach(
    k: usize,
    ptr: &[usize],
    rows: &[usize],
    parent: &[usize],
    mark: &mut [usize],
    stack: &mut [usize],
) -> usize {
    let n = stack.len();
    let mut top = n;
    mark[k] = k;
    let mut path = Vec::new();
    for &r in &rows[ptr[k]..ptr[k + 1]] {
        let mut i = r;
        if i > k {
            continue;
        }
        path.clear();
        while mark[i] != k {
            path.push(i);
            mark[i] = k;
            i = parent[i];
        }
        for &p in path.iter().rev() {
            top -= 1;
            stack[top] = p;
        }
    }
    top
}

/// Entries of each column of $L$ (the diagonal included) from the row patterns of the
/// upper triangle `ptr`/`rows` and the elimination tree: row $k$ of $L$ is the
/// elimination-tree reach of row $k$ of $A$ (`ereach`).
fn column_counts(ptr: &[usize], rows: &[usize], parent: &[usize]) -> Vec<usize> {
    let n = parent.len();
    let mut mark = vec![NONE; n];
    let mut stack = vec![0usize; n];
    let mut count = vec![1usize; n];
    for k in 0..n {
        let top = ereach(k, ptr, rows, parent, &mut mark, &mut stack);
        for &i in &stack[top..] {
            count[i] += 1;
        }
    }
    count
}

/// Depth of every column in an elimination forest whose parents have larger indices (0 at
/// a root), filled from the roots down.
fn forest_depths(parent: &[usize]) -> Vec<usize> {
    let mut depth = vec![0usize; parent.len()];
    for j in (0..parent.len()).rev() {
        if parent[j] != NONE {
            depth[j] = depth[parent[j]] + 1;
        }
    }
    depth
}

/// The sizes of the factor of $PAP^T$ and of its explicit inverse, from `a`'s pattern alone
/// (no numeric factorization): what [`SimplicialFactor::new`] would store. For a memory
/// estimate before a run (`examples/device_memory.rs`); equal to the numeric factor's
/// [`SimplicialFactor::nnz`] and [`SimplicialFactor::inverse_nnz`] (unit test).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FactorSizes {
    /// Rows of the factored matrix.
    pub n: usize,
    /// Stored entries of $L$ (the diagonal included).
    pub nnz_l: usize,
    /// Stored entries of $S=L^{-1}$: $\sum_j(1+|\mathrm{anc}(j)|)$.
    pub nnz_s: usize,
    /// Height of the elimination forest (its deepest column's depth + 1).
    pub height: usize,
}

impl FactorSizes {
    /// The symbolic analysis of $PAP^T$ for the ordering `perm[new] = old`, `iperm[old] = new`.
    pub fn new(a: &CscMatrix, perm: &[usize], iperm: &[usize]) -> Self {
        let (ptr, rows, _) = permuted_upper(a, perm, iperm);
        let parent = etree(a.n, &ptr, &rows);
        let depth = forest_depths(&parent);
        FactorSizes {
            n: a.n,
            nnz_l: column_counts(&ptr, &rows, &parent).iter().sum(),
            nnz_s: depth.iter().map(|d| d + 1).sum(),
            height: depth.iter().max().map_or(0, |d| d + 1),
        }
    }
}

impl SimplicialFactor {
    /// Factor $PAP^T$ for a symmetric `a` (both triangles stored) and the ordering
    /// `perm[new] = old`, `iperm[old] = new`. Errors name the failing (permuted) pivot.
    pub fn new(a: &CscMatrix, perm: &[usize], iperm: &[usize]) -> Result<Self, LinalgError> {
        let n = a.n;
        let (ptr, rows, vals) = permuted_upper(a, perm, iperm);
        let parent = etree(n, &ptr, &rows);
        let count = column_counts(&ptr, &rows, &parent);
        let mut mark = vec![NONE; n];
        let mut stack = vec![0usize; n];
        let mut col_ptr = vec![0usize; n + 1];
        for j in 0..n {
            col_ptr[j + 1] = col_ptr[j] + count[j];
        }
        let nnz = col_ptr[n];
        let mut row_idx = vec![0usize; nnz];
        let mut values = vec![0.0; nnz];
        let mut next: Vec<usize> = col_ptr[..n].to_vec();
        let mut x = vec![0.0; n];
        mark.iter_mut().for_each(|m| *m = NONE);
        for k in 0..n {
            let top = ereach(k, &ptr, &rows, &parent, &mut mark, &mut stack);
            for p in ptr[k]..ptr[k + 1] {
                x[rows[p]] = vals[p];
            }
            let mut d = x[k];
            x[k] = 0.0;
            for &i in &stack[top..] {
                let lki = x[i] / values[col_ptr[i]];
                x[i] = 0.0;
                for p in col_ptr[i] + 1..next[i] {
                    x[row_idx[p]] -= values[p] * lki;
                }
                d -= lki * lki;
                row_idx[next[i]] = k;
                values[next[i]] = lki;
                next[i] += 1;
            }
            if d.is_nan() || d <= 0.0 || d.is_infinite() {
                return Err(LinalgError::NotPositiveDefinite { index: k });
            }
            row_idx[next[k]] = k;
            values[next[k]] = d.sqrt();
            next[k] += 1;
        }
        Ok(SimplicialFactor {
            n,
            col_ptr,
            row_idx,
            values,
            parent,
            perm: perm.to_vec(),
            iperm: iperm.to_vec(),
        })
    }

    /// The factor from an existing $L$ of $PAP^T$ in CSC (each column's rows ascending, the
    /// diagonal first: [`crate::linalg::cholesky::SparseCholesky::lower_csc`], the CPU path's
    /// factor, so the GPU path does not factor again); the elimination tree is each column's
    /// first off-diagonal row.
    pub fn from_lower(
        (col_ptr, row_idx, values): (Vec<usize>, Vec<usize>, Vec<f64>),
        perm: &[usize],
        iperm: &[usize],
    ) -> Self {
        let n = col_ptr.len() - 1;
        let parent = (0..n)
            .map(|j| {
                let (a, b) = (col_ptr[j], col_ptr[j + 1]);
                debug_assert!(b > a && row_idx[a] == j, "column {j}: diagonal first");
                if b - a > 1 {
                    row_idx[a + 1]
                } else {
                    NONE
                }
            })
            .collect();
        SimplicialFactor {
            n,
            col_ptr,
            row_idx,
            values,
            parent,
            perm: perm.to_vec(),
            iperm: iperm.to_vec(),
        }
    }

    /// Stored entries of $L$.
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// Solve $(P^TLL^TP)x=b$ on the host (reference for the device paths).
    pub fn solve(&self, b: &[f64]) -> Vec<f64> {
        let n = self.n;
        let mut y: Vec<f64> = (0..n).map(|k| b[self.perm[k]]).collect();
        for j in 0..n {
            let s = self.col_ptr[j];
            y[j] /= self.values[s];
            for p in s + 1..self.col_ptr[j + 1] {
                y[self.row_idx[p]] -= self.values[p] * y[j];
            }
        }
        for j in (0..n).rev() {
            let s = self.col_ptr[j];
            let mut v = y[j];
            for p in s + 1..self.col_ptr[j + 1] {
                v -= self.values[p] * y[self.row_idx[p]];
            }
            y[j] = v / self.values[s];
        }
        (0..n).map(|i| y[self.iperm[i]]).collect()
    }

    /// $L$ as CSR with the diagonal last in each row (the lower solve's row form), plus the
    /// map from CSR position to CSC position (for refreshing values after a refactor).
    pub fn lower_csr(&self) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
        transpose_pattern(self.n, &self.col_ptr, &self.row_idx)
    }

    /// Level schedule of the lower solve (row `r` after every row it reads) and of the upper
    /// solve (row `r` of $L^T$ after every row it reads), each as (level pointers, rows).
    pub fn levels(&self) -> (LevelSchedule, LevelSchedule) {
        let n = self.n;
        let mut lo = vec![0usize; n];
        for j in 0..n {
            for p in self.col_ptr[j] + 1..self.col_ptr[j + 1] {
                let i = self.row_idx[p];
                lo[i] = lo[i].max(lo[j] + 1);
            }
        }
        let mut up = vec![0usize; n];
        for j in (0..n).rev() {
            for p in self.col_ptr[j] + 1..self.col_ptr[j + 1] {
                up[j] = up[j].max(up[self.row_idx[p]] + 1);
            }
        }
        (bucket(&lo), bucket(&up))
    }

    /// Pattern of $S=L^{-1}$ in CSC: column $j$ is the elimination-tree path from $j$ to its
    /// root (ascending). Returns (column pointers, row indices).
    pub fn inverse_pattern(&self) -> (Vec<usize>, Vec<usize>) {
        let mut ptr = vec![0usize];
        let mut rows = Vec::new();
        for j in 0..self.n {
            let mut i = j;
            while i != NONE {
                rows.push(i);
                i = self.parent[i];
            }
            ptr.push(rows.len());
        }
        (ptr, rows)
    }

    /// Depth of every column in the elimination forest (0 at a root): column $j$ of $S$ has
    /// `depth[j] + 1` entries, and the ancestor $k$ of $j$ sits at position
    /// `depth[j] - depth[k]` of $j$'s path.
    pub fn depths(&self) -> Vec<usize> {
        forest_depths(&self.parent)
    }

    /// Columns grouped by elimination-tree depth (roots first), with the depths: the launch
    /// schedule of [`crate::gpu::pipeline::DeviceFactor`]'s top-down build of $S$.
    pub fn columns_by_depth(&self) -> (LevelSchedule, Vec<usize>) {
        let depth = self.depths();
        (bucket(&depth), depth)
    }

    /// A postorder of the elimination forest, children in ascending order: (`post`, the
    /// columns in postorder; `first`, where each column's subtree starts in `post`; `size`,
    /// each subtree's column count, itself included). The descendants of $i$ are
    /// `post[first[i]..first[i] + size[i]]` with $i$ last: the columns of row $i$ of $S$
    /// (an entry $S_{ij}$ exists iff $i$ is on $j$'s path). When the numbering already is such
    /// a postorder `post` is the identity (a chain's natural order; nested dissection's
    /// numberings generally are not).
    pub fn postorder(&self) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
        let n = self.n;
        // children have smaller indices than their parents: ascending order completes
        // every subtree before its parent adds it
        let mut size = vec![1usize; n];
        for j in 0..n {
            if self.parent[j] != NONE {
                size[self.parent[j]] += size[j];
            }
        }
        // top down (descending index: parents first), each block filled from its end, so
        // the largest child sits just before its parent and siblings ascend
        let mut first = vec![0usize; n];
        let mut end = vec![0usize; n]; // one past the free end of each column's block
        let mut roots_end = n;
        for j in (0..n).rev() {
            let stop = match self.parent[j] {
                NONE => &mut roots_end,
                p => &mut end[p],
            };
            first[j] = *stop - size[j];
            *stop = first[j];
            end[j] = first[j] + size[j] - 1; // the column itself takes its block's last slot
        }
        let mut post = vec![0usize; n];
        for j in 0..n {
            post[first[j] + size[j] - 1] = j;
        }
        (post, first, size)
    }

    /// Stored entries of $S$ without building it: $\sum_j (1 + |\mathrm{anc}(j)|)$.
    pub fn inverse_nnz(&self) -> usize {
        self.depths().iter().map(|d| d + 1).sum()
    }
}

/// Rows grouped by level: (level pointers, rows in level order).
pub type LevelSchedule = (Vec<usize>, Vec<usize>);

/// Rows grouped by level.
fn bucket(level: &[usize]) -> LevelSchedule {
    let nl = level.iter().max().map_or(0, |m| m + 1);
    let mut ptr = vec![0usize; nl + 1];
    for &l in level {
        ptr[l + 1] += 1;
    }
    for l in 0..nl {
        ptr[l + 1] += ptr[l];
    }
    let mut fill = ptr.clone();
    let mut rows = vec![0usize; level.len()];
    for (r, &l) in level.iter().enumerate() {
        rows[fill[l]] = r;
        fill[l] += 1;
    }
    (ptr, rows)
}

/// Transpose a CSC pattern: (row pointers, column indices, map CSR position -> CSC position).
pub fn transpose_pattern(
    n: usize,
    col_ptr: &[usize],
    row_idx: &[usize],
) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let mut rp = vec![0usize; n + 1];
    for &r in row_idx {
        rp[r + 1] += 1;
    }
    for i in 0..n {
        rp[i + 1] += rp[i];
    }
    let mut fill = rp.clone();
    let mut cols = vec![0usize; row_idx.len()];
    let mut map = vec![0usize; row_idx.len()];
    for j in 0..n {
        for p in col_ptr[j]..col_ptr[j + 1] {
            let r = row_idx[p];
            cols[fill[r]] = j;
            map[fill[r]] = p;
            fill[r] += 1;
        }
    }
    (rp, cols, map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linalg::ordering::nested_dissection;
    use crate::linalg::SparseCholesky;

    /// A `w`³ grid of springs (7-point stencil) with mass on the diagonal.
    fn grid3(w: usize) -> CscMatrix {
        let id = |i: usize, j: usize, k: usize| (i * w + j) * w + k;
        let mut conn = vec![];
        for i in 0..w {
            for j in 0..w {
                for k in 0..w {
                    let p = id(i, j, k);
                    for (di, dj, dk) in [(1, 0, 0), (0, 1, 0), (0, 0, 1)] {
                        if i + di < w && j + dj < w && k + dk < w {
                            conn.extend([p, id(i + di, j + dj, k + dk)]);
                        }
                    }
                }
            }
        }
        let ptr: Vec<usize> = (0..=conn.len() / 2).map(|e| 2 * e).collect();
        let mut a = CscMatrix::pattern_from_elements(w * w * w, &conn, &ptr);
        for e in conn.chunks(2) {
            a.add(e[0], e[0], 1.0);
            a.add(e[1], e[1], 1.0);
            a.add(e[0], e[1], -1.0);
            a.add(e[1], e[0], -1.0);
        }
        a.add_diagonal(&vec![0.05; w * w * w]);
        a
    }

    /// The CPU path's factor unpacked ([`SimplicialFactor::from_lower`]) is the simplicial
    /// factor: every entry of the simplicial $L$ is in its pattern with the same value (to
    /// 1e-12 of the column's diagonal), any other entry is an explicit zero of a relaxed
    /// supernode, both solve alike, and $S$'s pattern holds at least the simplicial one's;
    /// on a pattern faer factors simplicially and on one it factors by supernodes.
    #[test]
    fn the_cpu_factor_unpacked_is_the_simplicial_factor() {
        let mut kinds = vec![];
        for w in [3, 14] {
            let a = grid3(w);
            let (p, ip) = nested_dissection(&a).unwrap();
            let want = SimplicialFactor::new(&a, &p, &ip).unwrap();
            let cpu = SparseCholesky::factor(&a, &p, &ip).unwrap();
            kinds.push(cpu.is_supernodal());
            let got = SimplicialFactor::from_lower(cpu.lower_csc(), &p, &ip);
            for j in 0..a.n {
                let col = |f: &SimplicialFactor| -> Vec<(usize, f64)> {
                    (f.col_ptr[j]..f.col_ptr[j + 1])
                        .map(|q| (f.row_idx[q], f.values[q]))
                        .collect()
                };
                let (w_col, g_col) = (col(&want), col(&got));
                assert_eq!(g_col[0].0, j, "column {j}: diagonal first");
                let scale = w_col[0].1.abs();
                for (r, v) in &g_col {
                    let expect = w_col.iter().find(|e| e.0 == *r).map_or(0.0, |e| e.1);
                    assert!(
                        (v - expect).abs() <= 1e-12 * scale,
                        "L[{r},{j}]: {v} vs {expect}"
                    );
                }
                for (r, _) in &w_col {
                    assert!(g_col.iter().any(|e| e.0 == *r), "L[{r},{j}] missing");
                }
            }
            let b: Vec<f64> = (0..a.n).map(|i| (i % 7) as f64 - 3.0).collect();
            let (x1, x2) = (want.solve(&b), got.solve(&b));
            let e = x1
                .iter()
                .zip(&x2)
                .map(|(p, q)| (p - q).abs())
                .fold(0.0, f64::max);
            let s = x1.iter().map(|v| v.abs()).fold(0.0, f64::max);
            assert!(e <= 1e-12 * s, "w = {w}: solves differ by {e:e}");
            assert!(got.inverse_nnz() >= want.inverse_nnz());
        }
        assert_eq!(kinds, vec![false, true], "simplicial and supernodal cases");
    }

    /// The symbolic sizes equal what the numeric factor stores: nnz(L), nnz(S) counted from
    /// $S$'s built column pattern, and the forest's height (its number of depth levels).
    #[test]
    fn factor_sizes_are_the_numeric_factors() {
        for w in [2, 5, 9] {
            let a = grid3(w);
            let (p, ip) = nested_dissection(&a).unwrap();
            let f = SimplicialFactor::new(&a, &p, &ip).unwrap();
            let got = FactorSizes::new(&a, &p, &ip);
            let (sp, _) = f.inverse_pattern();
            let want = FactorSizes {
                n: a.n,
                nnz_l: f.nnz(),
                nnz_s: sp[a.n],
                height: f.columns_by_depth().0 .0.len() - 1,
            };
            assert_eq!(got, want, "w = {w}");
            assert!(got.nnz_s > got.nnz_l && got.height > 1, "w = {w}: {got:?}");
        }
    }

    /// Row $i$ of $S$ holds the descendants of $i$: the postorder's ranges are the rows of
    /// the transposed column pattern as sets (and in the same ascending order where the
    /// numbering is a postorder), under nested dissection and the grid's natural order.
    #[test]
    fn postorder_ranges_are_the_rows_of_s() {
        let a = grid3(6);
        let (p, ip) = nested_dissection(&a).unwrap();
        let natural: Vec<usize> = (0..a.n).collect();
        for (perm, iperm) in [(&p, &ip), (&natural, &natural)] {
            let f = SimplicialFactor::new(&a, perm, iperm).unwrap();
            let (sp, sr) = f.inverse_pattern();
            let (rp, cols, _) = transpose_pattern(f.n, &sp, &sr);
            let (post, first, size) = f.postorder();
            let mut sorted = post.clone();
            sorted.sort_unstable();
            assert!(
                sorted.iter().enumerate().all(|(k, &c)| k == c),
                "a permutation"
            );
            let identity = post.iter().enumerate().all(|(k, &c)| k == c);
            for i in 0..f.n {
                assert_eq!(
                    post[first[i] + size[i] - 1],
                    i,
                    "column {i} ends its subtree"
                );
                let range = &post[first[i]..first[i] + size[i]];
                let row = &cols[rp[i]..rp[i + 1]];
                let (mut x, mut y) = (range.to_vec(), row.to_vec());
                x.sort_unstable();
                y.sort_unstable();
                assert_eq!(x, y, "row {i}");
                if identity {
                    assert_eq!(range, row, "row {i}: ascending like the transpose");
                }
            }
        }
    }
}
