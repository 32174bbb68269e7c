//! Per-element output fields of a deformed state, written as VTU cell data: the
//! strain-energy density ψ (J/m³) and the von Mises stress of the Cauchy stress (Pa), both
//! averaged over the element's quadrature samples with their rest volumes as weights.
//!
//! The energy is the body's material law at the element's (E, ν) (Lamé μ, λ):
//! - `corotated`: the PD corotated + volume energy ψ = μ‖F − R‖² + λ/2 ‖F − D(F)‖², with R
//!   the polar rotation and D(F) the closest det = 1 matrix ([`crate::material::volume`]);
//!   its first Piola stress is P = 2μ(F − R) + λ(F − D) (both projections are closest points).
//! - `neohookean`: ψ and P of [`crate::material::neohookean`]; NaN for an inverted element
//!   (J ≤ 0), where the energy is infinite.
//!
//! Cauchy stress σ = P Fᵀ / J; von Mises = √(3/2 s:s) with s = σ − tr(σ)/3 I.

use crate::material::{self, MaterialModel};
use crate::model::Model;
use nalgebra::Matrix3;

/// Energy density ψ(F) and first Piola stress P(F) of a material law
/// ([`crate::material::Material::density_and_pk1`]).
pub fn energy_and_pk1(
    model: MaterialModel,
    mu: f64,
    lambda: f64,
    f: &Matrix3<f64>,
) -> (f64, Matrix3<f64>) {
    model.density_and_pk1(mu, lambda, f)
}

/// Von Mises stress of the Cauchy stress of (F, P).
pub fn von_mises(f: &Matrix3<f64>, p: &Matrix3<f64>) -> f64 {
    let j = f.determinant();
    let sigma = p * f.transpose() / j;
    let s = sigma - Matrix3::identity() * (sigma.trace() / 3.0);
    (1.5 * s.component_mul(&s).sum()).sqrt()
}

/// Per-element (energy density, von Mises stress) at node positions `x` (node-major, 3n).
pub fn cell_fields(model: &Model, x: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let ne = model.num_elements();
    let mut acc = vec![(0.0, 0.0, 0.0); ne];
    for s in 0..model.samples.elem.len() {
        let e = model.samples.elem[s];
        let mut f = Matrix3::zeros();
        for (&i, g) in model.element(e).iter().zip(model.sample_grads(s)) {
            for r in 0..3 {
                for c in 0..3 {
                    f[(r, c)] += x[3 * i + r] * g[c];
                }
            }
        }
        let body = model.elem_body[e];
        let (mu, lambda) = material::lame(model.params.youngs[e], model.params.nu_of(e, body));
        let law = model.bodies[body].model;
        let (psi, p) = energy_and_pk1(law, mu, lambda, &f);
        let w = model.samples.vol[s];
        acc[e].0 += w * psi;
        acc[e].1 += w * von_mises(&f, &p);
        acc[e].2 += w;
    }
    acc.iter().map(|(a, b, w)| (a / w, b / w)).unzip()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Central-difference gradient of a scalar function of a 3x3 matrix.
    fn fd_gradient(f: impl Fn(&Matrix3<f64>) -> f64, x: &Matrix3<f64>, h: f64) -> Matrix3<f64> {
        let mut g = Matrix3::zeros();
        for k in 0..9 {
            let (mut a, mut b) = (*x, *x);
            a[k] += h;
            b[k] -= h;
            g[k] = (f(&a) - f(&b)) / (2.0 * h);
        }
        g
    }

    fn deformation() -> Matrix3<f64> {
        Matrix3::new(1.1, 0.05, -0.02, 0.03, 0.93, 0.04, -0.01, 0.06, 1.04)
    }

    #[test]
    fn pk1_is_the_derivative_of_the_energy_for_both_laws() {
        let (mu, lambda) = material::lame(1e5, 0.35);
        for law in [MaterialModel::Corotated, MaterialModel::Neohookean] {
            let f = deformation();
            let (_, p) = energy_and_pk1(law, mu, lambda, &f);
            let num = fd_gradient(|g| energy_and_pk1(law, mu, lambda, g).0, &f, 1e-6);
            let err = (p - num).norm() / p.norm();
            assert!(err < 1e-6, "{law:?}: relative error {err:e}");
        }
    }

    #[test]
    fn rest_state_is_stress_free_and_uniaxial_stress_has_von_mises_equal_to_it() {
        let (mu, lambda) = material::lame(1e5, 0.3);
        for law in [MaterialModel::Corotated, MaterialModel::Neohookean] {
            let (psi, p) = energy_and_pk1(law, mu, lambda, &Matrix3::identity());
            assert!(psi.abs() < 1e-9 && p.norm() < 1e-9, "{law:?}");
            // A rigid rotation stores no energy either.
            let r = nalgebra::Rotation3::from_euler_angles(0.3, -0.2, 0.7).into_inner();
            let (psi, p) = energy_and_pk1(law, mu, lambda, &r);
            assert!(
                psi.abs() < 1e-6 && von_mises(&r, &p) < 1e-6,
                "{law:?}: {psi}"
            );
        }
        // Pure uniaxial Cauchy stress: von Mises equals its magnitude.
        let f = Matrix3::identity();
        let p = Matrix3::new(2.5e4, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        assert!((von_mises(&f, &p) - 2.5e4).abs() < 1e-9);
        // Pure hydrostatic pressure: zero.
        assert!(von_mises(&f, &(Matrix3::identity() * 7e3)) < 1e-9);
    }
}
