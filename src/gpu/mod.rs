//! GPU backend (spec §2.8, §5): CUDA kernels in `kernels/*.cu`, compiled at run time by NVRTC
//! for a GPU (`cuda::Cuda`, feature `cuda`) and at build time as host C++ for the
//! [`Emulator`]. Both implement [`Device`]; the orchestration in [`pipeline`] and [`local`]
//! is written once against it, so CI runs every kernel and the whole orchestration without a
//! GPU. The CPU path ([`crate::linalg::GlobalSystem`], `solver::local`) is the reference.
//! See `docs/gpu.md` for the kernel list, the emulator and the memory budget.

pub mod gradient;
pub mod linalg;
pub mod local;
pub mod mpm;
pub mod mpm_contact;
pub mod offload;
pub mod resident;
pub mod runtime;
pub mod sort;

// The runtime and the linear algebra under their historical paths (`gpu::device`, `gpu::system`).
pub use linalg::{factor, krylov, pipeline, reduce, system};
#[cfg(feature = "cuda")]
pub use runtime::cuda;
pub use runtime::{counted, device, emulator, kernels, nvrtc};

pub use counted::Counted;
pub use device::{Arg, Device};
pub use emulator::Emulator;
pub use kernels::Kernel;

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
    Compile {
        file: &'static str,
        log: nvrtc::NvrtcError,
    },
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

/// A failure building the device system at the accelerator seam.
impl From<system::GpuSystemError> for crate::solver::offload::OffloadError {
    fn from(e: system::GpuSystemError) -> Self {
        crate::solver::offload::OffloadError::Device(Box::new(e))
    }
}

/// Which backend a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Cpu,
    Cuda,
    /// The host emulator of the GPU kernels (for testing; slow by design).
    Emulator,
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
    Nvrtc(#[from] nvrtc::NvrtcError),
}

/// Reports (`diffphd doctor --json`) carry the message.
impl serde::Serialize for Unavailable {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Why the CUDA backend is not available, or `Ok(())` when it is.
pub fn cuda_status() -> Result<(), Unavailable> {
    #[cfg(not(feature = "cuda"))]
    {
        Err(Unavailable::NoFeature)
    }
    #[cfg(feature = "cuda")]
    {
        cuda::probe().map(|_| ())
    }
}

/// What `diffphd doctor` reports about the GPU side.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DoctorReport {
    /// `cuda` feature compiled in.
    pub cuda_feature: bool,
    /// Driver + device, or why not.
    pub device: Result<String, Unavailable>,
    /// NVRTC library and version, or why not.
    pub nvrtc: Result<String, Unavailable>,
    /// Whether the host emulator is built in (always: `build.rs` compiles it).
    pub emulator: bool,
    /// Kernel sources embedded.
    pub kernels: Vec<&'static str>,
}

/// Probe everything without panicking.
pub fn doctor() -> DoctorReport {
    let nvrtc = nvrtc::Nvrtc::load()
        .and_then(|n| {
            let (a, b) = n.version()?;
            Ok(format!("{} (NVRTC {a}.{b})", n.soname))
        })
        .map_err(Unavailable::from);
    #[cfg(feature = "cuda")]
    let device = cuda::probe();
    #[cfg(not(feature = "cuda"))]
    let device = cuda_status().map(|_| String::new());
    DoctorReport {
        cuda_feature: cfg!(feature = "cuda"),
        device,
        nvrtc,
        emulator: true,
        kernels: kernels::SOURCES.iter().map(|(p, _)| *p).collect(),
    }
}
