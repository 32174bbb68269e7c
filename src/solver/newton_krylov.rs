//! The Newton–Krylov phase of a PD step (`mode = "accurate"`) and the optional Newton polish:
//! Newton steps on the step's force balance $F(x)=b(x)-Ax=0$ with $K=A-\Delta A$ applied
//! matrix-free and GMRES preconditioned by the persistent factor $A^{-1}$ (docs/NOTES.md,
//! "Accuracy of the defaults"). Split from `forward.rs`; the PD iteration hands over here.

use super::config::BackwardConfig;
use super::forward::StepRhs;
use super::simulator::{norm, Simulator};

/// Newton–Krylov steps per PD step at most (`mode = "accurate"`); quadratic convergence
/// needs 1–3 from the dual gate at its default tolerance.
pub const MAX_NEWTON_KRYLOV_STEPS: usize = 30;

/// The Newton–Krylov phase gives up when the best $\|F\|$ has not halved over this many
/// steps ([`stalled`]; converging frames need ≤ 5 steps in all, the Plant's buckling frames
/// crawled for 30).
pub const STALL_STEPS: usize = 6;

/// Outcome of [`Simulator::newton_krylov`].
pub(super) struct KrylovOutcome {
    pub(super) converged: bool,
    pub(super) steps: usize,
    pub(super) gmres_iterations: usize,
    /// Final $\|b(x)-Ax\|$ on the free DoFs.
    pub(super) residual: f64,
}

