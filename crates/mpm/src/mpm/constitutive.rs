//! Hyperelastic energy densities ψ(F) and first Piola–Kirchhoff stresses P = ∂ψ/∂F.
//!
//! Lamé parameters from Young's modulus E and Poisson's ratio ν:
//! μ = E / (2(1 + ν)), λ = E ν / ((1 + ν)(1 − 2ν)).
//!
//! - **Fixed-corotated** (Stomakhin et al. 2012, "Energetically consistent invertible
//!   elasticity", Eq. 2): ψ = μ‖F − R‖²_F + (λ/2)(J − 1)², with F = RS the polar decomposition
//!   and J = det F; P = 2μ(F − R) + λ(J − 1) J F⁻ᵀ. Defined for inverted F.
//! - **Neo-Hookean** (compressible, e.g. Bonet & Wood; Sifakis & Barbič 2012 course, §3.4):
//!   ψ = (μ/2)(tr FᵀF − 3) − μ ln J + (λ/2)(ln J)²; P = μ(F − F⁻ᵀ) + λ ln J F⁻ᵀ. Needs J > 0.
//! - **St. Venant–Kirchhoff with Hencky strain** (Klár et al. 2016, "Drucker–Prager
//!   elastoplasticity for sand animation", §5; Mast et al. 2014): with the rotation-fixed SVD
//!   F = U Σ Vᵀ and ε = ln Σ, ψ = μ tr(ε²) + (λ/2)(tr ε)²;
//!   P = U (2μ ε + λ tr(ε) I) Σ⁻¹ Vᵀ and the Kirchhoff stress τ = P Fᵀ = U (2μ ε + λ tr ε I) Uᵀ.
//!   Needs J > 0. This is the model the return mappings of [`super::plasticity`] act on.

use nalgebra::{Matrix3, Vector3};

use super::plasticity::Plasticity;
pub use super::svd::rotation_svd;
use super::MpmError;

/// Which hyperelastic energy density a material uses (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElasticModel {
    FixedCorotated,
    NeoHookean,
    /// St. Venant–Kirchhoff on the Hencky (logarithmic) strain; required by the plastic models.
    StvkHencky,
}

/// A material: density ρ (kg/m³), Young's modulus E (Pa), Poisson's ratio ν, an elastic model
/// and an optional plastic return mapping.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Material {
    pub density: f64,
    pub youngs_modulus: f64,
    pub poisson_ratio: f64,
    pub elastic: ElasticModel,
    pub plasticity: Plasticity,
}

impl Material {
    /// A purely elastic material.
    pub fn elastic(
        density: f64,
        youngs_modulus: f64,
        poisson_ratio: f64,
        model: ElasticModel,
    ) -> Self {
        Self {
            density,
            youngs_modulus,
            poisson_ratio,
            elastic: model,
            plasticity: Plasticity::None,
        }
    }

    /// Lamé parameters (μ, λ) = (E/(2(1+ν)), Eν/((1+ν)(1−2ν))).
    pub fn lame(&self) -> (f64, f64) {
        let (e, nu) = (self.youngs_modulus, self.poisson_ratio);
        (
            e / (2.0 * (1.0 + nu)),
            e * nu / ((1.0 + nu) * (1.0 - 2.0 * nu)),
        )
    }

    /// Dilatational (P-wave) speed √((λ + 2μ)/ρ); ≥ √(E/ρ) for ν ∈ [0, ½).
    pub fn p_wave_speed(&self) -> f64 {
        let (mu, lambda) = self.lame();
        ((lambda + 2.0 * mu) / self.density).sqrt()
    }

    /// Checks ranges; `index` names the material in the error.
    pub fn validate(&self, index: usize) -> Result<(), MpmError> {
        let bad = |key, value, reason| MpmError::InvalidMaterial {
            material: index,
            key,
            value,
            reason,
        };
        if !(self.density.is_finite() && self.density > 0.0) {
            return Err(bad("density", self.density, "must be finite and > 0"));
        }
        if !(self.youngs_modulus.is_finite() && self.youngs_modulus > 0.0) {
            return Err(bad(
                "youngs_modulus",
                self.youngs_modulus,
                "must be finite and > 0",
            ));
        }
        if !(self.poisson_ratio > -1.0 && self.poisson_ratio < 0.5) {
            return Err(bad(
                "poisson_ratio",
                self.poisson_ratio,
                "must lie in (-1, 0.5)",
            ));
        }
        self.plasticity
            .validate(index, self.elastic == ElasticModel::StvkHencky)
    }

