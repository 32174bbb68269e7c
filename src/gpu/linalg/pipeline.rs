//! Orchestration written once against [`Device`]: persistent device buffers built once
//! (plan), kernels launched per iteration (execute). Runs on the emulator in CI and on a GPU
//! with `--features cuda`.

use crate::gpu::linalg::factor::SimplicialFactor;
use crate::gpu::runtime::device::{Arg, Device};
use crate::gpu::runtime::error::GpuError;
use crate::gpu::runtime::kernels::Kernel;

/// `[0, a_0, a_0 + a_1, ...]`: pointers from counts.
fn prefix_sums(counts: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut out = vec![0usize];
    for c in counts {
        out.push(out[out.len() - 1] + c);
    }
    out
}

fn idx(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}

/// Which global-solve path runs (spec §5.3), and why.
#[derive(Clone, Debug, PartialEq)]
pub enum SolvePath {
    /// Two SpMVs with the explicit inverse factor $S=L^{-1}$ (Eq. 33).
    InverseFactor { nnz_s: usize, bytes: usize },
    /// Level-scheduled triangular solves with $L$: $S$ would exceed the memory budget.
    Triangular { nnz_s: usize, budget_bytes: usize },
}

/// Bytes the explicit inverse factor needs on the device: values (8 bytes) and 32-bit column
/// indices (4 bytes) of both forms (S and its row form), sliced ([`sliced_len`]: at most
/// `nnz_s / SEGMENT + n + 1`
/// segments per form, rounded up to whole groups of [`SEGMENT`] segments of [`SEGMENT`]
/// slots), plus the segments of both forms and their partial sums for a block of [`BLOCK`]
/// columns, plus the build's per-column arrays (its schedule, depths, parents, postorder:
/// `8n` each).
pub fn inverse_factor_bytes(nnz_s: usize, n: usize) -> usize {
    let segs = nnz_s / SEGMENT + n + 1;
    let slots = segs.div_ceil(SEGMENT) * SEGMENT * SEGMENT;
    2 * slots * (8 + 4) + 2 * (n + 1) * 8 + (2 * segs + 2 * (n + 1) + BLOCK * segs) * 8 + 5 * n * 8
}

/// The sliced slot of entry `off` of a row whose segments start at segment `first_segment`
/// (sparse.cu `dphd_sliced_at`): entry $p$ of segment $s$ at $(32\lfloor s/32\rfloor+p)\cdot32+s\bmod32$.
pub fn sliced_slot(first_segment: usize, off: usize) -> usize {
    let (s, p) = (first_segment + off / SEGMENT, off % SEGMENT);
    ((s / SEGMENT) * SEGMENT + p) * SEGMENT + s % SEGMENT
}

/// Slots of a sliced form with `segments` segments (sparse.cu `dphd_sliced`): whole groups of
/// [`SEGMENT`] segments, each segment [`SEGMENT`] slots.
pub fn sliced_len(segments: usize) -> usize {
    segments.div_ceil(SEGMENT) * SEGMENT * SEGMENT
}

/// Columns one block solve on device vectors takes at most ([`DeviceFactor::solve_block_device`]):
/// the three axes of the global solve when they share a free set.
pub const BLOCK: usize = 3;

/// Entries per segment of the segmented SpMV (sparse.cu `dphd_spmv_segments`): rows of $S$
/// hold up to $n$ entries (the root's row: every column), so a thread per row serialised the
/// product on the longest rows (measured on an H100, 2026-11-27, 56k-DoF tet box: 5.4 ms per
/// one-axis solve, slower than the CPU's 4.3 ms). Also the slice width of the sliced layout
/// (sparse.cu `DPHD_SLICE`): 32 segments side by side, a warp's worth.
pub const SEGMENT: usize = 32;

/// Cut the rows of a CSR pattern (`ptr`) into segments of at most `chunk` entries:
/// (`rseg`, `seg`), segment `s` = entries `seg[s]..seg[s+1]`, the segments of row `r` =
/// `rseg[r]..rseg[r+1]` (none for an empty row). The segments partition the entries in order.
pub fn segments(ptr: &[usize], chunk: usize) -> (Vec<usize>, Vec<usize>) {
    let n = ptr.len().saturating_sub(1);
    let mut rseg = Vec::with_capacity(n + 1);
    let mut seg = vec![ptr.first().copied().unwrap_or(0)];
    rseg.push(0);
    for r in 0..n {
        let mut s = ptr[r];
        while s < ptr[r + 1] {
            s = (s + chunk).min(ptr[r + 1]);
            seg.push(s);
        }
        rseg.push(seg.len() - 1);
    }
    (rseg, seg)
}

