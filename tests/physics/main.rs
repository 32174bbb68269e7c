//! Physics against known answers and the solver's stopping tests: beam theory, wave speed,
//! free fall, momentum, convergence, the defaults' accuracy, the baselines, muscles and attachments.
//!
//! One test binary; each module was a test binary of its own before the workspace split.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod attachment;
mod auto_method;
mod baselines;
mod convergence;
mod defaults_accuracy;
mod muscle;
mod newton_roundoff;
mod physics;
mod schwarz;
