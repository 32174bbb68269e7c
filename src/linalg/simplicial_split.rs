//! Two-way tree-parallel triangular solves with a simplicial (column by column) $LL^T$
//! factor, the same bits as faer's sequential solve: the column analogue of
//! [`super::tree_solve`] (issue 37: two threads that pay). The PD per-axis factors of mid-size
//! scenes (the Plant's ~10k free nodes a axis) are simplicial, and their solves — the global
//! step and the Newton–Krylov phase's preconditioner — were the largest serial part of a
//! two-thread run.
//!
//! faer's forward substitution $Ly=b$ visits the columns $j=0,1,\dots$:
//! $x_j\leftarrow x_j\cdot(1/L_{jj})$, then $x_i\leftarrow x_i-L_{ij}x_j$ for the rows $i>j$
//! of column $j$, which are ancestors of $j$ in the elimination tree (parent of $j$: the
//! smallest of those rows). A cut of the tree into disjoint subtrees, binned into two groups
//! $\mathcal L$, $\mathcal R$ of about equal work, leaves the top $\mathcal T$: the columns
//! above the cut, closed under taking ancestors. The cut starts at the children of the first
//! node with two or more children and moves down where that evens the work out
//! (`balanced_cut`). $\mathcal L$ and $\mathcal R$ touch each other's rows nowhere; they run
//! on two threads, each on its own rows (laid out side by side), each writing its products
//! $L_{ij}x_j$ for rows $i\in\mathcal T$ into its border buffer. After the join one sweep in
//! column order (planned once) runs $\mathcal T$'s columns and subtracts the border products
//! where the sequential loop would. Every entry of $x$ so receives faer's subtractions in
//! faer's order. The back substitution
//! $x_j\leftarrow(x_j-\sum_i L_{ij}x_i)\cdot(1/L_{jj})$, the sum accumulated from zero over
//! column $j$'s stored rows in reverse, runs $\mathcal T$ first, then $\mathcal L$ and
//! $\mathcal R$ at once (a column reads only its ancestors: its own group's rows and
//! $\mathcal T$'s final ones). Test `column_split_solve_is_faer_bitwise`.
//!
//! Measured on the Plant's PD factor (9,878 rows, 306,768 values; 2-core VM; session 26,
//! `examples/solve_timing.rs split`): three right-hand sides 0.85 ms sequential, 0.65 ms split
//! (rows 4,953 / 4,842 / 83). The top's split alone was 60/40 (0.73 ms); each thread runs its
//! half about 15 % slower than the sequential loop runs it.
//!
//! Liu, "The role of elimination trees in sparse factorization", SIAM J. Matrix Anal. Appl.
//! 11 (1990): the structure of column $j$ of $L$ lies among $j$'s ancestors; disjoint subtrees
//! are independent.

/// Below this many stored values of $L$ the solve stays sequential: the joins, the layout
/// copies and the top's sweep cost a fixed tens of microseconds a solve. Set a factor of three
/// under the Plant's 306,768 values (split measured 1.31x there); not measured in between: of
/// the frontier's scenes' PD factors the other simplicial ones hold under 40,000 values.
const MIN_PARALLEL_VALUES: usize = 100_000;

/// The split of a simplicial factor's columns into $\mathcal L$, $\mathcal R$, $\mathcal T$,
/// the row layout of the solve ($\mathcal L$'s rows, then $\mathcal R$'s, then $\mathcal T$'s,
/// each group in increasing order) and the merge of the border products. Planned once per
/// symbolic analysis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnSplit {
    /// Columns of $\mathcal L$, $\mathcal R$, $\mathcal T$, each increasing.
    groups: [Vec<usize>; 3],
    /// Layout row of each row of the (permuted) system.
    layout: Vec<usize>,
    /// Layout row of each stored entry of $L$ (the factor's entry positions).
    entry_row: Vec<usize>,
    /// First layout rows of $\mathcal R$ and $\mathcal T$.
    row_r: usize,
    row_t: usize,
    /// Border products of $\mathcal L$ and $\mathcal R$ (entries whose row is in
    /// $\mathcal T$), counted.
    border: [usize; 2],
    /// The top's sweep in the sequential column order: a border product's subtraction
    /// (group 0 or 1, slot in that group's border, layout row minus `row_t`) or a column of
    /// the top (2, column, 0).
    merge: Vec<(u8, usize, usize)>,
}

