//! Quadratic B-spline interpolation weights (Steffen et al. 2008; Hu et al. 2018, MLS-MPM §4).
//!
//! With ξ = (xₚ − origin)/h, the particle's base node is b = ⌊ξ − ½⌋ and its fractional offset
//! f = ξ − b ∈ [½, 3/2). The three nodes b, b+1, b+2 along one axis get
//!
//!   w₀ = ½(3/2 − f)²,   w₁ = 3/4 − (f − 1)²,   w₂ = ½(f − ½)²,
//!
//! which sum to one (partition of unity) and reproduce linear functions,
//! Σₖ wₖ (b + k) = ξ, hence Σᵢ wᵢₚ (xᵢ − xₚ) = 0. The inertia-like tensor
//! Dₚ = Σᵢ wᵢₚ (xᵢ − xₚ)(xᵢ − xₚ)ᵀ = (h²/4) I for every particle position (Jiang et al. 2015,
//! APIC §5.3), which is where the 4/h² of the MLS-MPM transfers comes from.

/// Base node index (per axis, may be negative) and fractional offset f ∈ [½, 3/2).
#[inline]
pub fn base_and_fraction(xi: f64) -> (i64, f64) {
    let b = (xi - 0.5).floor();
    (b as i64, xi - b)
}

/// The three weights of a quadratic B-spline for fractional offset `f` (see module docs).
#[inline]
pub fn weights(f: f64) -> [f64; 3] {
    let a = 1.5 - f;
    let c = f - 0.5;
    let d = f - 1.0;
    [0.5 * a * a, 0.75 - d * d, 0.5 * c * c]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_of_unity_linear_reproduction_and_inertia() {
        for k in 0..=100 {
            let xi = 7.0 + k as f64 * 0.0173;
            let (b, f) = base_and_fraction(xi);
            assert!((0.5..1.5).contains(&f), "f = {f}");
            let w = weights(f);
            let sum: f64 = w.iter().sum();
            let first: f64 = (0..3).map(|j| w[j] * (b as f64 + j as f64 - xi)).sum();
            let second: f64 = (0..3)
                .map(|j| w[j] * (b as f64 + j as f64 - xi).powi(2))
                .sum();
            assert!((sum - 1.0).abs() < 1e-14);
            assert!(first.abs() < 1e-13);
            // D = (h²/4) I with h = 1.
            assert!((second - 0.25).abs() < 1e-13, "second moment {second}");
        }
    }
}
