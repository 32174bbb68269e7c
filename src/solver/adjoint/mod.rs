//! The backward (spec §7): the step linearization and adjoint solves, the per-step parameter
//! gradients, the cotangent sources (the TOML loss among them) and the backward's
//! trust-region statistics.

pub mod backward;
pub mod cotangent;
pub mod error_estimate;
pub mod gradient;
pub mod loss;
pub mod trust_region;
