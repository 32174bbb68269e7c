//! A [`Device`] that counts what it is asked to do ([`DeviceTraffic`]): every call forwarded
//! to the device inside, with the number of launches (by kernel), items, copies, bytes and
//! the host's wall seconds inside each. The CLI wraps every device in it, so `grad` and
//! `grad.json` report the forward's and the backward's traffic (docs/gpu.md "Profiling
//! without a profiler"); the cost is two clock reads and a few atomic adds per call.

use super::device::{Arg, Device};
use super::error::GpuError;
use super::kernels::Kernel;
use crate::solver::offload::DeviceTraffic;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

/// Counters of one kind of call.
#[derive(Default)]
struct Tally {
    calls: AtomicU64,
    amount: AtomicU64,
    nanos: AtomicU64,
}

impl Tally {
    fn add(&self, amount: usize, since: Instant) {
        self.calls.fetch_add(1, Relaxed);
        self.amount.fetch_add(amount as u64, Relaxed);
        self.nanos
            .fetch_add(since.elapsed().as_nanos() as u64, Relaxed);
    }
    fn read(&self) -> (u64, u64, f64) {
        (
            self.calls.load(Relaxed),
            self.amount.load(Relaxed),
            self.nanos.load(Relaxed) as f64 * 1e-9,
        )
    }
}

/// The shared counters of a [`Counted`] device and its clones.
struct Counters {
    launches: Tally,
    downloads: Tally,
    uploads: Tally,
    /// Launches per kernel, in [`Kernel::ALL`]'s order.
    by_kernel: Vec<AtomicU64>,
}

/// `D` with its traffic counted (clones share the counters).
#[derive(Clone)]
pub struct Counted<D> {
    inner: D,
    counters: Arc<Counters>,
}

impl<D: Device> Counted<D> {
    /// Count the calls made to `inner` from now on.
    pub fn new(inner: D) -> Self {
        Counted {
            inner,
            counters: Arc::new(Counters {
                launches: Tally::default(),
                downloads: Tally::default(),
                uploads: Tally::default(),
                by_kernel: Kernel::ALL.iter().map(|_| AtomicU64::new(0)).collect(),
            }),
        }
    }

    fn uploaded<T>(&self, bytes: usize, t: Instant, r: Result<T, GpuError>) -> Result<T, GpuError> {
        self.counters.uploads.add(bytes, t);
        r
    }
}

impl<D: Device> Device for Counted<D> {
    type Real = D::Real;
    type Index = D::Index;
    type Index32 = D::Index32;

