//! Finite-difference helpers for the element-level tests (spec §10.1). Test-only.
//!
//! All derivatives use the fourth-order central stencil
//! $f'(x)\approx\frac{-f(x+2h)+8f(x+h)-8f(x-h)+f(x-2h)}{12h}$ (truncation $O(h^4)$), which with
//! $h\approx10^{-4}$ gives $\sim10^{-12}$ relative accuracy for smooth maps.

use nalgebra::{Matrix3, SMatrix, SVector, Vector3};

/// Column-major $\mathrm{vec}$ of a $3\times3$ matrix.
pub fn vec9(m: &Matrix3<f64>) -> SVector<f64, 9> {
    SVector::<f64, 9>::from_column_slice(m.as_slice())
}

/// Inverse of [`vec9`].
pub fn unvec9(v: &SVector<f64, 9>) -> Matrix3<f64> {
    Matrix3::from_column_slice(v.as_slice())
}

/// Central FD Jacobian of $f:\mathbb R^N\to\mathbb R^M$ at `x` with step `h` (per coordinate).
pub fn jacobian<const N: usize, const M: usize>(
    f: impl Fn(&SVector<f64, N>) -> SVector<f64, M>,
    x: &SVector<f64, N>,
    h: f64,
) -> SMatrix<f64, M, N> {
    let mut out = SMatrix::<f64, M, N>::zeros();
    for k in 0..N {
        let at = |t: f64| {
            let mut y = *x;
            y[k] += t;
            f(&y)
        };
        let d = (at(-2.0 * h) - at(2.0 * h) + (at(h) - at(-h)) * 8.0) / (12.0 * h);
        out.set_column(k, &d);
    }
    out
}

/// Central FD gradient of a scalar function.
pub fn gradient<const N: usize>(
    f: impl Fn(&SVector<f64, N>) -> f64,
    x: &SVector<f64, N>,
    h: f64,
) -> SVector<f64, N> {
    let j = jacobian(|y| SVector::<f64, 1>::new(f(y)), x, h);
    j.transpose()
}

/// Central FD of a matrix map $F\mapsto p(F)$ as a $9\times9$ matrix in column-major vec.
pub fn jacobian_mat3(
    f: impl Fn(&Matrix3<f64>) -> Matrix3<f64>,
    x: &Matrix3<f64>,
    h: f64,
) -> SMatrix<f64, 9, 9> {
    jacobian(|v| vec9(&f(&unvec9(v))), &vec9(x), h)
}

/// Central FD gradient of a scalar function of a matrix (returned as a matrix).
pub fn gradient_mat3(f: impl Fn(&Matrix3<f64>) -> f64, x: &Matrix3<f64>, h: f64) -> Matrix3<f64> {
    unvec9(&gradient(|v| f(&unvec9(v)), &vec9(x), h))
}

/// Central FD Jacobian of a map $\mathbb R^3\to\mathbb R^3$.
pub fn jacobian3(
    f: impl Fn(&Vector3<f64>) -> Vector3<f64>,
    x: &Vector3<f64>,
    h: f64,
) -> Matrix3<f64> {
    jacobian(f, x, h)
}

/// Derivative of a scalar-parameter vector function.
pub fn derivative3(f: impl Fn(f64) -> Vector3<f64>, x: f64, h: f64) -> Vector3<f64> {
    (f(x - 2.0 * h) - f(x + 2.0 * h) + (f(x + h) - f(x - h)) * 8.0) / (12.0 * h)
}

/// Deterministic pseudo-random numbers in $[0,1)$ for tests (SplitMix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next_f64()
    }

    /// Random rotation from random Euler angles.
    pub fn rotation(&mut self) -> Matrix3<f64> {
        let a = self.uniform(-3.1, 3.1);
        let b = self.uniform(-3.1, 3.1);
        let c = self.uniform(-3.1, 3.1);
        nalgebra::Rotation3::from_euler_angles(a, b, c).into_inner()
    }

    /// $R_1\,\mathrm{diag}(s)\,R_2^T$ with random rotations.
    pub fn with_stretches(&mut self, s: &Vector3<f64>) -> Matrix3<f64> {
        self.rotation() * Matrix3::from_diagonal(s) * self.rotation().transpose()
    }
}

/// Directional central FD (fourth order) of a matrix map along `dir`.
pub fn directional_mat3(
    f: impl Fn(&Matrix3<f64>) -> Matrix3<f64>,
    x: &Matrix3<f64>,
    dir: &Matrix3<f64>,
    h: f64,
) -> Matrix3<f64> {
    let at = |t: f64| f(&(x + dir * t));
    (at(-2.0 * h) - at(2.0 * h) + (at(h) - at(-h)) * 8.0) / (12.0 * h)
}

