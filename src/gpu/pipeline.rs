//! Orchestration written once against [`Device`]: persistent device buffers built once
//! (plan), kernels launched per iteration (execute). Runs on the emulator in CI and on a GPU
//! with `--features cuda`.

use super::device::{Arg, Device};
use super::factor::{transpose_pattern, SimplicialFactor};
use super::kernels::Kernel;
use super::GpuError;

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

/// Bytes the explicit inverse factor needs on the device: values twice (S and its row form)
/// plus both index patterns, plus the value map, plus the segments of both forms and their
/// partial sums for a block of [`BLOCK`] columns (at most `nnz_s / SEGMENT + n` segments per
/// form).
pub fn inverse_factor_bytes(nnz_s: usize, n: usize) -> usize {
    let segs = nnz_s / SEGMENT + n + 1;
    nnz_s * (8 + 8 + 8 + 8 + 8) + 2 * (n + 1) * 8 + (2 * segs + 2 * (n + 1) + BLOCK * segs) * 8
}

/// Columns one block solve on device vectors takes at most ([`DeviceFactor::solve_block_device`]):
/// the three axes of the global solve when they share a free set.
pub const BLOCK: usize = 3;

/// Entries per segment of the segmented SpMV (sparse.cu `dphd_spmv_segments`): rows of $S$
/// hold up to $n$ entries (the root's row: every column), so a thread per row serialised the
/// product on the longest rows (measured on an H100, 2026-11-27, 56k-DoF tet box: 5.4 ms per
/// one-axis solve, slower than the CPU's 4.3 ms).
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

/// One form of $S$ (CSR: its column indices and values) with its segments.
struct Form<D: Device> {
    col: D::Index,
    val: D::Real,
    rseg: D::Index,
    seg: D::Index,
    segments: usize,
}

impl<D: Device> Form<D> {
    fn new(dev: &D, ptr: &[usize], col: &[usize], val: D::Real) -> Result<Self, GpuError> {
        let (rseg, seg) = segments(ptr, SEGMENT);
        Ok(Form {
            col: dev.upload_index(&idx(col))?,
            val,
            rseg: dev.upload_index(&idx(&rseg))?,
            seg: dev.upload_index(&idx(&seg))?,
            segments: seg.len() - 1,
        })
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
                Arg::Index(&self.col),
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
                Arg::Index(&self.col),
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
        dev.launch(
            Kernel::SpmvSegmentedMulti,
            n * k,
            &mut [
                Arg::Int(k as i64),
                Arg::Index(&self.rseg),
                Arg::Index(&self.seg),
                Arg::Index(&self.col),
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
    /// The path [`DeviceFactor::solve`] takes, and why.
    pub path: SolvePath,
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
            path: SolvePath::Triangular {
                nnz_s,
                budget_bytes,
            },
        };
        if bytes <= budget_bytes {
            me.inverse = Some(me.build_inverse(dev, f)?);
            me.path = SolvePath::InverseFactor { nnz_s, bytes };
        }
        Ok(me)
    }

    /// $S=L^{-1}$ on the device (Eq. 32), top down along the elimination tree (one launch per
    /// depth, one item per column and path position), and its row form.
    fn build_inverse(&self, dev: &D, f: &SimplicialFactor) -> Result<Inverse<D>, GpuError> {
        let (sp, sr) = f.inverse_pattern();
        let (rp, cols, map) = transpose_pattern(self.n, &sp, &sr);
        let col_ptr = dev.upload_index(&idx(&sp))?;
        let mut values = dev.zeros(sr.len())?;
        // top down along the elimination tree: one launch per depth (Eq. 32 from S L = I)
        let ((level_ptr, by_depth), depth) = f.columns_by_depth();
        let order = dev.upload_index(&idx(&by_depth))?;
        let depth = dev.upload_index(&idx(&depth))?;
        for (d, w) in level_ptr.windows(2).enumerate() {
            let len = d + 1;
            dev.launch(
                Kernel::InverseFactorLevel,
                (w[1] - w[0]) * len,
                &mut [
                    Arg::Int(len as i64),
                    Arg::Int(w[0] as i64),
                    Arg::Index(&order),
                    Arg::Index(&depth),
                    Arg::Index(&self.upper_ptr),
                    Arg::Index(&self.upper_col),
                    Arg::In(&self.upper_val),
                    Arg::Index(&col_ptr),
                    Arg::Out(&mut values),
                ],
            )?;
        }
        drop((order, depth));
        let map = dev.upload_index(&idx(&map))?;
        let mut row_values = dev.zeros(sr.len())?;
        dev.launch(
            Kernel::GatherPerm,
            sr.len(),
            &mut [
                Arg::Index(&map),
                Arg::In(&values),
                Arg::Out(&mut row_values),
            ],
        )?;
        drop((col_ptr, map));
        let cols_form = Form::new(dev, &sp, &sr, values)?;
        let rows_form = Form::new(dev, &rp, &cols, row_values)?;
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
        let mut blk = Block::<D> {
            k,
            a: dev.upload(b)?,
            b: dev.zeros(n * k)?,
        };
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
        dev.download(&blk.a)
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
    use super::segments;

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
}
