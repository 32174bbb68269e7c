//! Tree-parallel numeric supernodal $LL^T$ on faer's symbolic analysis (issue 37: two
//! threads that pay in the Newton factorization).
//!
//! Left-looking, supernode by supernode in the analysis' order (children before parents):
//! supernode $s$ with columns $J_s$ and rows $R_s=J_s\cup P_s$ starts from the columns
//! $J_s$ of $PAP^T$ (lower part), receives $L_{R_s,J_d}L_{J_s,J_d}^T$ subtracted for every
//! descendant $d$ whose pattern meets $J_s$ (in increasing $d$), then
//! $L_{J_sJ_s}=\mathrm{chol}(\cdot)$ and $L_{P_sJ_s}\leftarrow L_{P_sJ_s}L_{J_sJ_s}^{-T}$ —
//! the algorithm of faer's `factorize_supernodal_numeric_llt`, with faer's public dense
//! kernels (`matmul`, `cholesky_in_place`, the triangular solve), each called with
//! `Par::Seq`. A supernode reads only its descendants, so disjoint subtrees of the
//! supernodal elimination tree are independent (Liu 1990): the subtrees under a node with
//! two or more children run as rayon tasks, and a subtree below `SEQUENTIAL_FLOPS` runs
//! on one thread. Each supernode's arithmetic is the same whatever thread ran it, so the
//! factor is the same bits on any thread count (test
//! `tree_factorization_is_the_same_bits_on_any_thread_count`). It is not faer's bits:
//! faer's update kernel (`spicy_matmul`, which scatters inside the product) is private, so
//! the updates here form $L_{R_s,J_d}L_{J_s,J_d}^T$ in a buffer and subtract it entry by
//! entry; the factor agrees with faer's to round-off (test `matches_faer_to_round_off`).
//!
//! A failed pivot is reported for the first supernode in the sequential order that fails
//! (supernodes above a failure are not computed), as the sequential loop would.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{cholesky_in_place, cholesky_in_place_scratch, LltError};
use faer::linalg::matmul::matmul;
use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use faer::sparse::linalg::cholesky::supernodal::SymbolicSupernodalCholesky;
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;
use std::sync::Mutex;

/// Below this many flops (the leading term $\sum_j c_j^2$ of the subtree's columns) a
/// subtree is factored on one thread: a task costs more in scheduling than it saves.
const SEQUENTIAL_FLOPS: f64 = 2e6;

/// The plan of the tree-parallel factorization of one symbolic analysis: the supernodal
/// elimination tree, each supernode's descendants that update it, and the work of each
/// subtree.
#[derive(Clone, Debug)]
pub struct TreePlan {
    /// Children of each supernode (increasing) and the roots.
    children: Vec<Vec<usize>>,
    roots: Vec<usize>,
    /// `updates[upd_ptr[s]..upd_ptr[s + 1]]`: the supernodes $d<s$ whose pattern has a row
    /// in $J_s$, increasing.
    upd_ptr: Vec<usize>,
    updates: Vec<usize>,
    /// Leading-term flops of the subtree under each supernode (itself included).
    subtree_flops: Vec<f64>,
    /// Leading-term flops of each supernode's own columns.
    own_flops: Vec<f64>,
}

impl TreePlan {
    /// Children of supernode `s`, increasing.
    pub(super) fn children(&self, s: usize) -> &[usize] {
        &self.children[s]
    }

    /// The roots of the supernodal tree, increasing.
    pub(super) fn roots(&self) -> &[usize] {
        &self.roots
    }

    /// The plan of `sym` (any analysis of faer's: children precede parents).
    pub fn new(sym: &SymbolicSupernodalCholesky<usize>) -> Self {
        let ns = sym.n_supernodes();
        let (begin, end) = (sym.supernode_begin(), sym.supernode_end());
        let mut col_super = vec![0usize; sym.nrows()];
        for s in 0..ns {
            col_super[begin[s]..end[s]].fill(s);
        }
        let mut parent = vec![usize::MAX; ns];
        let mut lists: Vec<Vec<usize>> = vec![Vec::new(); ns];
        let mut flops = vec![0.0f64; ns];
        for d in 0..ns {
            let pat = pattern(sym, d);
            if let Some(&r) = pat.first() {
                parent[d] = col_super[r];
            }
            let mut last = usize::MAX;
            for &r in pat {
                let s = col_super[r];
                if s != last {
                    lists[s].push(d);
                    last = s;
                }
            }
            flops[d] = supernode_flops(sym, d);
        }
        let mut children = vec![Vec::new(); ns];
        let mut roots = Vec::new();
        for s in 0..ns {
            match parent[s] {
                usize::MAX => roots.push(s),
                p => children[p].push(s),
            }
        }
        // children precede parents: accumulate subtree work upwards
        let own_flops = flops.clone();
        let mut subtree_flops = flops;
        for s in 0..ns {
            if parent[s] != usize::MAX {
                subtree_flops[parent[s]] += subtree_flops[s];
            }
        }
        let mut upd_ptr = vec![0];
        let mut updates = Vec::new();
        for l in lists {
            updates.extend(l);
            upd_ptr.push(updates.len());
        }
        TreePlan {
            children,
            roots,
            upd_ptr,
            updates,
            subtree_flops,
            own_flops,
        }
    }
}