/// Central FD (fourth order) of a scalar function of one variable.
pub fn derivative(f: impl Fn(f64) -> f64, x: f64, h: f64) -> f64 {
    (f(x - 2.0 * h) - f(x + 2.0 * h) + (f(x + h) - f(x - h)) * 8.0) / (12.0 * h)
}

/// The generic FD checks every material law is registered with ([`material_fd_tests!`]): each
/// takes the law as a type parameter and compares its derivatives with central differences of
/// its own values at a few deformation gradients (generic, compressed, stretched, near rest).
pub mod law_checks {
    use super::{derivative, directional_mat3, gradient_mat3, Rng};
    use crate::material::law::{frob, mat9_of, Linearization, Mat9, Material, ParamInput};
    use crate::material::neohookean::{HessianFilter, NhParams};
    use crate::material::svd::{svd3, SpectralLinear};
    use crate::material::weights::DEFAULT_FIT_RANGE;
    use crate::material::{lame, lame_dnu, PdWeights};
    use nalgebra::{Matrix3, Vector3};

    const YOUNGS: f64 = 3.0;
    const NU: f64 = 0.3;
    const VOL: f64 = 0.7;
    /// FD step in F (entries of F are O(1)).
    const H: f64 = 1e-4;

    /// Deformation gradients of the checks (no inversions: the true energies are infinite there).
    pub fn deformations() -> Vec<Matrix3<f64>> {
        let mut rng = Rng(2024);
        [
            Vector3::new(1.3, 1.0, 0.8),
            Vector3::new(0.7, 0.6, 0.5),
            Vector3::new(1.6, 1.2, 0.9),
            Vector3::new(1.02, 0.99, 0.97),
        ]
        .iter()
        .map(|s| rng.with_stretches(s))
        .collect()
    }

    /// Weights and body means of a one-element body at $(E,\nu)$.
    pub fn setup<M: Material>(youngs: f64, nu: f64) -> (PdWeights, NhParams) {
        let (mu, la) = lame(youngs, nu);
        (
            M::pd_weights(mu, la, VOL, DEFAULT_FIT_RANGE),
            NhParams::with_fit(mu, la, DEFAULT_FIT_RANGE),
        )
    }

    fn rel(a: f64, b: f64) -> f64 {
        (a - b).abs() / b.abs().max(1e-300)
    }

    /// Stress of `terms` vs the FD gradient of its energy, Hessian vs the FD Jacobian of
    /// its stress.
    fn check_terms(
        what: &str,
        terms: impl Fn(&Matrix3<f64>, bool) -> (f64, Matrix3<f64>, Mat9),
        tol: f64,
    ) {
        for f in deformations() {
            let (_, p, hess) = terms(&f, true);
            let fd_p = gradient_mat3(|g| terms(g, false).0, &f, H);
            let e = (p - fd_p).norm() / fd_p.norm();
            assert!(e < tol, "{what}: stress vs FD of the energy {e:e}");
            let fd_h = mat9_of(|df| directional_mat3(|g| terms(g, false).1, &f, df, H));
            let e = (hess - fd_h).norm() / fd_h.norm();
            assert!(e < tol, "{what}: Hessian vs FD of the stress {e:e}");
        }
    }

    /// PD energy → stress → Hessian ([`Material::pd_terms`]), and [`Material::pd_energy`]
    /// equal to the energy of `pd_terms`.
    pub fn pd_terms<M: Material>() {
        let (w, body) = setup::<M>(YOUNGS, NU);
        check_terms(
            "PD",
            |f, hess| M::pd_terms(f, &svd3(f), &w, &body, hess),
            1e-6,
        );
        for f in deformations() {
            let (e, _, _) = M::pd_terms(&f, &svd3(&f), &w, &body, false);
            assert_eq!(e, M::pd_energy(&f, &svd3(&f), &w, &body));
        }
    }

    /// True energy → stress → Hessian ([`Material::true_terms`]).
    pub fn true_terms<M: Material>() {
        let (w, body) = setup::<M>(YOUNGS, NU);
        let terms = |f: &Matrix3<f64>, hess| M::true_terms(f, &svd3(f), &w, &body, VOL, hess);
        check_terms("true", terms, 1e-6);
    }

