//! Constitutive models: P = ∂ψ/∂F by central differences, and the return mappings' known
//! answers (yield surfaces, the von Mises uniaxial plateau at σ_y).

use diffphd_mpm::mpm::plasticity::PlasticState;
use diffphd_mpm::mpm::{ElasticModel, Material, Plasticity};
use nalgebra::{Matrix3, Vector3};

fn reference_f() -> Matrix3<f64> {
    Matrix3::new(1.2, 0.1, -0.05, 0.03, 0.9, 0.2, -0.1, 0.05, 1.1)
}

/// Relative error of the central-difference gradient of ψ against P, for steps 1e-2 … 1e-7.
fn fd_errors(mat: &Material, f: &Matrix3<f64>) -> Vec<(f64, f64)> {
    let p = mat.first_piola(f);
    assert!(p.norm() > 1e-3, "reference stress must be nonzero");
    (2..=7)
        .map(|k| {
            let eps = 10f64.powi(-k);
            let mut fd = Matrix3::zeros();
            for i in 0..3 {
                for j in 0..3 {
                    let mut fp = *f;
                    let mut fm = *f;
                    fp[(i, j)] += eps;
                    fm[(i, j)] -= eps;
                    fd[(i, j)] = (mat.energy_density(&fp) - mat.energy_density(&fm)) / (2.0 * eps);
                }
            }
            (eps, (fd - p).norm() / p.norm())
        })
        .collect()
}

fn check_stress_is_energy_gradient(model: ElasticModel, f: Matrix3<f64>) {
    let mat = Material::elastic(1000.0, 3.0, 0.3, model);
    let errs = fd_errors(&mat, &f);
    let best = errs.iter().map(|e| e.1).fold(f64::INFINITY, f64::min);
    assert!(
        best < 1e-8,
        "{model:?}: best FD error {best:e}, sweep {errs:?}"
    );
    // Truncation error is O(ε²): from ε = 1e-2 to 1e-3 it must drop by about 100.
    let ratio = errs[0].1 / errs[1].1;
    assert!(
        (30.0..300.0).contains(&ratio),
        "{model:?}: ratio {ratio}, sweep {errs:?}"
    );
}

#[test]
fn fixed_corotated_stress_is_energy_gradient() {
    check_stress_is_energy_gradient(ElasticModel::FixedCorotated, reference_f());
    // Inverted (det F < 0) too: the model is defined there.
    let mut inverted = reference_f();
    inverted.column_mut(2).neg_mut();
    check_stress_is_energy_gradient(ElasticModel::FixedCorotated, inverted);
}

#[test]
fn neo_hookean_stress_is_energy_gradient() {
    check_stress_is_energy_gradient(ElasticModel::NeoHookean, reference_f());
}

#[test]
fn stvk_hencky_stress_is_energy_gradient() {
    check_stress_is_energy_gradient(ElasticModel::StvkHencky, reference_f());
}

#[test]
fn small_strain_limit_is_linear_elasticity() {
    // σ ≈ 2μ ε + λ tr(ε) I for F = I + ε with symmetric ε ~ 1e-6.
    let e = Matrix3::new(1.0, 0.3, 0.0, 0.3, -0.5, 0.2, 0.0, 0.2, 0.7) * 1e-6;
    for model in [
        ElasticModel::FixedCorotated,
        ElasticModel::NeoHookean,
        ElasticModel::StvkHencky,
    ] {
        let mat = Material::elastic(1.0, 1e6, 0.3, model);
        let (mu, lambda) = mat.lame();
        let lin = 2.0 * mu * e + lambda * e.trace() * Matrix3::identity();
        let p = mat.first_piola(&(Matrix3::identity() + e));
        assert!((p - lin).norm() / lin.norm() < 1e-5, "{model:?}");
    }
}

fn principal_hencky(f: &Matrix3<f64>) -> Vector3<f64> {
    f.svd(false, false).singular_values.map(f64::ln)
}

