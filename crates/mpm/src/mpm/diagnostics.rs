//! Per-frame diagnostics: energies, momenta and per-particle stress.
//!
//! - kinetic energy T = Σₚ ½ mₚ |vₚ|², and the APIC affine part T_C = Σₚ ½ mₚ tr(Cₚ Dₚ Cₚᵀ)
//!   = Σₚ ½ mₚ (h²/4) ‖Cₚ‖²_F (Jiang et al. 2015, §5);
//! - elastic energy Σₚ Vₚ⁰ ψ(Fₚ); gravitational energy −Σₚ mₚ g·xₚ;
//! - linear momentum Σₚ mₚ vₚ;
//! - angular momentum (APIC, Jiang et al. 2015 §5.3) L = Σₚ mₚ [xₚ × vₚ + (h²/4)·a(Cₚ)] with
//!   a(C) = (C₃₂ − C₂₃, C₁₃ − C₃₁, C₂₁ − C₁₂): the affine term is ε : (Cₚ Dₚ)ᵀ with
//!   Dₚ = Σᵢ wᵢₚ (xᵢ − xₚ)(xᵢ − xₚ)ᵀ = (h²/4) I. This is exactly the grid's Σᵢ xᵢ × mᵢ vᵢ
//!   after P2G, so the transfers conserve it.

use nalgebra::{Matrix3, Vector3};

use super::sim::Simulation;

/// Energies and momenta of the particle state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Diagnostics {
    pub kinetic: f64,
    pub affine_kinetic: f64,
    pub elastic: f64,
    pub gravitational: f64,
    pub linear_momentum: Vector3<f64>,
    pub angular_momentum: Vector3<f64>,
    /// Σₚ mₚ |xₚ| |vₚ|: the scale against which angular momentum errors are measured.
    pub momentum_scale: f64,
    pub mass: f64,
}

/// The axial vector a(C) = (C₃₂ − C₂₃, C₁₃ − C₃₁, C₂₁ − C₁₂) = ε : Cᵀ.
pub fn axial(c: &Matrix3<f64>) -> Vector3<f64> {
    Vector3::new(
        c[(2, 1)] - c[(1, 2)],
        c[(0, 2)] - c[(2, 0)],
        c[(1, 0)] - c[(0, 1)],
    )
}

impl Simulation {
    /// Energies and momenta (formulas in the module docs).
    pub fn diagnostics(&self) -> Diagnostics {
        let p = self.particles();
        let h = self.grid().spec().h;
        let d = h * h / 4.0;
        let g = self.params().gravity;
        let mut out = Diagnostics {
            kinetic: 0.0,
            affine_kinetic: 0.0,
            elastic: 0.0,
            gravitational: 0.0,
            linear_momentum: Vector3::zeros(),
            angular_momentum: Vector3::zeros(),
            momentum_scale: 0.0,
            mass: 0.0,
        };
        for i in 0..p.len() {
            let m = p.mass[i];
            let (x, v) = (p.x[i], p.v[i]);
            out.mass += m;
            out.kinetic += 0.5 * m * v.norm_squared();
            out.affine_kinetic += 0.5 * m * d * p.c[i].norm_squared();
            let mat = &self.materials()[p.material[i] as usize];
            out.elastic += p.volume[i] * mat.energy_density(&p.f[i]);
            out.gravitational -= m * g.dot(&x);
            out.linear_momentum += m * v;
            out.angular_momentum += m * (x.cross(&v) + d * axial(&p.c[i]));
            out.momentum_scale += m * x.norm() * v.norm();
        }
        out
    }

    /// Cauchy stress σ = τ / J = P Fᵀ / det F of particle `i`.
    pub fn cauchy_stress(&self, i: usize) -> Matrix3<f64> {
        let p = self.particles();
        let f = &p.f[i];
        let mat = &self.materials()[p.material[i] as usize];
        mat.kirchhoff(f) / f.determinant()
    }

    /// von Mises equivalent stress √(3/2)‖dev σ‖ of particle `i`.
    pub fn von_mises_stress(&self, i: usize) -> f64 {
        let s = self.cauchy_stress(i);
        let dev = s - Matrix3::identity() * (s.trace() / 3.0);
        (1.5f64).sqrt() * dev.norm()
    }

    /// Plastic measure of particle `i` (see [`super::plasticity::PlasticState`]).
    pub fn plastic_strain(&self, i: usize) -> f64 {
        self.particles().plastic[i].plastic_strain
    }
}
