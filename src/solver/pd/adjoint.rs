//! The PD method's adjoint of one step (its stepper's `adjoint`, [`super::stepper`]):
//! $A^{-1}$-preconditioned GMRES on $Kz=g$ (`backward.adjoint`), handed to the direct
//! solve of $K$ ([`crate::solver::newton::adjoint::solve_adjoint`], whose pattern and
//! symbolic factor the simulator shares with Newton) past `backward.direct_after`
//! iterations, and on an accelerator the device GMRES under [`DevicePolicy`].

use crate::model::HessianFilterMode;
use crate::solver::adjoint::backward::{solve_adjoint as solve_gmres_adjoint, StepLinearization};
use crate::solver::context::StepContext;
use crate::solver::offload::OffloadError;
use crate::solver::records::config::BackwardConfig;
use crate::solver::records::error::SolverError;
use crate::solver::records::stats::AdjointStats;
use std::sync::atomic::AtomicUsize;

/// The adjoint of one PD step: GMRES (on the device when the step's linearization is
/// there), with the direct hand-over where [`direct_fallback_applies`]; `streak` counts the
/// consecutive frames the direct solve took (the PD stepper's state, [`DIRECT_RETRY`]).
pub(crate) fn solve(
    sim: &StepContext,
    lin: &StepLinearization,
    (x_next, g): (&[f64], &[f64]),
    cfg: &BackwardConfig,
    frame: usize,
    streak: &AtomicUsize,
) -> Result<(Vec<f64>, AdjointStats), SolverError> {
    if direct_fallback_applies(sim, cfg) {
        return adjoint_gmres_then_direct(sim, lin, x_next, g, cfg, frame, streak);
    }
    solve_gmres_adjoint(sim, lin, g, cfg, frame)
        .map_err(|error| SolverError::adjoint_offload(frame, error))
}

/// Whether a frame's adjoint may fall back to the direct solve (`backward.direct_after`):
/// the $A^{-1}$-preconditioned GMRES adjoint (`woodbury` or `gmres`), with the exact Hessian
/// (the backward filters change $\Delta A$ in ways the assembled Hessian does not reproduce)
/// and the PD energy. With contact rows on the host too: the direct solve is then Newton's
/// KKT adjoint (the contact Schur complement on the factor of $K$, the same system the
/// Woodbury GMRES solves; session 28: the bouncing ball's first contact frame took 46
/// Woodbury iterations, 0.53 s, against 0.12 s direct). On the device path too: the factor
/// of $K$ is a host factorization, and a frame whose device GMRES hit the cap would otherwise
/// leave its adjoint unconverged (the armadillo on an H100, 2026-11-27: 900 iterations a
/// frame, gradient 5.3e-5 off the CPU's); a device frame with contact rows likewise (named
/// regression: the Crab on the emulator, 1000× contrast on the ground, session 29: the KKT
/// GMRES ran to its 10,000-iteration cap in both frames and `grad` failed).
fn direct_fallback_applies(sim: &StepContext, cfg: &BackwardConfig) -> bool {
    use crate::model::{AdjointMethod, NewtonEnergy};
    (cfg.direct_after > 0 || cfg.direct_first)
        && matches!(cfg.method, AdjointMethod::Woodbury | AdjointMethod::Gmres)
        && cfg.filter == HessianFilterMode::None
        && sim.config.newton.energy == NewtonEnergy::Pd
}

/// After a frame whose adjoint needed the direct solve, the next frames go straight to it,
/// retrying GMRES first on every `DIRECT_RETRY`-th (armadillo: 151 wasted GMRES iterations
/// a frame before the factorization otherwise).
const DIRECT_RETRY: usize = 8;