impl ColumnSplit {
    /// The split of the simplicial factor with column pointers `col_ptr` and row indices
    /// `row_idx` (each column's diagonal first, as faer stores it), or `None` where the tree
    /// is a chain (no node with two children) or the factor is too small to pay.
    pub fn plan(col_ptr: &[usize], row_idx: &[usize]) -> Option<ColumnSplit> {
        Self::plan_from(col_ptr, row_idx, MIN_PARALLEL_VALUES)
    }

    /// [`Self::plan`] for factors of at least `min_values` stored values.
    pub(crate) fn plan_from(
        col_ptr: &[usize],
        row_idx: &[usize],
        min_values: usize,
    ) -> Option<ColumnSplit> {
        let n = col_ptr.len().checked_sub(1)?;
        if row_idx.len() < min_values || n < 2 {
            return None;
        }
        let below = |j: usize| &row_idx[col_ptr[j] + 1..col_ptr[j + 1]];
        // elimination tree: the parent of j is the smallest row below its diagonal
        let parent: Vec<Option<usize>> = (0..n).map(|j| below(j).iter().copied().min()).collect();
        let mut children = vec![Vec::new(); n];
        let mut roots = Vec::new();
        for (j, p) in parent.iter().enumerate() {
            match p {
                Some(p) => children[*p].push(j),
                None => roots.push(j),
            }
        }
        // work of the subtree under each column (children precede parents)
        let mut work = vec![0usize; n];
        for j in 0..n {
            work[j] += col_ptr[j + 1] - col_ptr[j];
            if let Some(p) = parent[j] {
                work[p] += work[j];
            }
        }
        let mut kids = roots;
        loop {
            match kids.len() {
                0 => return None,
                1 => kids = children[kids[0]].clone(),
                _ => break,
            }
        }
        let (cut, bins) = balanced_cut(
            kids,
            |j| children[j].as_slice(),
            &work,
            |j| col_ptr[j + 1] - col_ptr[j],
        );
        let mut group = vec![2u8; n];
        for (&c, &g) in cut.iter().zip(&bins) {
            let mut stack = vec![c];
            while let Some(j) = stack.pop() {
                group[j] = g;
                stack.extend_from_slice(&children[j]);
            }
        }
        let groups: [Vec<usize>; 3] =
            std::array::from_fn(|g| (0..n).filter(|&j| group[j] as usize == g).collect());
        let mut layout = vec![0usize; n];
        for (r, &j) in groups.iter().flatten().enumerate() {
            layout[j] = r;
        }
        let (row_r, row_t) = (groups[0].len(), groups[0].len() + groups[1].len());
        let entry_row: Vec<usize> = row_idx.iter().map(|&i| layout[i]).collect();
        // the top's sweep in column order: its own columns, and the border products of the
        // others' columns where the sequential loop would subtract them
        let mut border = [0usize; 2];
        let mut merge = Vec::new();
        for j in 0..n {
            let g = group[j] as usize;
            if g == 2 {
                merge.push((2, j, 0));
                continue;
            }
            for &r in &entry_row[col_ptr[j] + 1..col_ptr[j + 1]] {
                if r >= row_t {
                    merge.push((g as u8, border[g], r - row_t));
                    border[g] += 1;
                }
            }
        }
        Some(ColumnSplit {
            groups,
            layout,
            entry_row,
            row_r,
            row_t,
            border,
            merge,
        })
    }

    /// Rows of $\mathcal L$, $\mathcal R$, $\mathcal T$ and border products of
    /// $\mathcal L$ and $\mathcal R$ (what the solve's balance and merge cost depend on).
    pub fn sizes(&self) -> ([usize; 3], [usize; 2]) {
        (std::array::from_fn(|g| self.groups[g].len()), self.border)
    }

    /// Whether a column of the top comes before a column of $\mathcal L$ or $\mathcal R$
    /// with border products (the top's sweep interleaves them: a cut below the first
    /// two-child node).
    #[cfg(test)]
    pub(crate) fn interleaves(&self) -> bool {
        let first_top = self.merge.iter().position(|m| m.0 == 2);
        let last_border = self.merge.iter().rposition(|m| m.0 != 2);
        matches!((first_top, last_border), (Some(t), Some(b)) if t < b)
    }

