//! The resolved model: what the solver, contact and the optimizer consume. The discrete
//! model (nodes, elements, quadrature samples, per-element and per-body parameters,
//! prescribed motions, loads, attachments, obstacles, muscles, initial state), the
//! quantities derived from its parameters, and the settings vocabulary of the methods.
//!
//! Layering: below the solver and contact, above `material`, `mesh` and `linalg`. It does
//! no I/O and knows no file format: `crate::scene::resolve` builds a [`Model`] from a scene,
//! `ModelBuilder` builds one in tests.

pub mod attachment;
pub mod build;
pub mod builder;
pub mod derive;
pub mod discrete;
pub mod gather;
pub mod geometry;
pub mod memory;
pub mod muscle;
pub mod obstacle;
pub mod settings;

pub use build::BodyMaterial;
pub use builder::{BuildError, ModelBuilder};
pub use derive::Derived;
pub use discrete::{
    euler_rotation, state_direction, BodyInfo, DirichletGroup, ForceGroup, MaterialParams, Model,
    RigidOffset, Samples,
};
pub use settings::*;

/// Deterministic uniform numbers in [-1, 1] (splitmix64), so a seed reproduces a functional.
pub fn seeded_uniform(seed: u64, n: usize) -> Vec<f64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            2.0 * ((z >> 11) as f64 / (1u64 << 53) as f64) - 1.0
        })
        .collect()
}