/// GMRES on $Kz=g$ preconditioned by $A^{-1}$ for at most `direct_after` iterations; if it
/// has not converged, $K=A-\Delta A$ (the step's PD Hessian) is assembled and factored and
/// $z$ solved directly ([`crate::solver::newton::adjoint::solve_adjoint`]). The stats add both
/// phases; the method reads `"woodbury+direct"` (or `"gmres+direct"`) when the direct solve ran
/// after GMRES, `"direct"` when it ran alone (the streak rule of [`DIRECT_RETRY`]).
fn adjoint_gmres_then_direct(
    sim: &StepContext,
    lin: &StepLinearization,
    x_next: &[f64],
    g: &[f64],
    cfg: &BackwardConfig,
    frame: usize,
    streak_of: &AtomicUsize,
) -> Result<(Vec<f64>, AdjointStats), SolverError> {
    use std::sync::atomic::Ordering::Relaxed;
    let streak = streak_of.load(Relaxed);
    if cfg.direct_first {
        let (z, mut direct) =
            crate::solver::newton::adjoint::solve_adjoint(sim, lin, x_next, g, cfg, frame)?;
        direct.method = "direct".into();
        return Ok((z, direct));
    }
    if streak > 0 && !streak.is_multiple_of(DIRECT_RETRY) {
        // the previous frame's GMRES ran past the cap: K is alike from frame to frame, so
        // this one goes straight to the direct solve (GMRES is tried again every
        // DIRECT_RETRY frames)
        streak_of.store(streak + 1, Relaxed);
        let (z, mut direct) =
            crate::solver::newton::adjoint::solve_adjoint(sim, lin, x_next, g, cfg, frame)?;
        direct.method = "direct".into();
        return Ok((z, direct));
    }
    // the device GMRES runs the contact-free system; a frame with contact rows runs the KKT
    // GMRES (its K products on the device) capped at `direct_after`, as on the host
    let on_device = lin.device_step.is_some() && lin.contact.is_none();
    let (z, st) = if on_device && device_cap(cfg) > cfg.direct_after {
        device_adjoint(sim, lin, g, cfg, frame)
    } else {
        let capped = BackwardConfig {
            max_iterations: cfg.max_iterations.min(cfg.direct_after),
            ..cfg.clone()
        };
        solve_gmres_adjoint(sim, lin, g, &capped, frame)
    }
    .map_err(|error| SolverError::adjoint_offload(frame, error))?;
    if st.converged {
        streak_of.store(0, Relaxed);
        return Ok((z, st));
    }
    streak_of.store(streak + 1, Relaxed);
    let (z, mut direct) =
        crate::solver::newton::adjoint::solve_adjoint(sim, lin, x_next, g, cfg, frame)?;
    direct.method = format!("{}+direct", st.method);
    direct.iterations += st.iterations;
    direct.gmres_iterations += st.gmres_iterations;
    direct.seconds += st.seconds;
    Ok((z, direct))
}

/// The relative residual at which GMRES stands in for the direct solve
/// (`backward.device_direct_after`): on the 126k-tet box its gradient lands 1.0e-9 from the
/// direct adjoint's (CPU, 650 iterations), on the 1M-tet box 4.5e-10 (H100, 641).
pub const DIRECT_EQUIVALENT_TOL: f64 = 1e-10;

/// Iterations GMRES needs from relative residual `now` to `target`, projected from the
/// contraction per iteration between `before` (relative residual `iterations` earlier) and
/// `now`; `None` when the residual did not fall.
pub fn projected_iterations(before: f64, now: f64, iterations: usize, target: f64) -> Option<f64> {
    if now <= target {
        return Some(0.0);
    }
    let rate = (now / before).ln() / iterations.max(1) as f64;
    (rate < 0.0 && rate.is_finite()).then(|| (target / now).ln() / rate)
}

/// Iterations between the continuation's projections, and the window each reads its rate
/// from: the CPU path's restart cycle, whose rates were traced (docs/BENCHMARKS.md,
/// session 11).
pub const RATE_WINDOW: usize = 50;

/// The accelerator's cap on a frame's GMRES iterations (`backward.device_direct_after`,
/// within `max_iterations`).
fn device_cap(cfg: &BackwardConfig) -> usize {
    cfg.device_direct_after.min(cfg.max_iterations)
}