    /// Output density → stress ([`Material::density_and_pk1`]).
    pub fn density<M: Material>() {
        let (mu, la) = lame(YOUNGS, NU);
        for f in deformations() {
            let (_, p) = M::density_and_pk1(mu, la, &f);
            let fd_p = gradient_mat3(|g| M::density_and_pk1(mu, la, g).0, &f, H);
            let e = (p - fd_p).norm() / fd_p.norm();
            assert!(e < 1e-7, "density: stress vs FD {e:e}");
        }
    }

    /// The projection's differential (linearisation → spectral coefficients, the backward's
    /// $\Delta A$) vs FD of the projection $Q(F)$ in all nine directions; residuals consistent
    /// with $Q$; the interleaved kernels (where the law has them: projection, linearization,
    /// PD energy) equal to the exact ones.
    pub fn projection<M: Material>() {
        let (w, body) = setup::<M>(YOUNGS, NU);
        let q = |f: &Matrix3<f64>| M::project(&svd3(f), &w, &body, &mut Vector3::zeros());
        for f in deformations() {
            let lin = M::linearize(&f, svd3(&f), &w, &body, HessianFilter::None);
            let dq = SpectralLinear::from_coefficients(M::spectral_coefficients(&lin));
            let mine = mat9_of(|df| dq.apply(df));
            let fd = mat9_of(|df| directional_mat3(q, &f, df, H));
            let e = (mine - fd).norm() / fd.norm();
            assert!(e < 1e-6, "projection Jacobian vs FD {e:e}");
            let from_res = f * (w[0] + w[1]) - lin.residual[0] * w[0] - lin.residual[1] * w[1];
            assert!((from_res - q(&f)).norm() < 1e-12 * q(&f).norm());
        }
        lanes::<M>(&w, &body);
    }

    fn lanes<M: Material>(w: &PdWeights, body: &NhParams) {
        use crate::material::interleaved::{Mat3Lanes, LANES};
        let fs = deformations();
        let fl: Vec<Matrix3<f64>> = (0..LANES)
            .map(|l| fs[l % fs.len()] * (1.0 + 0.01 * l as f64))
            .collect();
        let mut f: Mat3Lanes = [[0.0; LANES]; 9];
        for (l, m) in fl.iter().enumerate() {
            for (k, v) in m.iter().enumerate() {
                f[k][l] = *v;
            }
        }
        let mut out: Mat3Lanes = [[0.0; LANES]; 9];
        let mut warm = vec![Vector3::zeros(); LANES];
        let ws = vec![*w; LANES];
        let ok = M::project_lanes(&f, &ws, |_| *body, &mut warm, &mut out);
        for l in (0..LANES).filter(|&l| ok[l]) {
            let exact = M::project(&svd3(&fl[l]), w, body, &mut Vector3::zeros());
            let got = Matrix3::from_fn(|r, c| out[3 * c + r][l]);
            assert!((got - exact).norm() < 1e-10 * exact.norm(), "lane {l}");
        }
        // the interleaved linearization (its ΔA map and residuals) and PD energy
        let lins = M::linearize_lanes(&f, &ws, |_| *body, HessianFilter::None);
        let energies = M::pd_energy_lanes(&f, &ws, |_| *body);
        let map = |lin: &Linearization| {
            let sl = SpectralLinear::from_coefficients(M::spectral_coefficients(lin));
            mat9_of(|df| sl.apply(df))
        };
        for l in 0..LANES {
            let usv = svd3(&fl[l]);
            let exact = M::linearize(&fl[l], usv, w, body, HessianFilter::None);
            if let Some(lin) = lins[l] {
                let (a, b) = (map(&lin), map(&exact));
                assert!((a - b).norm() < 1e-10 * b.norm(), "linearization, lane {l}");
                let r = (lin.residual[0] - exact.residual[0]).norm()
                    + (lin.residual[1] - exact.residual[1]).norm();
                assert!(r < 1e-10 * fl[l].norm(), "residuals, lane {l}");
            }
            if let Some(e) = energies[l] {
                let ex = M::pd_energy(&fl[l], &usv, w, body);
                assert!((e - ex).abs() < 1e-10 * ex.abs(), "energy, lane {l}");
            }
        }
    }

