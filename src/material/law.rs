//! The material abstraction: every operation the solver needs from a material law, behind one
//! trait ([`Material`]) implemented by one zero-sized type per law in its own file
//! ([`super::corotated::Corotated`], [`super::neohookean::Neohookean`]), and the one dispatch
//! point from the scene's [`super::MaterialModel`] to that implementation (`with_law!` in
//! `dispatch.rs`, used only by its `impl MaterialModel`). The solver calls the methods of `MaterialModel`; it never
//! matches on the model itself.
//!
//! A law enters the PD solver through up to two projective terms per quadrature sample
//! ([`PdWeights`]: weights $w_{s,k}$ and projections $p_k(F)$, $Q_s=\sum_kw_{s,k}p_k$), whose
//! differential is a spectral map $dp=U\,c(U^TdF\,V)\,V^T$ (spec App. A.1, Eq. 42) — the form of
//! every isotropic projection. Per body the law may read the body means $(\bar\mu,\bar\lambda,\bar k)$
//! ([`NhParams`], Lemma 1). Every operation has a finite-difference check, registered with one
//! line per law in `material::fd` (`material_fd_tests!`).

use super::lanes::{Mat3Lanes, LANES};
use super::svd::Svd3;
use super::weights::{pd_stiffness, DEFAULT_FIT_RANGE};
use nalgebra::{Matrix3, SMatrix, Vector3};

/// 9×9 Hessian in $F$-space, index $3r+c$ for $F_{rc}$ (row-major, the Newton solver's order).
pub type Mat9 = SMatrix<f64, 9, 9>;

/// PD weights of one sample, one per projective term of the law (spec Eq. 12, §3): corotated
/// $(2\mu V_s,\ \lambda V_s)$ for its rotation and volume terms, Neo-Hookean $(k V_s,\ 0)$.
pub type PdWeights = [f64; 2];

/// $A:B=\sum_{ij}A_{ij}B_{ij}$.
#[inline]
pub fn frob(a: &Matrix3<f64>, b: &Matrix3<f64>) -> f64 {
    a.component_mul(b).sum()
}

/// The 9×9 matrix of a linear map on $3\times3$ matrices, index $3r+c$ for $F_{rc}$ (column
/// $3r+c$ is the image of the unit matrix $e_re_c^T$).
pub fn mat9_of(op: impl Fn(&Matrix3<f64>) -> Matrix3<f64>) -> Mat9 {
    let mut h = Mat9::zeros();
    for c in 0..9 {
        let mut e = Matrix3::zeros();
        e[(c / 3, c % 3)] = 1.0;
        let col = op(&e);
        for r in 0..9 {
            h[(r, c)] = col[(r / 3, r % 3)];
        }
    }
    h
}

/// Linearisation of one sample's projections at $F$ (spec §7.2 step 2): its SVD, weights, the
/// stretch map's solution $\sigma^*$ and (possibly filtered) stretch Jacobian $W$ of the term
/// that has one, and the residuals $F-p_k$ per term (zero for an absent term).
#[derive(Clone, Copy, Debug)]
pub struct Linearization {
    pub svd: Svd3,
    pub w: PdWeights,
    pub star: Vector3<f64>,
    pub jac: Matrix3<f64>,
    pub residual: [Matrix3<f64>; 2],
    /// Whether the Hessian filter changed the stretch Jacobian.
    pub filtered: bool,
}

/// [`Material::param_gradient_linear`]: $(G^E,a^E,G^\nu,a^\nu)$.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParamLinear {
    pub ge: Matrix3<f64>,
    pub ae: f64,
    pub gnu: Matrix3<f64>,
    pub anu: f64,
}

/// What the parameter derivatives of one sample read (spec §7.5): the adjoint $\hat Z_s=G_sz$,
/// the element's $E_e$ and $\partial(\mu,\lambda)/\partial\nu$, the sample volume, the body's fit
/// range, $\beta_e$ and $\partial\mathcal L/\partial(\beta_ew_s)$, the body means and their
/// $\nu$-derivatives.
pub struct ParamInput<'a> {
    pub zh: &'a Matrix3<f64>,
    pub youngs: f64,
    pub dlame_dnu: (f64, f64),
    pub vol: f64,
    pub fit_range: f64,
    pub beta: f64,
    pub dl_dbw: f64,
    pub body: &'a NhParams,
    pub body_dnu: &'a NhParams,
}

