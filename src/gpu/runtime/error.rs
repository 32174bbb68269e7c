//! The errors of the device layer: a device call's failure ([`GpuError`]), why the CUDA
//! backend is not available ([`Unavailable`]) and NVRTC's own ([`NvrtcError`]), with the
//! conversion to the solver's accelerator seam (`solver::offload::OffloadError`).

/// Errors of the device layer.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("kernel {kernel}: {why}")]
    Arguments {
        kernel: &'static str,
        why: &'static str,
    },
    #[error("buffer length {got} differs from the device buffer's {expected}")]
    Length { expected: usize, got: usize },
    #[error("the inverse-factor path was not built (over the memory budget)")]
    NoInverse,
    #[error("CUDA: {0}")]
    Cuda(String),
    /// CUDA (or NVRTC) is not available (in the message, not a `source()`, so that a
    /// printed chain names it once).
    #[error("CUDA: {0}")]
    Unavailable(Unavailable),
    #[error("{file}: NVRTC compile failed:\n{log}")]
    Compile { file: &'static str, log: NvrtcError },
}

impl From<Unavailable> for GpuError {
    fn from(e: Unavailable) -> Self {
        GpuError::Unavailable(e)
    }
}

/// A device failure at the accelerator seam (the solver knows no device types).
impl From<GpuError> for crate::solver::offload::OffloadError {
    fn from(e: GpuError) -> Self {
        crate::solver::offload::OffloadError::Device(Box::new(e))
    }
}

/// Why the CUDA backend (or one of its parts) is not available.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Unavailable {
    #[error("this binary was built without the `cuda` feature (rebuild with `--features cuda`)")]
    NoFeature,
    #[error("no CUDA driver library (libcuda.so.1) on this machine")]
    NoDriver,
    /// The driver's message.
    #[error("no usable CUDA device: {0}")]
    NoDevice(String),
    /// A driver query failed (the driver's message).
    #[error("{0}")]
    Driver(String),
    #[error(transparent)]
    Nvrtc(#[from] NvrtcError),
}

/// Reports (`diffphd doctor --json`) carry the message.
impl serde::Serialize for Unavailable {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Why NVRTC is not available or a compile failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NvrtcError {
    /// No library of `NAMES` loads; `last` is the loader's message for the last one.
    #[error(
        "NVRTC not found (tried {tried}; put the directory of libnvrtc on LD_LIBRARY_PATH): {last}"
    )]
    NotFound { tried: String, last: String },
    /// A symbol is missing from the loaded library (the loader's message).
    #[error("{0}")]
    Symbol(String),
    #[error("{what} failed with NVRTC status {status}")]
    Status { what: &'static str, status: i32 },
    #[error("{name}: NUL byte in source")]
    Nul { name: String },
    /// NVRTC handed back a string without its terminating NUL.
    #[error("{0}")]
    Unterminated(String),
    /// The compile failed: NVRTC's log (it names the file and line).
    #[error("{0}")]
    Log(String),
}

/// Reports (`diffphd doctor --json`) carry the message.
impl serde::Serialize for NvrtcError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
