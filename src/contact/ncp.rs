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
//! - Static and dynamic friction ([`Coulomb`], docs/contact.md "Static and dynamic
//!   friction"): the radius uses the slip-dependent coefficient
//!   $\mu(\delta_f)=\mu_k+(\mu_s-\mu_k)\,e^{-\|\delta_f\|^2/s^2}$ with $s=v_sh$, i.e.
//!   $\mu(\|v_t\|)=\mu_k+(\mu_s-\mu_k)\,e^{-(\|v_t\|/v_s)^2}$ for the step's tangential
//!   velocity $v_t=\delta_f/h$ (a Gaussian regularisation of the Stribeck-type drop from
//!   $\mu_s$ at rest to $\mu_k$, C^∞ and flat at $v_t=0$). Its gradient
//!   $\partial\mu/\partial\delta_f=-2(\mu_s-\mu_k)e^{-\|\delta_f\|^2/s^2}\delta_f/s^2$ enters
//!   $D_j$ (so the forward Newton and the adjoint, its transpose, see it). With
//!   $\mu_s=\mu_k$ the law is the constant μ and none of these terms is formed.

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

/// Coulomb coefficients of one contact: kinetic (dynamic) $\mu_k$, static $\mu_s\ge\mu_k$ and
/// the slip scale $s=v_sh$ (m) of the transition between them ($v_s$: `contact.stick_slip_speed`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coulomb {
    pub kinetic: f64,
    pub stat: f64,
    /// $s=v_sh$ (m), $>0$.
    pub slip: f64,
}

impl Coulomb {
    /// One coefficient μ for both regimes (today's law).
    pub fn constant(mu: f64) -> Self {
        Coulomb {
            kinetic: mu,
            stat: mu,
            slip: 1.0,
        }
    }

    /// The larger coefficient (a contact has friction rows when it is positive).
    pub fn max(&self) -> f64 {
        self.kinetic.max(self.stat)
    }

    /// Whether $\mu_s=\mu_k$ (the constant law; no slip dependence is formed).
    pub fn is_constant(&self) -> bool {
        self.stat == self.kinetic
    }

