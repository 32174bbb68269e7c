//! Per-contact complementarity residuals and their Jacobians (spec Eqs. 34–35, App. A.5),
//! the same functions in the forward Newton solve and in the backward adjoint.
//!
//! Contact $j$ has the normal gap $\delta_n=n^Tx_i-d_n$ (m), the tangential slip over the
//! step $\delta_f=T^T(x_i-x_{t,i})-T^Tu_{obs}\in\mathbb R^2$ (m), and the multipliers
//! $\lambda=(\lambda_n,\lambda_f)$ (N), scaled to metres by the fixed compliance $\kappa_j=h^2/m_i$.
//!
//! - Normal (Eq. 34 with A.5): $\Phi_n=\phi^\epsilon(\delta_n,\kappa\lambda_n)$,
//!   $\phi^\epsilon(a,b)=a+b-\sqrt{a^2+b^2+2\epsilon^2}$; zero set $a,b\ge0$, $ab=\epsilon^2$.
//!   $\Omega=\partial\Phi_n/\partial\delta_n=1-a/s$, $\Xi=\partial\Phi_n/\partial\lambda_n=\kappa(1-b/s)$ (Eq. 35).
//! - Friction, in the same Newton system (the "exact alternative" of spec Eq. 37): the
//!   Alart–Curnier projection form $\Phi_f=\kappa\lambda_f-P(\kappa\lambda_f-\delta_f;\ \kappa\mu\lambda_n^+)$ with
//!   $P(y;R)$ the projection onto the disc of radius $R$. Its zeros are exactly Coulomb's law:
//!   stick ($\delta_f=0$, $\|\lambda_f\|\le\mu\lambda_n$) or slide ($\|\lambda_f\|=\mu\lambda_n$, $\lambda_f$
//!   anti-parallel to $\delta_f$) — the conditions of S3 Eqs. 6d–e without their non-smooth norms.
//!   Smoothed ($\epsilon>0$): $P^\epsilon(y;R)=y\,R/\mathrm{smax}(R,\|y\|)$ with
//!   $\mathrm{smax}(a,c)=\tfrac12(a+c+\sqrt{(a-c)^2+2\epsilon^2})$, so stick/slip transitions are
//!   smooth and the same $2\epsilon^2$ controls both the normal and the tangential smoothing.

use nalgebra::{Matrix2, Matrix3, Vector2, Vector3};

/// Parameters of the residuals.
#[derive(Clone, Copy, Debug)]
pub struct FbParams {
    /// $2\epsilon^2$ (m²).
    pub smoothing: f64,
    /// Floor of $s$ (m).
    pub s_floor: f64,
}

/// Normal residual $(\phi,\Omega,\Xi)$ for gap `delta`, multiplier `lambda`, scale `kappa`.
pub fn normal(delta: f64, lambda: f64, kappa: f64, p: &FbParams) -> (f64, f64, f64) {
    let a = delta;
    let b = kappa * lambda;
    let s = (a * a + b * b + p.smoothing).sqrt().max(p.s_floor);
    (a + b - s, 1.0 - a / s, kappa * (1.0 - b / s))
}

/// Disc projection $P(y;R)$ and its derivatives $(\partial P/\partial y,\ \partial P/\partial R)$.
pub fn disc_projection(
    y: &Vector2<f64>,
    r: f64,
    smoothing: f64,
) -> (Vector2<f64>, Matrix2<f64>, Vector2<f64>) {
    let rho = y.norm();
    if smoothing > 0.0 {
        let q = ((r - rho).powi(2) + smoothing).sqrt();
        let m = 0.5 * (r + rho + q);
        let g = r / m;
        let dm_dr = 0.5 * (1.0 + (r - rho) / q);
        let dm_drho = 0.5 * (1.0 - (r - rho) / q);
        let g_r = 1.0 / m - r * dm_dr / (m * m);
        let g_rho = -r * dm_drho / (m * m);
        let mut py = Matrix2::identity() * g;
        if rho > 0.0 {
            let yh = y / rho;
            py += yh * yh.transpose() * (rho * g_rho);
        }
        (y * g, py, y * g_r)
    } else if rho <= r {
        (*y, Matrix2::identity(), Vector2::zeros())
    } else {
        let yh = y / rho;
        (
            yh * r,
            (Matrix2::identity() - yh * yh.transpose()) * (r / rho),
            yh,
        )
    }
}

/// Residual and Jacobians of one contact block.
#[derive(Clone, Copy, Debug)]
pub struct Local {
    /// $\Phi_j$ (rows n, f1, f2; only the first is used for frictionless contacts).
    pub phi: Vector3<f64>,
    /// $D_j=\partial\Phi_j/\partial\delta_j$.
    pub d: Matrix3<f64>,
    /// $E_j=\partial\Phi_j/\partial\lambda_j$.
    pub e: Matrix3<f64>,
    /// $\partial\Phi_j/\partial\mu$.
    pub dmu: Vector3<f64>,
}

