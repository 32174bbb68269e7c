//! The one dispatch point from the scene's [`MaterialModel`] to the implementation of
//! [`Material`] for it (`with_law!`), and the methods of [`MaterialModel`] the solver calls
//! (each one static dispatch). A new law adds one arm to `with_law!`.

use super::lanes::{Mat3Lanes, LANES};
use super::law::{
    HessianFilter, Linearization, Mat9, Material, NhParams, ParamInput, ParamLinear, PdWeights,
};
use super::svd::Svd3;
use super::MaterialModel;
use nalgebra::{Matrix3, Vector3};

/// The one dispatch point: runs `$body` with `$L` naming the implementation of `$model`.
/// A new law adds one arm here (and its variant in [`MaterialModel`]).
macro_rules! with_law {
    ($model:expr, $L:ident => $body:expr) => {
        match $model {
            MaterialModel::Corotated => {
                type $L = super::corotated::Corotated;
                $body
            }
            MaterialModel::Neohookean => {
                type $L = super::neohookean::Neohookean;
                $body
            }
        }
    };
}

/// [`Material`] by value of the scene enum (each method one static dispatch).
impl MaterialModel {
    /// [`Material::pd_weights`].
    #[inline]
    pub fn pd_weights(self, mu: f64, lambda: f64, vol: f64, fit_range: f64) -> PdWeights {
        with_law!(self, L => L::pd_weights(mu, lambda, vol, fit_range))
    }

    /// [`Material::project`].
    #[inline]
    pub fn project(
        self,
        svd: &Svd3,
        w: &PdWeights,
        body: &NhParams,
        warm: &mut Vector3<f64>,
    ) -> Matrix3<f64> {
        with_law!(self, L => L::project(svd, w, body, warm))
    }

    /// [`Material::project_lanes`].
    #[inline]
    pub fn project_lanes(
        self,
        f: &Mat3Lanes,
        w: &[PdWeights],
        body: impl Fn(usize) -> NhParams,
        warm: &mut [Vector3<f64>],
        q: &mut Mat3Lanes,
    ) -> [bool; LANES] {
        with_law!(self, L => L::project_lanes(f, w, body, warm, q))
    }

    /// [`Material::linearize`].
    #[inline]
    pub fn linearize(
        self,
        f: &Matrix3<f64>,
        svd: Svd3,
        w: &PdWeights,
        body: &NhParams,
        filter: HessianFilter,
    ) -> Linearization {
        with_law!(self, L => L::linearize(f, svd, w, body, filter))
    }

    /// [`Material::linearize_lanes`].
    #[inline]
    pub fn linearize_lanes(
        self,
        f: &Mat3Lanes,
        w: &[PdWeights],
        body: impl Fn(usize) -> NhParams,
        filter: HessianFilter,
    ) -> [Option<Linearization>; LANES] {
        with_law!(self, L => L::linearize_lanes(f, w, body, filter))
    }

    /// [`Material::pd_energy_lanes`].
    #[inline]
    pub fn pd_energy_lanes(
        self,
        f: &Mat3Lanes,
        w: &[PdWeights],
        body: impl Fn(usize) -> NhParams,
    ) -> [Option<f64>; LANES] {
        with_law!(self, L => L::pd_energy_lanes(f, w, body))
    }

    /// [`Material::spectral_coefficients`].
    #[inline]
    pub fn spectral_coefficients(self, lin: &Linearization) -> [Matrix3<f64>; 5] {
        with_law!(self, L => L::spectral_coefficients(lin))
    }

    /// [`Material::param_gradient`].
    #[inline]
    pub fn param_gradient(self, lin: &Linearization, inp: &ParamInput) -> (f64, f64) {
        with_law!(self, L => L::param_gradient(lin, inp))
    }

    /// [`Material::param_gradient_linear`].
    #[inline]
    pub fn param_gradient_linear(self, lin: &Linearization, inp: &ParamInput) -> ParamLinear {
        with_law!(self, L => L::param_gradient_linear(lin, inp))
    }

    /// [`Material::pd_energy`].
    #[inline]
    pub fn pd_energy(self, f: &Matrix3<f64>, svd: &Svd3, w: &PdWeights, body: &NhParams) -> f64 {
        with_law!(self, L => L::pd_energy(f, svd, w, body))
    }

    /// [`Material::pd_terms`].
    #[inline]
    pub fn pd_terms(
        self,
        f: &Matrix3<f64>,
        svd: &Svd3,
        w: &PdWeights,
        body: &NhParams,
        with_hessian: bool,
    ) -> (f64, Matrix3<f64>, Mat9) {
        with_law!(self, L => L::pd_terms(f, svd, w, body, with_hessian))
    }

    /// [`Material::true_terms`].
    #[inline]
    pub fn true_terms(
        self,
        f: &Matrix3<f64>,
        svd: &Svd3,
        w: &PdWeights,
        body: &NhParams,
        vol: f64,
        with_hessian: bool,
    ) -> (f64, Matrix3<f64>, Mat9) {
        with_law!(self, L => L::true_terms(f, svd, w, body, vol, with_hessian))
    }

    /// [`Material::density_and_pk1`].
    #[inline]
    pub fn density_and_pk1(self, mu: f64, lambda: f64, f: &Matrix3<f64>) -> (f64, Matrix3<f64>) {
        with_law!(self, L => L::density_and_pk1(mu, lambda, f))
    }
}