/// One form of $S$ (CSR cut into segments: its column indices and values, sliced as
/// sparse.cu `dphd_sliced` lays them out) with its segments.
struct Form<D: Device> {
    col: D::Index32,
    val: D::Real,
    rseg: D::Index,
    seg: D::Index,
    segments: usize,
    /// Entries (the flat order's length).
    entries: usize,
    /// The flat (CSR-order) copy of `col` and `val` for wide blocks
    /// ([`DeviceFactor::enable_wide`]).
    flat: Option<(D::Index32, D::Real)>,
}

impl<D: Device> Form<D> {
    /// The segments of a form with pointers `ptr` (host) on the device, and zeroed sliced
    /// column indices and values for the build to fill.
    fn new(dev: &D, ptr: &[usize]) -> Result<Self, GpuError> {
        let (rseg, seg) = segments(ptr, SEGMENT);
        let slots = sliced_len(seg.len() - 1);
        Ok(Form {
            col: dev.zeros_index32(slots)?,
            val: dev.zeros(slots)?,
            rseg: dev.upload_index(&idx(&rseg))?,
            seg: dev.upload_index(&idx(&seg))?,
            segments: seg.len() - 1,
            entries: seg.last().copied().unwrap_or(0) - seg.first().copied().unwrap_or(0),
            flat: None,
        })
    }

    /// Bytes of the flat copy ([`Form::build_flat`]).
    fn flat_bytes(&self) -> usize {
        self.entries * (8 + 4)
    }

    /// The flat copy of the sliced form (`dphd_contact_unslice`, one item per entry).
    fn build_flat(&mut self, dev: &D) -> Result<(), GpuError> {
        if self.flat.is_some() {
            return Ok(());
        }
        let len = self.entries.max(1);
        let mut fcol = dev.zeros_index32(len)?;
        let mut fval = dev.zeros(len)?;
        dev.launch(
            Kernel::ContactUnslice,
            self.entries,
            &mut [
                Arg::Int(self.segments as i64),
                Arg::Index(&self.seg),
                Arg::Index32(&self.col),
                Arg::In(&self.val),
                Arg::Index32Out(&mut fcol),
                Arg::Out(&mut fval),
            ],
        )?;
        self.flat = Some((fcol, fval));
        Ok(())
    }

    /// `y = M x` by the two passes (`partial` holds at least `segments` values).
    fn apply(
        &self,
        dev: &D,
        n: usize,
        x: &D::Real,
        partial: &mut D::Real,
        y: &mut D::Real,
    ) -> Result<(), GpuError> {
        dev.launch(
            Kernel::SpmvSegments,
            self.segments,
            &mut [
                Arg::Index(&self.seg),
                Arg::Index32(&self.col),
                Arg::In(&self.val),
                Arg::In(x),
                Arg::Out(partial),
            ],
        )?;
        dev.launch(
            Kernel::SumSegments,
            n,
            &mut [Arg::Index(&self.rseg), Arg::In(partial), Arg::Out(y)],
        )
    }

    /// `Y = M X` on a row-interleaved block of `k` columns by the two passes (`partial` holds
    /// at least `k * segments` values), column by column bitwise as [`Form::apply`].
    fn apply_block(
        &self,
        dev: &D,
        (n, k): (usize, usize),
        x: &D::Real,
        partial: &mut D::Real,
        y: &mut D::Real,
    ) -> Result<(), GpuError> {
        dev.launch(
            Kernel::SpmvSegmentsMulti,
            self.segments * k,
            &mut [
                Arg::Int(k as i64),
                Arg::Index(&self.seg),
                Arg::Index32(&self.col),
                Arg::In(&self.val),
                Arg::In(x),
                Arg::Out(partial),
            ],
        )?;
        dev.launch(
            Kernel::SumSegmentsMulti,
            n * k,
            &mut [
                Arg::Int(k as i64),
                Arg::Index(&self.rseg),
                Arg::In(partial),
                Arg::Out(y),
            ],
        )
    }

    /// `Y = M X` on a row-interleaved block of `k` columns, one item per row and column
    /// (for many columns: no partial sums to hold), column by column bitwise as
    /// [`Form::apply`].
    fn apply_many(
        &self,
        dev: &D,
        n: usize,
        k: usize,
        x: &D::Real,
        y: &mut D::Real,
    ) -> Result<(), GpuError> {
        if let Some((col, val)) = self.flat.as_ref() {
            // the flat copy: the same sums in the same order (docs/gpu.md "Next" 1)
            return dev.launch(
                Kernel::ContactSpmvWide,
                n * k,
                &mut [
                    Arg::Int(k as i64),
                    Arg::Index(&self.rseg),
                    Arg::Index(&self.seg),
                    Arg::Index32(col),
                    Arg::In(val),
                    Arg::In(x),
                    Arg::Out(y),
                ],
            );
        }
        dev.launch(
            Kernel::SpmvSegmentedMulti,
            n * k,
            &mut [
                Arg::Int(k as i64),
                Arg::Index(&self.rseg),
                Arg::Index(&self.seg),
                Arg::Index32(&self.col),
                Arg::In(&self.val),
                Arg::In(x),
                Arg::Out(y),
            ],
        )
    }
}