/// When the device's adjoint GMRES of one frame goes on (`device_adjoint`), read after
/// every iteration from its estimated relative residual $\rho_k$ (`history[k]`, $\rho_0=1$).
/// Up to `direct_after` iterations it is the CPU path's solve: stop once
/// $\rho_k\le\tfrac12\epsilon$ ($\epsilon$ = `backward.rel_tol` + `abs_tol`/‖g‖, GMRES's own
/// test). From `direct_after` on, every [`RATE_WINDOW`] iterations, go on only while the
/// last window's rate projects [`DIRECT_EQUIVALENT_TOL`] within the cap
/// ([`projected_iterations`]); otherwise the caller solves the frame directly. Reads
/// residuals, never clocks: deterministic.
pub struct DevicePolicy {
    normal: f64,
    direct_after: usize,
    cap: usize,
    history: Vec<f64>,
}

impl DevicePolicy {
    pub fn new(normal: f64, direct_after: usize, cap: usize) -> Self {
        DevicePolicy {
            normal,
            direct_after,
            cap,
            history: vec![1.0],
        }
    }

    /// Whether GMRES goes on after iteration `k` with estimate `rho`.
    pub fn go_on(&mut self, k: usize, rho: f64) -> bool {
        self.history.resize(k, rho);
        self.history.push(rho);
        if k <= self.direct_after && rho <= 0.5 * self.normal {
            return false;
        }
        if k < self.direct_after || !(k - self.direct_after).is_multiple_of(RATE_WINDOW) {
            return true;
        }
        let w = RATE_WINDOW.min(k);
        let need = projected_iterations(self.history[k - w], rho, w, DIRECT_EQUIVALENT_TOL);
        matches!(need, Some(n) if n <= self.cap.saturating_sub(k) as f64)
    }
}

/// On an accelerator, a frame that may fall back to the direct solve: one GMRES run (restart
/// `backward.device_gmres_restart`, toward [`DIRECT_EQUIVALENT_TOL`], at most
/// `device_direct_after` iterations) under [`DevicePolicy`], so that the Krylov space
/// GMRES built before `direct_after` is kept past it. Converged when it stopped by
/// `direct_after` within `rel_tol` (the method reads `woodbury` or `gmres`, as on the CPU) or
/// later within [`DIRECT_EQUIVALENT_TOL`] (`…+device`); unconverged, the caller solves
/// directly. With the device restart equal to `gmres_restart` and `direct_after` a multiple
/// of it, its iterates are those of a capped run continued cycle by cycle (the policy of
/// sessions 11–13).
fn device_adjoint(
    sim: &StepContext,
    lin: &StepLinearization,
    g: &[f64],
    cfg: &BackwardConfig,
    frame: usize,
) -> Result<(Vec<f64>, AdjointStats), OffloadError> {
    let t0 = std::time::Instant::now();
    let mut gf = g.to_vec();
    sim.zero_prescribed(&mut gf);
    let gnorm = crate::solver::context::norm(&gf);
    let target = cfg.rel_tol.min(DIRECT_EQUIVALENT_TOL);
    let normal = cfg.rel_tol
        + if gnorm > 0.0 {
            cfg.abs_tol / gnorm
        } else {
            0.0
        };
    let run = BackwardConfig {
        rel_tol: target,
        max_iterations: device_cap(cfg),
        gmres_restart: cfg.device_gmres_restart.max(1),
        ..cfg.clone()
    };
    let mut policy = DevicePolicy::new(normal, cfg.direct_after, run.max_iterations);
    let mut z = vec![0.0; gf.len()];
    let ks = crate::solver::adjoint::backward::solve_gmres_monitored(
        sim,
        lin,
        &gf,
        &mut z,
        &run,
        &mut |k, rho| policy.go_on(k, rho),
    )?;
    let within_cap = ks.iterations <= cfg.direct_after;
    let base = crate::solver::adjoint::backward::gmres_method(cfg);
    let st = AdjointStats {
        frame,
        method: if within_cap {
            base.to_string()
        } else {
            format!("{base}+device")
        },
        iterations: ks.iterations,
        gmres_iterations: ks.iterations,
        converged: ks.converged || (within_cap && ks.relative_residual <= normal),
        relative_residual: ks.relative_residual,
        max_abs_z: z.iter().map(|v| v.abs()).fold(0.0, f64::max),
        filtered_samples: lin.filtered_samples,
        seconds: t0.elapsed().as_secs_f64(),
        ..Default::default()
    };
    Ok((z, st))
}

