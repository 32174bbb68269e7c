//! Particle seeding on a regular sub-cell lattice anchored at the grid origin.
//!
//! With `ppc = n³` particles per cell (n = 1, 2, 3, …), the candidate positions are
//! x = origin + h·(c + (k + ½)/n) for every cell c and sub-index k ∈ {0..n−1}³; a candidate is
//! kept when it lies inside the shape (box, sphere, or a caller-supplied inside test, e.g. a
//! mesh's winding number). Optional jitter moves each kept particle uniformly within
//! ±(amplitude/2)·(h/n) per axis, with a deterministic generator (SplitMix64) seeded by the
//! caller. Every particle gets volume V⁰ = h³/ppc (mass ρ V⁰ is set by the body's material).

use nalgebra::Vector3;

use super::MpmError;

/// Where the seeding lattice lives: grid origin, spacing h, particles per cell and jitter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lattice {
    pub origin: [f64; 3],
    pub h: f64,
    /// Particles per cell; must be a perfect cube (1, 8, 27, 64, …).
    pub ppc: usize,
    /// Jitter amplitude as a fraction of the sub-cell size (0 = regular lattice, ≤ 1).
    pub jitter: f64,
    /// Seed of the jitter's generator.
    pub seed: u64,
}

/// Seeded particle positions and the common per-particle volume h³/ppc.
#[derive(Debug, Clone, PartialEq)]
pub struct SeededParticles {
    pub positions: Vec<Vector3<f64>>,
    pub volume: f64,
}

impl Lattice {
    /// A regular lattice without jitter.
    pub fn new(origin: [f64; 3], h: f64, ppc: usize) -> Self {
        Self {
            origin,
            h,
            ppc,
            jitter: 0.0,
            seed: 0,
        }
    }

    fn per_axis(&self) -> Result<usize, MpmError> {
        if !(self.h.is_finite() && self.h > 0.0) {
            return Err(MpmError::InvalidParameter {
                key: "h",
                value: self.h,
                reason: "must be finite and > 0",
            });
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            return Err(MpmError::InvalidParameter {
                key: "jitter",
                value: self.jitter,
                reason: "must lie in [0, 1]",
            });
        }
        let n = (self.ppc as f64).cbrt().round() as usize;
        if self.ppc == 0 || n * n * n != self.ppc {
            return Err(MpmError::InvalidParameter {
                key: "ppc",
                value: self.ppc as f64,
                reason: "particles per cell must be a perfect cube (1, 8, 27, 64)",
            });
        }
        Ok(n)
    }

    /// Seeds every lattice point inside the axis-aligned box [lo, hi].
    pub fn seed_box(&self, lo: [f64; 3], hi: [f64; 3]) -> Result<SeededParticles, MpmError> {
        self.seed_inside(lo, hi, |x| (0..3).all(|a| x[a] >= lo[a] && x[a] <= hi[a]))
    }

    /// Seeds every lattice point in the closed ball |x − center| ≤ radius.
    pub fn seed_sphere(&self, center: [f64; 3], radius: f64) -> Result<SeededParticles, MpmError> {
        if !(radius.is_finite() && radius > 0.0) {
            return Err(MpmError::InvalidParameter {
                key: "radius",
                value: radius,
                reason: "must be finite and > 0",
            });
        }
        let lo = center.map(|c| c - radius);
        let hi = center.map(|c| c + radius);
        self.seed_inside(lo, hi, |x| {
            (0..3).map(|a| (x[a] - center[a]).powi(2)).sum::<f64>() <= radius * radius
        })
    }

    /// Seeds every lattice point in the bounding box [lo, hi] for which `inside` is true.
    /// Candidates are visited in z-major, then y, then x order, so the result is deterministic.
    pub fn seed_inside<I: Fn([f64; 3]) -> bool>(
        &self,
        lo: [f64; 3],
        hi: [f64; 3],
        inside: I,
    ) -> Result<SeededParticles, MpmError> {
        let n = self.per_axis()?;
        for a in 0..3 {
            if !(lo[a].is_finite() && hi[a].is_finite() && lo[a] <= hi[a]) {
                return Err(MpmError::InvalidParameter {
                    key: "bounding box",
                    value: hi[a] - lo[a],
                    reason: "lo and hi must be finite with lo <= hi on every axis",
                });
            }
        }
        let sub = self.h / n as f64;
        // Lattice index range along each axis: origin + sub·(j + ½) ∈ [lo, hi].
        let range = |a: usize| {
            let first = ((lo[a] - self.origin[a]) / sub - 0.5).ceil() as i64;
            let last = ((hi[a] - self.origin[a]) / sub - 0.5).floor() as i64;
            first..=last
        };
        let mut rng = SplitMix64(self.seed);
        let mut positions = Vec::new();
        for k in range(2) {
            for j in range(1) {
                for i in range(0) {
                    let mut p = [0.0; 3];
                    for (a, idx) in [i, j, k].into_iter().enumerate() {
                        p[a] = self.origin[a] + sub * (idx as f64 + 0.5);
                    }
                    if !inside(p) {
                        continue;
                    }
                    let mut x = Vector3::from(p);
                    if self.jitter > 0.0 {
                        for a in 0..3 {
                            x[a] += (rng.next_unit() - 0.5) * self.jitter * sub;
                        }
                    }
                    positions.push(x);
                }
            }
        }
        Ok(SeededParticles {
            positions,
            volume: self.h.powi(3) / self.ppc as f64,
        })
    }
}

/// SplitMix64 (Steele, Lea & Flood 2014): a small deterministic generator for the jitter.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn next_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_count_volume_and_bounds() {
        let lat = Lattice::new([0.0; 3], 0.1, 8);
        let s = lat.seed_box([0.2, 0.2, 0.2], [0.5, 0.4, 0.3]).unwrap();
        // 3 × 2 × 1 cells at 2 particles per axis.
        assert_eq!(s.positions.len(), 6 * 4 * 2);
        assert!((s.volume - 0.001 / 8.0).abs() < 1e-18);
        let total: f64 = s.volume * s.positions.len() as f64;
        assert!((total - 0.3 * 0.2 * 0.1).abs() < 1e-12);
    }

    #[test]
    fn sphere_volume_converges_and_jitter_is_deterministic() {
        let mut lat = Lattice::new([0.0; 3], 0.02, 8);
        let s = lat.seed_sphere([0.5, 0.5, 0.5], 0.2).unwrap();
        let v = s.volume * s.positions.len() as f64;
        let exact = 4.0 / 3.0 * std::f64::consts::PI * 0.008;
        assert!((v - exact).abs() / exact < 0.02, "{v} vs {exact}");
        lat.jitter = 0.5;
        lat.seed = 7;
        let a = lat.seed_sphere([0.5, 0.5, 0.5], 0.2).unwrap();
        let b = lat.seed_sphere([0.5, 0.5, 0.5], 0.2).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.positions.len(), s.positions.len());
        let moved = a
            .positions
            .iter()
            .zip(&s.positions)
            .map(|(p, q)| (p - q).amax());
        let max = moved.fold(0.0, f64::max);
        assert!(max > 0.0 && max <= 0.25 * 0.01 + 1e-15, "max jitter {max}");
    }

    #[test]
    fn ppc_must_be_a_cube() {
        let lat = Lattice::new([0.0; 3], 0.1, 4);
        let err = lat.seed_box([0.0; 3], [1.0; 3]).unwrap_err();
        assert!(err.to_string().contains("ppc = 4"), "{err}");
    }
}