    /// Energy density ψ(F) (J/m³). NaN for J ≤ 0 under Neo-Hookean or Hencky.
    pub fn energy_density(&self, f: &Matrix3<f64>) -> f64 {
        let (mu, lambda) = self.lame();
        match self.elastic {
            ElasticModel::FixedCorotated => {
                let (u, s, vt) = rotation_svd(f);
                let r = u * vt;
                let j = s.product();
                mu * (f - r).norm_squared() + 0.5 * lambda * (j - 1.0) * (j - 1.0)
            }
            ElasticModel::NeoHookean => {
                let j = f.determinant();
                let lnj = j.ln();
                0.5 * mu * (f.norm_squared() - 3.0) - mu * lnj + 0.5 * lambda * lnj * lnj
            }
            ElasticModel::StvkHencky => {
                let (_, s, _) = rotation_svd(f);
                let e = s.map(f64::ln);
                let tr = e.sum();
                mu * e.norm_squared() + 0.5 * lambda * tr * tr
            }
        }
    }

    /// First Piola–Kirchhoff stress P = ∂ψ/∂F (see the module docs for each model).
    pub fn first_piola(&self, f: &Matrix3<f64>) -> Matrix3<f64> {
        let (mu, lambda) = self.lame();
        match self.elastic {
            ElasticModel::FixedCorotated => {
                let (u, s, vt) = rotation_svd(f);
                let r = u * vt;
                let j = s.product();
                2.0 * mu * (f - r) + lambda * (j - 1.0) * cofactor(f)
            }
            ElasticModel::NeoHookean => {
                let j = f.determinant();
                let f_inv_t = cofactor(f) / j;
                mu * (f - f_inv_t) + lambda * j.ln() * f_inv_t
            }
            ElasticModel::StvkHencky => {
                let (u, s, vt) = rotation_svd(f);
                let e = s.map(f64::ln);
                let tr = e.sum();
                let d = Vector3::from_fn(|i, _| (2.0 * mu * e[i] + lambda * tr) / s[i]);
                u * Matrix3::from_diagonal(&d) * vt
            }
        }
    }

    /// Kirchhoff stress τ = P Fᵀ (symmetric for these isotropic models).
    pub fn kirchhoff(&self, f: &Matrix3<f64>) -> Matrix3<f64> {
        self.first_piola(f) * f.transpose()
    }

    /// Whether this model needs J = det F > 0.
    pub fn needs_positive_det(&self) -> bool {
        !matches!(self.elastic, ElasticModel::FixedCorotated)
    }
}

/// Cofactor matrix cof F = J F⁻ᵀ (defined for singular F too).
pub fn cofactor(f: &Matrix3<f64>) -> Matrix3<f64> {
    let c0 = f.column(0);
    let c1 = f.column(1);
    let c2 = f.column(2);
    // ∂det/∂F: columns are cross products of the other two columns.
    Matrix3::from_columns(&[c1.cross(&c2), c2.cross(&c0), c0.cross(&c1)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_svd_reconstructs_with_rotations() {
        let f = Matrix3::new(1.1, 0.2, -0.1, 0.05, 0.9, 0.3, -0.2, 0.1, -1.05);
        let (u, s, vt) = rotation_svd(&f);
        assert!((u.determinant() - 1.0).abs() < 1e-12);
        assert!((vt.determinant() - 1.0).abs() < 1e-12);
        assert!((u * Matrix3::from_diagonal(&s) * vt - f).norm() < 1e-12);
        assert!(s.product() < 0.0);
    }

    #[test]
    fn cofactor_is_det_times_inverse_transpose() {
        let f = Matrix3::new(1.1, 0.2, -0.1, 0.05, 0.9, 0.3, -0.2, 0.1, 1.05);
        let expect = f.determinant() * f.try_inverse().unwrap().transpose();
        assert!((cofactor(&f) - expect).norm() < 1e-13);
    }
}