    /// Work space of [`solve`] for `k` right-hand sides: the laid-out rows and the two
    /// border buffers.
    pub fn scratch(&self, k: usize) -> SplitScratch {
        SplitScratch {
            x: vec![0.0; self.layout.len() * k],
            border: std::array::from_fn(|g| vec![0.0; self.border[g] * k]),
        }
    }
}

/// Disjoint subtrees (`cut`, starting from the given ones) and their bins (0 or 1) that
/// minimise the two-thread estimate $\max(w_0,w_1)+w_{\mathcal T}$ (`work`: of each subtree;
/// `own`: of a node alone; the larger bin's substitutions, then the serial top's), found by repeatedly replacing the heaviest subtree
/// by its children (its root joins the top) and re-binning greedily (heaviest first, each to
/// the lighter bin). A nested-dissection tree's top split is often uneven (60/40 on the
/// Plant's PD factor); one or two steps down even it out.
fn balanced_cut<'c>(
    mut cut: Vec<usize>,
    children: impl Fn(usize) -> &'c [usize],
    work: &[usize],
    own: impl Fn(usize) -> usize,
) -> (Vec<usize>, Vec<u8>) {
    let bin = |cut: &mut Vec<usize>| {
        cut.sort_by_key(|&c| (std::cmp::Reverse(work[c]), c));
        let mut load = [0usize; 2];
        let bins: Vec<u8> = cut
            .iter()
            .map(|&c| {
                let g = usize::from(load[1] < load[0]);
                load[g] += work[c];
                g as u8
            })
            .collect();
        (bins, load[0].max(load[1]))
    };
    let (mut bins, mut longest) = bin(&mut cut);
    let mut top = 0;
    let mut best = (longest + top, cut.clone(), bins.clone());
    for _ in 0..64 {
        let heaviest = cut[0];
        if children(heaviest).is_empty() {
            break;
        }
        cut.swap_remove(0);
        cut.extend_from_slice(children(heaviest));
        top += own(heaviest);
        (bins, longest) = bin(&mut cut);
        if longest + top < best.0 {
            best = (longest + top, cut.clone(), bins.clone());
        }
    }
    (best.1, best.2)
}

/// Work space of the split solve (sized once, [`ColumnSplit::scratch`]).
pub struct SplitScratch {
    x: Vec<f64>,
    border: [Vec<f64>; 2],
}

/// One simplicial factor: column pointers, and values with the diagonal first per column.
#[derive(Clone, Copy)]
pub struct Columns<'a> {
    pub col_ptr: &'a [usize],
    pub values: &'a [f64],
}

/// Solve $LL^Tx=b$ in place for the `k` columns of `rhs` (column-major, `n` rows) on two
/// threads of the current rayon pool, with the fill-reducing permutation `perm` (`(fwd,
/// inv)`, as faer's `LltRef` applies it). `k` of 1 to 4; returns `false` (and leaves `rhs`
/// untouched) for other `k`.
pub fn solve(
    l: Columns<'_>,
    perm: Option<(&[usize], &[usize])>,
    split: &ColumnSplit,
    rhs: &mut [f64],
    k: usize,
    scratch: &mut SplitScratch,
) -> bool {
    match k {
        1 => solve_k::<1>(l, perm, split, rhs, scratch),
        2 => solve_k::<2>(l, perm, split, rhs, scratch),
        3 => solve_k::<3>(l, perm, split, rhs, scratch),
        4 => solve_k::<4>(l, perm, split, rhs, scratch),
        _ => return false,
    }
    true
}

