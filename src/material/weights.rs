//! PD surrogate stiffness from the linear-spring fit, spec Eq. (12) and §3.7.
//!
//! $$k=\arg\min_k\int_{1-r}^{1+r}\big(k(s-1)-\partial_{\sigma_1}\psi(s,1,1)\big)^2ds=c_\mu(r)\mu+c_\lambda(r)\lambda,$$
//! $\partial_{\sigma_1}\psi(s,1,1)=\mu(s-1/s)+\lambda\ln s/s$.

/// Default fit range $r$ (spec Eq. 12: `ComputeAverageStiffness(0.1)`).
pub const DEFAULT_FIT_RANGE: f64 = 0.1;

/// Below this $r$ the series are used (the closed forms cancel like $\varepsilon/r^3$).
const SERIES_BELOW: f64 = 0.5;

/// Fit coefficients $(c_\mu(r),c_\lambda(r))$ of Eq. (12):
/// $$c_\mu=\frac{\Phi_\mu(1+r)-\Phi_\mu(1-r)}{2r^3/3},\ \Phi_\mu(s)=\tfrac{s^3}3-\tfrac{s^2}2-s+\ln s,\qquad
/// c_\lambda=\frac{\Phi_\lambda(1+r)-\Phi_\lambda(1-r)}{2r^3/3},\ \Phi_\lambda(s)=s\ln s-s-\tfrac12\ln^2s.$$
/// For $r<\frac12$ the equivalent series (expanding $t f(1+t)$, $t=s-1$, and integrating the even
/// powers) are summed to round-off:
/// $$c_\mu=2+3\sum_{m\ge2}\frac{r^{2m-2}}{2m+1}=2+3\,\frac{\operatorname{atanh}r-r-r^3/3}{r^3},\qquad
/// c_\lambda=3\sum_{n\ \rm odd}\frac{H_n\,r^{n-1}}{n+2}$$
/// ($H_n$ the harmonic numbers), so $r\to0$ gives exactly $(2,1)$ ($k=2\mu+\lambda$, the tangent
/// modulus at rest). $r$ is used as $|r|$; the fit is undefined for $|r|\ge1$ (the interval reaches
/// $s\le0$) and NaN is returned there and for NaN input.
pub fn fit_coefficients(r: f64) -> (f64, f64) {
    let r = r.abs();
    if r.is_nan() || r >= 1.0 {
        return (f64::NAN, f64::NAN);
    }
    if r < SERIES_BELOW {
        let r2 = r * r;
        // c_μ: 2 + 3 Σ_{m≥2} r^{2m−2}/(2m+1)
        let mut cmu = 0.0;
        let mut pw = r2; // r^{2m-2} for m = 2
        let mut m = 2.0;
        while pw > 1e-18 * 0.2 {
            cmu += pw / (2.0 * m + 1.0);
            pw *= r2;
            m += 1.0;
        }
        let cmu = 2.0 + 3.0 * cmu;
        // c_λ: 3 Σ_{n odd} H_n r^{n−1}/(n+2)
        let mut clam = 0.0;
        let mut h = 1.0; // H_1
        let mut pw = 1.0; // r^{n-1}
        let mut n = 1.0;
        loop {
            let term = h * pw / (n + 2.0);
            clam += term;
            if term < 1e-18 * clam {
                break;
            }
            h += 1.0 / (n + 1.0) + 1.0 / (n + 2.0);
            pw *= r2;
            n += 2.0;
        }
        (cmu, 3.0 * clam)
    } else {
        let phi_mu = |s: f64| s * s * s / 3.0 - s * s / 2.0 - s + s.ln();
        let phi_l = |s: f64| {
            let l = s.ln();
            s * l - s - 0.5 * l * l
        };
        let den = 2.0 * r * r * r / 3.0;
        (
            (phi_mu(1.0 + r) - phi_mu(1.0 - r)) / den,
            (phi_l(1.0 + r) - phi_l(1.0 - r)) / den,
        )
    }
}