#[cfg(test)]
mod tests {
    use super::projected_iterations;

    /// A steady contraction of 10× per 50 iterations from 1e-2 needs 400 more to reach 1e-10;
    /// a residual that did not fall projects nothing (the caller then solves directly).
    #[test]
    fn projection_reads_the_last_blocks_rate() {
        let need = projected_iterations(1.0, 1e-3, 150, 1e-10).unwrap();
        assert!((need - 350.0).abs() < 1e-9, "{need}");
        let need = projected_iterations(1e-1, 1e-2, 50, 1e-10).unwrap();
        assert!((need - 400.0).abs() < 1e-9, "{need}");
        assert_eq!(projected_iterations(1e-2, 1e-11, 50, 1e-10), Some(0.0));
        assert_eq!(projected_iterations(1e-2, 1e-2, 50, 1e-10), None);
        assert_eq!(projected_iterations(1e-2, 2e-2, 50, 1e-10), None);
        assert_eq!(projected_iterations(1e-2, f64::NAN, 50, 1e-10), None);
    }

    /// Where [`super::DevicePolicy`] stops a GMRES run whose estimates interpolate
    /// `points` (iteration, relative residual) log-linearly; `None` when it goes on through
    /// the last point. Cap 2000, `direct_after` 150, `rel_tol` 1e-6 (the defaults).
    fn stop_of(points: &[(usize, f64)]) -> Option<usize> {
        let mut policy = super::DevicePolicy::new(1e-6, 150, 2000);
        for w in points.windows(2) {
            let ((k0, r0), (k1, r1)) = (w[0], w[1]);
            for k in k0 + 1..=k1 {
                let t = (k - k0) as f64 / (k1 - k0) as f64;
                let rho = (r0.ln() + t * (r1.ln() - r0.ln())).exp();
                if !policy.go_on(k, rho) {
                    return Some(k);
                }
            }
        }
        None
    }

    /// The policy's decisions on GMRES residual histories traced on the CPU path at restart
    /// 50 (docs/BENCHMARKS.md, session 11), where its windows are the restart cycles. Named
    /// regression: the armadillo's frame 2 went on at 150 and stopped one cycle later (the
    /// average rate since the start projected within the cap; its last 50 iterations,
    /// 1.0e-2 → 7.3e-3, project 2,879 more), so it now stops at 150. Its frame 1 goes on one
    /// window and stops at 200. The 126k-tet box goes on until it converges. A run that
    /// reaches half of `rel_tol` before `direct_after` stops there, as GMRES would.
    #[test]
    fn window_rates_stop_the_armadillo_and_not_the_box() {
        let frame2 = [
            (0, 1.0),
            (50, 3.2e-2),
            (100, 1.0e-2),
            (150, 7.301e-3),
            (200, 5.198e-3),
        ];
        assert_eq!(stop_of(&frame2), Some(150));
        let frame1 = [
            (0, 1.0),
            (50, 1.7e-2),
            (100, 6.6e-3),
            (150, 3.7e-3),
            (200, 2.5e-3),
        ];
        assert_eq!(stop_of(&frame1), Some(200));
        let long_box = [
            (0, 1.0),
            (50, 6.3e-3),
            (100, 1.4e-3),
            (150, 3.559e-4),
            (200, 1.066e-4),
            (250, 2.833e-5),
            (300, 1.153e-5),
            (350, 2.803e-6),
            (400, 1.106e-6),
            (450, 1.630e-7),
            (500, 5.073e-8),
            (550, 4.707e-9),
            (600, 8.682e-10),
            (650, 1.1e-10),
        ];
        assert_eq!(stop_of(&long_box), None);
        assert_eq!(stop_of(&[(0, 1.0), (100, 1e-7)]), Some(91)); // 10^(-7k/100) <= 5e-7
                                                                 // past `direct_after`, reaching `rel_tol` is not enough: the target is 1e-10
        assert_eq!(stop_of(&[(0, 1.0), (150, 1e-5), (200, 1e-7)]), None);
    }
}
