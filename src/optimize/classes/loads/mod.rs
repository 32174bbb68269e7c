//! Classes of the external loads: force-group scales, gravity and muscle activations (the
//! right-hand side $f_{ext}$ and the muscle projections of the PD step); their gradients
//! are the adjoint's nodal and per-group sums
//! ([`crate::solver::gradient::accumulate_step`]).

pub mod force_scale;
pub mod gravity;
pub mod muscle_activation;
