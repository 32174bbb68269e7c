//! The DiffPhD solver: model arrays, PD forward step with Anderson acceleration and the
//! dual gate, rollout tape, and (see `backward`) the adjoint.

pub mod adjoint;
pub mod assembly;
pub mod auto;
pub mod context;
pub mod diffpd;
pub mod hessian;
pub mod muscle;
pub mod newton;
pub mod offload;
pub mod pd;
pub mod records;
pub mod rollout;
pub mod simulator;
pub mod stages;
pub mod stepper;
pub mod timeloop;

// The stages, adjoint and records under their historical paths (`solver::forward`, ...).
pub use adjoint::{backward, cotangent, gradient, loss, trust_region};
pub use pd::{forward, newton_krylov};
pub use records::{cell_fields, config, error, stats};
pub use stages::{anderson, gate, local};

pub use crate::model::{Derived, MaterialParams, Model};
pub use error::SolverError;
pub use simulator::Simulator;
pub use stats::StepStats;
