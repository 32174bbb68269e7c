//! A stable sort of 32-bit (key, value) pairs on a device and the bin ranges of sorted keys
//! (`kernels/sort.cu`): the re-binning of the device MPM substep ([`crate::gpu::mpm`]), written
//! once so that a device contact broad phase can share it (docs/gpu.md "Sort").
//!
//! The sort is a bottom-up merge sort in the kernel subset: pass $w = 1, 2, 4, \dots$ merges
//! runs of width $w$, one item per element finding its output slot by a binary search in the
//! partner run (`dphd_merge_pass`), $\lceil\log_2 n\rceil$ launches ping-ponging between two
//! pairs of arrays. It is **stable**: equal keys keep their input order, so with the values
//! $0..n-1$ ([`KeyValueSort::iota`]) the result is the order of (key, index), the order of the
//! CPU reference's counting sort (`diffphd_mpm`'s `transfer::particle_to_grid`). Bin ranges
//! ([`KeyValueSort::bin_starts`]): one binary search per bin (`dphd_bin_starts`).

use crate::gpu::device::{Arg, Device};
use crate::gpu::kernels::Kernel;
use crate::gpu::GpuError;

/// Two pairs of `len` 32-bit (key, value) arrays on a device; [`KeyValueSort::keys`] and
/// [`KeyValueSort::values`] hold the data, the other pair is the merge passes' scratch.
pub struct KeyValueSort<D: Device> {
    len: usize,
    keys: D::Index32,
    values: D::Index32,
    spare_keys: D::Index32,
    spare_values: D::Index32,
}

impl<D: Device> KeyValueSort<D> {
    /// Zeroed arrays for `len` pairs.
    pub fn new(dev: &D, len: usize) -> Result<Self, GpuError> {
        Ok(Self {
            len,
            keys: dev.zeros_index32(len)?,
            values: dev.zeros_index32(len)?,
            spare_keys: dev.zeros_index32(len)?,
            spare_values: dev.zeros_index32(len)?,
        })
    }

    /// Number of pairs.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no pairs.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The keys (for a kernel that writes them, then [`KeyValueSort::sort`]).
    pub fn keys_mut(&mut self) -> &mut D::Index32 {
        &mut self.keys
    }

    /// The keys (sorted after [`KeyValueSort::sort`]).
    pub fn keys(&self) -> &D::Index32 {
        &self.keys
    }

    /// The keys and the values together (for a kernel that writes both, then
    /// [`KeyValueSort::sort`]: the contact broad phase's (cell, triangle) pairs).
    pub fn pairs_mut(&mut self) -> (&mut D::Index32, &mut D::Index32) {
        (&mut self.keys, &mut self.values)
    }

    /// The values (permuted with their keys by [`KeyValueSort::sort`]).
    pub fn values(&self) -> &D::Index32 {
        &self.values
    }

    /// Values `0..len` (one launch).
    pub fn iota(&mut self, dev: &D) -> Result<(), GpuError> {
        dev.launch(
            Kernel::Iota32,
            self.len,
            &mut [Arg::Index32Out(&mut self.values)],
        )
    }

    /// Sorts the pairs by key, stably (⌈log₂ len⌉ launches; none for len ≤ 1).
    pub fn sort(&mut self, dev: &D) -> Result<(), GpuError> {
        let mut w = 1usize;
        while w < self.len {
            dev.launch(
                Kernel::MergePass,
                self.len,
                &mut [
                    Arg::Int(w as i64),
                    Arg::Index32(&self.keys),
                    Arg::Index32(&self.values),
                    Arg::Index32Out(&mut self.spare_keys),
                    Arg::Index32Out(&mut self.spare_values),
                ],
            )?;
            std::mem::swap(&mut self.keys, &mut self.spare_keys);
            std::mem::swap(&mut self.values, &mut self.spare_values);
            w *= 2;
        }
        Ok(())
    }

    /// `start[c]` for `c = 0..=bins`: the first position of a key `>= c` in the (sorted)
    /// keys, so bin `c` holds positions `start[c]..start[c + 1]` (one launch of `bins + 1`
    /// items; `start` holds at least `bins + 1` entries).
    pub fn bin_starts(&self, dev: &D, bins: usize, start: &mut D::Index32) -> Result<(), GpuError> {
        dev.launch(
            Kernel::BinStarts,
            bins + 1,
            &mut [
                Arg::Int(self.len as i64),
                Arg::Index32(&self.keys),
                Arg::Index32Out(start),
            ],
        )
    }
}

/// Uploads 32-bit indices (|v| < 2^31) through doubles: one upload and one conversion launch
/// (the device seam moves doubles and 64-bit indices only).
pub fn upload_index32<D: Device>(dev: &D, v: &[i32]) -> Result<D::Index32, GpuError> {
    let real: Vec<f64> = v.iter().map(|&k| f64::from(k)).collect();
    let src = dev.upload(&real)?;
    let mut out = dev.zeros_index32(v.len())?;
    dev.launch(
        Kernel::RealToIndex32,
        v.len(),
        &mut [Arg::In(&src), Arg::Index32Out(&mut out)],
    )?;
    Ok(out)
}

/// Downloads the first `len` entries of a 32-bit index buffer through doubles (one launch,
/// one copy).
pub fn download_index32<D: Device>(
    dev: &D,
    b: &D::Index32,
    len: usize,
) -> Result<Vec<i32>, GpuError> {
    let mut real = dev.zeros(len)?;
    dev.launch(
        Kernel::Index32ToReal,
        len,
        &mut [Arg::Index32(b), Arg::Out(&mut real)],
    )?;
    // exact: every entry is an integer below 2^31 in magnitude
    Ok(dev.download(&real)?.into_iter().map(|r| r as i32).collect())
}
