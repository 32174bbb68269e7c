//! The `corotated` material law (spec §3 table, `corot_vol`): the corotated PD term
//! $\Psi=\frac k2\|F-R(F)\|_F^2$ (spec §3.1) with local step $p=R$ (polar rotation) and its
//! differential (spec App. A.2 / Eq. 42 with $\sigma^*\equiv1$, $W=0$), plus the quadratic
//! volume term of [`super::volume`]: [`Corotated`] implements [`Material`] with weights
//! $(2\mu V_s,\ \lambda V_s)$.

use super::interleaved::{self, Lanes, Mat3Lanes, LANES};
use super::law::{
    frob, mat9_of, Linearization, Mat9, Material, ParamInput, ParamLinear, PdWeights,
};
use super::law::{HessianFilter, NhParams};
use super::svd::{spectral_jacobian_apply, spectral_pair_coefficients, svd3, Svd3};
use super::volume;
use nalgebra::{Matrix3, Vector3};

/// Local step of the corotated term: $p = R = UV^T$ (spec §2.4 "Local step — corotated", §3.1).
pub fn project(svd: &Svd3) -> Matrix3<f64> {
    svd.u * svd.v.transpose()
}

/// $dR$ for a direction $dF$ (spec App. A.2): the spectral differential with $\sigma^*\equiv1$,
/// $W=0$, i.e. $\mathbf M_{ij}=1/(\sigma_i+\sigma_j)$, $\mathbf N_{ij}=-1/(\sigma_i+\sigma_j)$
/// (Eq. 42). As a $9\times9$ map it has eigenvalue $2/(\sigma_i+\sigma_j)$ on the twist modes
/// $U(e_ie_j^T-e_je_i^T)V^T$ and $0$ on the six symmetric modes. The divided difference is
/// identically zero, so repeated singular values need no special treatment; $\sigma_i+\sigma_j$
/// is guarded at $10^{-6}$ for inverted elements (where $R$ itself is discontinuous).
pub fn jacobian_apply(svd: &Svd3, df: &Matrix3<f64>) -> Matrix3<f64> {
    spectral_jacobian_apply(svd, &Vector3::repeat(1.0), &Matrix3::zeros(), df)
}

/// [`Material::linearize`] of the corotated + volume law from the signed SVD and the volume
/// stretches $s$ (`volume::project_stretches`): rotation $R=UV^T$, $D=U\,\mathrm{diag}(s)V^T$,
/// the volume stretch Jacobian $W=\partial s/\partial\sigma$ (`volume::stretch_jacobian`) and
/// the residuals $(F-R,\ F-D)$.
fn linearization(
    f: &Matrix3<f64>,
    svd: Svd3,
    vol_star: Vector3<f64>,
    w: &PdWeights,
) -> Linearization {
    let r = project(&svd);
    let dm = svd.compose(&vol_star);
    Linearization {
        w: *w,
        star: vol_star,
        jac: volume::stretch_jacobian(&svd.sigma, &vol_star),
        residual: [f - r, f - dm],
        filtered: false,
        svd,
    }
}

/// The `corotated` law: corotated term (weight $2\mu_eV_s$) plus the quadratic volume term
/// (weight $\lambda_eV_s$), both projective (spec §3 table). Its true energy (Newton baseline)
/// is $\mu\|F-R\|^2+\tfrac\lambda2(J-1)^2$.
pub struct Corotated;

impl Material for Corotated {
    #[inline]
    fn pd_weights(mu: f64, lambda: f64, vol: f64, _fit_range: f64) -> PdWeights {
        [2.0 * mu * vol, lambda * vol]
    }

    #[inline]
    fn project(svd: &Svd3, w: &PdWeights, _: &NhParams, _: &mut Vector3<f64>) -> Matrix3<f64> {
        let r = project(svd);
        let (dm, _) = volume::project(svd);
        r * w[0] + dm * w[1]
    }

    #[inline]
    fn project_lanes(
        f: &Mat3Lanes,
        w: &[PdWeights],
        _: impl Fn(usize) -> NhParams,
        _: &mut [Vector3<f64>],
        q: &mut Mat3Lanes,
    ) -> [bool; LANES] {
        let lanes = |k: usize| -> Lanes { std::array::from_fn(|l| w[l][k]) };
        interleaved::corot_vol(f, &lanes(0), &lanes(1), q)
    }

