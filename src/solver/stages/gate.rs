//! Dual-gate convergence test (spec Eq. 22).

/// Round-off floor of the displacement-referenced position gate, relative to $\|x_k\|$:
/// $10^4\,\epsilon_{\rm mach}\approx2.2\times10^{-12}$. At tight tolerances
/// $\epsilon_r\|x_k-x_t\|+\epsilon_a$ alone can ask for a PD residual below what round-off
/// in the local step allows: a stiff block (E 1e8) bobbing slowly on soft attachments at
/// $\epsilon_r=10^{-12}$, $\epsilon_a=10^{-16}$ ran to its iteration cap on most frames
/// (`tests/physics/convergence.rs::stiff_slow_body_converges_under_the_displacement_gate`); a body at
/// rest ($\|x_k-x_t\|\to0$) is the limiting case. The floor is far below any tolerance that
/// matters for motion ($10^{-4}$ of a 1 µm step on a 1 m body is still $10^{-10}$).
pub const DISPLACEMENT_FLOOR: f64 = 1e4 * f64::EPSILON;

/// Round-off floor of the force-balance test of `mode = "accurate"`, relative to the norm of
/// the right-hand side $\|b\|$ (free DoFs): $10^3\,\epsilon_{\rm mach}\approx2.2\times10^{-13}$.
/// $b-Ax$ is a difference of terms of the size of $\|b\|$ (for a body at rest or one far from
/// the origin $\|b\|\gg\|b-Ax^0\|$), so its value carries an error of a few $\epsilon\|b\|$.
pub const RESIDUAL_FLOOR: f64 = 1e3 * f64::EPSILON;

/// Stop when both the position step and the change of the projection part of the RHS are
/// small: $\|\Phi(x_k)-x_k\|\le\epsilon_r\,r_k+\epsilon_a$ (+ floor) and
/// $\|b_p^k-b_p^{k-1}\|\le\epsilon_r\|b_p^{k-1}\|+\epsilon_a$ (only for $k\ge1$), where the
/// reference $r_k$ is $\|x_k-x_t\|$ (`gate_reference = "displacement"`, the default, with
/// the floor [`DISPLACEMENT_FLOOR`]$\|x_k\|$) or $\|x_k\|$ (`"position"`, spec Eq. 22).
///
/// Deliberate reading of spec Eq. 22: the position gate measures the *plain PD step*
/// $g_k=\Phi(x_k)-x_k$ (the fixed-point residual), not the Anderson-mixed step
/// $x_{k+1}-x_k$. Without acceleration the two coincide; with it, the mixed step can
/// collapse while the iterate is still far from the fixed point (Anderson stagnation), and
/// gradients checked against finite differences were then wrong by up to 40 %.
#[derive(Clone, Copy, Debug)]
pub struct DualGate {
    pub rel: f64,
    pub abs: f64,
}

/// Residuals of one gate evaluation, for the log.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct GateResiduals {
    /// $\|\Phi(x_k)-x_k\| / (\epsilon_r\|x_k\|+\epsilon_a)$ (≤ 1 means the gate is met; +∞ when the
    /// gate was never evaluated, i.e. fewer than two iterations).
    pub position: f64,
    /// $\|b_p^k-b_p^{k-1}\| / (\epsilon_r\|b_p^{k-1}\|+\epsilon_a)$.
    pub projection: f64,
}

impl DualGate {
    /// `x`: the reference norm of the position gate; `floor`: an absolute term added to its
    /// tolerance (the round-off floor [`DISPLACEMENT_FLOOR`]$\|x_k\|$ of the displacement
    /// gate, 0 for the position gate).
    pub fn evaluate(&self, dx: f64, x: f64, floor: f64, dbp: f64, bp: f64) -> GateResiduals {
        GateResiduals {
            position: dx / (self.rel * x + self.abs + floor),
            projection: dbp / (self.rel * bp + self.abs),
        }
    }
    pub fn met(r: &GateResiduals) -> bool {
        r.position <= 1.0 && r.projection <= 1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn both_gates_must_pass() {
        let g = DualGate {
            rel: 1e-4,
            abs: 1e-9,
        };
        assert!(DualGate::met(&g.evaluate(1e-6, 1.0, 0.0, 1e-6, 1.0)));
        // position passes, projection does not
        assert!(!DualGate::met(&g.evaluate(1e-6, 1.0, 0.0, 1e-2, 1.0)));
        assert!(!DualGate::met(&g.evaluate(1e-2, 1.0, 0.0, 1e-6, 1.0)));
        // the floor loosens only the position gate
        assert!(DualGate::met(&g.evaluate(1e-2, 1.0, 2e-2, 1e-6, 1.0)));
        assert!(!DualGate::met(&g.evaluate(1e-6, 1.0, 1.0, 1e-2, 1.0)));
    }
}
