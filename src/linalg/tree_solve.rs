//! Two-way tree-parallel triangular solves with a supernodal $LL^T$ factor (issue 37: two
//! threads that pay), the same bits as faer's sequential solve.
//!
//! The forward substitution $Ly=b$ visits the supernodes $s=0,1,\dots$ in order (children
//! before parents in the supernodal elimination tree): $x_s\leftarrow L_{ss}^{-1}x_s$, then
//! $x_{P(s)}\leftarrow x_{P(s)}-L_{P(s),s}x_s$ on the rows $P(s)$ of its pattern, which are
//! ancestors of $s$. Under the first node of the tree with two or more children (the top
//! separator of the nested-dissection ordering) the children's subtrees form two groups
//! $\mathcal L$ and $\mathcal R$ of about equal work that touch each other's rows nowhere; the
//! rest, $\mathcal T$, are their ancestors. $\mathcal L$ and $\mathcal R$ run on two threads,
//! each on its own rows (laid out side by side), recording its updates of $\mathcal T$'s rows;
//! after the join the two records are applied merged by supernode, then $\mathcal T$ runs.
//! Every entry of $x$ so receives the sequential loop's subtractions in its order, and the
//! result is the sequential one bit for bit. The back substitution runs $\mathcal T$ first,
//! then $\mathcal L$ and $\mathcal R$ at once (each reads $\mathcal T$'s final rows and writes
//! only its own; a supernode's result does not depend on the order). Each supernode's dense
//! work is faer's own kernels called as faer's solve calls them (`Par::Seq`), so the
//! arithmetic is the same; test `tree_solve_is_faer_bitwise`.
//!
//! Liu, "The role of elimination trees in sparse factorization", SIAM J. Matrix Anal. Appl.
//! 11 (1990): disjoint subtrees of the elimination tree are independent.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::matmul::matmul_with_conj;
use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place_with_conj, solve_upper_triangular_in_place_with_conj,
};
use faer::linalg::{temp_mat_scratch, temp_mat_zeroed};
use faer::mat::AsMatMut;
use faer::reborrow::{Reborrow, ReborrowMut};
use faer::sparse::linalg::cholesky::supernodal::{SupernodalLltRef, SymbolicSupernodalCholesky};
use faer::{Accum, Conj, MatMut, MatRef, Par};

use super::supernodal::TreePlan;

/// Below this many stored values of $L$ the solve stays sequential: a two-thread split of a
/// small factor costs more in joins and in the merge of the recorded updates than it saves.
/// Measured (session 25, 2-core VM, `--threads 2`; docs/BENCHMARKS.md): at the former
/// 20,000, PD's per-axis solves on the bouncing ball (split at every PD and contact
/// iteration) made its 25-frame PD forward take 37 s against 22 s unsplit and 24 s at one
/// thread, and cantilever_diffpd's (230,558 values) took 1.19 ms a solve against 0.76 ms at
/// one thread; the armadillo's Newton factors (tens of millions of values) gain 2-4 % from
/// the split.
const MIN_PARALLEL_VALUES: usize = 1_000_000;

/// The split of the supernodes into $\mathcal L$, $\mathcal R$, $\mathcal T$ (each in
/// increasing order) and the row layout of the solve: the rows of $\mathcal L$'s supernodes
/// first, then $\mathcal R$'s, then $\mathcal T$'s, each supernode's rows kept together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeSplit {
    groups: [Vec<usize>; 3],
    /// Row of the layout of each row of the (permuted) system.
    new_row: Vec<usize>,
    /// First row of the layout of each supernode.
    new_start: Vec<usize>,
    /// First rows of $\mathcal R$ and $\mathcal T$ in the layout.
    row_r: usize,
    row_t: usize,
}