    fn linearize(
        f: &Matrix3<f64>,
        svd: Svd3,
        w: &PdWeights,
        _: &NhParams,
        _: HessianFilter,
    ) -> Linearization {
        let vol_star = volume::project_stretches(&svd.sigma);
        linearization(f, svd, vol_star, w)
    }

    /// The signed SVDs of [`interleaved::signed_svds`] and the volume stretches of
    /// [`interleaved::volume_stretches`] (principal branch), then `linearization` as in
    /// [`Material::linearize`]. Lanes with a nearly repeated pair of singular values fall back
    /// ([`interleaved::separated_pairs`]).
    fn linearize_lanes(
        f: &Mat3Lanes,
        w: &[PdWeights],
        _: impl Fn(usize) -> NhParams,
        _: HessianFilter,
    ) -> [Option<Linearization>; LANES] {
        let (svd, sigma, mut ok) = interleaved::signed_svds(f);
        interleaved::separated_pairs(&sigma, &mut ok);
        let s = interleaved::volume_stretches(&sigma, &mut ok);
        std::array::from_fn(|l| {
            let star = Vector3::new(s[0][l], s[1][l], s[2][l]);
            ok[l].then(|| linearization(&interleaved::lane(f, l), svd[l], star, &w[l]))
        })
    }

    /// $\tfrac{w_{cor}}2\sum_i(\sigma_i-1)^2+\tfrac{w_{vol}}2\sum_i(\sigma_i-s_i)^2$, which is
    /// [`Material::pd_energy`] ($F-R=U\,\mathrm{diag}(\sigma-1)V^T$, $F-D=U\,\mathrm{diag}(\sigma-s)V^T$)
    /// from the singular values of [`interleaved::spectral`] and the volume stretches.
    fn pd_energy_lanes(
        f: &Mat3Lanes,
        w: &[PdWeights],
        _: impl Fn(usize) -> NhParams,
    ) -> [Option<f64>; LANES] {
        let sp = interleaved::spectral(f);
        let mut ok = sp.ok;
        let s = interleaved::volume_stretches(&sp.sigma, &mut ok);
        std::array::from_fn(|l| {
            let (mut cor, mut vol) = (0.0, 0.0);
            for i in 0..3 {
                let sig = sp.sigma[i][l];
                cor += (sig - 1.0) * (sig - 1.0);
                vol += (sig - s[i][l]) * (sig - s[i][l]);
            }
            ok[l].then_some(0.5 * w[l][0] * cor + 0.5 * w[l][1] * vol)
        })
    }

    fn spectral_coefficients(lin: &Linearization) -> [Matrix3<f64>; 5] {
        let svd = &lin.svd;
        let [w_cor, w_vol] = lin.w;
        let (mc, nc) =
            spectral_pair_coefficients(&svd.sigma, &Vector3::repeat(1.0), &Matrix3::zeros());
        let (mv, nv) = spectral_pair_coefficients(&svd.sigma, &lin.star, &lin.jac);
        [
            svd.u,
            svd.v,
            lin.jac * w_vol,
            mc * w_cor + mv * w_vol,
            nc * w_cor + nv * w_vol,
        ]
    }

    fn param_gradient(lin: &Linearization, inp: &ParamInput) -> (f64, f64) {
        let ee = inp.youngs;
        let dl_dwc = -frob(inp.zh, &lin.residual[0]);
        let dl_dwv = -frob(inp.zh, &lin.residual[1]);
        let de = lin.w[0] / ee * dl_dwc + lin.w[1] / ee * dl_dwv;
        let (dmu, dla) = inp.dlame_dnu;
        let [dwc, dwv] = Self::pd_weights(dmu, dla, inp.vol, inp.fit_range);
        let dnu = dwc * dl_dwc + dwv * dl_dwv + inp.beta * (dwc + dwv) * inp.dl_dbw;
        (de, dnu)
    }

    fn param_gradient_linear(lin: &Linearization, inp: &ParamInput) -> ParamLinear {
        let ee = inp.youngs;
        let (dmu, dla) = inp.dlame_dnu;
        let [dwc, dwv] = Self::pd_weights(dmu, dla, inp.vol, inp.fit_range);
        ParamLinear {
            ge: -(lin.residual[0] * (lin.w[0] / ee) + lin.residual[1] * (lin.w[1] / ee)),
            ae: 0.0,
            gnu: -(lin.residual[0] * dwc + lin.residual[1] * dwv),
            anu: inp.beta * (dwc + dwv),
        }
    }

