//! Element-level material kernels: signed SVD and polar decomposition, the PD local steps
//! (corotated rotation projection, volume projection, Neo-Hookean proximal map in
//! singular-value space), their Jacobians (matrix-free, spec App. A), the PD weight fit
//! (spec Eq. 12) and the Neo-Hookean energy density (spec Eqs. 5–6).
//!
//! Everything here is a pure function of small fixed-size matrices: no I/O, no globals.
//! Matrices are `nalgebra::Matrix3<f64>`; `vec(·)` is column-major (spec conventions).
//!
//! A material law is one type implementing [`Material`] (`law.rs`: the trait; `dispatch.rs`:
//! the one dispatch point from [`MaterialModel`]); the solver calls it only through the methods of
//! [`MaterialModel`].

pub mod corotated;
mod dispatch;
pub mod eigen;
#[cfg(test)]
pub(crate) mod fd;
pub mod interleaved;
pub mod lanes;
pub mod law;
pub mod neohookean;
mod prox_consts;
pub mod svd;
pub mod volume;
pub mod weights;

pub use law::{frob, Linearization, Mat9, Material, ParamInput, ParamLinear, PdWeights};
pub use nalgebra::{Matrix3, Vector3};

/// Lamé parameters from Young's modulus and Poisson ratio (spec Eq. 1):
/// $\mu = E/(2(1+\nu))$, $\lambda = E\nu/((1+\nu)(1-2\nu))$.
pub fn lame(e: f64, nu: f64) -> (f64, f64) {
    let mu = e / (2.0 * (1.0 + nu));
    let lambda = e * nu / ((1.0 + nu) * (1.0 - 2.0 * nu));
    (mu, lambda)
}

/// $\partial(\mu,\lambda)/\partial\nu$ at fixed $E$ (spec §7.5):
/// $\mu_{,\nu} = -E/(2(1+\nu)^2)$, $\lambda_{,\nu} = E(1+2\nu^2)/((1+\nu)^2(1-2\nu)^2)$.
pub fn lame_dnu(e: f64, nu: f64) -> (f64, f64) {
    let dmu = -e / (2.0 * (1.0 + nu) * (1.0 + nu));
    let dl = e * (1.0 + 2.0 * nu * nu) / ((1.0 + nu).powi(2) * (1.0 - 2.0 * nu).powi(2));
    (dmu, dl)
}

/// Which PD energy an element uses (spec §3 table). Each variant names one implementation of
/// [`Material`], mapped in `dispatch.rs` (the only `match` on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MaterialModel {
    /// `corot_vol`: corotated term (weight $2\mu_e$) plus quadratic volume term
    /// (weight $\lambda_e$), both projective.
    Corotated,
    /// `nh_prox`: Neo-Hookean proximal map (Eqs. 13–15) with weight $k_e$ from Eq. 12.
    #[serde(alias = "neo_hookean", alias = "neo-hookean")]
    Neohookean,
}