/// Leading-term flops of supernode `s`'s own columns: $\sum_j c_j^2$ over its columns, $c_j$
/// the count of column $j$ of $L$ (diagonal included; George & Liu 1981, §2.2).
pub fn supernode_flops(sym: &SymbolicSupernodalCholesky<usize>, s: usize) -> f64 {
    let w = sym.supernode_end()[s] - sym.supernode_begin()[s];
    let below = pattern(sym, s).len();
    (0..w)
        .map(|j| {
            let c = (w - j + below) as f64;
            c * c
        })
        .sum()
}

/// The rows $P_s$ below supernode `s`'s diagonal block (increasing).
fn pattern(sym: &SymbolicSupernodalCholesky<usize>, s: usize) -> &[usize] {
    let p = sym.col_ptr_for_row_idx();
    &sym.row_idx()[p[s]..p[s + 1]]
}

/// The values of $L$, written by supernode: each task writes only its own supernodes'
/// ranges and reads only descendants that finished before it began (a rayon join orders
/// them).
struct Values {
    ptr: *mut f64,
    len: usize,
}
// SAFETY: tasks write disjoint supernode ranges and read only finished ones (module docs).
unsafe impl Sync for Values {}

/// What the factorization reads: the analysis, its plan, $A$ (both triangles, CSC, the
/// original numbering) and the permutation `perm[new] = old`, `iperm[old] = new`.
pub struct Input<'a> {
    pub sym: &'a SymbolicSupernodalCholesky<usize>,
    pub plan: &'a TreePlan,
    pub col_ptr: &'a [usize],
    pub row_idx: &'a [usize],
    pub values: &'a [f64],
    pub perm: &'a [usize],
    pub iperm: &'a [usize],
}

/// Numeric $LL^T$ of $PAP^T$ into `l_values` (faer's supernodal layout for `sym`). Returns
/// the first non-positive pivot (a column of the permuted matrix) on failure.
pub fn factorize(input: &Input, l_values: &mut [f64]) -> Result<(), usize> {
    // the callers allocate `l_values` from this analysis (`SparseCholesky::numeric`) or reuse
    // the factor's own (`refactor`)
    debug_assert_eq!(l_values.len(), input.sym.len_val());
    let threads = rayon::current_num_threads();
    let ctx = Ctx {
        input,
        vals: Values {
            ptr: l_values.as_mut_ptr(),
            len: l_values.len(),
        },
        failed: Mutex::new(None),
        threads,
    };
    let roots = &input.plan.roots;
    if threads > 1 && roots.len() > 1 {
        roots.par_iter().for_each(|&r| ctx.subtree(r, false));
    } else {
        // one root: its chain runs alone, with the whole pool
        roots.iter().for_each(|&r| ctx.subtree(r, threads > 1));
    }
    match ctx.failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(col) => Err(col),
        None => Ok(()),
    }
}

/// One factorization's shared state: what it reads, the values it writes, the first
/// failure, the pool's thread count.
struct Ctx<'a> {
    input: &'a Input<'a>,
    vals: Values,
    failed: Mutex<Option<usize>>,
    threads: usize,
}

/// Descendant updates formed at once by the pool for a large supernode (each in its own
/// buffer, then subtracted in order).
const UPDATE_BATCH: usize = 8;

/// A supernode with at least this many flops of its own (or the root chain's, which runs
/// alone) forms its updates and runs its dense kernels on the whole pool; smaller ones run
/// on the task's thread (faer's parallel kernels cost more than they save on small blocks).
const POOL_FLOPS: f64 = 2e7;

