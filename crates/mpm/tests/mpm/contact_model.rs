//! The lagged compliant contact model: analytic values, finite-difference checks of γ = −∂ℓ/∂v_c
//! and G = ∂²ℓ/∂v_c², convexity (G PSD) and the lagged Coulomb bound.

use diffphd_mpm::contact::model::contact_frame;
use diffphd_mpm::contact::{ContactError, LaggedContact, LaggedParams};
use nalgebra::{Matrix3, SymmetricEigen, Vector3};

/// Small deterministic generator (SplitMix64) for sampled checks.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, a: f64, b: f64) -> f64 {
        a + (b - a) * self.next()
    }
}

fn params() -> LaggedParams {
    LaggedParams {
        stiffness: 1.0e6,
        dissipation: 50.0,
        friction: 0.4,
        stiction_tolerance: 1.0e-4,
        sigma: 0.0,
    }
}

/// Minimum over h = scale·10^-j, j = 2..=7 (six decades), of the central-difference error of
/// `f`'s derivative along `dir` against `exact`, relative to |exact|.
fn best_fd_error(f: &dyn Fn(f64) -> f64, exact: f64, scale: f64) -> f64 {
    assert!(exact.abs() > 0.0, "reference derivative must be nonzero");
    (2..=7)
        .map(|j| {
            let h = scale * 10f64.powi(-j);
            ((f(h) - f(-h)) / (2.0 * h) - exact).abs() / exact.abs()
        })
        .fold(f64::INFINITY, f64::min)
}

#[test]
fn normal_impulse_matches_hunt_crossley_formula() {
    let p = params();
    let (dt, phi0) = (1.0e-3, -2.0e-4);
    let c = LaggedContact::new(&p, dt, phi0, -0.01, 0.0).unwrap();
    // n(v) = δt·(k·x₀ − δt·k·v)·(1 − d·v) at v = −0.005: x₀ = 2e-4.
    let v = -0.005;
    let expected = dt * (p.stiffness * 2.0e-4 - dt * p.stiffness * v) * (1.0 - p.dissipation * v);
    let got = c.impulse(&Vector3::new(0.0, 0.0, v)).z;
    assert!(
        (got - expected).abs() <= 1e-14 * expected,
        "{got} vs {expected}"
    );
    // Lagged n₀ = δt·k·x₀·(1 − d·v_n0).
    let n0 = dt * p.stiffness * 2.0e-4 * (1.0 + p.dissipation * 0.01);
    assert!((c.n0() - n0).abs() <= 1e-14 * n0);
    // Zero impulse beyond v̂ = min(x₀/δt, 1/d) = min(0.2, 0.02).
    assert_eq!(c.impulse(&Vector3::new(0.0, 0.0, 0.0201)).z, 0.0);
    assert!(c.impulse(&Vector3::new(0.0, 0.0, 0.0199)).z > 0.0);
    // Separated at step start and moving away: no force at all.
    let far = LaggedContact::new(&p, dt, 1.0e-3, 0.0, 0.0).unwrap();
    assert_eq!(far.impulse(&Vector3::new(0.3, 0.0, 0.0)), Vector3::zeros());
    assert_eq!(far.n0(), 0.0);
}

#[test]
fn friction_is_bounded_by_lagged_coulomb_and_opposes_slip() {
    let p = params();
    let c = LaggedContact::new(&p, 1e-3, -1e-4, 0.0, 0.0).unwrap();
    let bound = p.friction * c.n0();
    for &s in &[1e-6, 1e-4, 1e-2, 1.0, 100.0] {
        let vt = Vector3::new(0.6 * s, -0.8 * s, -0.001);
        let g = c.impulse(&vt);
        let gt = (g.x * g.x + g.y * g.y).sqrt();
        assert!(gt <= bound * (1.0 + 1e-15));
        assert!(g.x * vt.x + g.y * vt.y < 0.0, "friction must oppose slip");
        // γ_t = −μ n₀ f(s/ε) t̂ with f(x) = x/√(1+x²).
        let x = s / p.stiction_tolerance;
        let expected = bound * x / (1.0 + x * x).sqrt();
        assert!(
            (gt - expected).abs() <= 1e-12 * expected,
            "{gt} vs {expected}"
        );
    }
}