/// PD stiffness density $k=c_\mu(r)\mu+c_\lambda(r)\lambda$ (spec Eq. 12, §3.7); homogeneous of
/// degree one in $(\mu,\lambda)$, as Lemma 1 requires.
pub fn pd_stiffness(mu: f64, lambda: f64, r: f64) -> f64 {
    let (cm, cl) = fit_coefficients(r);
    cm * mu + cl * lambda
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Independent check: the least-squares fit by composite Gauss–Legendre quadrature of
    /// ∫ t f(1+t) dt / ∫ t² dt.
    fn quadrature(r: f64) -> (f64, f64) {
        let nodes = [
            -0.906_179_845_938_664,
            -0.538_469_310_105_683,
            0.0,
            0.538_469_310_105_683,
            0.906_179_845_938_664,
        ];
        let wts = [
            0.236_926_885_056_189,
            0.478_628_670_499_366,
            0.568_888_888_888_889,
            0.478_628_670_499_366,
            0.236_926_885_056_189,
        ];
        let n = 200;
        let (mut a, mut b) = (0.0, 0.0);
        for seg in 0..n {
            let lo = -r + 2.0 * r * seg as f64 / n as f64;
            let hw = r / n as f64;
            for (x, w) in nodes.iter().zip(wts.iter()) {
                let t = lo + hw * (1.0 + x);
                let s = 1.0 + t;
                a += w * hw * t * (s - 1.0 / s);
                b += w * hw * t * s.ln() / s;
            }
        }
        let den = 2.0 * r * r * r / 3.0;
        (a / den, b / den)
    }

    /// T11: c_μ(0.1) = 2.00604, c_λ(0.1) = 1.01110, r = 0.2 values, r → 0 limit, continuity of the
    /// series/closed-form switch, agreement with quadrature.
    #[test]
    fn t11_weight_fit() {
        let (cm, cl) = fit_coefficients(0.1);
        eprintln!("T11 c_mu(0.1) = {cm:.10}, c_lambda(0.1) = {cl:.10}");
        assert!((cm - 2.00604).abs() < 5e-6 && (cl - 1.01110).abs() < 5e-6);
        let (cm, cl) = fit_coefficients(0.2);
        assert!((cm - 2.02471).abs() < 5e-6 && (cl - 1.04562).abs() < 5e-6);
        assert_eq!(fit_coefficients(0.0), (2.0, 1.0));
        let (cm, cl) = fit_coefficients(1e-9);
        assert!((cm - 2.0).abs() < 1e-15 && (cl - 1.0).abs() < 1e-15);
        for r in [1e-3, 0.05, 0.1, 0.3, 0.49, 0.51, 0.7, 0.9] {
            let (q1, q2) = quadrature(r);
            let (c1, c2) = fit_coefficients(r);
            assert!(
                (c1 - q1).abs() < 1e-9 * q1 && (c2 - q2).abs() < 1e-9 * q2,
                "r={r}"
            );
        }
        // series and closed form agree at the switch
        let phi = |s: f64| s * s * s / 3.0 - s * s / 2.0 - s + s.ln();
        let r: f64 = 0.5;
        let closed = (phi(1.0 + r) - phi(1.0 - r)) / (2.0 * r.powi(3) / 3.0);
        assert!((fit_coefficients(0.4999999999).0 - closed).abs() < 1e-9);
        assert!(fit_coefficients(1.0).0.is_nan());
        let k = pd_stiffness(3.0, 5.0, DEFAULT_FIT_RANGE);
        let (cm, cl) = fit_coefficients(DEFAULT_FIT_RANGE);
        assert_eq!(k, cm * 3.0 + cl * 5.0);
        // homogeneity (Lemma 1)
        assert!((pd_stiffness(300.0, 500.0, 0.1) - 100.0 * k).abs() < 1e-12 * k * 100.0);
    }
}
