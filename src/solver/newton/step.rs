//! One implicit-Euler step by Newton's method (module docs of [`super`]): the iteration
//! state, the contact-projected Newton step and the line-searched descent step.

use super::{
    evaluate, factor_filtered, kkt, roundoff_scale, Eval, FilterPolicy, Kkt, LOCAL_STEP,
    ROUNDOFF_C, ROUNDOFF_K, ROUNDOFF_STOP,
};
use crate::contact::{self, ContactSet, ContactStats, Delassus};
use crate::linalg::LinalgError;
use crate::solver::context::{contact_settings, norm, ContactOutcome, StepContext};
use crate::solver::hessian::{NewtonFactor, NewtonSystem};
use crate::solver::records::error::SolverError;
use crate::solver::records::stats::{NewtonStats, StepStats};
use std::time::Instant;

/// One implicit-Euler step by Newton's method (`[solver] method = "newton"`), with NCP
/// contact when the scene has contact candidates (module docs).
pub fn step(
    sim: &mut StepContext,
    frame: usize,
    x_t: &[f64],
    v_t: &[f64],
) -> Result<(Vec<f64>, StepStats), SolverError> {
    let t0 = Instant::now();
    let model = sim.model;
    let h = model.h;
    let cfg = sim.config.newton;
    let t_start = (frame - 1) as f64 * h;
    sim.derived.muscle_time = frame as f64 * h;
    let mut f_ext = model.external_force(t_start, &sim.derived.mass);
    let penalty_force = sim.penalty_forces(t_start, x_t, v_t, &mut f_ext);
    let y = sim.inertial_target(x_t, v_t, &f_ext);
    let xd = model.dirichlet_values(frame as f64 * h);
    let mut x = x_t.to_vec();
    sim.impose_prescribed(&mut x, &xd);
    let t_c = Instant::now();
    let csettings = contact::SolveSettings {
        cancel: sim.cancel.clone(),
        ..contact_settings(model)
    };
    let mut ncp = sim.contact_begin(t_start, x_t, v_t);
    let cstats = ContactStats {
        seconds_setup: t_c.elapsed().as_secs_f64(),
        ..Default::default()
    };
    let ev = evaluate(sim, cfg.energy, &x, &y, x_t, (true, true));
    let mut it = Iterate::new(x, ev, cstats);
    run(
        sim,
        (cfg, csettings),
        (x_t, &y),
        (frame, true),
        &mut ncp,
        &mut it,
    )?;
    let Iterate {
        mut x, ns, cstats, ..
    } = it;
    let mut stats = StepStats {
        iterations: ns.iterations,
        converged: ns.converged,
        newton: Some(ns.clone()),
        ..Default::default()
    };
    let outcome = ContactOutcome {
        ncp,
        penalty_force,
        stats: cstats,
    };
    sim.contact_finish(frame, outcome, (x_t, v_t), &mut x, &mut stats);
    stats.time_other = t0.elapsed().as_secs_f64();
    sim.contact_time_limit(frame, &stats)?;
    if !ns.converged && sim.config.on_nonconvergence == crate::model::OnNonConvergence::Error {
        return Err(SolverError::NewtonNotConverged {
            frame,
            iterations: ns.iterations,
            relative_gradient: ns.relative_gradient,
            tol: cfg.tol,
        });
    }
    Ok((x, stats))
}

/// The direct fallback of the PD method's accurate mode (`[solver] direct_fallback`):
/// Newton iterations on the step's PD energy from `x` (the settings of `method = "newton"`
/// with the PD energy; contacts not modelled), stopping at $\|\nabla g\|\le$ `target` on the
/// free DoFs (the PD force residual, $\nabla g=Ax-b(x)$), the iteration cap, or when no
/// further decrease is possible (without the round-off stop of `method = "newton"`: the
/// caller tests the residual itself). `y` is the step's inertial target. `x` is left at the
/// last accepted iterate: the energy never increases.
pub fn solve_from(
    sim: &mut StepContext,
    frame: usize,
    (x_t, y): (&[f64], &[f64]),
    x: &mut Vec<f64>,
    target: f64,
) -> Result<NewtonStats, SolverError> {
    let mut cfg = sim.config.newton;
    cfg.energy = crate::model::NewtonEnergy::Pd;
    let ev = evaluate(sim, cfg.energy, x, y, x_t, (true, false));
    // the test is relative to the energy's gradient scale: fixed at the start so that
    // it means `target`
    cfg.tol = target / ev.scale.max(f64::MIN_POSITIVE);
    let mut it = Iterate::new(std::mem::take(x), ev, ContactStats::default());
    let csettings = contact::SolveSettings {
        cancel: sim.cancel.clone(),
        ..contact_settings(sim.model)
    };
    let result = run(
        sim,
        (cfg, csettings),
        (x_t, y),
        (frame, false),
        &mut None,
        &mut it,
    );
    *x = it.x;
    result.map(|_| it.ns)
}

