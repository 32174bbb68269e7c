//! The `neohookean` material law (spec §3 table, `nh_prox`): compressible Neo-Hookean density
//! (spec Eqs. 5–6) and its proximal map in singular-value space (spec Eqs. 13–15, §3.3; the
//! stretch solve in `prox.rs`), with the prox-map stretch Jacobian and its trust-region
//! filter (spec Eqs. 23–25) and parameter sensitivities (for $\partial\mathcal L/\partial\theta$
//! routing). [`Neohookean`] implements [`Material`] with weights $(k_eV_s,\ 0)$.

mod prox;

pub use super::law::{HessianFilter, NhParams};
pub use super::prox_consts::{PROX_TOL, SIGMA_MIN};
pub use prox::{prox_stretch, ProxStretch, PROX_MAX_ITER};

use super::eigen::sym_eigen3;
use super::interleaved::{self, Mat3Lanes, LANES};
use super::law::{
    frob, mat9_of, Linearization, Mat9, Material, ParamInput, ParamLinear, PdWeights,
};
use super::svd::{spectral_jacobian_apply, spectral_pair_coefficients, Svd3};
use super::weights::fit_coefficients;
use nalgebra::{Matrix3, Vector3};

/// $\ln J$ and $\mathrm{tr}(F^TF)-3$ computed accurately near $F=I$: with $H=F-I$,
/// $J-1=\mathrm{tr}H+\tfrac12((\mathrm{tr}H)^2-\mathrm{tr}H^2)+\det H$, $\ln J=\mathrm{log1p}(J-1)$
/// and $\mathrm{tr}F^TF-3=2\,\mathrm{tr}H+\|H\|_F^2$ (no cancellation for small strains). Far from
/// $I$ ($|J-1|\ge\frac12$) $\ln\det F$ is used directly. Returns `None` for $J\le0$.
fn log_det_and_i1(f: &Matrix3<f64>) -> (Option<f64>, f64) {
    let h = f - Matrix3::identity();
    let tr = h.trace();
    let i1m3 = 2.0 * tr + h.norm_squared();
    let jm1 = tr + 0.5 * (tr * tr - (h * h).trace()) + h.determinant();
    let log_j = if jm1.abs() < 0.5 {
        Some(jm1.ln_1p())
    } else {
        let j = f.determinant();
        if j > 0.0 {
            Some(j.ln())
        } else {
            None
        }
    };
    (log_j, i1m3)
}

/// $F^{-T}=\mathrm{cof}(F)/J$ (columns $c_1\times c_2,\ c_2\times c_0,\ c_0\times c_1$).
fn inv_transpose(f: &Matrix3<f64>) -> Matrix3<f64> {
    let c0 = f.column(0).into_owned();
    let c1 = f.column(1).into_owned();
    let c2 = f.column(2).into_owned();
    let cof = Matrix3::from_columns(&[c1.cross(&c2), c2.cross(&c0), c0.cross(&c1)]);
    cof / c0.dot(&c1.cross(&c2))
}

/// Neo-Hookean energy density, spec Eq. (5):
/// $$\Psi(F)=\frac\mu2(\mathrm{tr}F^TF-3)-\mu\ln J+\frac\lambda2(\ln J)^2,\qquad J=\det F.$$
/// $+\infty$ for $J\le0$. $\ln J$ and $\mathrm{tr}F^TF-3$ are evaluated without cancellation near
/// $F=I$ (so $\Psi$ is relatively accurate in the small-strain regime).
pub fn energy_density(mu: f64, lambda: f64, f: &Matrix3<f64>) -> f64 {
    match log_det_and_i1(f) {
        (Some(lj), i1m3) => 0.5 * mu * i1m3 - mu * lj + 0.5 * lambda * lj * lj,
        (None, _) => f64::INFINITY,
    }
}

/// First Piola–Kirchhoff stress, spec Eq. (6): $P=\mu(F-F^{-T})+\lambda\ln J\,F^{-T}$.
/// Undefined for $J\le0$: returns a NaN matrix there (the energy is $+\infty$).
pub fn pk1(mu: f64, lambda: f64, f: &Matrix3<f64>) -> Matrix3<f64> {
    match log_det_and_i1(f).0 {
        Some(lj) => {
            let fit = inv_transpose(f);
            (f - fit) * mu + fit * (lambda * lj)
        }
        None => Matrix3::repeat(f64::NAN),
    }
}