struct Levels<D: Device> {
    ptr: Vec<usize>,
    rows: D::Index,
}

struct Inverse<D: Device> {
    /// S in CSC = rows of S^T (x = S^T y).
    cols: Form<D>,
    /// S in CSR (y = S b), values gathered from the CSC values through the transpose map.
    rows: Form<D>,
    /// The first pass's partial sums (the larger form's segment count, times [`BLOCK`]).
    partial: D::Real,
}

/// $L$ on the device with both solve paths (spec §5.2–5.3).
pub struct DeviceFactor<D: Device> {
    n: usize,
    perm: D::Index,
    iperm: D::Index,
    lower_ptr: D::Index,
    lower_col: D::Index,
    lower_val: D::Real,
    upper_ptr: D::Index,
    upper_col: D::Index,
    upper_val: D::Real,
    lower_levels: Levels<D>,
    upper_levels: Levels<D>,
    inverse: Option<Inverse<D>>,
    work: D::Real,
    work2: D::Real,
    /// The memory budget of the explicit inverse factor (and of the wide blocks' flat copy).
    budget_bytes: usize,
    /// The path [`DeviceFactor::solve`] takes, and why.
    pub path: SolvePath,
}

/// The host's part of building $S$ on the device ([`DeviceFactor`]), $O(n)$: the columns by
/// elimination-tree depth (`level_ptr`, `by_depth`: the launch schedule) with their depths and
/// parents (`-1` at a root), a postorder (`post`, `first`: row $i$'s columns are
/// `post[first[i]..]`), and the pointers of the column form (path lengths) and of the row form
/// (subtree sizes).
pub struct InversePlan {
    pub level_ptr: Vec<usize>,
    pub by_depth: Vec<usize>,
    pub depth: Vec<usize>,
    pub parent: Vec<i64>,
    pub post: Vec<usize>,
    pub first: Vec<usize>,
    pub col_ptr: Vec<usize>,
    pub row_ptr: Vec<usize>,
}

impl InversePlan {
    pub fn new(f: &SimplicialFactor) -> Self {
        let ((level_ptr, by_depth), depth) = f.columns_by_depth();
        let (post, first, size) = f.postorder();
        InversePlan {
            col_ptr: prefix_sums(depth.iter().map(|d| d + 1)),
            row_ptr: prefix_sums(size.into_iter()),
            parent: f
                .parent
                .iter()
                .map(|&p| i64::try_from(p).unwrap_or(-1))
                .collect(),
            level_ptr,
            by_depth,
            depth,
            post,
            first,
        }
    }
}

impl<D: Device> DeviceFactor<D> {
    /// Upload `f`; build $S$ on the device when its bytes fit `budget_bytes`.
    pub fn new(dev: &D, f: &SimplicialFactor, budget_bytes: usize) -> Result<Self, GpuError> {
        let n = f.n;
        let (rp, cols, map) = f.lower_csr();
        let lower_vals: Vec<f64> = map.iter().map(|&p| f.values[p]).collect();
        let ((lp, lr), (up, ur)) = f.levels();
        let nnz_s = f.inverse_nnz();
        let bytes = inverse_factor_bytes(nnz_s, n);
        let mut me = DeviceFactor {
            n,
            perm: dev.upload_index(&idx(&f.perm))?,
            iperm: dev.upload_index(&idx(&f.iperm))?,
            lower_ptr: dev.upload_index(&idx(&rp))?,
            lower_col: dev.upload_index(&idx(&cols))?,
            lower_val: dev.upload(&lower_vals)?,
            upper_ptr: dev.upload_index(&idx(&f.col_ptr))?,
            upper_col: dev.upload_index(&idx(&f.row_idx))?,
            upper_val: dev.upload(&f.values)?,
            lower_levels: Levels {
                ptr: lp,
                rows: dev.upload_index(&idx(&lr))?,
            },
            upper_levels: Levels {
                ptr: up,
                rows: dev.upload_index(&idx(&ur))?,
            },
            inverse: None,
            work: dev.zeros(n)?,
            work2: dev.zeros(n)?,
            budget_bytes,
            path: SolvePath::Triangular {
                nnz_s,
                budget_bytes,
            },
        };
        // the forms' column indices are 32-bit: rows of S beyond 2^31 take the triangular path
        if bytes <= budget_bytes && n <= i32::MAX as usize {
            me.inverse = Some(me.build_inverse(dev, f)?);
            me.path = SolvePath::InverseFactor { nnz_s, bytes };
        }
        Ok(me)
    }

