//! Deterministic two-pass reductions on a device: a first pass of $P$ strided partials
//! (item $k$ sums entries $k, k+P, k+2P, \dots$ in order, so a warp's loads are coalesced),
//! then the $P$ partials summed in order on the host. No atomics: the same bits on every run.
//! The `Reducer` batches several such reductions into one copy; `lincomb` and `copy` are
//! the device vector updates the resident PD iteration and the Krylov space share.

use crate::gpu::runtime::device::{Arg, Device};
use crate::gpu::runtime::error::GpuError;
use crate::gpu::runtime::kernels::Kernel;

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

/// The deterministic two-pass reductions: chunk partials on the device, summed in order on
/// the host, or, from [`DEVICE_SUM_FROM`] partials on, on the device (`dphd_sum_groups`,
/// the same order and bits) so that only the sums cross. Several reductions write one
/// buffer at their own offsets and come back in one copy: each copy is a round trip that
/// stalls the launch queue (docs/gpu.md "Profiling").
pub(crate) struct Reducer<D: Device> {
    n3: usize,
    chunks: usize,
    /// Reductions (norms or dot products) one copy holds.
    capacity: usize,
    partial: D::Real,
    /// The device's second pass: one sum per reduction.
    sums: D::Real,
    /// Partials from which the second pass runs on the device ([`DEVICE_SUM_FROM`]).
    device_sum_from: usize,
}

/// Partials (256 KiB) from which a copy of reductions is summed on the device first: a
/// 300-vector Gram–Schmidt pass over the 1M-tet box's 557k-entry vectors writes 4,096
/// partials per dot product, 9.8 MB a copy, against 2.4 kB of sums; below this the copy is
/// small and the extra launch not worth it.
pub(crate) const DEVICE_SUM_FROM: usize = 32 * 1024;

/// Norms one [`Reducer`] returns together at least (the PD map's eight).
pub(crate) const NORMS: usize = 8;

/// One block of dot products for [`Reducer::dots_many`]: $a\cdot B_c$ for the `q` vectors
/// $B_c$ stored one after another in `b`, `a` starting at its offset.
pub(crate) type DotsRequest<'a, D> = (
    (&'a <D as Device>::Real, usize),
    &'a <D as Device>::Real,
    usize,
);

impl<D: Device> Reducer<D> {
    /// Reductions over vectors of `n3` entries, at most `q` (and at least [`NORMS`]) at once.
    pub(crate) fn new(dev: &D, n3: usize, q: usize) -> Result<Self, GpuError> {
        let chunks = partials(n3);
        let capacity = q.max(NORMS);
        Ok(Reducer {
            n3,
            chunks,
            capacity,
            partial: dev.zeros(capacity * chunks)?,
            sums: dev.zeros(capacity)?,
            device_sum_from: DEVICE_SUM_FROM,
        })
    }

    /// The second pass on the device from `partials` partials on (tests force both paths).
    #[cfg(test)]
    pub(crate) fn with_device_sum_from(mut self, partials: usize) -> Self {
        self.device_sum_from = partials;
        self
    }

    fn check(&self, count: usize) -> Result<(), GpuError> {
        if count <= self.capacity {
            Ok(())
        } else {
            Err(GpuError::Length {
                expected: self.capacity,
                got: count,
            })
        }
    }

    /// The sums of the first `count` groups of chunk partials, in order, after one copy (of
    /// those groups only).
    fn sums(&mut self, dev: &D, count: usize) -> Result<Vec<f64>, GpuError> {
        if count > 0 && count * self.chunks >= self.device_sum_from {
            dev.launch(
                Kernel::SumGroups,
                count,
                &mut [
                    Arg::Int(self.chunks as i64),
                    Arg::In(&self.partial),
                    Arg::Out(&mut self.sums),
                ],
            )?;
            return dev.download_prefix(&self.sums, count);
        }
        let p = dev.download_prefix(&self.partial, count * self.chunks)?;
        Ok(p.chunks(self.chunks)
            .take(count)
            .map(|c| c.iter().sum())
            .collect())
    }

    /// $\|a-b\|$ for each pair, in one copy.
    pub(crate) fn dists(
        &mut self,
        dev: &D,
        pairs: &[(&D::Real, &D::Real)],
    ) -> Result<Vec<f64>, GpuError> {
        self.check(pairs.len())?;
        for (i, (a, b)) in pairs.iter().enumerate() {
            dev.launch(
                Kernel::DiffSqPartial,
                self.chunks,
                &mut [
                    Arg::Int(self.n3 as i64),
                    Arg::Int((i * self.chunks) as i64),
                    Arg::In(*a),
                    Arg::In(*b),
                    Arg::Out(&mut self.partial),
                ],
            )?;
        }
        Ok(self
            .sums(dev, pairs.len())?
            .into_iter()
            .map(f64::sqrt)
            .collect())
    }

