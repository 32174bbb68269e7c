//! Exact line search for a strictly convex 1-D function φ(α) = ℓ_p(v + α·Δv), α ≥ 0
//! (seed Algorithm 1; the safeguarded Newton–bisection of SAP, Castro et al. 2022 §V).
//!
//! Given a descent direction (φ′(0) < 0), find α* with φ′(α*) = 0:
//! 1. bracket: α_hi = 1, doubled while φ′(α_hi) < 0 (strong convexity guarantees a sign change);
//! 2. Newton steps α ← α − φ′/φ″ kept inside the bracket \[α_lo, α_hi\] (φ′(α_lo) < 0 < φ′(α_hi)),
//!    a bisection step whenever Newton would leave it or φ″ ≤ 0, the bracket shrunk by the sign
//!    of φ′ every iteration; stop when |φ′(α)| ≤ tol·|φ′(0)| or the bracket is at round-off.

/// Line-search outcome.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LineSearchResult {
    /// The step length.
    pub alpha: f64,
    /// The largest α known with φ′(α) < 0 (0 if none): φ(alpha_lo) < φ(0), a safe fallback.
    pub alpha_lo: f64,
    /// Evaluations of (φ′, φ″) spent.
    pub evaluations: usize,
}

/// Runs the exact line search. `dphi(α)` returns (φ′(α), φ″(α)); `dphi0` = φ′(0) < 0.
/// Returns α = 0 when `dphi0` ≥ 0 (no descent left: the caller stops).
pub fn exact_line_search(
    mut dphi: impl FnMut(f64) -> (f64, f64),
    dphi0: f64,
    rel_tol: f64,
    max_iterations: usize,
) -> LineSearchResult {
    if dphi0 >= 0.0 || !dphi0.is_finite() {
        return LineSearchResult {
            alpha: 0.0,
            alpha_lo: 0.0,
            evaluations: 0,
        };
    }
    let tol = rel_tol * dphi0.abs();
    let mut evaluations = 0;
    let mut lo = 0.0;
    let mut hi = 1.0;
    let (mut d, mut dd) = dphi(hi);
    evaluations += 1;
    // Bracket the root of φ′.
    while d < 0.0 {
        if d.abs() <= tol {
            return LineSearchResult {
                alpha: hi,
                alpha_lo: lo,
                evaluations,
            };
        }
        lo = hi;
        hi *= 2.0;
        (d, dd) = dphi(hi);
        evaluations += 1;
        if evaluations > 200 {
            return LineSearchResult {
                alpha: lo,
                alpha_lo: lo,
                evaluations,
            };
        }
    }
    if d.abs() <= tol {
        return LineSearchResult {
            alpha: hi,
            alpha_lo: lo,
            evaluations,
        };
    }
    // Safeguarded Newton from the upper end (φ′(hi) > 0).
    let mut alpha = hi;
    for _ in 0..max_iterations {
        let newton = if dd > 0.0 { alpha - d / dd } else { f64::NAN };
        alpha = if newton > lo && newton < hi {
            newton
        } else {
            0.5 * (lo + hi)
        };
        (d, dd) = dphi(alpha);
        evaluations += 1;
        if d.abs() <= tol {
            break;
        }
        if d < 0.0 {
            lo = alpha;
        } else {
            hi = alpha;
        }
        if hi - lo <= 4.0 * f64::EPSILON * hi {
            // Bracket at round-off: take its descent end.
            alpha = lo;
            break;
        }
    }
    LineSearchResult {
        alpha,
        alpha_lo: lo,
        evaluations,
    }
}