    fn pd_energy(f: &Matrix3<f64>, svd: &Svd3, w: &PdWeights, _: &NhParams) -> f64 {
        let r = project(svd);
        let (dm, _) = volume::project(svd);
        0.5 * w[0] * (f - r).norm_squared() + 0.5 * w[1] * (f - dm).norm_squared()
    }

    fn pd_terms(
        f: &Matrix3<f64>,
        svd: &Svd3,
        w: &PdWeights,
        _: &NhParams,
        with_hessian: bool,
    ) -> (f64, Matrix3<f64>, Mat9) {
        let r = project(svd);
        let (dm, vol_star) = volume::project(svd);
        let [wc, wv] = *w;
        let e = 0.5 * wc * (f - r).norm_squared() + 0.5 * wv * (f - dm).norm_squared();
        let p = (f - r) * wc + (f - dm) * wv;
        let h = if with_hessian {
            let vol_w = volume::stretch_jacobian(&svd.sigma, &vol_star);
            mat9_of(|df| {
                df * (wc + wv)
                    - jacobian_apply(svd, df) * wc
                    - volume::jacobian_apply(svd, &vol_star, &vol_w, df) * wv
            })
        } else {
            Mat9::zeros()
        };
        (e, p, h)
    }

    fn true_terms(
        f: &Matrix3<f64>,
        svd: &Svd3,
        w: &PdWeights,
        _: &NhParams,
        _vol: f64,
        with_hessian: bool,
    ) -> (f64, Matrix3<f64>, Mat9) {
        // w = (2 μ V, λ V)
        let [two_mu_v, la_v] = *w;
        let r = project(svd);
        let j = f.determinant();
        let cof = cofactor(f);
        let e = 0.5 * two_mu_v * (f - r).norm_squared() + 0.5 * la_v * (j - 1.0).powi(2);
        let p = (f - r) * two_mu_v + cof * (la_v * (j - 1.0));
        let h = if with_hessian {
            mat9_of(|df| {
                (df - jacobian_apply(svd, df)) * two_mu_v
                    + cof * (la_v * cof.component_mul(df).sum())
                    + cofactor_differential(f, df) * (la_v * (j - 1.0))
            })
        } else {
            Mat9::zeros()
        };
        (e, p, h)
    }

    /// The PD corotated + volume density $\mu\|F-R\|^2+\tfrac\lambda2\|F-D(F)\|^2$ and
    /// $P=2\mu(F-R)+\lambda(F-D)$ (both projections are closest points).
    fn density_and_pk1(mu: f64, lambda: f64, f: &Matrix3<f64>) -> (f64, Matrix3<f64>) {
        let svd = svd3(f);
        let r = project(&svd);
        let (d, _) = volume::project(&svd);
        let (fr, fd) = (f - r, f - d);
        (
            mu * fr.norm_squared() + 0.5 * lambda * fd.norm_squared(),
            fr * (2.0 * mu) + fd * lambda,
        )
    }
}

/// $\mathrm{cof}(F)=\partial\det F/\partial F$.
pub fn cofactor(f: &Matrix3<f64>) -> Matrix3<f64> {
    let c0 = f.column(0).into_owned();
    let c1 = f.column(1).into_owned();
    let c2 = f.column(2).into_owned();
    Matrix3::from_columns(&[c1.cross(&c2), c2.cross(&c0), c0.cross(&c1)])
}