    /// $\big(\mu(\delta_f),\ \partial\mu/\partial\delta_f,\ \partial\mu/\partial\mu_s\big)$ for the slip
    /// $\delta_f$ of the step: $\mu=\mu_k+(\mu_s-\mu_k)w$, $w=e^{-\|\delta_f\|^2/s^2}$,
    /// $\partial\mu/\partial\delta_f=-2(\mu_s-\mu_k)w\,\delta_f/s^2$, $\partial\mu/\partial\mu_s=w$
    /// ($\partial\mu/\partial\mu_k=1-w$). With $\mu_s=\mu_k$: exactly $(\mu_k, 0, w)$.
    pub fn at(&self, df: &Vector2<f64>) -> (f64, Vector2<f64>, f64) {
        let w = (-df.norm_squared() / (self.slip * self.slip)).exp();
        if self.is_constant() {
            return (self.kinetic, Vector2::zeros(), w);
        }
        let jump = self.stat - self.kinetic;
        (
            self.kinetic + jump * w,
            df * (-2.0 * jump * w / (self.slip * self.slip)),
            w,
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
    /// $\partial\Phi_j/\partial\mu$ with $\mu_s$ and $\mu_k$ moved together (the `friction`
    /// coefficient of a contact with one μ).
    pub dmu: Vector3<f64>,
    /// $\partial\Phi_j/\partial\mu_s$ ($\mu_k$ fixed); $\partial\Phi_j/\partial\mu_k$ is `dmu - dmu_s`.
    pub dmu_s: Vector3<f64>,
}

/// Residual of contact `j` with `rows` = 1 (frictionless) or 3 (friction coefficients `mu`).
pub fn local(
    delta: &[f64],
    lambda: &[f64],
    kappa: f64,
    coulomb: &Coulomb,
    rows: usize,
    p: &FbParams,
) -> Local {
    let (phi_n, om, xi) = normal(delta[0], lambda[0], kappa, p);
    let mut out = Local {
        phi: Vector3::new(phi_n, 0.0, 0.0),
        d: Matrix3::zeros(),
        e: Matrix3::zeros(),
        dmu: Vector3::zeros(),
        dmu_s: Vector3::zeros(),
    };
    out.d[(0, 0)] = om;
    out.e[(0, 0)] = xi;
    if rows == 1 {
        return out;
    }
    let lf = Vector2::new(lambda[1], lambda[2]);
    let df = Vector2::new(delta[1], delta[2]);
    let ln = lambda[0].max(0.0);
    let (mu, dmu_ddf, dmu_dstat) = coulomb.at(&df);
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
        out.dmu_s[1 + a] = -pr[a] * kappa * ln * dmu_dstat;
    }
    if !coulomb.is_constant() {
        // the radius κ μ(δ_f) λ_n⁺ depends on the slip: -∂P/∂R κ λ_n⁺ (∂μ/∂δ_f)ᵀ
        for a in 0..2 {
            for b in 0..2 {
                out.d[(1 + a, 1 + b)] -= pr[a] * kappa * ln * dmu_ddf[b];
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_block(delta: [f64; 3], lambda: [f64; 3], c: Coulomb, smoothing: f64) {
        let p = FbParams {
            smoothing,
            s_floor: 1e-14,
        };
        let kappa = 0.7;
        let l = local(&delta, &lambda, kappa, &c, 3, &p);
        let h = 1e-7;
        for col in 0..3 {
            let mut dp = delta;
            let mut dm = delta;
            dp[col] += h;
            dm[col] -= h;
            let fd = (local(&dp, &lambda, kappa, &c, 3, &p).phi
                - local(&dm, &lambda, kappa, &c, 3, &p).phi)
                / (2.0 * h);
            for r in 0..3 {
                assert!(
                    (fd[r] - l.d[(r, col)]).abs() < 1e-6,
                    "dPhi/ddelta ({r},{col}): fd {} vs {}",
                    fd[r],
                    l.d[(r, col)]
                );
            }
            let mut lp = lambda;
            let mut lm = lambda;
            lp[col] += h;
            lm[col] -= h;
            let fd = (local(&delta, &lp, kappa, &c, 3, &p).phi
                - local(&delta, &lm, kappa, &c, 3, &p).phi)
                / (2.0 * h);
            for r in 0..3 {
                assert!(
                    (fd[r] - l.e[(r, col)]).abs() < 1e-6,
                    "dPhi/dlambda ({r},{col}): fd {} vs {}",
                    fd[r],
                    l.e[(r, col)]
                );
            }
        }
        let shift = |dk: f64, ds: f64| Coulomb {
            kinetic: c.kinetic + dk,
            stat: c.stat + ds,
            slip: c.slip,
        };
        let phi = |c: Coulomb| local(&delta, &lambda, kappa, &c, 3, &p).phi;
        let fd = (phi(shift(h, h)) - phi(shift(-h, -h))) / (2.0 * h);
        assert!((fd - l.dmu).norm() < 1e-6, "dPhi/dmu {fd:?} vs {:?}", l.dmu);
        let fd = (phi(shift(0.0, h)) - phi(shift(0.0, -h))) / (2.0 * h);
        assert!(
            (fd - l.dmu_s).norm() < 1e-6,
            "dPhi/dmu_s {fd:?} vs {:?}",
            l.dmu_s
        );
    }

    #[test]
    fn constant_law_is_bitwise_the_single_coefficient() {
        let c = Coulomb {
            kinetic: 0.4,
            stat: 0.4,
            slip: 1e-3,
        };
        let df = Vector2::new(3e-4, -2e-4);
        let (mu, g, _) = c.at(&df);
        assert_eq!(mu.to_bits(), 0.4f64.to_bits());
        assert_eq!(g, Vector2::zeros());
    }

    /// $\mu(\delta_f)$ against central differences over four decades of step: the
    /// derivative error shrinks as $h^2$ until round-off, at slips below, near and above
    /// the transition scale.
    #[test]
    fn effective_coefficient_derivative_matches_finite_differences() {
        let c = Coulomb {
            kinetic: 0.3,
            stat: 0.7,
            slip: 2e-3,
        };
        for df in [
            Vector2::new(2e-4, -1e-4),
            Vector2::new(1.5e-3, 1e-3),
            Vector2::new(-3e-3, 2e-3),
        ] {
            let (mu, g, w) = c.at(&df);
            assert!(mu > c.kinetic && mu < c.stat, "{mu}");
            assert!(g.norm() > 0.0);
            let mut best = f64::INFINITY;
            for k in 0..5 {
                let h = 1e-4 * c.slip * 10f64.powi(-k);
                let fd = Vector2::new(
                    (c.at(&(df + Vector2::new(h, 0.0))).0 - c.at(&(df - Vector2::new(h, 0.0))).0)
                        / (2.0 * h),
                    (c.at(&(df + Vector2::new(0.0, h))).0 - c.at(&(df - Vector2::new(0.0, h))).0)
                        / (2.0 * h),
                );
                best = best.min((fd - g).norm() / g.norm());
            }
            assert!(best < 1e-7, "dmu/ddf at {df:?}: relative error {best}");
            // ∂μ/∂μ_s = w (μ is linear in μ_s)
            let up = Coulomb {
                stat: c.stat + 0.1,
                ..c
            };
            assert!(((up.at(&df).0 - mu) / 0.1 - w).abs() < 1e-12);
        }
        // the limits: μ_s at rest, μ_k far above the transition
        assert_eq!(c.at(&Vector2::zeros()).0, c.stat);
        assert!((c.at(&Vector2::new(10.0 * c.slip, 0.0)).0 - c.kinetic).abs() < 1e-40);
    }

    #[test]
    fn jacobians_match_finite_differences() {
        // smoothed: stick-like, slide-like, separated
        let k = Coulomb::constant;
        check_block([0.01, 0.001, -0.002], [0.5, 0.1, 0.05], k(0.4), 1e-4);
        check_block([0.0, 0.3, -0.2], [1.0, 0.1, 0.05], k(0.2), 1e-4);
        check_block([0.2, 0.3, -0.2], [1e-3, 0.0, 0.0], k(0.2), 1e-4);
        // hard: away from the kinks
        check_block([0.01, 0.001, -0.002], [0.5, 0.01, 0.005], k(0.4), 0.0);
        check_block([-0.01, 0.3, -0.2], [1.0, 0.1, 0.05], k(0.2), 0.0);
        // static > dynamic: slips near the transition scale (sliding and sticking branches)
        let sd = |slip| Coulomb {
            kinetic: 0.2,
            stat: 0.5,
            slip,
        };
        check_block([0.0, 0.3, -0.2], [1.0, 0.1, 0.05], sd(0.3), 1e-4);
        check_block([0.0, 0.03, -0.02], [1.0, 0.1, 0.05], sd(0.04), 1e-4);
        check_block([0.01, 0.001, -0.002], [0.5, 0.1, 0.05], sd(0.002), 1e-4);
        check_block([-0.01, 0.3, -0.2], [1.0, 0.1, 0.05], sd(0.25), 0.0);
    }

    #[test]
    fn zero_set_is_coulomb() {
        let p = FbParams {
            smoothing: 0.0,
            s_floor: 1e-14,
        };
        // sticking: zero slip, force inside the cone
        let l = local(
            &[0.0, 0.0, 0.0],
            &[1.0, 0.1, -0.2],
            1.0,
            &Coulomb::constant(0.5),
            3,
            &p,
        );
        assert!(l.phi.norm() < 1e-14);
        // sliding: force on the cone boundary, opposite to the slip
        let l = local(
            &[0.0, 0.3, 0.4],
            &[1.0, -0.3, -0.4],
            1.0,
            &Coulomb::constant(0.5),
            3,
            &p,
        );
        assert!(l.phi.norm() < 1e-14, "{:?}", l.phi);
        // not a solution: force inside the cone while slipping
        let l = local(
            &[0.0, 0.3, 0.4],
            &[1.0, -0.1, -0.1],
            1.0,
            &Coulomb::constant(0.5),
            3,
            &p,
        );
        assert!(l.phi.norm() > 1e-3);
        // static > dynamic: at rest the cone is μ_s (a force between μ_k λ_n and μ_s λ_n
        // sticks), far above the transition slip it is μ_k
        let sd = Coulomb {
            kinetic: 0.3,
            stat: 0.6,
            slip: 1e-3,
        };
        let l = local(&[0.0, 0.0, 0.0], &[1.0, 0.3, -0.4], 1.0, &sd, 3, &p);
        assert!(l.phi.norm() < 1e-14, "{:?}", l.phi);
        let l = local(&[0.0, 0.3, 0.4], &[1.0, -0.18, -0.24], 1.0, &sd, 3, &p);
        assert!(l.phi.norm() < 1e-14, "{:?}", l.phi);
        let l = local(&[0.0, 0.3, 0.4], &[1.0, -0.36, -0.48], 1.0, &sd, 3, &p);
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
