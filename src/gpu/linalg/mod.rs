//! Device linear algebra: the simplicial factor and its solve pipeline, the global system
//! behind `LinearSolver` ([`system::GpuSystem`]), the Krylov space on device vectors and the
//! deterministic reductions.

pub mod axes;
pub mod factor;
pub mod krylov;
pub mod pipeline;
pub mod reduce;
pub mod system;