fn solve_k<const K: usize>(
    l: Columns<'_>,
    perm: Option<(&[usize], &[usize])>,
    split: &ColumnSplit,
    rhs: &mut [f64],
    scratch: &mut SplitScratch,
) {
    let n = split.layout.len();
    debug_assert_eq!(rhs.len(), n * K);
    if scratch.x.len() < n * K || (0..2).any(|g| scratch.border[g].len() < split.border[g] * K) {
        *scratch = split.scratch(K);
    }
    let x = &mut scratch.x[..n * K];
    for (i, &r) in split.layout.iter().enumerate() {
        let from = perm.map_or(i, |(fwd, _)| fwd[i]);
        for c in 0..K {
            x[r * K + c] = rhs[c * n + from];
        }
    }
    let [gl, gr, gt] = &split.groups;
    let (xl, rest) = x.split_at_mut(split.row_r * K);
    let (xr, xt) = rest.split_at_mut((split.row_t - split.row_r) * K);
    let [bl, br] = &mut scratch.border;
    rayon::join(
        || forward::<K>(l, split, gl, (0, &mut *xl), bl),
        || forward::<K>(l, split, gr, (split.row_r, &mut *xr), br),
    );
    // the top's columns and the border products, in the sequential loop's column order
    let mut no_border = [];
    for &(g, a, r) in &split.merge {
        match g {
            0 | 1 => {
                let b = if g == 0 { &*bl } else { &*br };
                for c in 0..K {
                    xt[r * K + c] -= b[a * K + c];
                }
            }
            _ => forward::<K>(l, split, &[a], (split.row_t, &mut *xt), &mut no_border),
        }
    }
    backward::<K>(l, split, gt, (split.row_t, &mut *xt), &[]);
    let xt = &*xt;
    rayon::join(
        || backward::<K>(l, split, gl, (0, xl), xt),
        || backward::<K>(l, split, gr, (split.row_r, xr), xt),
    );
    for i in 0..n {
        let r = split.layout[perm.map_or(i, |(_, inv)| inv[i])];
        for c in 0..K {
            rhs[c * n + i] = x[r * K + c];
        }
    }
}

/// Forward substitution over the columns `cols` (increasing), whose layout rows are those
/// of `own` (from row `own.0`); the products for rows past them (the top's) go to `border`
/// in order (faer's loop, term for term).
fn forward<const K: usize>(
    l: Columns<'_>,
    split: &ColumnSplit,
    cols: &[usize],
    (own0, xo): (usize, &mut [f64]),
    border: &mut [f64],
) {
    let own_end = own0 + xo.len() / K;
    let mut slot = 0;
    for &j in cols {
        let (s, e) = (l.col_ptr[j], l.col_ptr[j + 1]);
        let d = l.values[s].recip();
        let rj = (split.entry_row[s] - own0) * K;
        let mut xj = [0.0; K];
        for (c, v) in xj.iter_mut().enumerate() {
            *v = xo[rj + c] * d;
            xo[rj + c] = *v;
        }
        for (&r, &lij) in split.entry_row[s + 1..e].iter().zip(&l.values[s + 1..e]) {
            if r < own_end {
                let xi = &mut xo[(r - own0) * K..(r - own0 + 1) * K];
                for c in 0..K {
                    xi[c] -= lij * xj[c];
                }
            } else {
                let b = &mut border[slot * K..(slot + 1) * K];
                for c in 0..K {
                    b[c] = lij * xj[c];
                }
                slot += 1;
            }
        }
    }
}

/// Back substitution over the columns `cols` (decreasing), whose layout rows are those of
/// `own`; rows past them are read from `top` (the top group's final rows, from `row_t`).
fn backward<const K: usize>(
    l: Columns<'_>,
    split: &ColumnSplit,
    cols: &[usize],
    (own0, xo): (usize, &mut [f64]),
    top: &[f64],
) {
    let own_end = own0 + xo.len() / K;
    for &j in cols.iter().rev() {
        let (s, e) = (l.col_ptr[j], l.col_ptr[j + 1]);
        let mut acc = [0.0; K];
        for (&r, &lij) in split.entry_row[s + 1..e]
            .iter()
            .zip(&l.values[s + 1..e])
            .rev()
        {
            let xi = if r < own_end {
                &xo[(r - own0) * K..(r - own0 + 1) * K]
            } else {
                &top[(r - split.row_t) * K..(r - split.row_t + 1) * K]
            };
            for c in 0..K {
                acc[c] += lij * xi[c];
            }
        }
        let d = l.values[s].recip();
        let rj = (split.entry_row[s] - own0) * K;
        for c in 0..K {
            xo[rj + c] = (xo[rj + c] - acc[c]) * d;
        }
    }
}
