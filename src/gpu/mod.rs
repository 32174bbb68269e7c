//! GPU backend (spec §2.8, §5): CUDA kernels in `kernels/*.cu`, compiled at run time by NVRTC
//! for a GPU (`cuda::Cuda`, feature `cuda`) and at build time as host C++ for the
//! [`Emulator`]. Both implement [`Device`]; the orchestration in [`pipeline`] and [`local`]
//! is written once against it, so CI runs every kernel and the whole orchestration without a
//! GPU. The CPU path ([`crate::linalg::GlobalSystem`], `solver::local`) is the reference.
//! See `docs/gpu.md` for the kernel list, the emulator and the memory budget.

pub mod contact;
pub mod contact_grid;
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
pub use runtime::error::{GpuError, Unavailable};

/// Which backend a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Cpu,
    Cuda,
    /// The host emulator of the GPU kernels (for testing; slow by design).
    Emulator,
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