/// Stress differential (spec §2.2, below Eq. 6):
/// $dP=\mu(dF+F^{-T}dF^TF^{-T})+\lambda[\mathrm{tr}(F^{-1}dF)F^{-T}-\ln J\,F^{-T}dF^TF^{-T}]$.
/// NaN matrix for $J\le0$.
pub fn pk1_differential(mu: f64, lambda: f64, f: &Matrix3<f64>, df: &Matrix3<f64>) -> Matrix3<f64> {
    match log_det_and_i1(f).0 {
        Some(lj) => {
            let fit = inv_transpose(f);
            let t = fit * df.transpose() * fit;
            let tr = (fit.transpose() * df).trace();
            (df + t) * mu + (fit * tr - t * lj) * lambda
        }
        None => Matrix3::repeat(f64::NAN),
    }
}

/// $\ln\hat J=\sum_i\ln\hat\sigma_i$ (accurate, no product over/underflow); `None` unless all
/// $\hat\sigma_i>0$.
fn log_j(s: &Vector3<f64>) -> Option<f64> {
    if s.iter().all(|&x| x > 0.0) {
        Some(s.iter().map(|x| x.ln()).sum())
    } else {
        None
    }
}

/// Stretch-space density, spec Eq. (14):
/// $\bar\psi(\hat\sigma)=\frac{\bar\mu}2(\sum_i\hat\sigma_i^2-3)-\bar\mu\ln\hat J+\frac{\bar\lambda}2\ln^2\hat J$,
/// $+\infty$ unless $\hat\sigma>0$.
pub fn stretch_energy(p: &NhParams, s: &Vector3<f64>) -> f64 {
    match log_j(s) {
        Some(lj) => 0.5 * p.mu * (s.norm_squared() - 3.0) - p.mu * lj + 0.5 * p.lambda * lj * lj,
        None => f64::INFINITY,
    }
}

/// $\partial\bar\psi/\partial\hat\sigma_i=\bar\mu\hat\sigma_i-\bar\mu/\hat\sigma_i+\bar\lambda\ln\hat J/\hat\sigma_i$
/// (spec Eq. 14, without the penalty $\bar k(\hat\sigma-\sigma)$). NaN unless $\hat\sigma>0$.
pub fn stretch_gradient(p: &NhParams, s: &Vector3<f64>) -> Vector3<f64> {
    match log_j(s) {
        Some(lj) => s.map(|x| p.mu * x + (p.lambda * lj - p.mu) / x),
        None => Vector3::repeat(f64::NAN),
    }
}

/// Stretch Hessian $H_\sigma$, spec Eq. (15):
/// $[H_\sigma]_{ii}=\bar\mu+\frac{\bar\mu+\bar\lambda(1-\ln\hat J)}{\hat\sigma_i^2}$,
/// $[H_\sigma]_{ij}=\frac{\bar\lambda}{\hat\sigma_i\hat\sigma_j}$. NaN unless $\hat\sigma>0$.
pub fn stretch_hessian(p: &NhParams, s: &Vector3<f64>) -> Matrix3<f64> {
    match log_j(s) {
        Some(lj) => Matrix3::from_fn(|i, j| {
            if i == j {
                p.mu + (p.mu + p.lambda * (1.0 - lj)) / (s[i] * s[i])
            } else {
                p.lambda / (s[i] * s[j])
            }
        }),
        None => Matrix3::repeat(f64::NAN),
    }
}

/// Proximal map, spec Eq. (13)–(14): $p=\mathrm{prox}_{\bar\Psi/\bar k}(F)=U\,\mathrm{diag}(\sigma^*)V^T$
/// with $\sigma^*$ from [`prox_stretch`] on the signed singular values (so $\det p>0$ even for
/// inverted $F$).
pub fn prox(p: &NhParams, svd: &Svd3, warm: Option<&Vector3<f64>>) -> (Matrix3<f64>, ProxStretch) {
    let r = prox_stretch(p, &svd.sigma, warm);
    (svd.compose(&r.sigma_star), r)
}

