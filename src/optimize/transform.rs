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

/// How close to a bound (relative to the box's width) a start value may lie, on it or past
/// it, and still start: it starts this far inside ([`VarMap::u_of_start`]).
pub const BOUND_SLACK: f64 = 1e-9;

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

    /// u of a start value θ: [`Self::u_of`], where a θ on a bound or past it by round-off
    /// (within [`BOUND_SLACK`] of the box's width, or of the bound's size for a one-sided box)
    /// starts that far inside it instead. An optimum the sigmoid has pushed onto a bound reads
    /// back as the bound, or a few ulps past it after `exp(ln …)` of a log parameter, from a
    /// written `optimized.toml`; a value truly outside the box is still `None`.
    pub fn u_of_start(&self, theta: f64) -> Option<f64> {
        self.u_of(theta).or_else(|| {
            let width = match (self.lo, self.hi) {
                (Some(l), Some(h)) => h - l,
                (Some(b), None) | (None, Some(b)) => b.abs().max(1.0),
                (None, None) => return None,
            };
            let slack = BOUND_SLACK * width;
            let inside = match (self.lo, self.hi) {
                (Some(l), _) if (theta - l).abs() <= slack => l + slack,
                (_, Some(h)) if (theta - h).abs() <= slack => h - slack,
                _ => return None,
            };
            self.u_of(inside)
        })
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

    /// Regression (session 27): an optimum on a bound, written to `optimized.toml` as
    /// `exp(ln 2e4)` = 19999.99999999998 below `lower = 2e4`, was refused as a start ("must lie
    /// strictly inside"), so the written scene could not be optimized again. A start on a
    /// bound or a round-off past it starts just inside; one truly outside is still refused.
    #[test]
    fn a_start_on_a_bound_starts_just_inside_it() {
        let log_box = VarMap::new(Some(2e4), Some(2e6), true, 1.0);
        let on_bound = 19999.999999999978f64.ln();
        assert_eq!(log_box.u_of(on_bound), None);
        let u = log_box.u_of_start(on_bound).expect("starts");
        let t = log_box.theta(u);
        assert!(t > 2e4f64.ln() && t - 2e4f64.ln() < 1e-8, "{t}");
        let b = VarMap::new(Some(0.2), Some(0.45), false, 1.0);
        for (start, bound) in [(0.2, 0.2), (0.45, 0.45), (0.45 + 1e-12, 0.45)] {
            let t = b.theta(b.u_of_start(start).expect("on the bound"));
            assert!(
                (t - bound).abs() <= 2.0 * BOUND_SLACK * 0.25,
                "{start}: {t}"
            );
            assert!(t > 0.2 && t < 0.45, "{start}: {t}");
        }
        assert_eq!(b.u_of_start(0.19), None);
        assert_eq!(b.u_of_start(0.46), None);
        let one_sided = VarMap::new(Some(0.2), None, false, 1.0);
        assert!(one_sided.u_of_start(0.2).is_some());
        assert_eq!(one_sided.u_of_start(0.1), None);
        assert_eq!(
            VarMap::new(None, None, false, 1.0).u_of_start(0.1),
            Some(0.1)
        );
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