/// Residual of contact `j` with `rows` = 1 (frictionless) or 3 (friction coefficient `mu`).
pub fn local(
    delta: &[f64],
    lambda: &[f64],
    kappa: f64,
    mu: f64,
    rows: usize,
    p: &FbParams,
) -> Local {
    let (phi_n, om, xi) = normal(delta[0], lambda[0], kappa, p);
    let mut out = Local {
        phi: Vector3::new(phi_n, 0.0, 0.0),
        d: Matrix3::zeros(),
        e: Matrix3::zeros(),
        dmu: Vector3::zeros(),
    };
    out.d[(0, 0)] = om;
    out.e[(0, 0)] = xi;
    if rows == 1 {
        return out;
    }
    let lf = Vector2::new(lambda[1], lambda[2]);
    let df = Vector2::new(delta[1], delta[2]);
    let ln = lambda[0].max(0.0);
    let y = lf * kappa - df;
    let (proj, py, pr) = disc_projection(&y, kappa * mu * ln, p.smoothing);
    let phi_f = lf * kappa - proj;
    out.phi[1] = phi_f[0];
    out.phi[2] = phi_f[1];
    let active = if lambda[0] > 0.0 { 1.0 } else { 0.0 };
    for a in 0..2 {
        for b in 0..2 {
            out.d[(1 + a, 1 + b)] = py[(a, b)];
            let id = if a == b { 1.0 } else { 0.0 };
            out.e[(1 + a, 1 + b)] = kappa * (id - py[(a, b)]);
        }
        out.e[(1 + a, 0)] = -pr[a] * kappa * mu * active;
        out.dmu[1 + a] = -pr[a] * kappa * ln;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_block(delta: [f64; 3], lambda: [f64; 3], mu: f64, smoothing: f64) {
        let p = FbParams {
            smoothing,
            s_floor: 1e-14,
        };
        let kappa = 0.7;
        let l = local(&delta, &lambda, kappa, mu, 3, &p);
        let h = 1e-7;
        for c in 0..3 {
            let mut dp = delta;
            let mut dm = delta;
            dp[c] += h;
            dm[c] -= h;
            let fd = (local(&dp, &lambda, kappa, mu, 3, &p).phi
                - local(&dm, &lambda, kappa, mu, 3, &p).phi)
                / (2.0 * h);
            for r in 0..3 {
                assert!(
                    (fd[r] - l.d[(r, c)]).abs() < 1e-6,
                    "dPhi/ddelta ({r},{c}): fd {} vs {}",
                    fd[r],
                    l.d[(r, c)]
                );
            }
            let mut lp = lambda;
            let mut lm = lambda;
            lp[c] += h;
            lm[c] -= h;
            let fd = (local(&delta, &lp, kappa, mu, 3, &p).phi
                - local(&delta, &lm, kappa, mu, 3, &p).phi)
                / (2.0 * h);
            for r in 0..3 {
                assert!(
                    (fd[r] - l.e[(r, c)]).abs() < 1e-6,
                    "dPhi/dlambda ({r},{c}): fd {} vs {}",
                    fd[r],
                    l.e[(r, c)]
                );
            }
        }
        let fd = (local(&delta, &lambda, kappa, mu + h, 3, &p).phi
            - local(&delta, &lambda, kappa, mu - h, 3, &p).phi)
            / (2.0 * h);
        assert!((fd - l.dmu).norm() < 1e-6, "dPhi/dmu {fd:?} vs {:?}", l.dmu);
    }

    #[test]
    fn jacobians_match_finite_differences() {
        // smoothed: stick-like, slide-like, separated
        check_block([0.01, 0.001, -0.002], [0.5, 0.1, 0.05], 0.4, 1e-4);
        check_block([0.0, 0.3, -0.2], [1.0, 0.1, 0.05], 0.2, 1e-4);
        check_block([0.2, 0.3, -0.2], [1e-3, 0.0, 0.0], 0.2, 1e-4);
        // hard: away from the kinks
        check_block([0.01, 0.001, -0.002], [0.5, 0.01, 0.005], 0.4, 0.0);
        check_block([-0.01, 0.3, -0.2], [1.0, 0.1, 0.05], 0.2, 0.0);
    }

    #[test]
    fn zero_set_is_coulomb() {
        let p = FbParams {
            smoothing: 0.0,
            s_floor: 1e-14,
        };
        // sticking: zero slip, force inside the cone
        let l = local(&[0.0, 0.0, 0.0], &[1.0, 0.1, -0.2], 1.0, 0.5, 3, &p);
        assert!(l.phi.norm() < 1e-14);
        // sliding: force on the cone boundary, opposite to the slip
        let l = local(&[0.0, 0.3, 0.4], &[1.0, -0.3, -0.4], 1.0, 0.5, 3, &p);
        assert!(l.phi.norm() < 1e-14, "{:?}", l.phi);
        // not a solution: force inside the cone while slipping
        let l = local(&[0.0, 0.3, 0.4], &[1.0, -0.1, -0.1], 1.0, 0.5, 3, &p);
        assert!(l.phi.norm() > 1e-3);
        // smoothed normal: zero set a b = eps^2
        let ps = FbParams {
            smoothing: 2e-6,
            s_floor: 1e-14,
        };
        let (phi, _, _) = normal(1e-3, 1.0, 1e-3, &ps);
        assert!(phi.abs() < 1e-15, "{phi}");
    }
}