/// [`StepCtx::iterate`] on `it` with the simulator's persistent Newton system (pattern and
/// symbolic factor: taken from `sim`, created on first use, and put back); `roundoff_stop`
/// enables the round-off stop (module docs of [`super`]).
fn run(
    sim: &mut StepContext,
    (cfg, csettings): (
        crate::solver::records::config::NewtonConfig,
        contact::SolveSettings,
    ),
    (x_t, y): (&[f64], &[f64]),
    (frame, roundoff_stop): (usize, bool),
    ncp: &mut Option<(ContactSet, Vec<f64>)>,
    it: &mut Iterate,
) -> Result<(), SolverError> {
    let mut sys = sim
        .newton_system
        .take()
        .unwrap_or_else(|| Box::new(NewtonSystem::new(sim.model, &sim.prescribed)));
    let ctx = StepCtx {
        sim: &*sim,
        cfg,
        y,
        x_t,
        csettings,
        frame,
        roundoff_stop,
    };
    let result = ctx.iterate(&mut sys, ncp, it);
    sim.newton_system = Some(sys);
    result
}

/// The constants of one Newton step: the simulator, the settings, the inertial target $y$,
/// the step start $x_t$ and the contact solve settings.
struct StepCtx<'a> {
    sim: &'a StepContext<'a>,
    cfg: crate::solver::records::config::NewtonConfig,
    y: &'a [f64],
    x_t: &'a [f64],
    csettings: contact::SolveSettings,
    frame: usize,
    /// `method = "newton"` (not the PD method's direct fallback): the round-off stop (without
    /// contact), the whole local steps and the torque-free stresses apply.
    roundoff_stop: bool,
}

/// The state of the Newton iteration of one step.
struct Iterate {
    x: Vec<f64>,
    /// Energy, gradient and per-sample Hessians at `x`.
    ev: Eval,
    ns: NewtonStats,
    cstats: ContactStats,
    /// The trust-region filter's choice (clamp vs abs) for the next factorization.
    tr_clamp: bool,
    /// PPN's progressive threshold δ.
    ppn_delta: f64,
    /// The smallest $\|\nabla g\|$ so far and the iterations in a row, ending at or above
    /// half of it, whose $\|\nabla g\|$ was at the round-off floor (the round-off stop).
    best_gradient: f64,
    stalls: usize,
    /// The last line search found no decrease down to a trial step below
    /// $\epsilon\|x\|_\infty$.
    line_search_exhausted: bool,
}

impl Iterate {
    /// The iteration's start: `x` with its evaluation `ev`, no iterations yet.
    fn new(x: Vec<f64>, ev: Eval, cstats: ContactStats) -> Self {
        Iterate {
            x,
            ev,
            ns: NewtonStats::default(),
            cstats,
            tr_clamp: false,
            ppn_delta: f64::INFINITY,
            best_gradient: f64::INFINITY,
            stalls: 0,
            line_search_exhausted: false,
        }
    }
}