    /// Each request's dot products ([`DotsRequest`]), in one copy.
    pub(crate) fn dots_many(
        &mut self,
        dev: &D,
        requests: &[DotsRequest<'_, D>],
    ) -> Result<Vec<Vec<f64>>, GpuError> {
        let total: usize = requests.iter().map(|r| r.2).sum();
        self.check(total)?;
        let mut first = 0;
        for &((a, a_off), b, q) in requests {
            dev.launch(
                Kernel::DotsPartial,
                q * self.chunks,
                &mut [
                    Arg::Int(self.n3 as i64),
                    Arg::Int(self.chunks as i64),
                    Arg::Int(a_off as i64),
                    Arg::Int((first * self.chunks) as i64),
                    Arg::In(a),
                    Arg::In(b),
                    Arg::Out(&mut self.partial),
                ],
            )?;
            first += q;
        }
        let mut all = self.sums(dev, total)?.into_iter();
        Ok(requests
            .iter()
            .map(|r| all.by_ref().take(r.2).collect())
            .collect())
    }

    /// $a\cdot B_c$ for the `q` vectors $B_c$ of the block `b`, `a` starting at `a_off`.
    pub(crate) fn dots(
        &mut self,
        dev: &D,
        a: (&D::Real, usize),
        b: &D::Real,
        q: usize,
    ) -> Result<Vec<f64>, GpuError> {
        Ok(self.dots_many(dev, &[(a, b, q)])?.remove(0))
    }
}

/// `out` $=a\,x+b\,y$ on `n` entries.
pub(crate) fn lincomb<D: Device>(
    dev: &D,
    n: usize,
    (a, x): (f64, &D::Real),
    (b, y): (f64, &D::Real),
    out: &mut D::Real,
) -> Result<(), GpuError> {
    dev.launch(
        Kernel::Lincomb,
        n,
        &mut [
            Arg::Real(a),
            Arg::In(x),
            Arg::Real(b),
            Arg::In(y),
            Arg::Out(out),
        ],
    )
}

/// `dst` $=$ `src` on `n` entries.
pub(crate) fn copy<D: Device>(
    dev: &D,
    n: usize,
    src: &D::Real,
    dst: &mut D::Real,
) -> Result<(), GpuError> {
    dev.launch(Kernel::Copy, n, &mut [Arg::In(src), Arg::Out(dst)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::runtime::emulator::Emulator;

    /// The device's second pass (`dphd_sum_groups`) returns the host's in-order sums bit for
    /// bit, for norms and for blocks of dot products, one copy of `count` numbers instead of
    /// `count` × partials.
    #[test]
    fn device_second_pass_equals_the_host_sums_bitwise() {
        let dev = crate::gpu::runtime::counted::Counted::new(Emulator);
        let n3 = 5_000;
        let q = 40;
        let noise = |k: usize| -> Vec<f64> {
            (0..k)
                .map(|i| ((i * 7919 + 13) % 1009) as f64 / 1009.0 - 0.37)
                .collect()
        };
        let a = dev.upload(&noise(n3)).unwrap();
        let b = dev
            .upload(&noise(q * n3)[..].iter().rev().copied().collect::<Vec<_>>())
            .unwrap();
        let run = |from: usize| {
            let mut red = Reducer::new(&dev, n3, q)
                .unwrap()
                .with_device_sum_from(from);
            let before = dev.traffic().unwrap();
            let dots = red.dots(&dev, (&a, 0), &b, q).unwrap();
            let dists = red.dists(&dev, &[(&a, &b), (&b, &a)]).unwrap();
            let after = dev.traffic().unwrap();
            (dots, dists, after.download_bytes - before.download_bytes)
        };
        let (host_dots, host_dists, host_bytes) = run(usize::MAX);
        let (dev_dots, dev_dists, dev_bytes) = run(0);
        assert_eq!(host_dots, dev_dots);
        assert_eq!(host_dists, dev_dists);
        let parts = partials(n3);
        assert_eq!(host_bytes, ((q + 2) * parts * 8) as u64);
        assert_eq!(dev_bytes, ((q + 2) * 8) as u64);
    }
}
