//! Muscle groups of the model (spec §3.5): actuated samples, their rest fibres and the
//! activation knots in time. The fibre physics (projection, matrix term, linearization)
//! is `crate::solver::muscle`.

use nalgebra::Vector3;

/// One muscle group: elements sharing an activation.
#[derive(Clone, Debug)]
pub struct MuscleGroup {
    pub body: usize,
    pub name: String,
    /// Muscle stiffness $k_m$ (Pa).
    pub stiffness: f64,
    /// Activation knot values $a_k$ (dimensionless target fibre stretch); one value =
    /// constant in time.
    pub knots: Vec<f64>,
    /// Knot spacing τ (s); unused with one knot.
    pub knot_interval: f64,
    /// Actuated samples and their unit rest fibres.
    pub samples: Vec<usize>,
    pub fibers: Vec<Vector3<f64>>,
}

impl MuscleGroup {
    /// Interpolation weights $((k, 1-s), (k+1, s))$ of the knots at time `t` (the second
    /// index equals the first with weight 0 at and beyond the last knot).
    pub fn weights(&self, t: f64) -> [(usize, f64); 2] {
        let last = self.knots.len() - 1;
        if last == 0 || self.knot_interval.is_nan() || self.knot_interval <= 0.0 {
            return [(0, 1.0), (0, 0.0)];
        }
        let u = (t / self.knot_interval).max(0.0);
        // tolerate round-off at a knot time (t = k tau computed as n h)
        let ur = u.round();
        let u = if (u - ur).abs() < 1e-9 { ur } else { u };
        let k = u.floor() as usize;
        if k >= last {
            return [(last, 1.0), (last, 0.0)];
        }
        let s = u - k as f64;
        [(k, 1.0 - s), (k + 1, s)]
    }

    /// $a(t)$, linearly interpolated between knots.
    pub fn activation_at(&self, t: f64) -> f64 {
        self.weights(t)
            .iter()
            .map(|&(k, w)| w * self.knots[k])
            .sum()
    }
}
