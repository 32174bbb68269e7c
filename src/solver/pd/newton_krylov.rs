//! The Newton–Krylov phase of a PD step (`mode = "accurate"`) and the optional Newton polish:
//! Newton steps on the step's force balance $F(x)=b(x)-Ax=0$ with $K=A-\Delta A$ applied
//! matrix-free and GMRES preconditioned by the persistent factor $A^{-1}$ (docs/NOTES.md,
//! "Accuracy of the defaults"). Split from `forward.rs`; the PD iteration hands over here.

use super::iterate::StepRhs;
use crate::solver::context::{norm, StepContext};
use crate::solver::offload::OffloadError;
use crate::solver::records::config::BackwardConfig;

/// Newton–Krylov steps per PD step at most in the line-search phase (muscles,
/// attachments); the trust-region phase's cap is `[solver] newton_krylov_max_steps`.
pub const MAX_NEWTON_KRYLOV_STEPS: usize = 30;

/// The trust-region phase's first region, as a multiple of the PD step's length
/// $\|A^{-1}F\|_A=(F^TA^{-1}F)^{1/2}$ at its start. Newton steps from the dual gate are
/// hundreds of PD steps long; measured on the Plant's first 60 frames (2026-11-27): 1,000
/// and 100 took the same time (409 and 426 subproblems), 10 made the 8×2×2 cantilever's
/// frame 1 grow its region for seven steps.
pub const FIRST_RADIUS: f64 = 1e3;

/// The line-search phase (muscles, attachments) gives up when the best $\|F\|$ has not
/// halved over this many steps (`stalled`; converging frames needed ≤ 5 steps in all, the
/// Plant's buckling frames crawled for 30 before the trust region took over there).
pub const STALL_STEPS: usize = 6;

/// Outcome of [`StepContext::newton_krylov`].
pub(in crate::solver) struct KrylovOutcome {
    pub(in crate::solver) converged: bool,
    pub(in crate::solver) steps: usize,
    pub(in crate::solver) gmres_iterations: usize,
    /// Final $\|b(x)-Ax\|$ on the free DoFs.
    pub(in crate::solver) residual: f64,
}

impl KrylovOutcome {
    /// A phase that has taken no step from $\|F\|$ = `residual`.
    fn at(residual: f64) -> Self {
        KrylovOutcome {
            converged: false,
            steps: 0,
            gmres_iterations: 0,
            residual,
        }
    }
}

