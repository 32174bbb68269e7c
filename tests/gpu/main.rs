//! The GPU backend: the host emulator's parity with the CPU path (and a CUDA device's, with
//! `--features cuda` on a GPU machine), device Krylov solves, gradient terms, and the NVRTC compile
//! of every kernel.
//!
//! One test binary; each module was a test binary of its own before the workspace split.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod gpu;
mod gpu_gradient_terms;
mod gpu_krylov;
mod gpu_mpm;
mod gpu_mpm_contact;
mod gpu_parity;
mod gpu_rollouts;
mod kernels_compile;