impl TreeSplit {
    /// The split of `symbolic`'s supernodal tree (`tree`: its children and roots, as the
    /// numeric factorization's plan found them), or `None` where it has no node with two
    /// children under a chain from the root or is too small to pay.
    pub fn plan(
        symbolic: &SymbolicSupernodalCholesky<usize>,
        tree: &TreePlan,
    ) -> Option<TreeSplit> {
        let ns = symbolic.n_supernodes();
        let begin = symbolic.supernode_begin();
        let end = symbolic.supernode_end();
        if symbolic.len_val() < MIN_PARALLEL_VALUES || ns < 2 {
            return None;
        }
        let n = symbolic.nrows();
        let children = |s: usize| tree.children(s);
        // work of the subtree under each supernode (children precede parents)
        let mut work = vec![0usize; ns];
        for s in 0..ns {
            let w = end[s] - begin[s];
            work[s] = w * (w + symbolic.supernode(s).pattern().len())
                + children(s).iter().map(|&c| work[c]).sum::<usize>();
        }
        let mut kids = tree.roots().to_vec();
        loop {
            match kids.len() {
                0 => return None,
                1 => kids = children(kids[0]).to_vec(),
                _ => break,
            }
        }
        // two groups of the children's subtrees, the heavier first, each to the lighter group
        kids.sort_by_key(|&c| std::cmp::Reverse(work[c]));
        let mut group = vec![2u8; ns];
        let mut load = [0usize; 2];
        for &c in &kids {
            let g = usize::from(load[1] < load[0]);
            load[g] += work[c];
            let mut stack = vec![c];
            while let Some(s) = stack.pop() {
                group[s] = g as u8;
                stack.extend_from_slice(children(s));
            }
        }
        let groups: [Vec<usize>; 3] =
            std::array::from_fn(|g| (0..ns).filter(|&s| group[s] as usize == g).collect());
        let mut new_row = vec![0usize; n];
        let mut new_start = vec![0usize; ns];
        let mut at = 0;
        let mut firsts = [0usize; 3];
        for (g, list) in groups.iter().enumerate() {
            firsts[g] = at;
            for &s in list {
                new_start[s] = at;
                for (k, i) in (begin[s]..end[s]).enumerate() {
                    new_row[i] = at + k;
                }
                at += end[s] - begin[s];
            }
        }
        Some(TreeSplit {
            groups,
            new_row,
            new_start,
            row_r: firsts[1],
            row_t: firsts[2],
        })
    }
}

/// An update of a row outside a group: (supernode, row of the layout, column, value).
type Update = (usize, usize, usize, f64);

/// Solve $LL^Tx=b$ in place for the `k` columns of `rhs` (column-major, `n` rows), on two
/// threads of the current rayon pool, with the fill-reducing permutation `perm`
/// (`(fwd, inv)`, as faer's `LltRef` applies it).
pub fn solve(
    llt: SupernodalLltRef<'_, usize, f64>,
    perm: Option<(&[usize], &[usize])>,
    split: &TreeSplit,
    rhs: &mut [f64],
    k: usize,
) {
    let n = llt.symbolic().nrows();
    let mut mem = MemBuffer::new(temp_mat_scratch::<f64>(n, k));
    let (mut xbuf, _) = temp_mat_zeroed::<f64, _, _>(n, k, MemStack::new(&mut mem));
    let mut x = xbuf.as_mat_mut();
    let nr = &split.new_row;
    for j in 0..k {
        for i in 0..n {
            let from = perm.map_or(i, |(fwd, _)| fwd[i]);
            x[(nr[i], j)] = rhs[j * n + from];
        }
    }
    solve_laid_out(llt, split, x.rb_mut());
    for j in 0..k {
        for i in 0..n {
            let at = perm.map_or(i, |(_, inv)| inv[i]);
            rhs[j * n + i] = x[(nr[at], j)];
        }
    }
}

/// The two substitutions on the right-hand sides `x` in the split's row layout.
fn solve_laid_out(
    llt: SupernodalLltRef<'_, usize, f64>,
    split: &TreeSplit,
    mut x: MatMut<'_, f64>,
) {
    let n = x.nrows();
    let k = x.ncols();
    let scratch = || MemBuffer::new(temp_mat_scratch::<f64>(max_pattern(llt), k));
    let (mut mem_l, mut mem_r) = (scratch(), scratch());
    let (row_r, row_t) = (split.row_r, split.row_t);
    let [gl, gr, gt] = &split.groups;
    let mut top = Vec::new();
    {
        let (xl, rest) = x.rb_mut().split_at_row_mut(row_r);
        let (xr, mut xt) = rest.split_at_row_mut(row_t - row_r);
        let (mut up_l, mut up_r) = (Vec::new(), Vec::new());
        rayon::join(
            || {
                forward(
                    llt,
                    split,
                    gl,
                    (0, xl),
                    &mut up_l,
                    MemStack::new(&mut mem_l),
                )
            },
            || {
                forward(
                    llt,
                    split,
                    gr,
                    (row_r, xr),
                    &mut up_r,
                    MemStack::new(&mut mem_r),
                )
            },
        );
        // both records in supernode order, merged: the sequential order of the updates
        let (mut a, mut b) = (up_l.into_iter().peekable(), up_r.into_iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(u), Some(v)) if u.0 <= v.0 => a.next(),
                (Some(_), Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, _) => b.next(),
            };
            let Some((_, r, j, v)) = next else { break };
            xt[(r - row_t, j)] -= v;
        }
    }
    // the top: every row it updates is its own (nothing is recorded)
    forward(
        llt,
        split,
        gt,
        (0, x.rb_mut()),
        &mut top,
        MemStack::new(&mut mem_l),
    );
    for (_, r, j, v) in top {
        x[(r, j)] -= v;
    }
    backward(
        llt,
        split,
        gt,
        (0, x.rb_mut()),
        None,
        MemStack::new(&mut mem_l),
    );
    let (xl, rest) = x.rb_mut().split_at_row_mut(row_r);
    let (xr, xt) = rest.split_at_row_mut(row_t - row_r);
    let xt = xt.rb();
    debug_assert_eq!(row_t + xt.nrows(), n);
    rayon::join(
        || {
            backward(
                llt,
                split,
                gl,
                (0, xl),
                Some((row_t, xt)),
                MemStack::new(&mut mem_l),
            )
        },
        || {
            backward(
                llt,
                split,
                gr,
                (row_r, xr),
                Some((row_t, xt)),
                MemStack::new(&mut mem_r),
            )
        },
    );
}