#[test]
fn impulse_is_minus_the_gradient_of_the_cost() {
    let p = params();
    let mut rng = Rng(7);
    for _ in 0..50 {
        let c = LaggedContact::new(
            &p,
            1e-3,
            rng.range(-1e-3, -1e-5),
            rng.range(-0.02, 0.01),
            0.0,
        )
        .unwrap();
        // Inside the smooth region: v_n < v̂ − margin.
        let vc = Vector3::new(
            rng.range(-5e-4, 5e-4),
            rng.range(-5e-4, 5e-4),
            rng.range(-0.03, 0.0),
        );
        let gamma = c.impulse(&vc);
        for axis in 0..3 {
            let scale = if axis == 2 { 1e-2 } else { 1e-4 };
            let e = Vector3::ith(axis, 1.0);
            let f = |h: f64| c.cost(&(vc + e * h));
            let err = best_fd_error(&f, -gamma[axis], scale);
            assert!(
                err < 1e-7,
                "axis {axis}: relative FD error {err:.2e} at vc = {vc:?}"
            );
        }
    }
}

#[test]
fn hessian_is_the_derivative_of_minus_the_impulse() {
    let p = params();
    let mut rng = Rng(11);
    for _ in 0..50 {
        let c = LaggedContact::new(
            &p,
            1e-3,
            rng.range(-1e-3, -1e-5),
            rng.range(-0.02, 0.01),
            0.0,
        )
        .unwrap();
        let vc = Vector3::new(
            rng.range(-5e-4, 5e-4),
            rng.range(-5e-4, 5e-4),
            rng.range(-0.03, 0.0),
        );
        let g = c.hessian(&vc);
        for col in 0..3 {
            let scale = if col == 2 { 1e-2 } else { 1e-4 };
            let e = Vector3::ith(col, 1.0);
            for row in 0..3 {
                let exact = g[(row, col)];
                if exact == 0.0 {
                    // The lagged model decouples normal and tangential parts exactly.
                    let d = (c.impulse(&(vc + e * 1e-7)) - c.impulse(&(vc - e * 1e-7)))[row];
                    assert!(d.abs() < 1e-12, "G[{row},{col}] = 0 but FD gives {d:e}");
                    continue;
                }
                let f = |h: f64| -c.impulse(&(vc + e * h))[row];
                let err = best_fd_error(&f, exact, scale);
                assert!(err < 1e-6, "G[{row},{col}]: relative FD error {err:.2e}");
            }
        }
    }
}

#[test]
fn hessian_is_symmetric_psd_and_cost_is_convex_along_segments() {
    let p = LaggedParams {
        sigma: 1e-3,
        ..params()
    };
    let mut rng = Rng(3);
    for _ in 0..500 {
        let c = LaggedContact::new(
            &p,
            1e-3,
            rng.range(-1e-3, 1e-4),
            rng.range(-0.05, 0.05),
            rng.range(0.0, 10.0),
        )
        .unwrap();
        let a = Vector3::new(
            rng.range(-1e-2, 1e-2),
            rng.range(-1e-2, 1e-2),
            rng.range(-0.1, 0.1),
        );
        let b = Vector3::new(
            rng.range(-1e-2, 1e-2),
            rng.range(-1e-2, 1e-2),
            rng.range(-0.1, 0.1),
        );
        let g: Matrix3<f64> = c.hessian(&a);
        assert!((g - g.transpose()).norm() <= 1e-15 * g.norm());
        let min_eig = SymmetricEigen::new(g).eigenvalues.min();
        assert!(
            min_eig >= -1e-12 * g.norm(),
            "negative eigenvalue {min_eig:e}"
        );
        // Convexity: ℓ(midpoint) ≤ mean of the ends.
        let mid = c.cost(&((a + b) * 0.5));
        let mean = 0.5 * (c.cost(&a) + c.cost(&b));
        assert!(mid <= mean + 1e-14 * mean.abs().max(1e-12));
    }
}

#[test]
fn contact_frame_is_orthonormal_with_normal_last() {
    for n in [
        Vector3::z(),
        -Vector3::x(),
        Vector3::new(0.3, -0.4, 0.86).normalize(),
    ] {
        let r = contact_frame(&n);
        assert!((r.transpose() * r - Matrix3::identity()).norm() < 1e-14);
        assert!((r.column(2) - n).norm() < 1e-14);
        assert!((r.determinant() - 1.0).abs() < 1e-14);
    }
}

#[test]
fn invalid_parameters_are_named() {
    let p = LaggedParams {
        stiffness: -1.0,
        ..params()
    };
    assert!(matches!(
        LaggedContact::new(&p, 1e-3, 0.0, 0.0, 0.0),
        Err(ContactError::InvalidParameter {
            name: "stiffness",
            ..
        })
    ));
    assert!(matches!(
        LaggedContact::new(&params(), 0.0, 0.0, 0.0, 0.0),
        Err(ContactError::InvalidParameter { name: "dt", .. })
    ));
    assert!(matches!(
        LaggedContact::new(&params(), 1e-3, f64::NAN, 0.0, 0.0),
        Err(ContactError::InvalidParameter { name: "phi0", .. })
    ));
}