/// A material law: everything the solver computes per quadrature sample. Implemented by a
/// zero-sized type per law; dispatched from [`super::MaterialModel`] by `with_law!` (statically: no
/// `dyn`, every call monomorphised and inlinable).
pub trait Material {
    /// PD weights of a sample of rest volume `vol` at Lamé $(\mu,\lambda)$; `fit_range` is the
    /// body's range $r$ of the Eq. 12 fit. Linear in $(\mu,\lambda)$, so the same map gives
    /// $\partial w/\partial\nu$ from $\partial(\mu,\lambda)/\partial\nu$.
    fn pd_weights(mu: f64, lambda: f64, vol: f64, fit_range: f64) -> PdWeights;

    /// Weighted projection $Q_s=\sum_kw_kp_k(F)$ of the local step. `warm` carries the
    /// stretch solution between calls (a law without one leaves it alone).
    fn project(svd: &Svd3, w: &PdWeights, body: &NhParams, warm: &mut Vector3<f64>)
        -> Matrix3<f64>;

    /// [`Self::project`] of [`LANES`] samples side by side (`material::interleaved`): `f` the
    /// deformation gradients, `w` and `body(l)` the weights and body means of lane `l`. Returns
    /// which lanes succeeded; the caller computes the others with [`Self::project`]. The default
    /// refuses every lane (the exact path only).
    #[inline]
    fn project_lanes(
        f: &Mat3Lanes,
        w: &[PdWeights],
        body: impl Fn(usize) -> NhParams,
        warm: &mut [Vector3<f64>],
        q: &mut Mat3Lanes,
    ) -> [bool; LANES] {
        let _ = (f, w, body, warm, q);
        [false; LANES]
    }

    /// Linearisation of the projections at $F$ (cold start); `filter` applies to a stretch
    /// Jacobian that has one (spec Eqs. 24–25).
    fn linearize(
        f: &Matrix3<f64>,
        svd: Svd3,
        w: &PdWeights,
        body: &NhParams,
        filter: HessianFilter,
    ) -> Linearization;

    /// [`Self::linearize`] of [`LANES`] samples side by side (`material::interleaved`: the
    /// SVD from the eigen-decomposition of $F^TF$, the stretch solve in lockstep; the same
    /// values to round-off, with the signed-SVD conventions of `svd::svd3`). `Some` for the
    /// lanes computed here; the caller linearizes the others with [`Self::linearize`]. The
    /// default refuses every lane.
    #[inline]
    fn linearize_lanes(
        f: &Mat3Lanes,
        w: &[PdWeights],
        body: impl Fn(usize) -> NhParams,
        filter: HessianFilter,
    ) -> [Option<Linearization>; LANES] {
        let _ = (f, w, body, filter);
        [None; LANES]
    }

    /// [`Self::pd_energy`] of [`LANES`] samples side by side (from the singular values and
    /// the stretch solve of `material::interleaved`); `Some` for the lanes computed here. The
    /// default refuses every lane.
    #[inline]
    fn pd_energy_lanes(
        f: &Mat3Lanes,
        w: &[PdWeights],
        body: impl Fn(usize) -> NhParams,
    ) -> [Option<f64>; LANES] {
        let _ = (f, w, body);
        [None; LANES]
    }

    /// The weighted spectral coefficients $\[U,V,W,M,N\]$ of $dQ_s=\sum_kw_k\,dp_k$ (App. A.1,
    /// Eq. 42; terms sharing $U,V$ summed), for `svd::SpectralLinear`.
    fn spectral_coefficients(lin: &Linearization) -> [Matrix3<f64>; 5];

    /// This sample's material part of $(\partial\mathcal L/\partial E_e,\ \partial\mathcal L/\partial\nu)$
    /// (spec §7.5) with $\partial\mathcal L/\partial w_k=-\hat Z_s:(F-p_k)$: the weights (homogeneous
    /// of degree one in $E$, so $\partial w/\partial E=w/E$; $\partial w/\partial\nu$ also through
    /// $\beta_ew_s$) and the projections' own dependence on $\nu$ through the body means.
    fn param_gradient(lin: &Linearization, inp: &ParamInput) -> (f64, f64);