impl StepCtx<'_> {
    /// Newton iterations from `it` until the gradient test (and, with contact, the NCP
    /// tolerance) holds, the cap, or no further decrease is possible: per iteration factor the
    /// filtered Hessian $H$, take $\delta=-H^{-1}\nabla g$ and line-search it
    /// ([`StepCtx::descent_step`]) or, with contacts, project it onto the NCP
    /// ([`StepCtx::contact_step`]).
    fn iterate(
        &self,
        sys: &mut NewtonSystem,
        ncp: &mut Option<(ContactSet, Vec<f64>)>,
        it: &mut Iterate,
    ) -> Result<(), SolverError> {
        let (cfg, simr) = (&self.cfg, self.sim);
        loop {
            if !it.ev.finite {
                return Err(SolverError::Diverged {
                    frame: self.frame,
                    iteration: it.ns.iterations,
                    element: None,
                });
            }
            let kk = ncp.as_ref().map(|(set, lambda)| {
                kkt(simr, &it.ev.grad, set, lambda, &it.x, &self.csettings.fb)
            });
            let (gn, scale, contact_ok) = match &kk {
                Some(k) => (
                    k.residual,
                    it.ev.scale + k.force,
                    k.phi_inf <= self.csettings.tolerance,
                ),
                None => (norm(&it.ev.grad), it.ev.scale, true),
            };
            it.ns.relative_gradient = gn / scale.max(f64::MIN_POSITIVE);
            if (gn <= cfg.tol * scale || gn == 0.0) && contact_ok {
                it.ns.converged = true;
                return Ok(());
            }
            let roundoff_stop = self.roundoff_stop && kk.is_none();
            if roundoff_stop && self.stalled_at_roundoff(sys, it, gn, scale) {
                return Ok(());
            }
            if it.ns.iterations >= cfg.max_iterations {
                return Ok(());
            }
            simr.cancel
                .poll(crate::cancel::Stage::Newton, it.ns.iterations)
                .map_err(|c| SolverError::cancelled(self.frame, c))?;
            let policy = FilterPolicy {
                filter: cfg.filter,
                tr_clamp: it.tr_clamp,
                ppn_delta: &mut it.ppn_delta,
            };
            factor_filtered(
                simr,
                sys,
                policy,
                (&mut it.ev.hess, &it.ev.grad),
                &mut it.ns,
            )?;
            let neg: Vec<f64> = it.ev.grad.iter().map(|v| -v).collect();
            let delta = sys.solve(&neg)?;
            let go_on = match (ncp.as_mut(), kk.as_ref()) {
                (Some((set, lambda)), Some(k0)) => self
                    .contact_step(sys, (set, lambda), k0, &delta, (scale, contact_ok), it)
                    .map_err(|e| SolverError::linalg(self.frame, e))?,
                _ => self.descent_step(neg, delta, it),
            };
            if !go_on {
                if roundoff_stop && it.ns.converged && kk.is_none() {
                    // the Newton step reached machine precision before the gradient test:
                    // converged to round-off, logged with the floor
                    let floor = self.roundoff_floor(sys, it);
                    it.ns.roundoff_floor = Some(floor / scale.max(f64::MIN_POSITIVE));
                    it.ns.stop = Some(ROUNDOFF_STOP);
                }
                if roundoff_stop && it.line_search_exhausted {
                    // no decrease at steps below ε‖x‖: round-off if ∇g is at its floor
                    let floor = self.roundoff_floor(sys, it);
                    if gn <= floor {
                        it.ns.roundoff_floor = Some(floor / scale.max(f64::MIN_POSITIVE));
                        it.ns.converged = true;
                        it.ns.stop = Some(ROUNDOFF_STOP);
                    }
                }
                return Ok(());
            }
        }
    }

    /// The round-off floor of $\|\nabla g\|$ at the iterate: $c\,\epsilon\,\||K|\,|x|\|_2$
    /// ([`roundoff_scale`], $c$ = [`ROUNDOFF_C`]).
    fn roundoff_floor(&self, sys: &NewtonSystem, it: &Iterate) -> f64 {
        ROUNDOFF_C * f64::EPSILON * roundoff_scale(self.sim, sys, &it.ev.hess, &it.x)
    }

    /// The round-off stop (module docs of [`super`]): an iteration that did not halve the
    /// smallest $\|\nabla g\|$ so far, ending with $\|\nabla g\|$ at the round-off floor
    /// ([`StepCtx::roundoff_floor`]), is a stall; [`ROUNDOFF_K`] stalls in a row end the step
    /// as converged (`stop` = [`ROUNDOFF_STOP`]). Returns whether the step ends. The floor is
    /// only computed after an iteration without progress, so converging steps pay nothing.
    fn stalled_at_roundoff(
        &self,
        sys: &NewtonSystem,
        it: &mut Iterate,
        gn: f64,
        scale: f64,
    ) -> bool {
        let progress = gn <= 0.5 * it.best_gradient;
        it.best_gradient = it.best_gradient.min(gn);
        if progress {
            it.stalls = 0;
            return false;
        }
        let floor = self.roundoff_floor(sys, it);
        if gn > floor {
            it.stalls = 0;
            return false;
        }
        it.stalls += 1;
        it.ns.roundoff_floor = Some(floor / scale.max(f64::MIN_POSITIVE));
        if it.stalls >= ROUNDOFF_K {
            it.ns.converged = true;
            it.ns.stop = Some(ROUNDOFF_STOP);
            return true;
        }
        false
    }

    /// Newton step with contact: the quadratic model's minimiser $u=x-H^{-1}\nabla g$
    /// projected onto the NCP ($X=H^{-1}J^T$, $\hat x=u+X\hat\lambda$, [`contact::solve`]),
    /// then a backtracking line search on the KKT merit
    /// $(\|r\|/\epsilon s)^2+(\|\Phi\|_2/\epsilon_c)^2$ along $(\hat x-x,\hat\lambda-\lambda)$.
    /// Returns `false` when the iteration stops (step at round-off, or no merit decrease);
    /// a failed solve with the factor is the error.
    fn contact_step(
        &self,
        sys: &NewtonSystem,
        (set, lambda): (&ContactSet, &mut Vec<f64>),
        k0: &Kkt,
        delta: &[f64],
        (scale, contact_ok): (f64, bool),
        it: &mut Iterate,
    ) -> Result<bool, LinalgError> {
        let (cfg, simr, csettings) = (&self.cfg, self.sim, &self.csettings);
        let fb = csettings.fb;
        let x = &it.x;
        // Quadratic model + contact NCP: u = x − H⁻¹∇g, X = H⁻¹Jᵀ, x̂ = u + Xλ̂.
        let tc = Instant::now();
        let u: Vec<f64> = x.iter().zip(delta).map(|(a, b)| a + b).collect();
        let fac = NewtonFactor {
            sys,
            k: None,
            n: simr.model.num_nodes(),
        };
        let del = Delassus::new(set, &fac)?;
        let mut lam_new = lambda.clone();
        let mut cache = None;
        let info = contact::solve(set, &del, &fac, &u, &mut lam_new, csettings, &mut cache)?;
        it.cstats.newton_iterations += info.iterations;
        it.cstats.factorizations += info.factorizations;
        if info.timed_out {
            // out of time (contact.max_seconds): the step ends non-converged
            it.cstats.time_limit_iteration = Some(it.ns.iterations);
            it.cstats.seconds_solve += tc.elapsed().as_secs_f64();
            return Ok(false);
        }
        let mut xhat = u;
        del.add_x(set, &fac, &lam_new, &mut xhat)?;
        it.cstats.seconds_solve += tc.elapsed().as_secs_f64();
        let dx: Vec<f64> = xhat.iter().zip(x).map(|(a, b)| a - b).collect();
        let dl: Vec<f64> = lam_new
            .iter()
            .zip(lambda.iter())
            .map(|(a, b)| a - b)
            .collect();
        let xmax = x.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        let dmax = dx.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        let lmax = lambda.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        let dlmax = dl.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        if dmax <= 8.0 * f64::EPSILON * (xmax + 1e-300)
            && dlmax <= 8.0 * f64::EPSILON * (lmax + 1e-300)
        {
            // at round-off: nothing left to improve
            it.ns.converged = contact_ok;
            return Ok(false);
        }
        let sf = (cfg.tol * scale).max(f64::MIN_POSITIVE);
        let sc = csettings.tolerance.max(f64::MIN_POSITIVE);
        let merit = |k: &Kkt| (k.residual / sf).powi(2) + (k.phi_2 / sc).powi(2);
        let m0 = merit(k0);
        let mut step = 1.0;
        let mut accepted = None;
        for _ in 0..40 {
            let xt: Vec<f64> = x.iter().zip(&dx).map(|(a, b)| a + step * b).collect();
            let lt: Vec<f64> = lambda.iter().zip(&dl).map(|(a, b)| a + step * b).collect();
            let et = evaluate(
                simr,
                cfg.energy,
                &xt,
                self.y,
                self.x_t,
                (false, self.roundoff_stop),
            );
            if et.finite {
                let mt = merit(&kkt(simr, &et.grad, set, &lt, &xt, &fb));
                if mt <= (1.0 - 1e-4 * step) * m0 {
                    accepted = Some((xt, lt));
                    break;
                }
            }
            step *= 0.5;
            it.ns.line_search_halvings += 1;
        }
        let Some((xt, lt)) = accepted else {
            // no decrease of the KKT merit possible (round-off): stop here
            return Ok(false);
        };
        it.x = xt;
        *lambda = lt;
        it.tr_clamp = false;
        it.ns.iterations += 1;
        it.ev = evaluate(
            simr,
            cfg.energy,
            &it.x,
            self.y,
            self.x_t,
            (true, self.roundoff_stop),
        );
        Ok(true)
    }

    /// Newton step without contact: Armijo backtracking on the energy along $\delta$
    /// (a scaled gradient step if $\delta$ is not a descent direction), accepting at
    /// round-off a step that lowers $\|\nabla g\|$; a full step sets the trust-region
    /// filter's clamp when $\rho=\Delta E/\text{pred}$ is within [`crate::solver::adjoint::trust_region::ETA`]
    /// of 1. Returns `false` when the iteration stops (step at machine precision: converged;
    /// or no decrease possible).
    fn descent_step(&self, neg: Vec<f64>, mut delta: Vec<f64>, it: &mut Iterate) -> bool {
        let (cfg, simr) = (&self.cfg, self.sim);
        it.line_search_exhausted = false;
        let (x, ev) = (&it.x, &it.ev);
        let mut slope: f64 = ev.grad.iter().zip(&delta).map(|(a, b)| a * b).sum();
        if slope.is_nan() || slope >= 0.0 {
            // not a descent direction (cannot happen with an SPD factor): gradient step
            delta = neg.iter().map(|v| v / ev.scale.max(1.0)).collect();
            slope = ev.grad.iter().zip(&delta).map(|(a, b)| a * b).sum();
        }
        // a Newton step at machine precision: the iterate cannot improve further
        let xmax = x.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        let dmax = delta.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        if dmax <= 8.0 * f64::EPSILON * (xmax + 1e-300) {
            it.ns.converged = true;
            return false;
        }
        // a Newton step this small against the step's motion is inside the quadratic
        // model's region, where the energy's round-off hides the decrease the line search
        // tests (module docs of [`super`], "local steps"): take it whole
        let motion = x
            .iter()
            .zip(self.x_t)
            .fold(0.0f64, |a, (p, q)| a.max((p - q).abs()));
        if self.roundoff_stop && dmax <= LOCAL_STEP * motion {
            let next: Vec<f64> = x.iter().zip(&delta).map(|(a, b)| a + b).collect();
            it.x = next;
            it.tr_clamp = false;
            it.ns.iterations += 1;
            it.ev = evaluate(
                simr,
                cfg.energy,
                &it.x,
                self.y,
                self.x_t,
                (true, self.roundoff_stop),
            );
            return true;
        }
        // predicted decrease of the quadratic model at the full step: −½ gᵀδ (Newton)
        let pred = -0.5 * slope;
        let mut step = 1.0;
        let mut accepted = None;
        for _ in 0..40 {
            let trial: Vec<f64> = x.iter().zip(&delta).map(|(a, b)| a + step * b).collect();
            let et = evaluate(
                simr,
                cfg.energy,
                &trial,
                self.y,
                self.x_t,
                (false, self.roundoff_stop),
            );
            let roundoff = -slope * step <= 1e-13 * (ev.energy.abs() + 1.0);
            if et.finite
                && (et.energy <= ev.energy + 1e-4 * step * slope
                    || (roundoff && norm(&et.grad) < norm(&ev.grad)))
            {
                accepted = Some((trial, et.energy));
                break;
            }
            step *= 0.5;
            it.ns.line_search_halvings += 1;
        }
        let Some((trial, e_new)) = accepted else {
            // no decrease possible at round-off: stop here (the caller checks the floor)
            it.line_search_exhausted = step * dmax <= f64::EPSILON * xmax;
            return false;
        };
        if step == 1.0 && pred > 0.0 {
            let rho = (ev.energy - e_new) / pred;
            it.tr_clamp = (rho - 1.0).abs() < crate::solver::adjoint::trust_region::ETA;
        } else {
            it.tr_clamp = false;
        }
        it.x = trial;
        it.ns.iterations += 1;
        it.ev = evaluate(
            simr,
            cfg.energy,
            &it.x,
            self.y,
            self.x_t,
            (true, self.roundoff_stop),
        );
        true
    }
}
