//! The particle state, below both the substep driver ([`super::sim`]) and the transfers
//! ([`super::transfer`]).

use nalgebra::{Matrix3, Vector3};

use super::plasticity::PlasticState;

/// Particle state (structure of arrays). Kinematic state is public for setting initial
/// conditions; mass, volume and material are fixed when the simulation is built.
#[derive(Debug, Clone, Default)]
pub struct Particles {
    pub x: Vec<Vector3<f64>>,
    pub v: Vec<Vector3<f64>>,
    /// APIC affine velocity Cₚ (≈ ∇v at the particle).
    pub c: Vec<Matrix3<f64>>,
    /// Elastic deformation gradient F_E.
    pub f: Vec<Matrix3<f64>>,
    pub(crate) mass: Vec<f64>,
    /// Initial volume V⁰.
    pub(crate) volume: Vec<f64>,
    pub plastic: Vec<PlasticState>,
    /// Index into the simulation's material table.
    pub(crate) material: Vec<u32>,
}

impl Particles {
    /// Particle masses ρV⁰ (fixed at construction).
    pub fn mass(&self) -> &[f64] {
        &self.mass
    }

    /// Initial volumes V⁰ (fixed at construction).
    pub fn volume(&self) -> &[f64] {
        &self.volume
    }

    /// Material (= body) index of each particle (fixed at construction).
    pub fn material(&self) -> &[u32] {
        &self.material
    }

    pub fn len(&self) -> usize {
        self.x.len()
    }

    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }
}
