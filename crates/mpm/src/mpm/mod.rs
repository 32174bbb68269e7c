//! Material-point bodies: MLS-MPM with APIC transfers on a background grid (seed §IV-B, Eq. 6:
//! "the free motion … is a standard explicit MPM step \[45\]").
//!
//! One substep of size Δt (Hu et al. 2018, MLS-MPM; Jiang et al. 2015, APIC):
//!
//! 1. **P2G** ([`transfer`]): for every grid node i,
//!    mᵢ = Σₚ wᵢₚ mₚ and
//!    (mv)ᵢ = Σₚ wᵢₚ [mₚ vₚ + (mₚ Cₚ − Δt·(4/h²)·Vₚ⁰·Pₚ·Fₚᵀ)(xᵢ − xₚ)],
//!    with quadratic B-spline weights wᵢₚ ([`bspline`]). It is written as a *gather*: each node
//!    sums over the particles binned in its 27 neighbouring cells, in a fixed order.
//! 2. **Grid update** ([`grid`]): vᵢ* = (mv)ᵢ/mᵢ + Δt g, then the wall conditions (sticky,
//!    slip, separating) on the boundary layer of the domain. This is v* of the seed's Eq. (6);
//!    a contact solve (Eq. 7–8) may change the grid velocities here ([`Simulation::grid_mut`]).
//! 3. **G2P**: vₚ = Σᵢ wᵢₚ vᵢ, Cₚ = (4/h²) Σᵢ wᵢₚ vᵢ (xᵢ − xₚ)ᵀ, Fₚ ← (I + Δt Cₚ) Fₚ,
//!    xₚ ← xₚ + Δt vₚ.
//! 4. **Plasticity** ([`plasticity`]): a return mapping projects the elastic Fₚ back onto the
//!    yield surface (von Mises, Drucker–Prager).
//!
//! Elastic models (first Piola–Kirchhoff stress P = ∂ψ/∂F) are in [`constitutive`]; particle
//! seeding in [`seeding`]; energies and momenta in [`diagnostics`]; the MPM side of the
//! MPM–rigid coupling (`Simulation` as [`crate::contact::GridContactProblem`]) in [`coupling`].

pub mod bspline;
pub mod constitutive;
pub mod coupling;
pub mod diagnostics;
pub mod grid;
pub mod particles;
pub mod plasticity;
pub mod seeding;
pub mod sim;
pub mod svd;
pub mod transfer;

pub use constitutive::{ElasticModel, Material};
pub use diagnostics::Diagnostics;
pub use grid::{memory_estimate, Grid, GridSpec, WallKind};
pub use plasticity::Plasticity;
pub use seeding::{Lattice, SeededParticles};
pub use sim::{cfl_time_step, BodySpec, Particles, SimParams, Simulation};

use thiserror::Error;

/// Errors of the MPM core. Every variant names what failed and where.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum MpmError {
    /// A material parameter is out of range.
    #[error("material {material}: {key} = {value} is invalid ({reason})")]
    InvalidMaterial {
        material: usize,
        key: &'static str,
        value: f64,
        reason: &'static str,
    },
    /// A grid or seeding parameter is out of range.
    #[error("{key} = {value} is invalid ({reason})")]
    InvalidParameter {
        key: &'static str,
        value: f64,
        reason: &'static str,
    },
    /// The grid and particle arrays would need more memory than the caller allows.
    #[error(
        "MPM state needs {needed_bytes} bytes ({nodes} grid nodes, {particles} particles), \
         over the budget of {budget_bytes} bytes"
    )]
    MemoryBudget {
        needed_bytes: u64,
        budget_bytes: u64,
        nodes: u64,
        particles: u64,
    },
    /// A particle is outside the region where its full 3×3×3 stencil lies on the grid.
    #[error("substep {substep}: particle {particle} at ({x}, {y}, {z}) is outside the grid")]
    OutsideGrid {
        substep: u64,
        particle: usize,
        x: f64,
        y: f64,
        z: f64,
    },
    /// The CFL guard: a particle moved more than h in one substep.
    #[error(
        "substep {substep}: particle {particle} moved {distance} in one substep, more than the \
         grid spacing h = {h} (reduce the time step)"
    )]
    Cfl {
        substep: u64,
        particle: usize,
        distance: f64,
        h: f64,
    },
    /// A particle's state became NaN or infinite.
    #[error("substep {substep}: particle {particle} has a non-finite {what}")]
    NonFinite {
        substep: u64,
        particle: usize,
        what: &'static str,
    },
    /// A particle's deformation gradient is inverted (det F ≤ 0) under a model that needs J > 0.
    #[error("substep {substep}: particle {particle} is inverted (det F = {det})")]
    Inverted {
        substep: u64,
        particle: usize,
        det: f64,
    },
    /// `finish_substep` was called without a preceding `substep_free_motion`, or vice versa.
    #[error("substep {substep}: {what}")]
    SubstepOrder { substep: u64, what: &'static str },
    /// The caller stopped the run before substep `substep` (a grid problem's `free_motion`
    /// returns it when its owner asks to stop: an interrupt, a deadline).
    #[error("substep {substep}: stopped by the caller")]
    Stopped { substep: u64 },
}