impl Simulator<'_> {
    /// Newton polish of a converged step (see `SolverSettings::newton_polish`). Each step is
    /// kept only if it reduces the residual. Returns (steps, final relative residual).
    pub(super) fn polish(&mut self, rhs: &StepRhs, x: &mut Vec<f64>) -> (usize, f64) {
        let Ok((mut r, mut bn)) = self.pd_residual(rhs, x) else {
            return (0, f64::NAN);
        };
        let mut rel = norm(&r) / bn.max(f64::MIN_POSITIVE);
        // each Newton system is solved to 1e-6 relative; the residual test on the trial
        // point decides whether the step is kept
        let cfg = BackwardConfig::gmres(1e-6, 500, 50, self.config.gamma_max);
        let mut steps = 0;
        while steps < self.config.newton_polish && rel > self.config.polish_tol {
            let lin = super::backward::StepLinearization::for_newton(self, x, false);
            let mut delta = vec![0.0; x.len()];
            super::backward::solve_gmres(self, &lin, &r, &mut delta, &cfg);
            let trial: Vec<f64> = x.iter().zip(&delta).map(|(a, b)| a + b).collect();
            let mut trial = trial;
            self.impose_prescribed(&mut trial, &rhs.xd);
            let Ok((r2, bn2)) = self.pd_residual(rhs, &trial) else {
                break;
            };
            let rel2 = norm(&r2) / bn2.max(f64::MIN_POSITIVE);
            if rel2.is_nan() || rel2 >= rel {
                break;
            }
            *x = trial;
            r = r2;
            bn = bn2;
            rel = rel2;
            steps += 1;
        }
        let _ = bn;
        (steps, rel)
    }

    /// Newton–Krylov steps on the PD force balance $F(x)=b(x)-Ax=0$ (free DoFs) from `x`:
    /// $K\delta=F(x)$ solved by CG preconditioned with the persistent factor ($A^{-1}$;
    /// [`Simulator::newton_direction`]) to an Eisenstat–Walker-like forcing tolerance, then a
    /// backtracking line search
    /// (Armijo on the PD energy where it is the whole objective, else on $F^TA^{-1}F$; `x`
    /// never gets worse). $K$ is the exact Jacobian $A-\Delta A(x)$ while full steps are
    /// taken, and the projected one ([`super::backward::StepLinearization::projected`],
    /// $K\succeq M/h^2$) after a damped step, a direction that climbs the energy or a failed
    /// line search. Stops at $\|F\|\le$ `target`, after [`MAX_NEWTON_KRYLOV_STEPS`] steps,
    /// when neither Jacobian gives a step, or when $\|F\|$ has not halved over
    /// [`STALL_STEPS`] steps (a non-convex step: the caller's direct fallback takes over).
    pub(super) fn newton_krylov(
        &mut self,
        rhs: &StepRhs,
        energy: Option<(&[f64], &[f64])>,
        x: &mut Vec<f64>,
        target: f64,
    ) -> KrylovOutcome {
        let mut out = KrylovOutcome {
            converged: false,
            steps: 0,
            gmres_iterations: 0,
            residual: f64::INFINITY,
        };
        let Ok((mut r, _)) = self.pd_residual(rhs, x) else {
            return out;
        };
        let mut rn = norm(&r);
        let r_start = rn.max(f64::MIN_POSITIVE);
        let mut exact = true;
        let mut switched = false;
        out.residual = rn;
        // the PD energy at `x`, carried over from the accepted trial point of the line search
        let mut e_x: Option<f64> = None;
        // ‖F‖ after each accepted step (for the stall test)
        let mut history = vec![rn];
        for _ in 0..MAX_NEWTON_KRYLOV_STEPS {
            if rn <= target || stalled(&history) {
                break;
            }
            let lin = super::backward::StepLinearization::for_newton(self, x, !exact);
            let eta = (0.5 * target / rn)
                .max((rn / r_start).min(0.1))
                .clamp(1e-6, 0.1);
            let cfg = BackwardConfig::gmres(eta, 400, 60, self.config.gamma_max);
            let Some(delta) =
                self.newton_direction(&lin, &r, &cfg, exact, &mut out.gmres_iterations)
            else {
                // negative curvature of the exact Jacobian: the projected one takes over
                exact = false;
                continue;
            };
            if !delta.iter().all(|v| v.is_finite()) {
                break;
            }
            // merit: F·A⁻¹F (the A-norm of the PD step A⁻¹F; the plain ‖F‖ is dominated by
            // the stiffest elements and stalls the line search on high-contrast meshes)
            let merit0 = self.merit(&r);
            let e0 = energy.map(|(y, x_t)| {
                *e_x.get_or_insert_with(|| super::trust_region::pd_energy(self, x, y, x_t))
            });
            let slope = dot(&r, &delta);
            let mut alpha = 1.0;
            let mut accepted = false;
            // the exact Jacobian is indefinite where the energy is not convex: a direction
            // that climbs the energy is not searched (the projected one is tried instead)
            let climbs = exact && energy.is_some() && slope <= 0.0;
            for _ in 0..if climbs { 0 } else { 7 } {
                let mut trial: Vec<f64> =
                    x.iter().zip(&delta).map(|(a, d)| a + alpha * d).collect();
                self.impose_prescribed(&mut trial, &rhs.xd);
                if let Ok((r2, _)) = self.pd_residual(rhs, &trial) {
                    let rn2 = norm(&r2);
                    let merit2 = self.merit(&r2);
                    // Armijo on the PD energy (∇E = −F) where it is the whole objective
                    let mut e_trial = None;
                    let armijo = match (energy, e0) {
                        // only while the predicted decrease is above the energy's round-off
                        (Some((y, x_t)), Some(e0)) if slope > 1e3 * f64::EPSILON * e0.abs() => {
                            let e2 = super::trust_region::pd_energy(self, &trial, y, x_t);
                            e_trial = Some(e2);
                            e2 <= e0 - 1e-4 * alpha * slope
                        }
                        _ => false,
                    };
                    if armijo
                        || merit2 < (1.0 - 1e-4 * alpha) * merit0
                        || (rn2 <= target && rn2 < rn)
                    {
                        *x = trial;
                        r = r2;
                        rn = rn2;
                        e_x = e_trial;
                        accepted = true;
                        break;
                    }
                }
                alpha *= 0.5;
            }
            if !accepted {
                // no progress along this direction: try the other Jacobian once
                if switched {
                    break;
                }
                switched = true;
                exact = !exact;
                continue;
            }
            switched = false;
            // the exact Jacobian while full steps are taken (quadratic convergence near the
            // solution); a damped step means an indefinite region: back to the projected one
            exact = alpha == 1.0;
            out.steps += 1;
            out.residual = rn;
            history.push(rn);
        }
        out.converged = rn <= target;
        out
    }

    /// $K\delta=F$ by preconditioned CG ($K$ is symmetric), which also detects negative
    /// curvature ($p^TKp\le0$): for the exact Jacobian that returns `None` (the step is not
    /// at a minimum there and the direction may lead to a saddle point); the projected
    /// Jacobian is positive definite, so only round-off gets it there, and GMRES solves it.
    /// Krylov iterations are added to `iterations`.
    fn newton_direction(
        &self,
        lin: &super::backward::StepLinearization,
        f: &[f64],
        cfg: &BackwardConfig,
        exact: bool,
        iterations: &mut usize,
    ) -> Option<Vec<f64>> {
        let mut delta = vec![0.0; f.len()];
        let (its, cg_ok, _) = super::backward::solve_pcg(self, lin, f, &mut delta, cfg);
        *iterations += its;
        if !cg_ok && its < cfg.max_iterations {
            if exact {
                return None;
            }
            delta.iter_mut().for_each(|v| *v = 0.0);
            let st = super::backward::solve_gmres(self, lin, f, &mut delta, cfg);
            *iterations += st.iterations;
        }
        Some(delta)
    }

    /// $F^TA^{-1}F$ (`F` zero on the prescribed DoFs).
    fn merit(&self, f: &[f64]) -> f64 {
        let mut w = vec![0.0; f.len()];
        super::backward::solve_a(self, f, &mut w);
        dot(f, &w)
    }
}