impl Ctx<'_> {
    /// Factor the subtree under `top`: the chain of single children above its first
    /// branching node (or leaf), the branches as parallel tasks, then the chain upwards. A
    /// subtree below [`SEQUENTIAL_FLOPS`] runs in supernode order on this thread. `alone`:
    /// nothing else runs while this chain does (the root's), so its supernodes use the
    /// whole pool.
    fn subtree(&self, top: usize, alone: bool) {
        let plan = self.input.plan;
        let mut chain = vec![top];
        let mut cur = top;
        while plan.children[cur].len() == 1 && plan.subtree_flops[cur] >= SEQUENTIAL_FLOPS {
            cur = plan.children[cur][0];
            chain.push(cur);
        }
        if plan.subtree_flops[cur] < SEQUENTIAL_FLOPS {
            chain.pop();
            let mut nodes = Vec::new();
            collect(plan, cur, &mut nodes);
            nodes.sort_unstable();
            for s in nodes {
                if !self.supernode_ok(s, false) {
                    return;
                }
            }
        } else if self.threads > 1 {
            plan.children[cur]
                .par_iter()
                .for_each(|&c| self.subtree(c, false));
        } else {
            plan.children[cur]
                .iter()
                .for_each(|&c| self.subtree(c, false));
        }
        for &s in chain.iter().rev() {
            if !self.supernode_ok(s, alone) {
                return;
            }
        }
    }

    /// Factor supernode `s` unless a failure earlier in the order was recorded; records
    /// its own failure. Whether the caller should go on upwards.
    fn supernode_ok(&self, s: usize, alone: bool) -> bool {
        let begin = self.input.sym.supernode_begin()[s];
        {
            let f = self.failed.lock().unwrap_or_else(|e| e.into_inner());
            if f.is_some_and(|col| col < begin) {
                // a failure earlier in the order: this supernode may read it (or the
                // sequential loop would have stopped before it)
                return false;
            }
        }
        match self.supernode(s, alone) {
            Ok(()) => true,
            Err(col) => {
                let mut f = self.failed.lock().unwrap_or_else(|e| e.into_inner());
                *f = Some(f.map_or(col, |c| c.min(col)));
                false
            }
        }
    }
}

/// The supernodes of the subtree under `s`.
fn collect(plan: &TreePlan, s: usize, out: &mut Vec<usize>) {
    let mut stack = vec![s];
    while let Some(t) = stack.pop() {
        out.push(t);
        stack.extend_from_slice(&plan.children[t]);
    }
}