    /// $S=L^{-1}$ on the device (Eq. 32), top down along the elimination tree (one launch per
    /// depth for its index pattern and one for its values, one item per column and path
    /// position), and its row form (one item per entry, through a postorder). The host does
    /// only $O(n)$ work: the pointers, depths, parents and the postorder (on the 1M-tet box its
    /// patterns, built on the host before 2026-11-27, took 38 s of one core here).
    fn build_inverse(&self, dev: &D, f: &SimplicialFactor) -> Result<Inverse<D>, GpuError> {
        let n = self.n;
        let InversePlan {
            level_ptr,
            by_depth,
            depth,
            parent,
            post,
            first,
            col_ptr: sp,
            row_ptr: rp,
        } = InversePlan::new(f);
        let nnz = sp[n];
        let mut cols_form = Form::new(dev, &sp)?;
        let order = dev.upload_index(&idx(&by_depth))?;
        let depth = dev.upload_index(&idx(&depth))?;
        let parent = dev.upload_index(&parent)?;
        // top down along the elimination tree: one depth per launch (a column's path and
        // values read its parent's and its ancestors', which are shallower)
        for (d, w) in level_ptr.windows(2).enumerate() {
            let len = d + 1;
            let items = (w[1] - w[0]) * len;
            dev.launch(
                Kernel::InversePatternLevel,
                items,
                &mut [
                    Arg::Int(len as i64),
                    Arg::Int(w[0] as i64),
                    Arg::Index(&order),
                    Arg::Index(&parent),
                    Arg::Index(&cols_form.rseg),
                    Arg::Index32Out(&mut cols_form.col),
                ],
            )?;
            dev.launch(
                Kernel::InverseFactorLevel,
                items,
                &mut [
                    Arg::Int(len as i64),
                    Arg::Int(w[0] as i64),
                    Arg::Index(&order),
                    Arg::Index(&depth),
                    Arg::Index(&self.upper_ptr),
                    Arg::Index(&self.upper_col),
                    Arg::In(&self.upper_val),
                    Arg::Index(&cols_form.rseg),
                    Arg::Out(&mut cols_form.val),
                ],
            )?;
        }
        drop((order, parent));
        let row_ptr = dev.upload_index(&idx(&rp))?;
        let post = dev.upload_index(&idx(&post))?;
        let first = dev.upload_index(&idx(&first))?;
        let mut rows_form = Form::new(dev, &rp)?;
        dev.launch(
            Kernel::InverseRows,
            nnz,
            &mut [
                Arg::Int(n as i64),
                Arg::Index(&row_ptr),
                Arg::Index(&rows_form.rseg),
                Arg::Index(&post),
                Arg::Index(&first),
                Arg::Index(&depth),
                Arg::Index(&cols_form.rseg),
                Arg::In(&cols_form.val),
                Arg::Index32Out(&mut rows_form.col),
                Arg::Out(&mut rows_form.val),
            ],
        )?;
        drop((row_ptr, post, first, depth));
        let partial = dev.zeros(BLOCK * cols_form.segments.max(rows_form.segments))?;
        Ok(Inverse {
            cols: cols_form,
            rows: rows_form,
            partial,
        })
    }

    /// Solve $P^TLL^TP\,x=b$ on the chosen path.
    pub fn solve(&mut self, dev: &D, b: &[f64]) -> Result<Vec<f64>, GpuError> {
        if self.inverse.is_some() {
            self.solve_inverse(dev, b)
        } else {
            self.solve_triangular(dev, b)
        }
    }

    fn permute_in(&mut self, dev: &D, b: &[f64]) -> Result<(), GpuError> {
        dev.write(&mut self.work2, b)?;
        dev.launch(
            Kernel::GatherPerm,
            self.n,
            &mut [
                Arg::Index(&self.perm),
                Arg::In(&self.work2),
                Arg::Out(&mut self.work),
            ],
        )
    }

    fn permute_out(&mut self, dev: &D) -> Result<Vec<f64>, GpuError> {
        dev.launch(
            Kernel::GatherPerm,
            self.n,
            &mut [
                Arg::Index(&self.iperm),
                Arg::In(&self.work),
                Arg::Out(&mut self.work2),
            ],
        )?;
        dev.download(&self.work2)
    }

