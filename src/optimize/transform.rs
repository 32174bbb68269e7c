//! Optimizer variables of `diffphd optimize`: a smooth, invertible map from an unconstrained
//! variable $u\in\mathbb R$ to a parameter's working variable θ (θ = value, or θ = ln value
//! with `log = true`, see [`super::params`]). argmin's L-BFGS has no bounds, so boxes are
//! imposed by reparametrization.
//!
//! With $w = s\,u$ (`scale` $s$, default 1) and the bounds mapped into θ-space
//! ($\theta_l$ = lower or ln lower, $\theta_h$ likewise):
//!
//! | bounds | θ(w) | dθ/dw |
//! |---|---|---|
//! | none | $w$ | 1 |
//! | lower only | $\theta_l+e^{w}$ | $e^{w}$ |
//! | upper only | $\theta_h-e^{w}$ | $-e^{w}$ |
//! | both | $\theta_l+(\theta_h-\theta_l)\,\sigma(w)$, $\sigma(w)=1/(1+e^{-w})$ | $(\theta_h-\theta_l)\,\sigma(1-\sigma)$ |
//!
//! so a positive parameter with `log = true` and a box $\[l,h\]$ is log-uniform in the box:
//! value $=\exp(\ln l+(\ln h-\ln l)\,\sigma(w))$. The chain rule gives
//! $d\mathcal L/du = s\,\frac{d\theta}{dw}\,d\mathcal L/d\theta$.

/// The map of one parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VarMap {
    /// Bound of θ from below (already in θ-space: ln lower with `log = true`).
    pub lo: Option<f64>,
    /// Bound of θ from above.
    pub hi: Option<f64>,
    /// Scale s: w = s u.
    pub scale: f64,
}

/// Numerically stable logistic function.
pub fn sigmoid(w: f64) -> f64 {
    if w >= 0.0 {
        1.0 / (1.0 + (-w).exp())
    } else {
        let e = w.exp();
        e / (1.0 + e)
    }
}

impl VarMap {
    /// A map from user-unit bounds of a parameter (`log`: bounds and θ in log space).
    pub fn new(lower: Option<f64>, upper: Option<f64>, log: bool, scale: f64) -> Self {
        let f = |v: f64| if log { v.ln() } else { v };
        VarMap {
            lo: lower.map(f),
            hi: upper.map(f),
            scale,
        }
    }

    /// θ(u).
    pub fn theta(&self, u: f64) -> f64 {
        let w = self.scale * u;
        match (self.lo, self.hi) {
            (None, None) => w,
            (Some(l), None) => l + w.exp(),
            (None, Some(h)) => h - w.exp(),
            (Some(l), Some(h)) => l + (h - l) * sigmoid(w),
        }
    }

    /// dθ/du at u.
    pub fn dtheta_du(&self, u: f64) -> f64 {
        let w = self.scale * u;
        self.scale
            * match (self.lo, self.hi) {
                (None, None) => 1.0,
                (Some(_), None) => w.exp(),
                (None, Some(_)) => -w.exp(),
                (Some(l), Some(h)) => {
                    let s = sigmoid(w);
                    (h - l) * s * (1.0 - s)
                }
            }
    }

    /// u(θ); `None` when θ is not strictly inside the bounds.
    pub fn u_of(&self, theta: f64) -> Option<f64> {
        let w = match (self.lo, self.hi) {
            (None, None) => theta,
            (Some(l), None) => (theta > l).then(|| (theta - l).ln())?,
            (None, Some(h)) => (theta < h).then(|| (h - theta).ln())?,
            (Some(l), Some(h)) => {
                if !(theta > l && theta < h) {
                    return None;
                }
                let p = (theta - l) / (h - l);
                (p / (1.0 - p)).ln()
            }
        };
        w.is_finite().then_some(w / self.scale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn maps() -> Vec<VarMap> {
        vec![
            VarMap::new(None, None, false, 1.0),
            VarMap::new(None, None, true, 0.5),
            VarMap::new(Some(0.2), None, false, 1.0),
            VarMap::new(None, Some(0.45), false, 2.0),
            VarMap::new(Some(0.2), Some(0.45), false, 1.0),
            VarMap::new(Some(1e4), Some(5e6), true, 1.0),
        ]
    }

    #[test]
    fn inverse_round_trips_and_stays_in_bounds() {
        for m in maps() {
            for &u in &[-30.0, -3.0, -0.7, 0.0, 0.4, 2.5, 30.0] {
                let t = m.theta(u);
                if let Some(l) = m.lo {
                    assert!(t >= l, "{m:?} u={u}");
                }
                if let Some(h) = m.hi {
                    assert!(t <= h, "{m:?} u={u}");
                }
                if u.abs() < 10.0 {
                    let back = m.u_of(t).expect("inside");
                    assert!(
                        (back - u).abs() < 1e-9 * (1.0 + u.abs()),
                        "{m:?}: {u} -> {back}"
                    );
                }
            }
        }
        let b = VarMap::new(Some(0.2), Some(0.45), false, 1.0);
        assert_eq!(b.u_of(0.2), None);
        assert_eq!(b.u_of(0.5), None);
    }

    /// The gradient of a transformed objective, $d/du\,f(\mathrm{value}(\theta(u)))$ by the chain
    /// rule, against central differences; f is a smooth function of the user value.
    #[test]
    fn chain_rule_matches_finite_differences() {
        let f = |v: f64| (v.ln() - 0.3).powi(2) + 0.1 * v.sqrt();
        let df = |v: f64| 2.0 * (v.ln() - 0.3) / v + 0.05 / v.sqrt();
        for (log, m) in [
            (true, VarMap::new(Some(1e-2), Some(1e2), true, 1.0)),
            (true, VarMap::new(Some(1e-2), None, true, 0.7)),
            (true, VarMap::new(None, None, true, 1.0)),
            (false, VarMap::new(Some(0.1), Some(8.0), false, 1.0)),
            (false, VarMap::new(None, Some(9.0), false, 1.0)),
            (false, VarMap::new(Some(0.05), None, false, 1.5)),
        ] {
            let value = |u: f64| {
                let t = m.theta(u);
                if log {
                    t.exp()
                } else {
                    t
                }
            };
            for &u in &[-1.3, -0.2, 0.0, 0.6, 1.1] {
                let v = value(u);
                // dL/dθ as `Param::gradient` returns it (log: value · dL/dvalue).
                let dtheta = if log { v * df(v) } else { df(v) };
                let g = m.dtheta_du(u) * dtheta;
                let e = 1e-5;
                let fd = (f(value(u + e)) - f(value(u - e))) / (2.0 * e);
                assert!(
                    (g - fd).abs() <= 1e-7 * (1.0 + fd.abs()),
                    "{m:?} u={u}: chain rule {g} vs FD {fd}"
                );
            }
        }
    }
}