thread_local! {
    /// Per worker: the map row → local row of the supernode being factored (faer's
    /// `global_to_local`), the buffer of one update and its rows' local indices.
    static SCRATCH: std::cell::RefCell<(Vec<usize>, Vec<f64>, Vec<usize>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
}

/// The update of supernode $s$ (columns `s0..s1`) by its descendant $d$: the rows of $d$'s
/// pattern from $s_0$ on, how many of them are in $J_s$, and
/// $W=L_{R,J_d}L_{J_s\cap P_d,J_d}^T$ (column-major, `rows × mid`) in `buf`.
fn update(ctx: &Ctx, d: usize, (s0, s1): (usize, usize), buf: &mut Vec<f64>) -> (usize, usize) {
    let sym = ctx.input.sym;
    let vptr = sym.col_ptr_for_val();
    let dpat = pattern(sym, d);
    let dcols = sym.supernode_end()[d] - sym.supernode_begin()[d];
    // SAFETY: d is a descendant of s, finished before this task began.
    let ld = unsafe {
        std::slice::from_raw_parts(
            ctx.vals.ptr.add(vptr[d]) as *const f64,
            vptr[d + 1] - vptr[d],
        )
    };
    let ld = MatRef::from_column_major_slice(ld, dcols + dpat.len(), dcols);
    let first = dpat.partition_point(|&r| r < s0);
    let mid = dpat[first..].partition_point(|&r| r < s1);
    let below = ld.subrows(dcols + first, dpat.len() - first);
    let top = below.subrows(0, mid);
    let m = below.nrows();
    if buf.len() < m * mid {
        buf.resize(m * mid, 0.0);
    }
    let w = MatMut::from_column_major_slice_mut(&mut buf[..m * mid], m, mid);
    matmul(w, Accum::Replace, below, top.transpose(), 1.0, Par::Seq);
    (first, mid)
}

impl Ctx<'_> {
    /// Supernode `s`: assemble, subtract the descendants' updates in increasing order,
    /// factor the diagonal block and solve the rows below it. On the root chain (`alone`)
    /// and for a supernode above [`POOL_FLOPS`], the updates are formed by the pool in
    /// batches and the dense kernels split over it (faer splits by block shape: the same
    /// bits; rayon nests the pool's tasks inside the subtree tasks). `Err(column)` on a
    /// non-positive pivot.
    fn supernode(&self, s: usize, alone: bool) -> Result<(), usize> {
        let input = self.input;
        let sym = input.sym;
        let vptr = sym.col_ptr_for_val();
        let (s0, s1) = (sym.supernode_begin()[s], sym.supernode_end()[s]);
        let ncols = s1 - s0;
        let pat = pattern(sym, s);
        let nrows = ncols + pat.len();
        debug_assert!(vptr[s + 1] <= self.vals.len);
        // SAFETY: supernode s's range is written by this task only (module docs of Values).
        let ls_slice = unsafe {
            std::slice::from_raw_parts_mut(self.vals.ptr.add(vptr[s]), vptr[s + 1] - vptr[s])
        };
        ls_slice.fill(0.0);
        let plan = input.plan;
        let ups = &plan.updates[plan.upd_ptr[s]..plan.upd_ptr[s + 1]];
        let big = self.threads > 1 && (alone || plan.own_flops[s] >= POOL_FLOPS);
        let par = if big {
            Par::rayon(self.threads)
        } else {
            Par::Seq
        };
        // the map row → local row of R_s, set again at each borrow of the worker's scratch
        // (a task stolen while this one waits for the pool may have used it); stale entries
        // of other rows are never read: every row looked up is in R_s
        let set_map = |map: &mut Vec<usize>| {
            if map.len() < sym.nrows() {
                map.resize(sym.nrows(), 0);
            }
            for (i, &r) in pat.iter().enumerate() {
                map[r] = ncols + i;
            }
        };
        let subtract = |map: &[usize],
                        loc: &mut Vec<usize>,
                        ls: &mut [f64],
                        d: usize,
                        (first, mid): (usize, usize),
                        w: &[f64]| {
            let local = |r: usize| if r < s1 { r - s0 } else { map[r] };
            let rows = &pattern(sym, d)[first..];
            let m = rows.len();
            loc.clear();
            loc.extend(rows.iter().map(|&r| local(r)));
            for jj in 0..mid {
                let lj = loc[jj];
                let col = &mut ls[lj * nrows..(lj + 1) * nrows];
                let wc = &w[jj * m..(jj + 1) * m];
                for ii in jj..m {
                    col[loc[ii]] -= wc[ii];
                }
            }
        };
        SCRATCH.with_borrow_mut(|(map, buf, loc)| {
            set_map(map);
            let local = |r: usize| if r < s1 { r - s0 } else { map[r] };
            // the columns J_s of PAP^T, lower part
            for j in s0..s1 {
                let c = input.perm[j];
                let col = &mut ls_slice[(j - s0) * nrows..(j - s0 + 1) * nrows];
                for k in input.col_ptr[c]..input.col_ptr[c + 1] {
                    let i = input.iperm[input.row_idx[k]];
                    if i >= j {
                        col[local(i)] += input.values[k];
                    }
                }
            }
            if !big || ups.len() < 2 {
                for &d in ups {
                    let fm = update(self, d, (s0, s1), buf);
                    subtract(map, loc, ls_slice, d, fm, buf);
                }
            }
        });
        if big && ups.len() >= 2 {
            for batch in ups.chunks(UPDATE_BATCH) {
                // formed by the pool (no scratch borrowed while it runs), subtracted in order
                let ws: Vec<((usize, usize), Vec<f64>)> = batch
                    .par_iter()
                    .map(|&d| {
                        let mut w = Vec::new();
                        (update(self, d, (s0, s1), &mut w), w)
                    })
                    .collect();
                SCRATCH.with_borrow_mut(|(map, _, loc)| {
                    set_map(map);
                    for (&d, (fm, w)) in batch.iter().zip(&ws) {
                        subtract(map, loc, ls_slice, d, *fm, w);
                    }
                });
            }
        }
        let ls = MatMut::from_column_major_slice_mut(ls_slice, nrows, ncols);
        let (mut top, mut bot) = ls.split_at_row_mut(ncols);
        let mut mem = MemBuffer::new(cholesky_in_place_scratch::<f64>(
            ncols,
            par,
            Default::default(),
        ));
        match cholesky_in_place(
            top.as_mut(),
            Default::default(),
            par,
            MemStack::new(&mut mem),
            Default::default(),
        ) {
            Ok(_) => {}
            Err(LltError::NonPositivePivot { index }) => return Err(s0 + index),
        }
        solve_lower_triangular_in_place(top.as_ref(), bot.as_mut().transpose_mut(), par);
        Ok(())
    }
}
