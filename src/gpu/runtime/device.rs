//! The device seam: one trait, two implementations (`Emulator` on the host, `Cuda` on an
//! NVIDIA GPU). Everything above it (`gpu::pipeline`) is written once against the trait, so
//! CI exercises the whole orchestration without a GPU.

use super::error::GpuError;
use super::kernels::Kernel;

/// A kernel argument after the implicit item count.
pub enum Arg<'a, D: Device + ?Sized> {
    /// `long long`.
    Int(i64),
    /// `double`.
    Real(f64),
    /// `const double*`.
    In(&'a D::Real),
    /// `double*`.
    Out(&'a mut D::Real),
    /// `const long long*`.
    Index(&'a D::Index),
    /// `const int*`.
    Index32(&'a D::Index32),
    /// `int*` (written: the inverse factor's index patterns, built on the device).
    Index32Out(&'a mut D::Index32),
}

/// A compute device: persistent buffers and kernel launches of `n` independent items.
pub trait Device: Send + Sync {
    /// A device buffer of `f64`.
    type Real: Send + Sync;
    /// A device buffer of `i64`.
    type Index: Send + Sync;
    /// A device buffer of `i32` (indices below 2^31 where a buffer is large: the inverse
    /// factor's columns).
    type Index32: Send + Sync;
    /// Human-readable device name (for logs).
    fn name(&self) -> String;
    /// Copy host data into a new device buffer.
    fn upload(&self, v: &[f64]) -> Result<Self::Real, GpuError>;
    /// Copy host indices into a new device buffer.
    fn upload_index(&self, v: &[i64]) -> Result<Self::Index, GpuError>;
    /// A zeroed buffer of `n` values.
    fn zeros(&self, n: usize) -> Result<Self::Real, GpuError>;
    /// A zeroed 32-bit index buffer of `n` entries (for kernels that write indices).
    fn zeros_index32(&self, n: usize) -> Result<Self::Index32, GpuError>;
    /// Overwrite a buffer from the host (same length).
    fn write(&self, dst: &mut Self::Real, v: &[f64]) -> Result<(), GpuError>;
    /// Copy a buffer back to the host.
    fn download(&self, b: &Self::Real) -> Result<Vec<f64>, GpuError>;
    /// Copy the first `len` values of a buffer back (the reductions' partials: a buffer sized
    /// for the most reductions at once need not cross whole). The default copies it whole.
    fn download_prefix(&self, b: &Self::Real, len: usize) -> Result<Vec<f64>, GpuError> {
        let mut v = self.download(b)?;
        if len > v.len() {
            return Err(GpuError::Length {
                expected: v.len(),
                got: len,
            });
        }
        v.truncate(len);
        Ok(v)
    }
    /// Launch `n` items of kernel `k` with `args` (kinds as in the kernel table), in stream
    /// order after every earlier launch.
    fn launch(&self, k: Kernel, n: usize, args: &mut [Arg<'_, Self>]) -> Result<(), GpuError>;
    /// Free device memory in bytes, where the device can say (sizes the explicit inverse
    /// factor's budget, [`crate::gpu::offload::inverse_budget`]); `None` for the emulator.
    fn free_memory(&self) -> Option<usize> {
        None
    }
    /// What this device has been asked to do so far, where it counts
    /// ([`crate::gpu::counted::Counted`]); `None` for the bare devices.
    fn traffic(&self) -> Option<crate::solver::offload::DeviceTraffic> {
        None
    }
}

/// Check `args` against the kernel table before a launch (both devices call this).
pub(crate) fn check_args<D: Device + ?Sized>(
    k: Kernel,
    args: &[Arg<'_, D>],
) -> Result<(), GpuError> {
    use super::kernels::Kind;
    let kinds = k.args();
    if kinds.len() != args.len() {
        return Err(GpuError::Arguments {
            kernel: k.symbol(),
            why: "wrong number of arguments",
        });
    }
    for (kind, a) in kinds.iter().zip(args) {
        let ok = matches!(
            (kind, a),
            (Kind::Int, Arg::Int(_))
                | (Kind::Real, Arg::Real(_))
                | (Kind::In, Arg::In(_))
                | (Kind::Out, Arg::Out(_))
                | (Kind::Index, Arg::Index(_))
                | (Kind::Index32, Arg::Index32(_))
                | (Kind::Index32Out, Arg::Index32Out(_))
        );
        if !ok {
            return Err(GpuError::Arguments {
                kernel: k.symbol(),
                why: "argument kind differs from the kernel table",
            });
        }
    }
    Ok(())
}
