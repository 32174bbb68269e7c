//! Gradients and optimization: finite-difference checks of every parameter class, gradcheck,
//! L-BFGS runs, resume and Real2Sim identification.
//!
//! One test binary; each module was a test binary of its own before the workspace split.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod dice;
mod example_cotangents;
mod field_sysid;
mod gradients;
mod optimize;
mod optimize_resume;
mod param_kinds;
mod real2sim;
mod verify;