/// Filtered stretch Jacobian of the prox map, spec Eqs. (23)–(25):
/// $$W(\alpha)=\bar k\,Q\,\mathrm{diag}\Big(\frac1{\bar k+\hat\lambda_i}\Big)Q^T,\quad
/// H_\sigma(\sigma^*)=Q\Lambda Q^T,\quad\hat\lambda_i=\begin{cases}\lambda_i&\lambda_i\ge0\\(1-2\alpha)\lambda_i&\lambda_i<0\end{cases}$$
/// ($\alpha=0$: $W=\bar k(H_\sigma+\bar kI)^{-1}$, the IFT of Eq. 14). Eigen-decomposition by
/// Jacobi ([`sym_eigen3`]). The flag is `true` iff the filter changed something (some
/// $\lambda_i<0$ and $\alpha\ne0$). Denominators are floored at $10^{-12}\bar k$, which is only
/// reachable if $\sigma^*$ is not a local minimiser of Eq. (14) ($\bar k+\lambda_i\le0$).
pub fn stretch_jacobian(
    p: &NhParams,
    sigma_star: &Vector3<f64>,
    filter: HessianFilter,
) -> (Matrix3<f64>, bool) {
    let alpha = filter.alpha();
    let h = stretch_hessian(p, sigma_star);
    let (l, q) = sym_eigen3(&h);
    let mut changed = false;
    let mut d = Vector3::zeros();
    for i in 0..3 {
        let li = if l[i] >= 0.0 {
            l[i]
        } else {
            if alpha != 0.0 {
                changed = true;
            }
            (1.0 - 2.0 * alpha) * l[i]
        };
        d[i] = p.k / (p.k + li).max(1e-12 * p.k);
    }
    let w = q * Matrix3::from_diagonal(&d) * q.transpose();
    (0.5 * (w + w.transpose()), changed)
}

/// Prox-map differential $dp$ for a direction $dF$ (spec Eq. 42, App. A.1) with the (possibly
/// filtered) stretch Jacobian $W$ from [`stretch_jacobian`]. The pair coefficients
/// $\mathbf M,\mathbf N$ use the exact divided differences of $\sigma^*$ (unfiltered) except in the
/// near-degenerate limit, where they come from $W$ (see `svd::spectral_pair_coefficients`).
pub fn jacobian_apply(
    svd: &Svd3,
    sigma_star: &Vector3<f64>,
    w: &Matrix3<f64>,
    df: &Matrix3<f64>,
) -> Matrix3<f64> {
    spectral_jacobian_apply(svd, sigma_star, w, df)
}

/// Sensitivities of the prox stretches to the mean parameters at fixed $\sigma$, by the implicit
/// function theorem on $g(\sigma^*;\theta)=0$ (Eq. 14):
/// $$\frac{\partial\sigma^*}{\partial\theta}=-(H_\sigma+\bar kI)^{-1}\frac{\partial g}{\partial\theta}
/// =-\frac{W}{\bar k}\frac{\partial g}{\partial\theta},\quad
/// \frac{\partial g_i}{\partial\bar\mu}=\sigma^*_i-\frac1{\sigma^*_i},\
/// \frac{\partial g_i}{\partial\bar\lambda}=\frac{\ln J^*}{\sigma^*_i},\
/// \frac{\partial g_i}{\partial\bar k}=\sigma^*_i-\sigma_i.$$
/// Returns $[\partial_{\bar\mu}\sigma^*,\partial_{\bar\lambda}\sigma^*,\partial_{\bar k}\sigma^*]$; a filtered
/// $W$ yields the consistently filtered sensitivity. (By Lemma 1 these vanish in the solver when
/// all three scale together: $\bar\mu\partial_{\bar\mu}+\bar\lambda\partial_{\bar\lambda}+\bar k\partial_{\bar k}=0$.)
pub fn dsigma_star_dparams(
    p: &NhParams,
    sigma: &Vector3<f64>,
    sigma_star: &Vector3<f64>,
    w: &Matrix3<f64>,
) -> [Vector3<f64>; 3] {
    let s = sigma_star;
    let lj: f64 = s.iter().map(|x| x.ln()).sum();
    let gmu = s.map(|x| x - 1.0 / x);
    let glam = s.map(|x| lj / x);
    let gk = s - sigma;
    let a = -w / p.k;
    [a * gmu, a * glam, a * gk]
}

/// [`Material::linearize`] of the Neo-Hookean law from the signed SVD and the prox stretches
/// $\sigma^*$: $p=U\,\mathrm{diag}(\sigma^*)V^T$, the (filtered) stretch Jacobian of
/// [`stretch_jacobian`] and the residual $F-p$.
pub(crate) fn linearization(
    f: &Matrix3<f64>,
    svd: Svd3,
    star: Vector3<f64>,
    w: &PdWeights,
    body: &NhParams,
    filter: HessianFilter,
) -> Linearization {
    let p = svd.compose(&star);
    let (jac, filtered) = stretch_jacobian(body, &star, filter);
    Linearization {
        w: *w,
        star,
        jac,
        residual: [f - p, Matrix3::zeros()],
        filtered,
        svd,
    }
}