    /// [`Material::param_gradient`] as the linear map of $(\hat Z_s,\ \ell_s)$ it is, with
    /// $\ell_s=\partial\mathcal L/\partial(\beta_ew_s)$: `inp.zh` and `inp.dl_dbw` are not read, and
    /// $(dE,d\nu)=(G^E:\hat Z_s+a^E\ell_s,\ G^\nu:\hat Z_s+a^\nu\ell_s)$. What the device
    /// accumulation contracts with $\hat Z_s$ (`solver::gradient`, docs/gpu.md).
    fn param_gradient_linear(lin: &Linearization, inp: &ParamInput) -> ParamLinear;

    /// PD surrogate energy of a sample $\sum_k\tfrac{w_k}2\|F-p_k\|^2$ plus the law's prox term
    /// (spec U1).
    fn pd_energy(f: &Matrix3<f64>, svd: &Svd3, w: &PdWeights, body: &NhParams) -> f64;

    /// PD energy, its first Piola stress $\partial E/\partial F$ and (if `with_hessian`) its
    /// 9×9 Hessian ([`Mat9`] order).
    fn pd_terms(
        f: &Matrix3<f64>,
        svd: &Svd3,
        w: &PdWeights,
        body: &NhParams,
        with_hessian: bool,
    ) -> (f64, Matrix3<f64>, Mat9);

    /// The true hyperelastic energy of a sample of volume `vol` (the Newton baseline's
    /// `newton_energy = "true"`), its stress and Hessian, at the material parameters encoded in
    /// its PD weights and body means.
    fn true_terms(
        f: &Matrix3<f64>,
        svd: &Svd3,
        w: &PdWeights,
        body: &NhParams,
        vol: f64,
        with_hessian: bool,
    ) -> (f64, Matrix3<f64>, Mat9);

    /// Energy density $\psi(F)$ at Lamé $(\mu,\lambda)$ and its first Piola stress, for output
    /// fields (NaN where undefined).
    fn density_and_pk1(mu: f64, lambda: f64, f: &Matrix3<f64>) -> (f64, Matrix3<f64>);
}

/// Mesh-mean Neo-Hookean parameters used by the local prox (spec §1, Eq. 13, Lemma 1):
/// $\bar\mu$, $\bar\lambda$ and the prox penalty $\bar k=k(\bar\mu,\bar\lambda)$ (Eq. 12).
#[derive(Clone, Copy, Debug)]
pub struct NhParams {
    /// $\bar\mu$ (Pa).
    pub mu: f64,
    /// $\bar\lambda$ (Pa).
    pub lambda: f64,
    /// Prox penalty $\bar k$ (Pa).
    pub k: f64,
}

impl NhParams {
    /// Parameters with the penalty from the weight fit (Eq. 12) over $[1-r,1+r]$.
    pub fn with_fit(mu: f64, lambda: f64, r: f64) -> Self {
        NhParams {
            mu,
            lambda,
            k: pd_stiffness(mu, lambda, r),
        }
    }

    /// Parameters with the default fit range $r=0.1$ ($k\approx2.006\mu+1.011\lambda$).
    pub fn new(mu: f64, lambda: f64) -> Self {
        Self::with_fit(mu, lambda, DEFAULT_FIT_RANGE)
    }

    /// All parameters scaled by `s` (Lemma 1: $(\mu_e,\lambda_e,k_e)=s_e(\bar\mu,\bar\lambda,\bar k)$).
    pub fn scaled(&self, s: f64) -> Self {
        NhParams {
            mu: s * self.mu,
            lambda: s * self.lambda,
            k: s * self.k,
        }
    }
}

/// Backward trust-region filter of the prox-map Hessian (spec Eqs. 24, 29).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HessianFilter {
    /// $\alpha=0$: exact IFT.
    None,
    /// $\alpha=\frac12$: negative eigenvalues of $H_\sigma$ clamped to 0.
    Clamp,
    /// $\alpha=1$: absolute value of the eigenvalues of $H_\sigma$.
    Abs,
    /// General blend $\alpha$ (clamped to $\[0,1\]$).
    Blend(f64),
}

impl HessianFilter {
    /// The blend parameter $\alpha$ of Eq. (24) (NaN maps to 0).
    pub fn alpha(&self) -> f64 {
        match *self {
            HessianFilter::None => 0.0,
            HessianFilter::Clamp => 0.5,
            HessianFilter::Abs => 1.0,
            HessianFilter::Blend(a) => {
                if a.is_nan() {
                    0.0
                } else {
                    a.clamp(0.0, 1.0)
                }
            }
        }
    }
}