#[test]
fn von_mises_return_lands_on_the_yield_surface() {
    let sigma_y = 50.0;
    let mat = Material {
        plasticity: Plasticity::VonMises {
            yield_stress: sigma_y,
        },
        ..Material::elastic(1.0, 1e4, 0.3, ElasticModel::StvkHencky)
    };
    let (mu, lambda) = mat.lame();
    let f = Matrix3::new(1.05, 0.02, 0.0, 0.01, 0.97, 0.03, 0.0, -0.02, 1.01);
    let mut st = PlasticState::default();
    let fe = mat.plasticity.return_map(mu, lambda, &f, &mut st);
    let tau = mat.kirchhoff(&fe);
    let dev = tau - Matrix3::identity() * (tau.trace() / 3.0);
    let target = (2.0f64 / 3.0).sqrt() * sigma_y;
    assert!(
        (dev.norm() - target).abs() < 1e-9 * target,
        "{} vs {target}",
        dev.norm()
    );
    assert!(
        (fe.determinant() - f.determinant()).abs() < 1e-13,
        "plastic flow is isochoric"
    );
    assert!((tau - tau.transpose()).norm() < 1e-9 * tau.norm());
    assert!(st.plastic_strain > 0.0);
    // An elastic trial state is left alone.
    let small = Matrix3::identity() + Matrix3::new(0.0, 1e-4, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    let mut st2 = PlasticState::default();
    assert_eq!(
        mat.plasticity.return_map(mu, lambda, &small, &mut st2),
        small
    );
    assert_eq!(st2.plastic_strain, 0.0);
}

#[test]
fn drucker_prager_return_cases() {
    let phi = 30.0;
    let mat = Material {
        plasticity: Plasticity::DruckerPrager {
            friction_angle_deg: phi,
            volume_correction: false,
        },
        ..Material::elastic(2000.0, 1e5, 0.3, ElasticModel::StvkHencky)
    };
    let (mu, lambda) = mat.lame();
    let alpha = Plasticity::drucker_prager_alpha(phi);
    // Case I: tension projects to the cone tip (stress-free, F_E a rotation).
    let f = Matrix3::new(1.02, 0.01, 0.0, 0.0, 1.01, 0.0, 0.0, 0.0, 0.999);
    let mut st = PlasticState::default();
    let fe = mat.plasticity.return_map(mu, lambda, &f, &mut st);
    assert!((fe.transpose() * fe - Matrix3::identity()).norm() < 1e-12);
    assert!(mat.kirchhoff(&fe).norm() < 1e-6);
    // Case III: compression with large shear lands on the cone ‖ε̂‖ = −(3λ+2μ)/(2μ)·tr ε·α.
    let f = Matrix3::new(0.97, 0.08, 0.0, 0.0, 0.99, 0.0, 0.0, 0.0, 0.995);
    let mut st = PlasticState::default();
    let fe = mat.plasticity.return_map(mu, lambda, &f, &mut st);
    let e = principal_hencky(&fe);
    let tr = e.sum();
    let dev = (e - Vector3::repeat(tr / 3.0)).norm();
    let cone = -(3.0 * lambda + 2.0 * mu) / (2.0 * mu) * tr * alpha;
    assert!(tr < 0.0 && (dev - cone).abs() < 1e-10, "{dev} vs {cone}");
    assert!(
        (tr - principal_hencky(&f).sum()).abs() < 1e-12,
        "volume kept in case III"
    );
    assert!(st.plastic_strain > 0.0);
    // Case II: pure compression stays (inside the cone).
    let f = Matrix3::identity() * 0.99;
    let mut st = PlasticState::default();
    assert_eq!(mat.plasticity.return_map(mu, lambda, &f, &mut st), f);
}

/// Steady simple shear under pressure: with flow along dev τ the normal stresses become equal
/// and the shear stress saturates at τ_xy = (3α/√2) p (docs of
/// `Plasticity::drucker_prager_repose`): tan φ for the repose cone, √6 sin φ/(3 − sin φ) for
/// Klár's cone (29.6° for φ = 25°, 39.3° for φ = 35°). Within 1 % after a shear of 0.3.
#[test]
fn drucker_prager_steady_shear_friction() {
    for (phi, repose) in [(25.0f64, true), (35.0, true), (25.0, false), (35.0, false)] {
        let plasticity = if repose {
            Plasticity::drucker_prager_repose(phi, false)
        } else {
            Plasticity::DruckerPrager {
                friction_angle_deg: phi,
                volume_correction: false,
            }
        };
        let mat = Material {
            plasticity,
            ..Material::elastic(1600.0, 3e5, 0.3, ElasticModel::StvkHencky)
        };
        let (mu, lambda) = mat.lame();
        let mut fe = Matrix3::identity() * 0.99;
        let mut st = PlasticState::default();
        let step = Matrix3::new(1.0, 1e-4, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0);
        for _ in 0..3000 {
            fe = mat.plasticity.return_map(mu, lambda, &(step * fe), &mut st);
        }
        let tau = mat.kirchhoff(&fe);
        let p = -tau.trace() / 3.0;
        let ratio = tau[(0, 1)].abs() / p;
        let expected = if repose {
            phi.to_radians().tan()
        } else {
            3.0 * Plasticity::drucker_prager_alpha(phi) / 2f64.sqrt()
        };
        eprintln!(
            "steady shear φ = {phi}°, repose cone {repose}: τ/p = {ratio:.5} ({:.2}°) vs {expected:.5}",
            ratio.atan().to_degrees()
        );
        assert!(p > 0.0 && (ratio - expected).abs() <= 0.01 * expected);
        let normal = Vector3::new(tau[(0, 0)], tau[(1, 1)], tau[(2, 2)]).add_scalar(p);
        // Equal up to a finite-strain term of the order of the elastic shear strain τ/μ
        // (3–5 % here; measured ‖σ_ii + p‖ ≤ 6.2 % of p).
        assert!(
            normal.norm() <= 0.1 * p,
            "normal stresses {normal:?}, p = {p}"
        );
    }
}

#[test]
fn drucker_prager_volume_correction_restores_volume_after_tension() {
    let mat = Material {
        plasticity: Plasticity::DruckerPrager {
            friction_angle_deg: 30.0,
            volume_correction: true,
        },
        ..Material::elastic(2000.0, 1e5, 0.3, ElasticModel::StvkHencky)
    };
    let (mu, lambda) = mat.lame();
    let mut st = PlasticState::default();
    let stretched = Matrix3::identity() * 1.01;
    let fe = mat.plasticity.return_map(mu, lambda, &stretched, &mut st);
    assert!((fe - Matrix3::identity()).norm() < 1e-12);
    assert!((st.log_volume_correction - 3.0 * 1.01f64.ln()).abs() < 1e-12);
    // A later compression by the same amount is absorbed by the correction (stress-free).
    let squeezed = Matrix3::identity() / 1.01;
    let fe = mat.plasticity.return_map(mu, lambda, &squeezed, &mut st);
    assert!((fe - Matrix3::identity()).norm() < 1e-12, "{fe}");
    assert!(st.log_volume_correction.abs() < 1e-12);
    // Stretch again, then compress further than the stretch: only the excess is elastic
    // strain and the correction is used up.
    let mut st = PlasticState::default();
    mat.plasticity.return_map(mu, lambda, &stretched, &mut st);
    let fe = mat
        .plasticity
        .return_map(mu, lambda, &(Matrix3::identity() / 1.03), &mut st);
    assert!(
        (fe - Matrix3::identity() * (1.01 / 1.03)).norm() < 1e-12,
        "{fe}"
    );
    assert!(st.log_volume_correction.abs() < 1e-12);
}

/// Strain-driven uniaxial tension of one material point: axial stretch increments, lateral
/// stretch solved by bisection so that the lateral stress is zero after the return mapping.
#[test]
fn von_mises_uniaxial_plateau_at_yield_stress_point() {
    let (e_mod, sigma_y) = (1e4, 20.0);
    let mat = Material {
        plasticity: Plasticity::VonMises {
            yield_stress: sigma_y,
        },
        ..Material::elastic(1.0, e_mod, 0.3, ElasticModel::StvkHencky)
    };
    let (mu, lambda) = mat.lame();
    let mut fe = Matrix3::identity();
    let mut st = PlasticState::default();
    let steps = 200;
    let total: f64 = 0.02; // 10× the yield strain σ_y/E = 2e-3
    let a = (1.0 + total).powf(1.0 / steps as f64);
    let mut curve = Vec::new();
    for n in 1..=steps {
        let trial = |b: f64, st: &mut PlasticState| {
            let inc = Matrix3::from_diagonal(&Vector3::new(a, b, b));
            mat.plasticity.return_map(mu, lambda, &(inc * fe), st)
        };
        let (mut lo, mut hi) = (0.95, 1.05);
        for _ in 0..80 {
            let mid = 0.5 * (lo + hi);
            let mut s = st;
            let t = mat.kirchhoff(&trial(mid, &mut s));
            if t[(1, 1)] > 0.0 {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        fe = trial(0.5 * (lo + hi), &mut st);
        let sigma = mat.kirchhoff(&fe) / fe.determinant();
        curve.push((a.powi(n) - 1.0, sigma[(0, 0)]));
    }
    // Elastic branch: slope E at small strain.
    let (e1, s1) = curve[4];
    assert!((s1 / e1 - e_mod).abs() / e_mod < 0.01, "slope {}", s1 / e1);
    // Plateau: every point beyond twice the yield strain is within 2 % of σ_y.
    for &(eps, s) in curve.iter().filter(|c| c.0 > 2.0 * sigma_y / e_mod) {
        assert!((s - sigma_y).abs() < 0.02 * sigma_y, "σ = {s} at ε = {eps}");
    }
}