    /// Level-scheduled $L y = Pb$, $L^T z = y$, $x = P^T z$.
    pub fn solve_triangular(&mut self, dev: &D, b: &[f64]) -> Result<Vec<f64>, GpuError> {
        self.permute_in(dev, b)?;
        self.solve_levels(dev)?;
        self.permute_out(dev)
    }

    /// $x = P^T S^T (S (P b))$: two SpMVs (Eq. 33).
    pub fn solve_inverse(&mut self, dev: &D, b: &[f64]) -> Result<Vec<f64>, GpuError> {
        if self.inverse.is_none() {
            return Err(GpuError::NoInverse);
        }
        self.permute_in(dev, b)?;
        self.solve_spmvs(dev)?;
        self.permute_out(dev)
    }

    /// Solve in place on the device: `v` $\leftarrow P^TL^{-T}L^{-1}Pv$ on the chosen path
    /// (the resident PD iteration: nothing crosses to the host).
    pub fn solve_device(&mut self, dev: &D, v: &mut D::Real) -> Result<(), GpuError> {
        dev.launch(
            Kernel::GatherPerm,
            self.n,
            &mut [Arg::Index(&self.perm), Arg::In(v), Arg::Out(&mut self.work)],
        )?;
        if self.inverse.is_some() {
            self.solve_spmvs(dev)?;
        } else {
            self.solve_levels(dev)?;
        }
        dev.launch(
            Kernel::GatherPerm,
            self.n,
            &mut [Arg::Index(&self.iperm), Arg::In(&self.work), Arg::Out(v)],
        )
    }

    /// Solve in place on a row-interleaved block of `k` ≤ [`BLOCK`] permuted columns:
    /// `a` $\leftarrow L^{-T}L^{-1}$`a` (`b` is scratch of the same size), column by column
    /// bitwise as [`DeviceFactor::solve_device`]'s middle (the caller permutes: the global
    /// solve composes the permutation with its gather and scatter).
    pub fn solve_block_device(
        &mut self,
        dev: &D,
        k: usize,
        a: &mut D::Real,
        b: &mut D::Real,
    ) -> Result<(), GpuError> {
        if k > BLOCK {
            return Err(GpuError::Length {
                expected: BLOCK,
                got: k,
            });
        }
        let n = self.n;
        if let Some(inv) = self.inverse.as_mut() {
            // y = S w (rows of S), z = S^T y (columns of S)
            inv.rows.apply_block(dev, (n, k), a, &mut inv.partial, b)?;
            return inv.cols.apply_block(dev, (n, k), b, &mut inv.partial, a);
        }
        self.levels_block(dev, k, a)
    }

    /// `a` $\leftarrow L^{-T}L^{-1}$`a` on a row-interleaved block of `k` columns by the
    /// level-scheduled triangular solves (one launch per level and direction).
    fn levels_block(&self, dev: &D, k: usize, a: &mut D::Real) -> Result<(), GpuError> {
        let stages = [
            (
                Kernel::TrisolveLowerLevelMulti,
                &self.lower_levels,
                &self.lower_ptr,
                &self.lower_col,
                &self.lower_val,
            ),
            (
                Kernel::TrisolveUpperLevelMulti,
                &self.upper_levels,
                &self.upper_ptr,
                &self.upper_col,
                &self.upper_val,
            ),
        ];
        for (kernel, levels, ptr, col, val) in stages {
            for w in levels.ptr.windows(2) {
                dev.launch(
                    kernel,
                    (w[1] - w[0]) * k,
                    &mut [
                        Arg::Int(k as i64),
                        Arg::Int(w[0] as i64),
                        Arg::Index(&levels.rows),
                        Arg::Index(ptr),
                        Arg::Index(col),
                        Arg::In(val),
                        Arg::Out(a),
                    ],
                )?;
            }
        }
        Ok(())
    }

    /// `work` $\leftarrow L^{-T}L^{-1}$`work` by the level-scheduled triangular solves.
    fn solve_levels(&mut self, dev: &D) -> Result<(), GpuError> {
        let lower = LevelSolve::<D> {
            kernel: Kernel::TrisolveLowerLevel,
            rows: &self.lower_levels.rows,
            ptr: &self.lower_ptr,
            col: &self.lower_col,
            val: &self.lower_val,
        };
        for w in self.lower_levels.ptr.windows(2) {
            lower.level(dev, w[0], w[1], &mut self.work)?;
        }
        let upper = LevelSolve::<D> {
            kernel: Kernel::TrisolveUpperLevel,
            rows: &self.upper_levels.rows,
            ptr: &self.upper_ptr,
            col: &self.upper_col,
            val: &self.upper_val,
        };
        for w in self.upper_levels.ptr.windows(2) {
            upper.level(dev, w[0], w[1], &mut self.work)?;
        }
        Ok(())
    }