/// The longest supernode pattern (the work space of one supernode's update).
fn max_pattern(llt: SupernodalLltRef<'_, usize, f64>) -> usize {
    let sym = llt.symbolic();
    (0..sym.n_supernodes())
        .map(|s| sym.supernode(s).pattern().len())
        .max()
        .unwrap_or(0)
}

/// Forward substitution over the supernodes `sns` (increasing), whose rows of the layout
/// are those of `own` (from row `own.0`); updates of other rows are recorded in `outer`
/// (faer's loop, term for term).
fn forward(
    llt: SupernodalLltRef<'_, usize, f64>,
    split: &TreeSplit,
    sns: &[usize],
    (own0, mut xo): (usize, MatMut<'_, f64>),
    outer: &mut Vec<Update>,
    stack: &mut MemStack,
) {
    let k = xo.ncols();
    let own_end = own0 + xo.nrows();
    for &s in sns {
        let sn = llt.supernode(s);
        let ls = sn.val();
        let size = ls.ncols();
        let (ls_top, ls_bot) = ls.split_at_row(size);
        let mut x_top = xo.rb_mut().subrows_mut(split.new_start[s] - own0, size);
        solve_lower_triangular_in_place_with_conj(ls_top, Conj::No, x_top.rb_mut(), Par::Seq);
        let pattern = sn.pattern();
        let (mut tmp, _) = temp_mat_zeroed::<f64, _, _>(pattern.len(), k, &mut *stack);
        let mut tmp = tmp.as_mat_mut();
        matmul_with_conj(
            tmp.rb_mut(),
            Accum::Replace,
            ls_bot,
            Conj::No,
            x_top.rb(),
            Conj::No,
            1.0,
            Par::Seq,
        );
        for j in 0..k {
            for (idx, &i) in pattern.iter().enumerate() {
                let (r, v) = (split.new_row[i], tmp[(idx, j)]);
                if (own0..own_end).contains(&r) {
                    xo[(r - own0, j)] -= v;
                } else {
                    outer.push((s, r, j, v));
                }
            }
        }
    }
}

/// Back substitution over the supernodes `sns` (in decreasing order), whose rows of the
/// layout are those of `own`; the other rows it reads are `outer` (final by then).
fn backward(
    llt: SupernodalLltRef<'_, usize, f64>,
    split: &TreeSplit,
    sns: &[usize],
    (own0, mut xo): (usize, MatMut<'_, f64>),
    outer: Option<(usize, MatRef<'_, f64>)>,
    stack: &mut MemStack,
) {
    let k = xo.ncols();
    let own_end = own0 + xo.nrows();
    for &s in sns.iter().rev() {
        let sn = llt.supernode(s);
        let ls = sn.val();
        let size = ls.ncols();
        let (ls_top, ls_bot) = ls.split_at_row(size);
        let pattern = sn.pattern();
        let (mut tmp, _) = temp_mat_zeroed::<f64, _, _>(pattern.len(), k, &mut *stack);
        let mut tmp = tmp.as_mat_mut();
        for j in 0..k {
            for (idx, &i) in pattern.iter().enumerate() {
                let r = split.new_row[i];
                tmp[(idx, j)] = if (own0..own_end).contains(&r) {
                    xo[(r - own0, j)]
                } else {
                    // (the top reads only its own rows: no outer, and a NaN were it not so)
                    outer.map_or(f64::NAN, |(t0, xt)| xt[(r - t0, j)])
                };
            }
        }
        let mut x_top = xo.rb_mut().subrows_mut(split.new_start[s] - own0, size);
        matmul_with_conj(
            x_top.rb_mut(),
            Accum::Add,
            ls_bot.transpose(),
            Conj::Yes,
            tmp.rb(),
            Conj::No,
            -1.0,
            Par::Seq,
        );
        solve_upper_triangular_in_place_with_conj(
            ls_top.transpose(),
            Conj::Yes,
            x_top.rb_mut(),
            Par::Seq,
        );
    }
}