/// The `neohookean` law: one projective term, the prox map $p$ of the body-mean density
/// (weight $k_eV_s$, Eq. 12; Lemma 1), warm-started from the previous stretch solution.
pub struct Neohookean;

impl Neohookean {
    /// $\partial p/\partial\nu=U\,\mathrm{diag}(\partial\sigma^*/\partial\nu)V^T$ through the body
    /// means (implicit function theorem of the stretch problem, spec §7.5), with `dbody` the
    /// $\nu$-derivatives of $(\bar\mu,\bar\lambda,\bar k)$.
    pub fn dp_dbody(lin: &Linearization, body: &NhParams, dbody: &NhParams) -> Matrix3<f64> {
        let svd = &lin.svd;
        let sens = dsigma_star_dparams(body, &svd.sigma, &lin.star, &lin.jac);
        let ds = sens[0] * dbody.mu + sens[1] * dbody.lambda + sens[2] * dbody.k;
        svd.u * Matrix3::from_diagonal(&ds) * svd.v.transpose()
    }
}

impl Material for Neohookean {
    #[inline]
    fn pd_weights(mu: f64, lambda: f64, vol: f64, fit_range: f64) -> PdWeights {
        let (cm, cl) = fit_coefficients(fit_range);
        [(cm * mu + cl * lambda) * vol, 0.0]
    }

    #[inline]
    fn project(
        svd: &Svd3,
        w: &PdWeights,
        body: &NhParams,
        warm: &mut Vector3<f64>,
    ) -> Matrix3<f64> {
        let start = if warm[0] > 0.0 { Some(*warm) } else { None };
        let (p, st) = prox(body, svd, start.as_ref());
        *warm = st.sigma_star;
        p * w[0]
    }

    #[inline]
    fn project_lanes(
        f: &Mat3Lanes,
        w: &[PdWeights],
        body: impl Fn(usize) -> NhParams,
        warm: &mut [Vector3<f64>],
        q: &mut Mat3Lanes,
    ) -> [bool; LANES] {
        let params = std::array::from_fn(body);
        let wn = std::array::from_fn(|l| w[l][0]);
        let mut wl: [[f64; 3]; LANES] = std::array::from_fn(|l| warm[l].into());
        let ok = interleaved::nh_prox(f, &params, &wn, &mut wl, q);
        for l in 0..LANES {
            if ok[l] {
                warm[l] = Vector3::from(wl[l]);
            }
        }
        ok
    }

    fn linearize(
        f: &Matrix3<f64>,
        svd: Svd3,
        w: &PdWeights,
        body: &NhParams,
        filter: HessianFilter,
    ) -> Linearization {
        let star = prox_stretch(body, &svd.sigma, None).sigma_star;
        linearization(f, svd, star, w, body, filter)
    }

    /// The signed SVDs of [`interleaved::signed_svds`] and the cold-started prox stretches of
    /// [`interleaved::nh_stretches`], then `linearization` as in [`Material::linearize`].
    /// Lanes with a nearly repeated pair of singular values fall back
    /// ([`interleaved::separated_pairs`]).
    fn linearize_lanes(
        f: &Mat3Lanes,
        w: &[PdWeights],
        body: impl Fn(usize) -> NhParams,
        filter: HessianFilter,
    ) -> [Option<Linearization>; LANES] {
        let params: [NhParams; LANES] = std::array::from_fn(body);
        let (svd, sigma, mut ok) = interleaved::signed_svds(f);
        interleaved::separated_pairs(&sigma, &mut ok);
        let x = interleaved::nh_stretches(&sigma, &params, &mut [[0.0; 3]; LANES], &mut ok);
        std::array::from_fn(|l| {
            let star = Vector3::from(x[l]);
            let fl = interleaved::lane(f, l);
            ok[l].then(|| linearization(&fl, svd[l], star, &w[l], &params[l], filter))
        })
    }

    /// $\tfrac w2\|\sigma-\sigma^*\|^2+\tfrac w{\bar k}\bar\psi(\sigma^*)$, which is
    /// [`Material::pd_energy`] ($F-p=U\,\mathrm{diag}(\sigma-\sigma^*)V^T$), from the singular values
    /// of [`interleaved::spectral`] and the cold-started prox stretches.
    fn pd_energy_lanes(
        f: &Mat3Lanes,
        w: &[PdWeights],
        body: impl Fn(usize) -> NhParams,
    ) -> [Option<f64>; LANES] {
        let params: [NhParams; LANES] = std::array::from_fn(body);
        let sp = interleaved::spectral(f);
        let mut ok = sp.ok;
        let x = interleaved::nh_stretches(&sp.sigma, &params, &mut [[0.0; 3]; LANES], &mut ok);
        std::array::from_fn(|l| {
            let star = Vector3::from(x[l]);
            let sig = Vector3::new(sp.sigma[0][l], sp.sigma[1][l], sp.sigma[2][l]);
            let e = 0.5 * w[l][0] * (sig - star).norm_squared()
                + w[l][0] / params[l].k * stretch_energy(&params[l], &star);
            ok[l].then_some(e)
        })
    }