    /// Parameter derivatives ([`Material::param_gradient`]) vs FD in $E$ and $\nu$ of the
    /// sample's residual term $\mathcal L=-\hat Z:\sum_kw_k(F-p_k)+\beta\,(\textstyle\sum_kw_k)\,
    /// \partial\mathcal L/\partial(\beta w)$ (the $\beta$ term in $\nu$ only: the solver adds the
    /// $E$ part of $\beta_ew_s$ itself); and the weights linear in $(\mu,\lambda)$.
    pub fn param_gradient<M: Material>() {
        let mut rng = Rng(77);
        let (beta, dl_dbw) = (0.03, -0.4);
        for f in deformations() {
            let zh = Matrix3::from_fn(|_, _| rng.uniform(-1.0, 1.0));
            let loss = |youngs: f64, nu: f64, with_beta: bool| {
                let (w, body) = setup::<M>(youngs, nu);
                let lin = M::linearize(&f, svd3(&f), &w, &body, HessianFilter::None);
                let l = -frob(&zh, &lin.residual[0]) * w[0] - frob(&zh, &lin.residual[1]) * w[1];
                l + if with_beta {
                    beta * (w[0] + w[1]) * dl_dbw
                } else {
                    0.0
                }
            };
            let (w, body) = setup::<M>(YOUNGS, NU);
            let lin = M::linearize(&f, svd3(&f), &w, &body, HessianFilter::None);
            let (dmu, dla) = lame_dnu(YOUNGS, NU);
            let body_dnu = NhParams::with_fit(dmu, dla, DEFAULT_FIT_RANGE);
            let (de, dnu) = M::param_gradient(
                &lin,
                &ParamInput {
                    zh: &zh,
                    youngs: YOUNGS,
                    dlame_dnu: (dmu, dla),
                    vol: VOL,
                    fit_range: DEFAULT_FIT_RANGE,
                    beta,
                    dl_dbw,
                    body: &body,
                    body_dnu: &body_dnu,
                },
            );
            let fd_e = derivative(|e| loss(e, NU, false), YOUNGS, 1e-4 * YOUNGS);
            let fd_nu = derivative(|nu| loss(YOUNGS, nu, true), NU, 1e-4);
            // the linear-map form the device contracts: same numbers for this (Ẑ, ℓ)
            let inp = ParamInput {
                zh: &zh,
                youngs: YOUNGS,
                dlame_dnu: (dmu, dla),
                vol: VOL,
                fit_range: DEFAULT_FIT_RANGE,
                beta,
                dl_dbw,
                body: &body,
                body_dnu: &body_dnu,
            };
            let lm = M::param_gradient_linear(&lin, &inp);
            let (le, lnu) = (
                frob(&zh, &lm.ge) + lm.ae * dl_dbw,
                frob(&zh, &lm.gnu) + lm.anu * dl_dbw,
            );
            assert!(rel(le, de) < 1e-12, "linear dL/dE {le} vs {de}");
            assert!(rel(lnu, dnu) < 1e-12, "linear dL/dnu {lnu} vs {dnu}");
            assert!(rel(de, fd_e) < 1e-6, "dL/dE {de} vs FD {fd_e}");
            assert!(rel(dnu, fd_nu) < 1e-6, "dL/dnu {dnu} vs FD {fd_nu}");
            // weights: linear in (mu, lambda), so d/dnu is the same map of d(mu, lambda)/dnu
            let dw = M::pd_weights(dmu, dla, VOL, DEFAULT_FIT_RANGE);
            for k in 0..2 {
                let fd_w = derivative(|nu| setup::<M>(YOUNGS, nu).0[k], NU, 1e-4);
                assert!(
                    (dw[k] - fd_w).abs() <= 1e-8 * fd_w.abs().max(1e-12),
                    "dw/dnu"
                );
            }
        }
    }
}

/// Registers a material law with every check of [`law_checks`]: one line per law, below.
macro_rules! material_fd_tests {
    ($name:ident, $law:ty) => {
        mod $name {
            use super::law_checks;
            #[test]
            fn pd_energy_stress_hessian_vs_fd() {
                law_checks::pd_terms::<$law>();
            }
            #[test]
            fn true_energy_stress_hessian_vs_fd() {
                law_checks::true_terms::<$law>();
            }
            #[test]
            fn output_density_stress_vs_fd() {
                law_checks::density::<$law>();
            }
            #[test]
            fn projection_jacobian_vs_fd() {
                law_checks::projection::<$law>();
            }
            #[test]
            fn parameter_derivatives_vs_fd() {
                law_checks::param_gradient::<$law>();
            }
        }
    };
}

material_fd_tests!(corotated_law, crate::material::corotated::Corotated);
material_fd_tests!(neohookean_law, crate::material::neohookean::Neohookean);