impl StepContext<'_> {
    /// Newton polish of a converged step (see `SolverSettings::newton_polish`). Each step is
    /// kept only if it reduces the residual. Returns (steps, final relative residual), or
    /// the accelerator's failure.
    pub(in crate::solver) fn polish(
        &mut self,
        rhs: &StepRhs,
        x: &mut Vec<f64>,
    ) -> Result<(usize, f64), OffloadError> {
        let Ok((mut r, mut bn)) = self.pd_residual(rhs, x) else {
            return Ok((0, f64::NAN));
        };
        let mut rel = norm(&r) / bn.max(f64::MIN_POSITIVE);
        // each Newton system is solved to 1e-6 relative; the residual test on the trial
        // point decides whether the step is kept
        let cfg = BackwardConfig::gmres(1e-6, 500, 50, self.config.gamma_max);
        let mut steps = 0;
        while steps < self.config.newton_polish && rel > self.config.polish_tol {
            let lin =
                crate::solver::adjoint::backward::StepLinearization::for_newton(self, x, false)?;
            let mut delta = vec![0.0; x.len()];
            crate::solver::adjoint::backward::solve_gmres(self, &lin, &r, &mut delta, &cfg)?;
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
        Ok((steps, rel))
    }

    /// Newton–Krylov steps on the PD force balance $F(x)=b(x)-Ax=0$ (free DoFs) from `x`,
    /// towards $\|F\|\le$ `target`. Where the PD energy is the whole objective (`energy` =
    /// the step's inertial target $y$ and start $x_t$) they are trust-region steps on it
    /// ([`StepContext::newton_trust_region`]); otherwise (muscles, compliant attachments) the
    /// line search of [`StepContext::newton_line_search`] on the merit $F^TA^{-1}F$. Either
    /// leaves `x` at its last accepted iterate, which is never worse than the start; a phase
    /// that does not converge hands over to the caller's direct fallback. An accelerator
    /// failure ends it and is returned.
    pub(in crate::solver) fn newton_krylov(
        &mut self,
        rhs: &StepRhs,
        energy: Option<(&[f64], &[f64])>,
        x: &mut Vec<f64>,
        target: f64,
    ) -> Result<KrylovOutcome, OffloadError> {
        let Ok((r, _)) = self.pd_residual(rhs, x) else {
            return Ok(KrylovOutcome::at(f64::INFINITY));
        };
        match energy {
            Some(energy) => self.newton_trust_region(rhs, energy, x, r, target),
            None => self.newton_line_search(rhs, x, r, target),
        }
    }

    /// Newton–Krylov steps where the PD energy is not the objective (muscles, compliant
    /// attachments): $K\delta=F(x)$ solved by CG preconditioned with the persistent factor
    /// ($A^{-1}$; [`StepContext::newton_direction`]) to an Eisenstat–Walker-like forcing
    /// tolerance, then a backtracking line search on the merit $F^TA^{-1}F$ (`x` never gets
    /// worse). $K$ is the exact Jacobian $A-\Delta A(x)$ while full steps are taken, and the
    /// projected one ([`crate::solver::adjoint::backward::StepLinearization::projected`], $K\succeq M/h^2$)
    /// after a damped step, on negative curvature or after a failed line search. Stops at
    /// $\|F\|\le$ `target`, after [`MAX_NEWTON_KRYLOV_STEPS`] steps, when neither Jacobian
    /// gives a step, or when $\|F\|$ has not halved over [`STALL_STEPS`] steps. `r` is $F(x)$.
    fn newton_line_search(
        &mut self,
        rhs: &StepRhs,
        x: &mut Vec<f64>,
        mut r: Vec<f64>,
        target: f64,
    ) -> Result<KrylovOutcome, OffloadError> {
        let mut rn = norm(&r);
        let r_start = rn.max(f64::MIN_POSITIVE);
        let mut out = KrylovOutcome::at(rn);
        let mut exact = true;
        let mut switched = false;
        // ‖F‖ after each accepted step (for the stall test)
        let mut history = vec![rn];
        for _ in 0..MAX_NEWTON_KRYLOV_STEPS {
            if rn <= target || stalled(&history) {
                break;
            }
            let lin =
                crate::solver::adjoint::backward::StepLinearization::for_newton(self, x, !exact)?;
            let cfg = forcing(target, rn, r_start, self.config.gamma_max);
            let Some(delta) =
                self.newton_direction(&lin, &r, &cfg, exact, &mut out.gmres_iterations)?
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
            let merit0 = self.merit(&r)?;
            let mut alpha = 1.0;
            let mut accepted = false;
            for _ in 0..7 {
                let mut trial: Vec<f64> =
                    x.iter().zip(&delta).map(|(a, d)| a + alpha * d).collect();
                self.impose_prescribed(&mut trial, &rhs.xd);
                if let Ok((r2, _)) = self.pd_residual(rhs, &trial) {
                    let rn2 = norm(&r2);
                    let merit2 = self.merit(&r2)?;
                    if merit2 < (1.0 - 1e-4 * alpha) * merit0 || (rn2 <= target && rn2 < rn) {
                        *x = trial;
                        r = r2;
                        rn = rn2;
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
        Ok(out)
    }

    /// Trust-region Newton–Krylov steps on the step's PD energy $\mathcal E_{PD}$
    /// ($\nabla\mathcal E_{PD}=-F$, Hessian $K=A-\Delta A(x)$, exact): each step minimizes the
    /// quadratic model $m(\delta)=-F^T\delta+\tfrac12\delta^TK\delta$ over
    /// $\|\delta\|_A\le\Delta$ by Steihaug–Toint CG preconditioned with $A^{-1}$
    /// ([`crate::solver::adjoint::backward::solve_steihaug`]; negative curvature is followed to the boundary),
    /// and is accepted when the energy's actual decrease is more than [`ACCEPT_RATIO`] of the
    /// model's ($\rho$); the region follows [`next_radius`], starting at [`FIRST_RADIUS`] PD
    /// steps. Where the model's decrease is below the energy's round-off, a step is accepted
    /// when it lowers $\|F\|$. `(y, x_t)` are the step's inertial target and start, `r` is
    /// $F(x)$. Stops at $\|F\|\le$ `target` or after `[solver] newton_krylov_max_steps`
    /// subproblems (accepted or not). There is no stall test: the energy falls at every
    /// accepted step, and $\|F\|$ may rise on the way down (measured on the Plant, 200 frames:
    /// 3 frames reach the cap and go to the direct fallback, against 26 stalls of the line
    /// search it replaced).
    fn newton_trust_region(
        &mut self,
        rhs: &StepRhs,
        (y, x_t): (&[f64], &[f64]),
        x: &mut Vec<f64>,
        mut r: Vec<f64>,
        target: f64,
    ) -> Result<KrylovOutcome, OffloadError> {
        let mut rn = norm(&r);
        let r_start = rn.max(f64::MIN_POSITIVE);
        let mut out = KrylovOutcome::at(rn);
        let mut e_x = crate::solver::adjoint::trust_region::pd_energy(self, x, y, x_t)?;
        // the first region: a multiple of the PD step's length ‖A⁻¹F‖_A = (FᵀA⁻¹F)^½
        let mut radius = FIRST_RADIUS * self.merit(&r)?.sqrt();
        let mut lin_cache = None;
        for _ in 0..self.config.newton_krylov_max_steps {
            if rn <= target || radius.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
                break;
            }
            let lin = match &mut lin_cache {
                Some(lin) => lin,
                None => lin_cache.insert(
                    crate::solver::adjoint::backward::StepLinearization::for_newton(
                        self, x, false,
                    )?,
                ),
            };
            let cfg = forcing(target, rn, r_start, self.config.gamma_max);
            let mut delta = vec![0.0; x.len()];
            let st = crate::solver::adjoint::backward::solve_steihaug(
                self, lin, &r, &mut delta, radius, &cfg,
            )?;
            out.gmres_iterations += st.krylov.iterations;
            if !delta.iter().all(|v| v.is_finite()) {
                break;
            }
            let mut trial: Vec<f64> = x.iter().zip(&delta).map(|(a, d)| a + d).collect();
            self.impose_prescribed(&mut trial, &rhs.xd);
            let Ok((r2, _)) = self.pd_residual(rhs, &trial) else {
                radius = 0.25 * st.norm;
                continue;
            };
            let rn2 = norm(&r2);
            let e2 = crate::solver::adjoint::trust_region::pd_energy(self, &trial, y, x_t)?;
            let pred = st.model_decrease;
            let roundoff = pred <= 1e3 * f64::EPSILON * e_x.abs();
            // below the round-off the energy cannot judge the step: ‖F‖ does (ρ = 1 or 0)
            let rho = match (roundoff, rn2 < rn) {
                (false, _) => (e_x - e2) / pred,
                (true, lower) => f64::from(u8::from(lower)),
            };
            let accept = rho > ACCEPT_RATIO;
            radius = next_radius(radius, rho, &st);
            if accept {
                *x = trial;
                r = r2;
                rn = rn2;
                e_x = e2;
                out.steps += 1;
                out.residual = rn;
                lin_cache = None;
            }
        }
        out.converged = rn <= target;
        Ok(out)
    }

    /// $K\delta=F$ by preconditioned CG ($K$ is symmetric), which also detects negative
    /// curvature ($p^TKp\le0$): for the exact Jacobian that returns `None` (the step is not
    /// at a minimum there and the direction may lead to a saddle point); the projected
    /// Jacobian is positive definite, so only round-off gets it there, and GMRES solves it.
    /// Krylov iterations are added to `iterations`.
    fn newton_direction(
        &self,
        lin: &crate::solver::adjoint::backward::StepLinearization,
        f: &[f64],
        cfg: &BackwardConfig,
        exact: bool,
        iterations: &mut usize,
    ) -> Result<Option<Vec<f64>>, OffloadError> {
        let mut delta = vec![0.0; f.len()];
        let (its, cg_ok, _) =
            crate::solver::adjoint::backward::solve_pcg(self, lin, f, &mut delta, cfg)?;
        *iterations += its;
        if !cg_ok && its < cfg.max_iterations {
            if exact {
                return Ok(None);
            }
            delta.iter_mut().for_each(|v| *v = 0.0);
            let st = crate::solver::adjoint::backward::solve_gmres(self, lin, f, &mut delta, cfg)?;
            *iterations += st.iterations;
        }
        Ok(Some(delta))
    }

    /// $F^TA^{-1}F$ (`F` zero on the prescribed DoFs).
    fn merit(&self, f: &[f64]) -> Result<f64, OffloadError> {
        let mut w = vec![0.0; f.len()];
        crate::solver::adjoint::backward::solve_a(self, f, &mut w)?;
        Ok(f.iter().zip(&w).map(|(a, b)| a * b).sum())
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

/// A trust-region step is accepted when the energy falls by more than this fraction of the
/// model's prediction ($\rho$).
const ACCEPT_RATIO: f64 = 1e-4;

/// The next trust region (Nocedal & Wright Alg. 4.1 in the $A$-norm): a quarter of the
/// step's length when $\rho<\tfrac14$ (or not a number: a non-finite energy), twice the
/// radius when $\rho>\tfrac34$ and the step reached the boundary, else unchanged.
fn next_radius(radius: f64, rho: f64, step: &crate::linalg::krylov::SteihaugStats) -> f64 {
    if rho.is_nan() || rho < 0.25 {
        0.25 * step.norm
    } else if rho > 0.75 && step.boundary {
        2.0 * radius
    } else {
        radius
    }
}

/// The Krylov settings of one Newton–Krylov step at $\|F\|$ = `rn` (the phase started at
/// `r_start`): an Eisenstat–Walker-like forcing tolerance
/// $\eta=\mathrm{clamp}(\max(\tfrac12\,\mathrm{target}/\|F\|,\ \min(\|F\|/\|F_0\|,0.1)),10^{-6},0.1)$,
/// at most 400 iterations.
fn forcing(target: f64, rn: f64, r_start: f64, gamma_max: f64) -> BackwardConfig {
    let eta = (0.5 * target / rn)
        .max((rn / r_start).min(0.1))
        .clamp(1e-6, 0.1);
    BackwardConfig::gmres(eta, 400, 60, gamma_max)
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