    /// `work` $\leftarrow S^T(S\,$`work`$)$ with the explicit inverse factor (Eq. 33), each
    /// product by the segmented two-pass SpMV.
    fn solve_spmvs(&mut self, dev: &D) -> Result<(), GpuError> {
        let inv = self.inverse.as_mut().ok_or(GpuError::NoInverse)?;
        // y = S w (S row form), into work2; z = S^T y (rows of S^T = columns of S), into work
        inv.rows
            .apply(dev, self.n, &self.work, &mut inv.partial, &mut self.work2)?;
        inv.cols
            .apply(dev, self.n, &self.work2, &mut inv.partial, &mut self.work)
    }

    /// Spec §5.2 step 5: the first-use self-check of the inverse-factor path against the
    /// triangular path on a fixed pseudo-random vector; returns the relative difference.
    pub fn self_check(&mut self, dev: &D) -> Result<f64, GpuError> {
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        let v: Vec<f64> = (0..self.n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
            })
            .collect();
        let a = self.solve_triangular(dev, &v)?;
        if self.inverse.is_none() {
            return Ok(0.0);
        }
        let b = self.solve_inverse(dev, &v)?;
        let num: f64 = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y) * (x - y))
            .sum::<f64>()
            .sqrt();
        let den: f64 = a.iter().map(|x| x * x).sum::<f64>().sqrt();
        Ok(num / den.max(f64::MIN_POSITIVE))
    }
}

// --- multi-RHS solves (the contact Delassus columns, issue 15) ---

/// Work buffers of a block of `k` right-hand sides (row-interleaved, `n k` values each).
struct Block<D: Device> {
    k: usize,
    a: D::Real,
    b: D::Real,
}

impl<D: Device> DeviceFactor<D> {
    /// Solve $P^TLL^TP\,X=B$ for `k` right-hand sides at once, on the path [`DeviceFactor::solve`]
    /// takes: `b` and the result are row-interleaved (entry $(r,c)$ at `r * k + c`). One launch
    /// per stage handles every (row, right-hand side) item; each column's arithmetic is that of
    /// [`DeviceFactor::solve`], so the columns equal `k` single solves bitwise.
    pub fn solve_many(&self, dev: &D, b: &[f64], k: usize) -> Result<Vec<f64>, GpuError> {
        let n = self.n;
        if b.len() != n * k {
            return Err(GpuError::Length {
                expected: n * k,
                got: b.len(),
            });
        }
        if k == 0 || n == 0 {
            return Ok(Vec::new());
        }
        let (a, _) = self.solve_many_device(dev, k, dev.upload(b)?, dev.zeros(n * k)?)?;
        dev.download(&a)
    }

    /// Wide blocks (the Delassus columns, [`DeviceFactor::solve_many`]) on a flat (CSR-order)
    /// copy of both forms of $S$ (docs/gpu.md "Next" 1: the sliced layout made the 64-column
    /// solve slower, 6.30 → 9.91 ms on the 56k box), where the inverse factor and the copy
    /// fit the budget together. The same sums in the same order: bitwise the sliced result.
    /// Returns whether the copy is there.
    pub fn enable_wide(&mut self, dev: &D) -> Result<bool, GpuError> {
        let (budget, path) = (self.budget_bytes, &self.path);
        let Some(inv) = self.inverse.as_mut() else {
            return Ok(false);
        };
        let used = match path {
            SolvePath::InverseFactor { bytes, .. } => *bytes,
            SolvePath::Triangular { .. } => 0,
        };
        let extra = inv.rows.flat_bytes() + inv.cols.flat_bytes();
        if inv.rows.flat.is_none() && used.saturating_add(extra) > budget {
            return Ok(false);
        }
        inv.rows.build_flat(dev)?;
        inv.cols.build_flat(dev)?;
        Ok(true)
    }

    /// [`DeviceFactor::solve_many`] on device buffers (the contact's Delassus columns, kept
    /// on the device: docs/gpu.md "Contact on the device"): `a` holds the `k` right-hand
    /// sides (row-interleaved, at least `n k` entries) and is returned holding the solution,
    /// `b` is scratch of the same length; the same launches and bits as `solve_many`.
    pub fn solve_many_device(
        &self,
        dev: &D,
        k: usize,
        a: D::Real,
        b: D::Real,
    ) -> Result<(D::Real, D::Real), GpuError> {
        let n = self.n;
        if k == 0 || n == 0 {
            return Ok((a, b));
        }
        let mut blk = Block::<D> { k, a, b };
        // w = P b (into blk.b)
        self.permute_block(dev, &self.perm, &mut blk, false)?;
        if let Some(inv) = self.inverse.as_ref() {
            // y = S w (into a), z = S^T y (into b)
            inv.rows.apply_many(dev, n, k, &blk.b, &mut blk.a)?;
            inv.cols.apply_many(dev, n, k, &blk.a, &mut blk.b)?;
        } else {
            self.levels_block(dev, k, &mut blk.b)?;
        }
        // x = P^T z (from blk.b into blk.a)
        self.permute_block(dev, &self.iperm, &mut blk, true)?;
        Ok((blk.a, blk.b))
    }