/// $d\,\mathrm{cof}(F)\[dF\]$ (cofactor columns are cross products of the other two).
pub fn cofactor_differential(f: &Matrix3<f64>, df: &Matrix3<f64>) -> Matrix3<f64> {
    let c = |m: &Matrix3<f64>, k: usize| m.column(k).into_owned();
    Matrix3::from_columns(&[
        c(df, 1).cross(&c(f, 2)) + c(f, 1).cross(&c(df, 2)),
        c(df, 2).cross(&c(f, 0)) + c(f, 2).cross(&c(df, 0)),
        c(df, 0).cross(&c(f, 1)) + c(f, 0).cross(&c(df, 1)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::material::fd::{self, Rng};
    use crate::material::svd::{polar_rotation, spectral_jacobian_matrix, svd3};
    use nalgebra::SMatrix;

    fn dr_matrix(f: &Matrix3<f64>) -> SMatrix<f64, 9, 9> {
        let s = svd3(f);
        spectral_jacobian_matrix(&s, &Vector3::repeat(1.0), &Matrix3::zeros())
    }

    /// Independent closed form of App. A.2: $M=R^TdF$, $w=\mathrm{axial}(M-M^T)$,
    /// $\omega=(\mathrm{tr}S\,I-S)^{-1}w$, $dR=R[\omega]_\times$.
    fn dr_polar_formula(f: &Matrix3<f64>, df: &Matrix3<f64>) -> Matrix3<f64> {
        let r = polar_rotation(f);
        let s = r.transpose() * f;
        let s = 0.5 * (s + s.transpose());
        let m = r.transpose() * df;
        let w = Vector3::new(
            m[(2, 1)] - m[(1, 2)],
            m[(0, 2)] - m[(2, 0)],
            m[(1, 0)] - m[(0, 1)],
        );
        let a = Matrix3::identity() * s.trace() - s;
        let omega = a.lu().solve(&w).unwrap();
        r * omega.cross_matrix()
    }

    /// T2: dR (Eq. 42 / App. A.2) vs central FD of the polar rotation (9 directions), for
    /// generic, compressed, near-degenerate, exactly degenerate and inverted F.
    #[test]
    fn t2_drotation_vs_fd() {
        let mut rng = Rng(7);
        let stretches = [
            Vector3::new(1.4, 1.0, 0.7),
            Vector3::new(0.3, 0.2, 0.1),
            Vector3::new(1.0, 1.0, 1.0),
            Vector3::new(1.0 + 1e-9, 1.0, 1.0 - 1e-9),
            Vector3::new(2.0, 2.0, 0.5),
            Vector3::new(1.2, 0.9, 0.9 + 1e-7),
            Vector3::new(1.5, 1.0, -0.4),
            Vector3::new(3.0, 0.05, 0.01),
        ];
        let mut worst: f64 = 0.0;
        for s in &stretches {
            let f = rng.with_stretches(s);
            let jac = dr_matrix(&f);
            // step η = 1e-4 ‖F‖ with the 4th-order central stencil
            let fdj = fd::jacobian_mat3(polar_rotation, &f, 1e-4 * f.norm());
            let err = (jac - fdj).norm() / fdj.norm();
            worst = worst.max(err);
            assert!(err < 1e-7, "dR FD error {err} at sigma {s}");
            // the two closed forms (A.1 spectral and A.2 polar) agree
            let df = unit_random(&mut rng);
            let a = jacobian_apply(&svd3(&f), &df);
            let b = dr_polar_formula(&f, &df);
            assert!((a - b).norm() < 1e-12 * b.norm().max(1.0), "A.1 vs A.2");
        }
        eprintln!("T2 dR vs FD worst relative error: {worst:.3e}");
    }

    fn unit_random(rng: &mut Rng) -> Matrix3<f64> {
        Matrix3::from_fn(|_, _| rng.uniform(-1.0, 1.0))
    }

    /// §3.1: eigenvalues 2/(σ_i+σ_j) on twist modes, 0 on symmetric modes; symmetric 9×9.
    #[test]
    fn drotation_spectrum() {
        let mut rng = Rng(11);
        let s = Vector3::new(1.6, 0.8, 0.5);
        let f = rng.with_stretches(&s);
        let svd = svd3(&f);
        let jac = dr_matrix(&f);
        assert!((jac - jac.transpose()).norm() < 1e-14 * jac.norm());
        for (i, j) in [(0, 1), (0, 2), (1, 2)] {
            let mut e = Matrix3::zeros();
            e[(i, j)] = 1.0;
            e[(j, i)] = -1.0;
            let twist = svd.u * e * svd.v.transpose();
            let out = jacobian_apply(&svd, &twist);
            let expect = twist * (2.0 / (s[i] + s[j]));
            assert!((out - expect).norm() < 1e-14);
            let sym = svd.u * e.abs() * svd.v.transpose();
            assert!(jacobian_apply(&svd, &sym).norm() < 1e-14);
        }
        for i in 0..3 {
            let mut e = Matrix3::zeros();
            e[(i, i)] = 1.0;
            let m = svd.u * e * svd.v.transpose();
            assert!(jacobian_apply(&svd, &m).norm() < 1e-14);
        }
        assert!((project(&svd) - polar_rotation(&f)).norm() < 1e-15);
    }
}
