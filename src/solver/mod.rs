//! The DiffPhD solver: model arrays, PD forward step with Anderson acceleration and the
//! dual gate, rollout tape, and (see `backward`) the adjoint.

pub mod anderson;
pub mod assembly;
pub mod backward;
pub mod cell_fields;
pub mod config;
pub mod cotangent;
pub mod diffpd;
pub mod error;
pub mod forward;
pub mod gate;
pub mod gradient;
pub mod local;
pub mod loss;
pub mod muscle;
pub mod newton;
pub mod newton_krylov;
pub mod offload;
mod resident;
pub mod rollout;
pub mod simulator;
pub mod stats;
pub mod step;
pub mod timeloop;
pub mod trust_region;

pub use crate::model::{Derived, MaterialParams, Model};
pub use error::SolverError;
pub use simulator::Simulator;
pub use stats::StepStats;
