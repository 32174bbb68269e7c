//! The device runtime: the [`device::Device`] seam, its two implementations (the host
//! [`emulator::Emulator`] and, with feature `cuda`, `cuda::Cuda` over [`nvrtc`]), the
//! counting wrapper, and the kernel table of `kernels/*.cu`.

pub mod counted;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod device;
pub mod emulator;
pub mod error;
pub mod kernels;
pub mod nvrtc;