/// The stall test of the Newton–Krylov phase on the accepted steps' $\|F\|$ (`history`,
/// the start first): the best of the last [`STALL_STEPS`] has not halved against the best
/// before them. The line search accepts a step that lowers the PD energy or the merit
/// $F^TA^{-1}F$, so $\|F\|$ itself may rise on the way down.
fn stalled(history: &[f64]) -> bool {
    let n = history.len();
    if n <= STALL_STEPS {
        return false;
    }
    let best = |h: &[f64]| h.iter().copied().fold(f64::INFINITY, f64::min);
    best(&history[n - STALL_STEPS..]) > 0.5 * best(&history[..n - STALL_STEPS])
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::{stalled, STALL_STEPS};

    /// On a monotone history the test is the plain one: $\|F\|$ now against
    /// [`STALL_STEPS`] steps ago.
    #[test]
    fn monotone_histories_stall_as_before() {
        let crawl: Vec<f64> = (0..=STALL_STEPS).map(|k| 1.0 - 0.05 * k as f64).collect();
        assert!(stalled(&crawl));
        let quadratic: Vec<f64> = (0..=STALL_STEPS).map(|k| 0.8f64.powi(k as i32)).collect();
        assert!(!stalled(&quadratic));
        assert!(!stalled(&crawl[..STALL_STEPS]), "too short to judge");
    }

    /// Regression (issue 15, 2026-11-27): frame 2 of the 64×16×16 tet4 cantilever box on the
    /// device path accepted six steps by the energy's Armijo test while $\|F\|$ went
    /// 34.3, 50.6, 5.05, 23.0, 1.53, 33.0 (the emulator's record; the start, not printed, is
    /// taken here as 40). The old test compared the last value with the start and called it
    /// a stall, and the direct fallback ran three host factorizations. With the best value
    /// of the window the phase goes on and converges at step 11 (1.8e-8 ≤ 4.1e-8). (The
    /// H200's slow forward on that box, 6.5 s a frame, took the same path bitwise with and
    /// without this test: its trigger is another one, docs/gpu.md "Next" item 1.)
    #[test]
    fn a_non_monotone_residual_is_not_a_stall() {
        let history = [40.0, 34.27, 50.60, 5.049, 22.99, 1.535, 32.97];
        assert!(!stalled(&history));
        let old = history[history.len() - 1] > 0.5 * history[0];
        assert!(old, "the old test called this a stall");
    }
}