    fn spectral_coefficients(lin: &Linearization) -> [Matrix3<f64>; 5] {
        let svd = &lin.svd;
        let w = lin.w[0];
        let (m, n) = spectral_pair_coefficients(&svd.sigma, &lin.star, &lin.jac);
        [svd.u, svd.v, lin.jac * w, m * w, n * w]
    }

    fn param_gradient(lin: &Linearization, inp: &ParamInput) -> (f64, f64) {
        let dl_dw = -frob(inp.zh, &lin.residual[0]);
        let de = lin.w[0] / inp.youngs * dl_dw;
        let (dmu, dla) = inp.dlame_dnu;
        let [dw, _] = Self::pd_weights(dmu, dla, inp.vol, inp.fit_range);
        // prox sensitivity: dL/dp_s = w_s Zhat, p depends on nu through the body means
        let dp = Self::dp_dbody(lin, inp.body, inp.body_dnu);
        let dnu = dw * dl_dw + inp.beta * dw * inp.dl_dbw + lin.w[0] * frob(inp.zh, &dp);
        (de, dnu)
    }

    fn param_gradient_linear(lin: &Linearization, inp: &ParamInput) -> ParamLinear {
        let (dmu, dla) = inp.dlame_dnu;
        let [dw, _] = Self::pd_weights(dmu, dla, inp.vol, inp.fit_range);
        let dp = Self::dp_dbody(lin, inp.body, inp.body_dnu);
        ParamLinear {
            ge: -lin.residual[0] * (lin.w[0] / inp.youngs),
            ae: 0.0,
            gnu: dp * lin.w[0] - lin.residual[0] * dw,
            anu: inp.beta * dw,
        }
    }

    fn pd_energy(f: &Matrix3<f64>, svd: &Svd3, w: &PdWeights, body: &NhParams) -> f64 {
        let (p, st) = prox(body, svd, None);
        0.5 * w[0] * (f - p).norm_squared() + w[0] / body.k * stretch_energy(body, &st.sigma_star)
    }

    fn pd_terms(
        f: &Matrix3<f64>,
        svd: &Svd3,
        w: &PdWeights,
        body: &NhParams,
        with_hessian: bool,
    ) -> (f64, Matrix3<f64>, Mat9) {
        let w = w[0];
        let (p, st) = prox(body, svd, None);
        let e =
            0.5 * w * (f - p).norm_squared() + w / body.k * stretch_energy(body, &st.sigma_star);
        let h = if with_hessian {
            let (jac, _) = stretch_jacobian(body, &st.sigma_star, HessianFilter::None);
            mat9_of(|df| (df - jacobian_apply(svd, &st.sigma_star, &jac, df)) * w)
        } else {
            Mat9::zeros()
        };
        (e, (f - p) * w, h)
    }

    /// Eq. 5 at the sample's own $(\mu_e,\lambda_e)=s_e(\bar\mu,\bar\lambda)$, $s_e=w/(\bar kV)$.
    fn true_terms(
        f: &Matrix3<f64>,
        _: &Svd3,
        w: &PdWeights,
        body: &NhParams,
        vol: f64,
        with_hessian: bool,
    ) -> (f64, Matrix3<f64>, Mat9) {
        let sc = w[0] / (body.k * vol);
        let (mu, la) = (sc * body.mu, sc * body.lambda);
        let e = vol * energy_density(mu, la, f);
        let p = pk1(mu, la, f) * vol;
        let h = if with_hessian {
            mat9_of(|df| pk1_differential(mu, la, f, df) * vol)
        } else {
            Mat9::zeros()
        };
        (e, p, h)
    }

    /// Eq. 5 and Eq. 6; NaN for an inverted element ($J\le0$, infinite energy).
    fn density_and_pk1(mu: f64, lambda: f64, f: &Matrix3<f64>) -> (f64, Matrix3<f64>) {
        if f.determinant() <= 0.0 {
            return (f64::NAN, Matrix3::repeat(f64::NAN));
        }
        (energy_density(mu, lambda, f), pk1(mu, lambda, f))
    }
}

#[cfg(test)]
mod tests;
