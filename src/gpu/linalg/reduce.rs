//! Deterministic two-pass reductions on a device: a first pass of $P$ strided partials
//! (item $k$ sums entries $k, k+P, k+2P, \dots$ in order, so a warp's loads are coalesced),
//! then the $P$ partials summed in order on the host. No atomics: the same bits on every run.

use crate::gpu::device::{Arg, Device};
use crate::gpu::kernels::Kernel;
use crate::gpu::GpuError;

/// Entries per item of a reduction's first pass, at least: a vector of `n3` entries has
/// [`partials`]`(n3)` partials. Until 2026-11-27 each item summed a block of 1,024
/// consecutive entries: an 8k-DoF vector had 8 threads.
pub const ENTRIES_PER_ITEM: usize = 32;

/// Partials of one reduction, at most: each comes back to the host and is summed there in
/// order (51 dot products of the GMRES basis at 4,096 partials are 1.7 MB a copy).
pub const MAX_PARTIALS: usize = 4096;

/// The number $P$ of first-pass items (partials) of a reduction over `n3` entries.
pub fn partials(n3: usize) -> usize {
    n3.div_ceil(ENTRIES_PER_ITEM).clamp(1, MAX_PARTIALS)
}

/// $\sum_j x_j$ over the first `len` entries of `x`: [`partials`]`(len)` strided partials
/// into `partial` (`dphd_sum_partial`; at least that long), summed in order here.
pub fn sum<D: Device>(
    dev: &D,
    (x, len): (&D::Real, usize),
    partial: &mut D::Real,
) -> Result<f64, GpuError> {
    let parts = partials(len);
    dev.launch(
        Kernel::SumPartial,
        parts,
        &mut [Arg::Int(len as i64), Arg::In(x), Arg::Out(partial)],
    )?;
    Ok(dev.download_prefix(partial, parts)?.iter().sum())
}