    fn name(&self) -> String {
        self.inner.name()
    }
    fn upload(&self, v: &[f64]) -> Result<D::Real, GpuError> {
        let t = Instant::now();
        self.uploaded(8 * v.len(), t, self.inner.upload(v))
    }
    fn upload_index(&self, v: &[i64]) -> Result<D::Index, GpuError> {
        let t = Instant::now();
        self.uploaded(8 * v.len(), t, self.inner.upload_index(v))
    }
    fn zeros(&self, n: usize) -> Result<D::Real, GpuError> {
        let t = Instant::now();
        self.uploaded(0, t, self.inner.zeros(n))
    }
    fn zeros_index32(&self, n: usize) -> Result<D::Index32, GpuError> {
        let t = Instant::now();
        self.uploaded(0, t, self.inner.zeros_index32(n))
    }
    fn write(&self, dst: &mut D::Real, v: &[f64]) -> Result<(), GpuError> {
        let t = Instant::now();
        self.uploaded(8 * v.len(), t, self.inner.write(dst, v))
    }
    fn download(&self, b: &D::Real) -> Result<Vec<f64>, GpuError> {
        let t = Instant::now();
        let r = self.inner.download(b);
        let bytes = r.as_ref().map_or(0, |v| 8 * v.len());
        self.counters.downloads.add(bytes, t);
        r
    }
    fn download_prefix(&self, b: &D::Real, len: usize) -> Result<Vec<f64>, GpuError> {
        let t = Instant::now();
        let r = self.inner.download_prefix(b, len);
        let bytes = r.as_ref().map_or(0, |v| 8 * v.len());
        self.counters.downloads.add(bytes, t);
        r
    }
    fn launch(&self, k: Kernel, n: usize, args: &mut [Arg<'_, Self>]) -> Result<(), GpuError> {
        let t = Instant::now();
        let mut inner: Vec<Arg<'_, D>> = args
            .iter_mut()
            .map(|a| match a {
                Arg::Int(v) => Arg::Int(*v),
                Arg::Real(v) => Arg::Real(*v),
                Arg::In(b) => Arg::In(&**b),
                Arg::Out(b) => Arg::Out(&mut **b),
                Arg::Index(b) => Arg::Index(&**b),
                Arg::Index32(b) => Arg::Index32(&**b),
                Arg::Index32Out(b) => Arg::Index32Out(&mut **b),
            })
            .collect();
        let r = self.inner.launch(k, n, &mut inner);
        self.counters.launches.add(n, t);
        if let Some(i) = Kernel::ALL.iter().position(|&x| x == k) {
            self.counters.by_kernel[i].fetch_add(1, Relaxed);
        }
        r
    }
    fn free_memory(&self) -> Option<usize> {
        self.inner.free_memory()
    }
    fn traffic(&self) -> Option<DeviceTraffic> {
        let c = &self.counters;
        let (launches, items, launch_seconds) = c.launches.read();
        let (downloads, download_bytes, download_seconds) = c.downloads.read();
        let (uploads, upload_bytes, upload_seconds) = c.uploads.read();
        let kernels = Kernel::ALL
            .iter()
            .zip(&c.by_kernel)
            .map(|(k, n)| (k.symbol().to_string(), n.load(Relaxed)))
            .collect();
        // `since` an empty reading drops the kernels never launched and sorts the rest
        Some(
            DeviceTraffic {
                launches,
                items,
                launch_seconds,
                downloads,
                download_bytes,
                download_seconds,
                uploads,
                upload_bytes,
                upload_seconds,
                kernels,
            }
            .since(&DeviceTraffic::default()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::runtime::emulator::Emulator;

    /// The counters see every call with its size: two uploads (16 and 24 bytes), one
    /// launch of 3 items, one download of 24 bytes; a span is the difference of readings.
    #[test]
    fn counts_calls_bytes_and_kernels() {
        let dev = Counted::new(Emulator);
        let x = dev.upload(&[1.0, 2.0]).unwrap();
        let mut y = dev.upload(&[0.0; 3]).unwrap();
        let before = dev.traffic().unwrap();
        assert_eq!((before.uploads, before.upload_bytes), (2, 40));
        assert_eq!(before.launches, 0);
        dev.launch(
            Kernel::Axpby,
            2,
            &mut [
                Arg::Real(2.0),
                Arg::In(&x),
                Arg::Real(0.0),
                Arg::Out(&mut y),
            ],
        )
        .unwrap();
        let y = dev.download(&y).unwrap();
        assert_eq!(y, vec![2.0, 4.0, 0.0]);
        let span = dev.traffic().unwrap().since(&before);
        assert_eq!((span.launches, span.items), (1, 2));
        assert_eq!((span.downloads, span.download_bytes), (1, 24));
        assert_eq!(span.uploads, 0);
        assert_eq!(span.kernels, vec![(Kernel::Axpby.symbol().to_string(), 1)]);
        assert!(span.summary().contains("1 launches"));
        // a prefix crosses alone, and a prefix longer than the buffer is an error
        let x3 = dev.upload(&[1.0, 2.0, 3.0]).unwrap();
        let before = dev.traffic().unwrap();
        assert_eq!(dev.download_prefix(&x3, 2).unwrap(), vec![1.0, 2.0]);
        assert!(dev.download_prefix(&x3, 4).is_err());
        let span = dev.traffic().unwrap().since(&before);
        assert_eq!((span.downloads, span.download_bytes), (2, 16));
    }
}