    /// Gather a block through a row permutation: `a -> b`, or `b -> a` when `back`.
    fn permute_block(
        &self,
        dev: &D,
        map: &D::Index,
        blk: &mut Block<D>,
        back: bool,
    ) -> Result<(), GpuError> {
        let (src, dst) = if back {
            (&blk.b, &mut blk.a)
        } else {
            (&blk.a, &mut blk.b)
        };
        dev.launch(
            Kernel::GatherPermMulti,
            self.n * blk.k,
            &mut [
                Arg::Int(blk.k as i64),
                Arg::Index(map),
                Arg::In(src),
                Arg::Out(dst),
            ],
        )
    }
}

/// The level kernels' operands: row list and one triangular matrix in row form.
struct LevelSolve<'a, D: Device> {
    kernel: Kernel,
    rows: &'a D::Index,
    ptr: &'a D::Index,
    col: &'a D::Index,
    val: &'a D::Real,
}

impl<D: Device> LevelSolve<'_, D> {
    /// Solve the rows `rows[s..e)` of one level in place in `x`.
    fn level(&self, dev: &D, s: usize, e: usize, x: &mut D::Real) -> Result<(), GpuError> {
        dev.launch(
            self.kernel,
            e - s,
            &mut [
                Arg::Int(s as i64),
                Arg::Index(self.rows),
                Arg::Index(self.ptr),
                Arg::Index(self.col),
                Arg::In(self.val),
                Arg::Out(x),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{segments, sliced_len, sliced_slot, SEGMENT};

    /// The segments partition every row's entries in order, none longer than the chunk and
    /// none empty; an empty row has none.
    #[test]
    fn segments_partition_the_rows() {
        let ptr = [0usize, 5, 5, 6, 17];
        let (rseg, seg) = segments(&ptr, 4);
        assert_eq!(rseg, vec![0, 2, 2, 3, 6]);
        assert_eq!(seg, vec![0, 4, 5, 6, 10, 14, 17]);
        for r in 0..4 {
            let (a, b) = (rseg[r], rseg[r + 1]);
            if a < b {
                assert_eq!((seg[a], seg[b]), (ptr[r], ptr[r + 1]));
            }
            assert!((a..b).all(|s| seg[s] < seg[s + 1] && seg[s + 1] - seg[s] <= 4));
        }
    }

    /// The device's $S$ (Emulator) holds what the host patterns say: the column form's rows
    /// are the elimination-tree paths, each row of the row form holds the transposed
    /// pattern's columns (as a set: the postorder lists them) with the column form's value of
    /// the same $(i,j)$, bitwise; on a chain (a postordered numbering), a grid under nested
    /// dissection and the grid shuffled.
    #[test]
    fn the_device_built_inverse_factor_matches_the_host_patterns() {
        use super::DeviceFactor;
        use crate::gpu::linalg::factor::{transpose_pattern, SimplicialFactor};
        use crate::gpu::runtime::emulator::Emulator;
        use crate::linalg::ordering::nested_dissection;
        use crate::linalg::CscMatrix;
        let w = 7;
        let id = |i: usize, j: usize| i * w + j;
        let mut conn = vec![];
        for i in 0..w {
            for j in 0..w {
                if i + 1 < w {
                    conn.extend([id(i, j), id(i + 1, j)]);
                }
                if j + 1 < w {
                    conn.extend([id(i, j), id(i, j + 1)]);
                }
            }
        }
        let ptr: Vec<usize> = (0..=conn.len() / 2).map(|e| 2 * e).collect();
        let mut a = CscMatrix::pattern_from_elements(w * w, &conn, &ptr);
        for e in conn.chunks(2) {
            a.add(e[0], e[0], 1.0);
            a.add(e[1], e[1], 1.0);
            a.add(e[0], e[1], -1.0);
            a.add(e[1], e[0], -1.0);
        }
        a.add_diagonal(&vec![0.1; w * w]);
        let (p, ip) = nested_dissection(&a).unwrap();
        // a shuffled numbering (its elimination tree is not postordered)
        let mut shuffled: Vec<usize> = (0..a.n).collect();
        let mut state = 12345u64;
        for k in (1..a.n).rev() {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            shuffled.swap(k, (state >> 33) as usize % (k + 1));
        }
        let mut unshuffled = vec![0; a.n];
        for (k, &c) in shuffled.iter().enumerate() {
            unshuffled[c] = k;
        }
        // the natural numbering of a 1-D chain is a postorder; the grid's orderings are not
        let chain = {
            let mut c = CscMatrix::pattern_from_elements(
                9,
                &(0..8).flat_map(|k| [k, k + 1]).collect::<Vec<_>>(),
                &(0..=8).map(|e| 2 * e).collect::<Vec<_>>(),
            );
            for k in 0..8 {
                c.add(k, k, 1.0);
                c.add(k + 1, k + 1, 1.0);
                c.add(k, k + 1, -1.0);
                c.add(k + 1, k, -1.0);
            }
            c.add_diagonal(&[0.1; 9]);
            c
        };
        let natural: Vec<usize> = (0..9).collect();
        for (a, perm, iperm, postordered) in [
            (&chain, &natural, &natural, true),
            (&a, &p, &ip, false),
            (&a, &shuffled, &unshuffled, false),
        ] {
            let f = SimplicialFactor::new(a, perm, iperm).unwrap();
            let dev = Emulator;
            let df = DeviceFactor::new(&dev, &f, usize::MAX).unwrap();
            let inv = df.inverse.as_ref().expect("inverse factor built");
            let (sp, sr) = f.inverse_pattern();
            let (rp, cols, _) = transpose_pattern(f.n, &sp, &sr);
            let want_rows: Vec<i64> = sr.iter().map(|&r| r as i64).collect();
            let (col_csr, col_val) = unsliced(&sp, &inv.cols.col, &inv.cols.val);
            let (row_csr, row_val) = unsliced(&rp, &inv.rows.col, &inv.rows.val);
            assert_eq!(col_csr, want_rows, "column form: the paths");
            for i in 0..f.n {
                let got = &row_csr[rp[i]..rp[i + 1]];
                let want: Vec<i64> = cols[rp[i]..rp[i + 1]].iter().map(|&c| c as i64).collect();
                let (mut x, mut y) = (got.to_vec(), want.clone());
                x.sort_unstable();
                y.sort_unstable();
                assert_eq!(x, y, "row {i}: the columns whose path passes it");
                for (q, &j) in (rp[i]..rp[i + 1]).zip(got) {
                    let j = j as usize;
                    let at = (sp[j]..sp[j + 1]).find(|&k| sr[k] == i).unwrap();
                    assert_eq!(row_val[q].to_bits(), col_val[at].to_bits());
                }
            }
            let (post, ..) = f.postorder();
            let identity = post.iter().enumerate().all(|(k, &c)| k == c);
            assert_eq!(identity, postordered, "the numberings cover both cases");
        }
    }

    /// A sliced form (`col`, `val` on the emulator, rows `ptr`) back in CSR order; every slot
    /// not an entry's is still zero.
    fn unsliced(ptr: &[usize], col: &[i32], val: &[f64]) -> (Vec<i64>, Vec<f64>) {
        let (rseg, seg) = segments(ptr, SEGMENT);
        assert_eq!(col.len(), sliced_len(seg.len() - 1));
        let mut used = vec![false; col.len()];
        let (mut c, mut v) = (vec![], vec![]);
        for r in 0..ptr.len() - 1 {
            for off in 0..ptr[r + 1] - ptr[r] {
                let at = sliced_slot(rseg[r], off);
                used[at] = true;
                c.push(i64::from(col[at]));
                v.push(val[at]);
            }
        }
        let padding = used.iter().zip(col.iter().zip(val)).filter(|(u, _)| !**u);
        assert!(padding.into_iter().all(|(_, (&c, &v))| c == 0 && v == 0.0));
        (c, v)
    }

    /// The sliced layout puts entry $p$ of the 32 segments of a group side by side (a warp's
    /// loads of one entry are contiguous) and is a bijection onto the group's slots.
    #[test]
    fn sliced_slots_put_a_groups_segments_side_by_side() {
        assert_eq!(sliced_slot(0, 0), 0);
        assert_eq!(sliced_slot(1, 0), 1);
        assert_eq!(sliced_slot(0, 1), 32);
        assert_eq!(sliced_slot(0, 32), 1); // entry 32 of a row is entry 0 of its next segment
        assert_eq!(sliced_slot(32, 0), 1024);
        let mut seen = vec![false; sliced_len(64)];
        for s in 0..64 {
            for p in 0..SEGMENT {
                let at = sliced_slot(s, p);
                assert!(!seen[at]);
                seen[at] = true;
            }
        }
        assert!(seen.iter().all(|&b| b));
    }
}
