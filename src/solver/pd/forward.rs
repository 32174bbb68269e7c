//! Forward time stepping (spec §6): implicit Euler solved by Projective Dynamics with the
//! persistent factor of $A$ (Eq. 31), bounded Anderson acceleration (Eqs. 18–21) and the
//! dual gate (Eq. 22).
//!
//! One step, from $(x_t,v_t)$:
//! $y=x_t+hv_t+h^2M^{-1}f_{ext}$; $c=\tfrac1{h^2}My+\tfrac1h\mathcal Dx_t$;
//! iterate $x^{k+1}=\mathrm{AA}\big(A^{-1}(c+b_p(x^k))\big)$ from $x^0=x_t$ (Dirichlet values
//! imposed) until the dual gate holds; $v_{t+1}=(x_{t+1}-x_t)/h$.
//!
//! The solves and residuals work on the step's displacement $u=x-x_t$ (`StepRhs`), not on
//! absolute positions: round-off of $A x$ grows with $\|A\|\,\|x\|$ and its translational
//! part is amplified by $h^2/m$ in the solve, which cost stiff bodies (E = 1e9) and bodies
//! far from the origin 3–4 digits (docs/NOTES.md "Precision for stiff and distant bodies").

use super::anderson::TypeII;
use crate::cancel::Stage;
use crate::contact::{self, ContactSet, ContactStats, Delassus};
use crate::linalg::{LinalgError, LinearSolver};
use crate::model::{GateReference, OnNonConvergence, SolverMode};
use crate::solver::error::SolverError;
use crate::solver::gate::{DualGate, GateResiduals};
use crate::solver::local;
use crate::solver::newton;
use crate::solver::offload::OffloadError;
use crate::solver::simulator::{contact_settings, norm, ContactOutcome, Simulator};
use crate::solver::stats::{StepStats, TrStats};
use nalgebra::Matrix3;
use std::time::Instant;

impl Simulator<'_> {
    /// One implicit-Euler step of the PD method producing frame `frame` (1-based) from
    /// $(x_t, v_t)$. Returns $x_{t+1}$ and the step statistics.
    ///
    /// `mode = "paper"`: Anderson-PD until the dual gate (then the optional `newton_polish`).
    /// `mode = "accurate"`: Anderson-PD until the dual gate, then Newton–Krylov steps
    /// ([`Simulator::newton_krylov`]) until the force-balance test
    /// $\|b(x)-Ax\|\le\epsilon_{res}\|b(x^0)-Ax^0\|$ + floor holds; where the Newton steps do not
    /// apply (active NCP contacts) or stall, PD iterations go on under the same residual test.
    pub(crate) fn step_pd(
        &mut self,
        aa: &mut TypeII,
        frame: usize,
        x_t: &[f64],
        v_t: &[f64],
    ) -> Result<(Vec<f64>, StepStats), SolverError> {
        let PdStart {
            f_ext,
            penalty_force,
            rhs,
            x,
            ncp,
            cstats,
        } = self.begin_pd(frame, x_t, v_t)?;
        let guard0 = aa.guard_firings();
        aa.reset();
        let accurate = self.config.mode == SolverMode::Accurate;
        let mut it = PdLoop::new(x, ncp, cstats);
        let mut stop = if accurate {
            Stop::GateThenPolish
        } else {
            Stop::Gate
        };
        let resident = self.runs_resident(&it);
        let converged = loop {
            let exit = if resident {
                self.pd_iterate_resident(aa, frame, &rhs, &mut it, stop)?
            } else {
                self.pd_iterate(aa, frame, &rhs, &mut it, stop)?
            };
            match exit {
                Exit::Converged => break true,
                Exit::Cap => break false,
                Exit::GateMet => {
                    // accurate mode: the dual gate is the hand-over point to Newton–Krylov
                    let y = self.inertial_target(x_t, v_t, &f_ext);
                    let handed = self
                        .hand_over((x_t, &y), &rhs, &mut it)
                        .map_err(|error| SolverError::offload(frame, it.k, error))?;
                    if handed || self.direct_fallback(frame, (x_t, &y), &rhs, &mut it)? {
                        break true;
                    }
                    // PD goes on from the (never worse) iterate under the residual test, with
                    // the contact solved as tightly as that test can see
                    aa.reset();
                    self.residual_contact_tolerance(&mut it);
                    stop = Stop::Residual;
                }
            }
        };
        let PdLoop {
            mut x,
            k,
            mut ncp,
            cstats,
            mut stats,
            last_gate,
            x_before,
            b_before,
            residual,
            r0,
            ..
        } = it;
        if accurate && converged && ncp.is_none() {
            let t0 = Instant::now();
            self.refine(&rhs, &mut x)
                .map_err(|error| SolverError::solve(frame, k, error))?;
            stats.time_other += t0.elapsed().as_secs_f64();
        }
        // Newton polish does not model NCP contact (penalty forces are explicit, in f_ext).
        if self.config.newton_polish > 0 && converged && ncp.is_none() {
            self.polish_into(&rhs, &mut x, &mut stats)
                .map_err(|error| SolverError::offload(frame, k, error))?;
        }
        let outcome = ContactOutcome {
            ncp: ncp.take().map(|(set, _, lambda)| (set, lambda)),
            penalty_force,
            stats: cstats,
        };
        self.contact_finish(frame, outcome, (x_t, v_t), &mut x, &mut stats);
        stats.iterations = k;
        stats.converged = converged;
        stats.gate = last_gate;
        if accurate {
            stats.residual = Some(if r0.is_some() {
                residual
            } else {
                f64::INFINITY
            });
        }
        stats.anderson_guard_firings = aa.guard_firings() - guard0;
        if self.compute_tr && !x_before.is_empty() {
            let tr = self.tr_stats(x_t, v_t, &f_ext, &x_before, &b_before, &x);
            stats.tr = Some(tr.map_err(|error| SolverError::offload(frame, k, error))?);
        }
        self.nonconvergence(frame, &stats)?;
        Ok((x, stats))
    }

    /// `mode = "accurate"`: PD iterations after which the Newton–Krylov phase (and its direct
    /// fallback) takes over even if the dual gate is not met. Converging frames reach the gate
    /// in ≈ 30–130 iterations (the armadillo's 1000× bands ≈ 400); on buckling steps Anderson-PD
    /// wandered for 1,500 iterations before the gate (a 12-hex column at 6 m/s).
    pub const HAND_OVER_AFTER: usize = 100;

    /// The dual gate, or in accurate mode (`Stop::GateThenPolish`) the hand-over budget
    /// [`Self::HAND_OVER_AFTER`] (not for a gate tighter than 1e-5: that is an accuracy
    /// request, e.g. of the gradient checks, and is waited for).
    pub(in crate::solver) fn gate_or_budget(
        &self,
        stop: Stop,
        k: usize,
        gate: &GateResiduals,
    ) -> bool {
        DualGate::met(gate)
            || (stop == Stop::GateThenPolish
                && k + 1 >= Self::HAND_OVER_AFTER
                && self.config.gate.rel >= 1e-5)
    }

    /// `mode = "accurate"` at the dual gate: Newton–Krylov steps ([`Simulator::newton_krylov`])
    /// from `it.x` towards the force-balance target ([`Simulator::residual_target`]), unless
    /// an NCP contact carries load. The result is kept (returns `true`: step converged) when
    /// it converged and, with contacts, stays out of the obstacles ($\delta_n\ge-$tolerance);
    /// otherwise `false` is returned with `it.x` at the last accepted Newton–Krylov iterate
    /// (never worse than PD's), or at the PD iterate where the contacts refused the result.
    /// `y` is the step's inertial target.
    /// An accelerator failure in the Newton–Krylov phase is the error.
    fn hand_over(
        &mut self,
        (x_t, y): (&[f64], &[f64]),
        rhs: &StepRhs,
        it: &mut PdLoop,
    ) -> Result<bool, OffloadError> {
        let model = self.model;
        let r_target = self.residual_target(it);
        if !Self::contacts_unloaded(it) {
            return Ok(false);
        }
        let t0 = Instant::now();
        let before = it.x.clone();
        // the PD energy is the objective unless muscles or compliant
        // attachments add terms it does not hold
        let energy = (model.muscles.is_empty() && model.attachments.is_empty()).then_some((y, x_t));
        let out = self.newton_krylov(rhs, energy, &mut it.x, r_target)?;
        it.stats.polish_steps += out.steps;
        it.stats.polish_gmres_iterations += out.gmres_iterations;
        it.stats.time_other += t0.elapsed().as_secs_f64();
        let ok = out.converged && self.keep_unconstrained(it, before);
        if ok {
            it.residual = out.residual / it.r0.unwrap_or(1.0).max(f64::MIN_POSITIVE);
        }
        Ok(ok)
    }

    /// Whether the unconstrained phases (Newton–Krylov, the direct fallback) may run: no NCP
    /// contact carries load.
    fn contacts_unloaded(it: &PdLoop) -> bool {
        it.ncp
            .as_ref()
            .is_none_or(|(_, _, l)| l.iter().all(|v| *v == 0.0))
    }

    /// An unconstrained phase ignores the (inactive) contacts: keep its converged result only
    /// if it stays out of the obstacles ($\delta_n\ge-$tolerance), else restore `before`.
    fn keep_unconstrained(&self, it: &mut PdLoop, before: Vec<f64>) -> bool {
        let Some((set, _, _)) = it.ncp.as_ref() else {
            return true;
        };
        let tol = contact_settings(self.model).tolerance;
        let delta = set.delta(&it.x);
        let ok = (0..set.len()).all(|j| delta[set.rows(j).start] >= -tol);
        if !ok {
            it.x = before;
        }
        ok
    }

    /// `[solver] direct_fallback` after a failed Newton–Krylov phase: Newton's method with the
    /// direct solver on the same PD energy ([`crate::solver::newton::solve_from`]) from the
    /// current iterate, to the residual target. The Newton–Krylov steps fail where the step
    /// energy is not convex (measured: the Plant's stems buckling on 15 of 200 frames, where
    /// the matrix-free Newton directions stalled and Anderson-PD then ran to its 5,000
    /// iteration cap); the factored, shifted Hessian gets through in a few iterations.
    /// Returns `true` when the step converged; the frame's Newton statistics are logged.
    fn direct_fallback(
        &mut self,
        frame: usize,
        (x_t, y): (&[f64], &[f64]),
        rhs: &StepRhs,
        it: &mut PdLoop,
    ) -> Result<bool, SolverError> {
        if !self.config.direct_fallback || !Self::contacts_unloaded(it) {
            return Ok(false);
        }
        let t0 = Instant::now();
        let target = self.residual_target(it);
        let before = it.x.clone();
        let ns = newton::solve_from(self, frame, (x_t, y), &mut it.x, 0.5 * target)?;
        let rn = self
            .pd_residual(rhs, &it.x)
            .map(|(r, _)| norm(&r))
            .unwrap_or(f64::INFINITY);
        it.stats.newton = Some(ns);
        it.stats.time_other += t0.elapsed().as_secs_f64();
        let ok = rn <= target && self.keep_unconstrained(it, before);
        if ok {
            it.residual = rn / it.r0.unwrap_or(1.0).max(f64::MIN_POSITIVE);
        }
        Ok(ok)
    }

    /// One more PD iteration, in correction form: $x\leftarrow x+A^{-1}r(x)$ with the force
    /// residual $r(x)=b(x)-Ax$ assembled without large cancellations (`mode = "accurate"`, at
    /// the end of a converged step without NCP contact). With $u=x-x_t$ and [`StepRhs`]:
    /// $r=c_u-\big(\tfrac{M}{h^2}+\tfrac{\alpha M}{h}+K_{att}\big)u
    /// +\sum_sG_s^T\mathrm{vec}\big(Q_s(x)-w_sF_s(x)-\tfrac{\beta_ew_s}{h}(F_s(x)-F_s(x_t))
    /// -w_m(F_s\mathsf m)\mathsf m^T\big)$ (the same $r$ as $c_u+b_{p,u}-Au$ in exact
    /// arithmetic, since $G_su=F_s(x)-F_s(x_t)$). The elastic part passes through $G_s^T$ and
    /// so carries no net force, whereas $Au$ from the stored matrix has a rounding error of
    /// $\epsilon\|A\|\|u\|$ with a translational part that the solve divides by $m/h^2$. A
    /// stiff body's step (E = 1e9) was off by that, ≈ 3e-12 of its displacement (9e-12 on
    /// tets); this step removes it. Mathematically it is the PD map $A^{-1}b(x)$ itself,
    /// so it only moves a converged $x$ by a PD step. Skipped if the local step is not finite;
    /// fails where the solve does.
    fn refine(&mut self, rhs: &StepRhs, x: &mut [f64]) -> Result<(), LinalgError> {
        let model = self.model;
        let h = model.h;
        let Ok(loc) = local::project_all(model, &self.derived, x, &mut self.warm) else {
            return Ok(());
        };
        let d = &self.derived;
        let mut lin: Vec<Matrix3<f64>> = (0..model.num_samples())
            .map(|s| {
                let w = d.w_total(s);
                let f = model.deformation_gradient(s, x);
                let ft = model.deformation_gradient(s, &rhs.x_t);
                f * w + (f - ft) * (d.beta[model.samples.elem[s]] * w / h)
            })
            .collect();
        crate::solver::muscle::add_linear_terms(model, x, &mut lin);
        for (l, q) in lin.iter_mut().zip(&loc.q) {
            *l = q - *l;
        }
        let mut r = vec![0.0; x.len()];
        local::scatter(model, &lin, &mut r);
        let k_att = crate::model::attachment::matrix_diagonal(&model.attachments, x.len() / 3);
        for (j, rj) in r.iter_mut().enumerate() {
            let i = j / 3;
            let diag = d.mass[i] * (1.0 / (h * h) + d.node_alpha[i] / h) + k_att[i];
            *rj += rhs.c[j] - diag * (x[j] - rhs.x_t[j]);
        }
        self.zero_prescribed(&mut r);
        let mut delta = vec![0.0; x.len()];
        self.system.solve_homogeneous(&r, &mut delta)?;
        if delta.iter().all(|v| v.is_finite()) {
            for (xj, dj) in x.iter_mut().zip(&delta) {
                *xj += dj;
            }
        }
        Ok(())
    }

    /// Round-off floor of the force-balance test, relative to the absolute-form
    /// $b=b_u+Ax_t$: the iterates are stored as positions, whose rounding ($\epsilon\|x\|$)
    /// $A$ turns into a residual of that order.
    fn residual_floor(&self, x_t: &[f64], b_u: &[f64]) -> f64 {
        let mut bf = vec![0.0; x_t.len()];
        self.system.apply_a(x_t, &mut bf);
        for (f, bu) in bf.iter_mut().zip(b_u) {
            *f += bu;
        }
        self.zero_prescribed(&mut bf);
        crate::solver::gate::RESIDUAL_FLOOR * norm(&bf)
    }

    /// Absolute force-balance target of `mode = "accurate"`: `residual_tol`$\cdot\|r^0\|$ + floor.
    pub(in crate::solver) fn residual_target(&self, it: &PdLoop) -> f64 {
        self.config.residual_tol * it.r0.unwrap_or(0.0) + it.floor
    }

    /// Contact tolerance of the force-balance phase (accurate mode, NCP contacts), set in
    /// `it.contact_tol`; raises `it.floor` where round-off bounds it.
    ///
    /// The per-iteration NCP solve stops at $\|\Phi\|_\infty\le$ `tol`: the contact rows of the
    /// projected global step are off by up to `tol` (m), so its multipliers, and the force
    /// residual $A g$ the test measures, by up to $\|J^TW^{-1}\|\sqrt m\,$`tol`
    /// $\le\lambda_{max}(A)\sqrt m\,$`tol` ($m$ contact rows; $\lambda_{max}$ bounded by
    /// the largest absolute row sum of $A$). Where that is above the residual target, the
    /// iteration map is not the smooth projection the residual converges under: the solve
    /// takes a Newton step only on the iterations where the change of the PD step pushes
    /// $\|\Phi\|$ past `tol`, the multipliers jump by up to that noise, and Anderson (or
    /// plain PD) stagnates at it. Measured: a 2×2×1 block resting on a plane with friction
    /// 0.5 (sticking), `contact.tolerance = 1e-12`, hand-over at `rel_tol = 1e-10`: residual
    /// stuck at 5e-9 … 5e-8 against a target of 2.2e-10, 5000 iterations on frame 11; looser
    /// contact tolerances froze the multipliers (a smooth map), tighter ones were solved
    /// past the noise. So the solve is tightened to half the target's share,
    /// `target / (2 λmax √m)`, not below its round-off `64 ε ‖x‖∞` (the target is then raised
    /// to what that round-off allows) and never looser than `contact.tolerance`; the contact
    /// conditions themselves are still tested against `contact.tolerance`.
    fn residual_contact_tolerance(&self, it: &mut PdLoop) {
        let Some((set, _, _)) = it.ncp.as_ref() else {
            return;
        };
        let strict = contact_settings(self.model).tolerance;
        let gain = self.system.a.max_abs_col_sum() * (set.nrows().max(1) as f64).sqrt();
        let roundoff = 64.0 * f64::EPSILON * it.x.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let tol = (0.5 * self.residual_target(it) / gain)
            .max(roundoff)
            .min(strict);
        it.floor = it
            .floor
            .max(2.0 * gain * tol - self.config.residual_tol * it.r0.unwrap_or(0.0));
        it.contact_tol = Some(tol);
    }

    /// PD iterations (Anderson-accelerated) from `it.x` until `stop` says so or the cap.
    fn pd_iterate(
        &mut self,
        aa: &mut TypeII,
        frame: usize,
        rhs: &StepRhs,
        it: &mut PdLoop,
        stop: Stop,
    ) -> Result<Exit, SolverError> {
        let (x_t, xd) = (rhs.x_t.as_slice(), rhs.xd.as_slice());
        let csettings = contact_settings(self.model);
        let solve_settings = contact::SolveSettings {
            tolerance: it.contact_tol.unwrap_or(csettings.tolerance),
            cancel: self.cancel.clone(),
            ..csettings
        };
        let n3 = it.x.len();
        let mut ag = vec![0.0; n3];
        while it.k < self.config.max_iterations {
            let k = it.k;
            self.cancel
                .poll(Stage::Pd, k)
                .map_err(|c| SolverError::cancelled(frame, c))?;
            let t0 = Instant::now();
            self.local_rhs(frame, k, &it.x, rhs, &mut it.bp)?;
            let t1 = Instant::now();
            // displacement form: A û = c_u + b_p,u(x), x̂ = x_t + û
            let b: Vec<f64> = rhs.c.iter().zip(&it.bp).map(|(a, b)| a + b).collect();
            self.global_solve(frame, k, &b, &rhs.xd_u, &mut it.xhat)?;
            for (xh, xt) in it.xhat.iter_mut().zip(x_t) {
                *xh += xt;
            }
            self.impose_prescribed(&mut it.xhat, xd);
            let t2 = Instant::now();
            if let Some(ncp) = it.ncp.as_mut() {
                // Contact projection of the global step (spec §6.2 steps 10–18).
                let info = project_contact(
                    ncp,
                    self.contact_solver(),
                    &solve_settings,
                    &mut it.xhat,
                    &mut it.newton_cache,
                )
                .map_err(|error| SolverError::solve(frame, k, error))?;
                it.contact_ok = info.residual <= csettings.tolerance && !info.timed_out;
                if info.timed_out {
                    it.cstats.time_limit_iteration.get_or_insert(k);
                }
                it.cstats.newton_iterations += info.iterations;
                it.cstats.factorizations += info.factorizations;
                it.cstats.products += info.products;
                it.cstats.seconds_solve += t2.elapsed().as_secs_f64();
            }
            let t2c = Instant::now();
            if !it.xhat.iter().all(|v| v.is_finite()) {
                return Err(SolverError::Diverged {
                    frame,
                    iteration: k,
                    element: self.first_bad_element(&it.xhat),
                });
            }
            let g: Vec<f64> = it.xhat.iter().zip(&it.x).map(|(a, b)| a - b).collect();
            let mut converged = false;
            let mut gate_met = false;
            if stop != Stop::Gate {
                // force balance of x_k: b(x_k) + J^T λ − A x_k = A g_k on the free DoFs
                self.system.apply_a(&g, &mut ag);
                self.zero_prescribed(&mut ag);
                let rn = norm(&ag);
                if it.r0.is_none() {
                    it.r0 = Some(rn);
                    it.floor = self.residual_floor(x_t, &b);
                }
                it.residual = rn / it.r0.unwrap_or(1.0).max(f64::MIN_POSITIVE);
                if stop == Stop::Residual && rn <= self.residual_target(it) && it.contact_ok {
                    converged = true;
                }
            }
            let mut xn = aa.step(&it.x, &g);
            self.impose_prescribed(&mut xn, xd);
            if k >= 1 {
                it.last_gate = self.gate_residuals(&it.x, x_t, &g, (&it.bp, &it.bp_prev), &rhs.st);
                if stop != Stop::Residual
                    && self.gate_or_budget(stop, k, &it.last_gate)
                    && it.contact_ok
                {
                    match stop {
                        Stop::Gate => converged = true,
                        _ => gate_met = true,
                    }
                }
            }
            std::mem::swap(&mut it.bp, &mut it.bp_prev);
            if (converged || gate_met) && it.ncp.is_some() {
                // return the contact-projected global step: it satisfies the contact
                // conditions to the contact tolerance, whatever the PD tolerance
                xn = it.xhat.clone();
            }
            if self.compute_tr {
                it.x_before = std::mem::replace(&mut it.x, xn);
                it.b_before = b;
            } else {
                it.x = xn;
            }
            let t3 = Instant::now();
            it.stats.time_local += (t1 - t0).as_secs_f64();
            it.stats.time_global += (t2 - t1).as_secs_f64();
            it.stats.time_other += (t3 - t2c).as_secs_f64();
            it.k += 1;
            if it.cstats.time_limit_iteration.is_some() {
                // a contact solve out of time ends the step, non-converged
                return Ok(Exit::Cap);
            }
            if converged {
                return Ok(Exit::Converged);
            }
            if gate_met {
                return Ok(Exit::GateMet);
            }
        }
        Ok(Exit::Cap)
    }

    /// `Err(NotConverged)` for a step that missed its gate under
    /// `on_nonconvergence = "error"`.
    fn nonconvergence(&self, frame: usize, stats: &StepStats) -> Result<(), SolverError> {
        self.contact_time_limit(frame, stats)?;
        if !stats.converged && self.config.on_nonconvergence == OnNonConvergence::Error {
            return Err(SolverError::NotConverged {
                frame,
                iterations: stats.iterations,
                position: stats.gate.position,
                projection: stats.gate.projection,
            });
        }
        Ok(())
    }

    /// Newton polish of a converged step into `x`, recorded in `stats`.
    fn polish_into(
        &mut self,
        rhs: &StepRhs,
        x: &mut Vec<f64>,
        stats: &mut StepStats,
    ) -> Result<(), OffloadError> {
        let t0 = Instant::now();
        let (steps, res) = self.polish(rhs, x)?;
        stats.polish_steps = steps;
        stats.polish_residual = res;
        stats.time_other += t0.elapsed().as_secs_f64();
        Ok(())
    }

    /// The start of a PD step: forces, constant right-hand side, Dirichlet values, the
    /// first iterate and the contact set-up (spec §6.2 step 3: candidates, frozen frames,
    /// Delassus columns).
    fn begin_pd(&mut self, frame: usize, x_t: &[f64], v_t: &[f64]) -> Result<PdStart, SolverError> {
        let model = self.model;
        let h = model.h;
        let t_start = (frame - 1) as f64 * h;
        self.derived.muscle_time = frame as f64 * h;
        if let Some(off) = self.offload.as_mut() {
            off.set_muscle_time(self.derived.muscle_time);
        }
        let mut f_ext = model.external_force(t_start, &self.derived.mass);
        let penalty_force = self.penalty_forces(t_start, x_t, v_t, &mut f_ext);
        let xd = model.dirichlet_values(frame as f64 * h);
        let rhs = self.step_rhs(x_t, v_t, &f_ext, xd);
        let mut x = x_t.to_vec();
        self.impose_prescribed(&mut x, &rhs.xd);
        let t_c = Instant::now();
        let ncp = match self.contact_begin(t_start, x_t, v_t) {
            Some((set, lambda)) => {
                let del = self.step_delassus(frame, &set)?;
                Some((set, del, lambda))
            }
            None => None,
        };
        let cstats = ContactStats {
            seconds_setup: t_c.elapsed().as_secs_f64(),
            ..Default::default()
        };
        Ok(PdStart {
            f_ext,
            penalty_force,
            rhs,
            x,
            ncp,
            cstats,
        })
    }

    /// Dual-gate residuals of a PD iteration (spec Eq. 22): the position gate on the
    /// un-accelerated PD step $g_k=\Phi(x_k)-x_k$ (the mixed step $x_{k+1}-x_k$ can be tiny
    /// while Anderson stagnates far from the fixed point; measured: finite differences off by
    /// 40 % with that gate), relative to $\|x_k\|$ or $\|x_k-x_t\|$ (`gate_reference`), and
    /// the projection gate on the change of $b_p$ relative to $\|b_p\|$ (`bp`, `bp_prev` are in
    /// displacement form, $b_{p,u}=b_p-$`st`: the change is the same, the reference is
    /// $\|b_{p,u}+$`st`$\|$).
    fn gate_residuals(
        &self,
        x: &[f64],
        x_t: &[f64],
        g: &[f64],
        (bp, bp_prev): (&[f64], &[f64]),
        st: &[f64],
    ) -> GateResiduals {
        let dx = norm(g);
        let dbp = norm(
            &bp.iter()
                .zip(bp_prev)
                .map(|(a, b)| a - b)
                .collect::<Vec<_>>(),
        );
        let (xref, floor) = match self.config.gate_reference {
            GateReference::Position => (norm(x), 0.0),
            // ‖x_k − x_t‖ without a temporary (same summation order as `norm`),
            // with the round-off floor (tight tolerances, bodies at rest)
            GateReference::Displacement => (
                x.iter()
                    .zip(x_t)
                    .map(|(a, b)| (a - b) * (a - b))
                    .sum::<f64>()
                    .sqrt(),
                crate::solver::gate::DISPLACEMENT_FLOOR * norm(x),
            ),
        };
        let bp_ref = bp_prev
            .iter()
            .zip(st)
            .map(|(a, b)| (a + b) * (a + b))
            .sum::<f64>()
            .sqrt();
        self.config.gate.evaluate(dx, xref, floor, dbp, bp_ref)
    }

    /// The local step and its gather in displacement form,
    /// $b_{p,u}=\sum_sG_s^T\mathrm{vec}(Q_s(x)-Q^t_s)$ ([`StepRhs`]; spec §6.2 steps 6–7), on the
    /// accelerator if the simulator has one (there $b_p$ minus the gathered $Q^t$).
    fn local_rhs(
        &mut self,
        frame: usize,
        k: usize,
        x: &[f64],
        rhs: &StepRhs,
        bp: &mut [f64],
    ) -> Result<(), SolverError> {
        if let Some(off) = self.offload.as_mut() {
            off.local_rhs(x, bp)
                .map_err(|error| SolverError::offload(frame, k, error))?;
            if bp.iter().all(|v| v.is_finite()) {
                for (b, st) in bp.iter_mut().zip(&rhs.st) {
                    *b -= st;
                }
                return Ok(());
            }
            return Err(self.device_local_failure(frame, k, x));
        }
        let mut loc =
            local::project_all(self.model, &self.derived, x, &mut self.warm).map_err(|e| {
                SolverError::NonFiniteLocal {
                    frame,
                    iteration: k,
                    element: e.element,
                }
            })?;
        for (q, qt) in loc.q.iter_mut().zip(&rhs.qt) {
            *q -= qt;
        }
        local::scatter(self.model, &loc.q, bp);
        Ok(())
    }

    /// The error of a local step that is not finite on the device at `x`: the CPU's
    /// reference step names the element.
    pub(in crate::solver) fn device_local_failure(
        &self,
        frame: usize,
        k: usize,
        x: &[f64],
    ) -> SolverError {
        let mut warm = self.warm.clone();
        match local::project_all(self.model, &self.derived, x, &mut warm) {
            Err(e) => SolverError::NonFiniteLocal {
                frame,
                iteration: k,
                element: e.element,
            },
            Ok(_) => SolverError::offload(frame, k, OffloadError::NonFiniteLocal),
        }
    }

    /// The global solve $Ax=b$ with Dirichlet values (spec §6.2 step 8), on the accelerator
    /// if the simulator has one.
    fn global_solve(
        &mut self,
        frame: usize,
        k: usize,
        b: &[f64],
        xd: &[f64],
        x: &mut [f64],
    ) -> Result<(), SolverError> {
        match self.offload.as_mut() {
            Some(off) => off
                .solve(b, xd, x)
                .map_err(|error| SolverError::offload(frame, k, error)),
            None => self
                .system
                .solve(b, xd, x)
                .map_err(|error| SolverError::solve(frame, k, error)),
        }
    }

    /// The factor of $A$ that contact solves with (Delassus columns, matrix-free products,
    /// the contact adjoint): the accelerator's when one is attached and offers it
    /// ([`crate::solver::offload::Offload::linear_solver`]), otherwise the CPU factor.
    pub(crate) fn contact_solver(&self) -> &dyn LinearSolver {
        match self.offload.as_deref().and_then(|o| o.linear_solver()) {
            Some(s) => s,
            None => &self.system,
        }
    }

    /// Force residual $b(x)-Ax=c_u+b_{p,u}(x)-A(x-x_t)$ ([`StepRhs`]) on the free DoFs and
    /// $\|c_u+b_{p,u}(x)\|$ (free DoFs). The local step runs where the PD iteration's does
    /// ([`Simulator::local_rhs`]: on the accelerator if there is one; the CPU path's
    /// arithmetic is unchanged).
    pub(in crate::solver) fn pd_residual(
        &mut self,
        rhs: &StepRhs,
        x: &[f64],
    ) -> Result<(Vec<f64>, f64), ()> {
        let mut bp = vec![0.0; x.len()];
        self.local_rhs(0, 0, x, rhs, &mut bp).map_err(|_| ())?;
        let b: Vec<f64> = rhs.c.iter().zip(&bp).map(|(a, b)| a + b).collect();
        let u: Vec<f64> = x.iter().zip(&rhs.x_t).map(|(a, b)| a - b).collect();
        let mut ax = vec![0.0; x.len()];
        self.system.apply_a(&u, &mut ax);
        let mut r: Vec<f64> = b.iter().zip(&ax).map(|(a, b)| a - b).collect();
        let mut bf = b;
        for &k in &self.prescribed {
            r[k] = 0.0;
            bf[k] = 0.0;
        }
        Ok((r, norm(&bf)))
    }

    /// Spec §6.5 TR_STATS from the last two iterates of the step.
    fn tr_stats(
        &self,
        x_t: &[f64],
        v_t: &[f64],
        f_ext: &[f64],
        x_prev: &[f64],
        b_prev: &[f64],
        x_k: &[f64],
    ) -> Result<TrStats, OffloadError> {
        let y = self.inertial_target(x_t, v_t, f_ext);
        let mut dx: Vec<f64> = x_k.iter().zip(x_prev).map(|(a, b)| a - b).collect();
        // A(x_prev − x_t) − b_prev: `b_prev` is the displacement-form right-hand side
        let u_prev: Vec<f64> = x_prev.iter().zip(x_t).map(|(a, b)| a - b).collect();
        let mut r = vec![0.0; dx.len()];
        self.system.apply_a(&u_prev, &mut r);
        for (rj, bj) in r.iter_mut().zip(b_prev) {
            *rj -= bj;
        }
        for &k in &self.prescribed {
            dx[k] = 0.0;
            r[k] = 0.0;
        }
        let mut adx = vec![0.0; dx.len()];
        self.system.apply_a(&dx, &mut adx);
        let pred = -r.iter().zip(&dx).map(|(a, b)| a * b).sum::<f64>()
            - 0.5 * adx.iter().zip(&dx).map(|(a, b)| a * b).sum::<f64>();
        let e_prev = crate::solver::trust_region::pd_energy(self, x_prev, &y, x_t)?;
        let e_k = crate::solver::trust_region::pd_energy(self, x_k, &y, x_t)?;
        Ok(crate::solver::trust_region::blend(
            pred,
            e_prev - e_k,
            e_prev,
        ))
    }
}

/// The state of a step's PD iteration, carried across its phases.
pub(in crate::solver) struct PdLoop {
    pub(in crate::solver) x: Vec<f64>,
    pub(in crate::solver) bp: Vec<f64>,
    pub(in crate::solver) bp_prev: Vec<f64>,
    pub(in crate::solver) xhat: Vec<f64>,
    /// PD iterations so far.
    pub(in crate::solver) k: usize,
    pub(in crate::solver) ncp: Option<NcpState>,
    pub(in crate::solver) cstats: ContactStats,
    pub(in crate::solver) stats: StepStats,
    /// The last contact solve met `contact.tolerance` (the gates also require it).
    pub(in crate::solver) contact_ok: bool,
    pub(in crate::solver) newton_cache: Option<contact::NewtonCache>,
    pub(in crate::solver) last_gate: GateResiduals,
    pub(in crate::solver) x_before: Vec<f64>,
    pub(in crate::solver) b_before: Vec<f64>,
    /// Force residual $\|b(x^0)-Ax^0\|$ of the step's first iterate (accurate mode).
    pub(in crate::solver) r0: Option<f64>,
    /// Last force residual relative to `r0`.
    pub(in crate::solver) residual: f64,
    /// Round-off floor of the residual test.
    pub(in crate::solver) floor: f64,
    /// Contact tolerance of the force-balance phase
    /// ([`Simulator::residual_contact_tolerance`]); `None`: `contact.tolerance`.
    pub(in crate::solver) contact_tol: Option<f64>,
}

impl PdLoop {
    /// The state before the first PD iteration from `x` ($x^0$).
    fn new(x: Vec<f64>, ncp: Option<NcpState>, cstats: ContactStats) -> PdLoop {
        let n3 = x.len();
        PdLoop {
            x,
            bp: vec![0.0; n3],
            bp_prev: vec![0.0; n3],
            xhat: vec![0.0; n3],
            k: 0,
            ncp,
            cstats,
            stats: StepStats::default(),
            contact_ok: true,
            newton_cache: None,
            last_gate: GateResiduals {
                position: f64::INFINITY,
                projection: f64::INFINITY,
            },
            x_before: Vec::new(),
            b_before: Vec::new(),
            r0: None,
            residual: f64::INFINITY,
            floor: 0.0,
            contact_tol: None,
        }
    }
}

/// What ends a run of PD iterations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::solver) enum Stop {
    /// The dual gate: the step is converged (`mode = "paper"`).
    Gate,
    /// The dual gate hands over to Newton–Krylov (`mode = "accurate"`); the residual is tracked.
    GateThenPolish,
    /// The force-balance test of `mode = "accurate"`.
    Residual,
}

/// Why a run of PD iterations ended.
pub(in crate::solver) enum Exit {
    Converged,
    GateMet,
    Cap,
}

/// What [`Simulator::begin_pd`] prepares for the PD iteration.
struct PdStart {
    /// External force $f_{ext}$ (with explicit penalty contact forces).
    f_ext: Vec<f64>,
    /// Penalty contact forces and pairs (penalty model only).
    penalty_force: Option<(Vec<f64>, usize)>,
    /// The step's right-hand side in displacement form and its Dirichlet values.
    rhs: StepRhs,
    /// First iterate: $x_t$ with the Dirichlet values imposed.
    x: Vec<f64>,
    ncp: Option<NcpState>,
    cstats: ContactStats,
}

/// The right-hand side of a PD step in displacement form. With $u=x-x_t$, the system
/// $Ax=c+b_p(x)$ ($c$ of [`Simulator::rhs_constant`]) is $Au=c_u+b_{p,u}(x)$ where
/// $c_u=\tfrac1hMv_t+f_{ext}-K_{att}x_t$ and
/// $b_{p,u}(x)=\sum_sG_s^T\mathrm{vec}\big(Q_s(x)-Q^t_s\big)$, $Q^t_s=w_sF_s(x_t)$ (+ the muscle
/// terms $w_m(F_s\mathsf m)\mathsf m^T$): $c-Ax_t=c_u-\sum_sG_s^T\mathrm{vec}\,Q^t_s$ because
/// the inertia, mass-damping and $K_\beta$ terms of $c$ and $A$ cancel exactly and
/// $\hat K x_t=\sum_sw_sG_s^T\mathrm{vec}\,F_s(x_t)$ ($G_sX=I$). Every term is a small
/// difference computed before it meets a stiffness: no $\|A\|\,\|x\|$ round-off, and the
/// elastic part has no net force (it passes through $G_s^T$), so nothing is amplified by
/// the $h^2/m$ of the translational mode.
pub(in crate::solver) struct StepRhs {
    /// Start-of-step positions $x_t$ (the reference of $u$).
    pub(in crate::solver) x_t: Vec<f64>,
    /// $c_u$.
    pub(in crate::solver) c: Vec<f64>,
    /// $Q^t_s$ per sample.
    qt: Vec<Matrix3<f64>>,
    /// $\sum_sG_s^T\mathrm{vec}\,Q^t_s$ (for an offloaded local step, which returns $b_p$).
    pub(in crate::solver) st: Vec<f64>,
    /// Dirichlet values at the end of the step, absolute ($x$) and relative ($u$).
    pub(in crate::solver) xd: Vec<f64>,
    pub(in crate::solver) xd_u: Vec<f64>,
}

impl Simulator<'_> {
    /// [`StepRhs`] of the step from $(x_t,v_t)$ with external forces `f_ext` and Dirichlet
    /// values `xd`.
    fn step_rhs(&self, x_t: &[f64], v_t: &[f64], f_ext: &[f64], xd: Vec<f64>) -> StepRhs {
        let model = self.model;
        let (h, n) = (model.h, model.num_nodes());
        let m = &self.derived.mass;
        let k_att = crate::model::attachment::matrix_diagonal(&model.attachments, n);
        let c = (0..3 * n)
            .map(|j| m[j / 3] * v_t[j] / h + f_ext[j] - k_att[j / 3] * x_t[j])
            .collect();
        let mut qt: Vec<Matrix3<f64>> = (0..model.num_samples())
            .map(|s| model.deformation_gradient(s, x_t) * self.derived.w_total(s))
            .collect();
        crate::solver::muscle::add_linear_terms(model, x_t, &mut qt);
        let mut st = vec![0.0; 3 * n];
        local::scatter(model, &qt, &mut st);
        let xd_u = xd.iter().zip(x_t).map(|(a, b)| a - b).collect();
        StepRhs {
            x_t: x_t.to_vec(),
            c,
            qt,
            st,
            xd,
            xd_u,
        }
    }
}

/// The NCP contact state of a PD step: contact set, its Delassus operator, multipliers.
pub(in crate::solver) type NcpState = (ContactSet, Delassus, Vec<f64>);

/// Project the global step `xhat` onto the contact conditions (spec §6.2 steps 10–18):
/// solve the NCP for the multipliers and add their displacement to `xhat` (fails where a
/// solve with `solver` does).
fn project_contact(
    (set, del, lambda): &mut NcpState,
    solver: &dyn LinearSolver,
    csettings: &contact::SolveSettings,
    xhat: &mut [f64],
    newton_cache: &mut Option<contact::NewtonCache>,
) -> Result<contact::SolveInfo, LinalgError> {
    let info = contact::solve(set, del, solver, xhat, lambda, csettings, newton_cache)?;
    del.add_x(set, solver, lambda, xhat)?;
    Ok(info)
}

#[cfg(test)]
mod tests {
    use crate::mesh::generate::box_hex;
    use crate::model::{ModelBuilder, SolverSettings};
    use crate::solver::Simulator;

    /// An undeformed free body in gravity: every local projection returns the rest shape,
    /// so the implicit-Euler step is the free flight $x_1=x_0+hv_0+h^2g$ exactly, and the
    /// PD iteration must converge to it (to its gate tolerance).
    #[test]
    fn free_flight_step_is_the_inertial_target() {
        let model = ModelBuilder::new(box_hex([2, 1, 1], 0.1, [0.0; 3]))
            .youngs_modulus(1e6)
            .velocity([0.3, 0.0, 0.1])
            .build()
            .unwrap();
        let settings = SolverSettings {
            rel_tol: 1e-10,
            abs_tol: 1e-14,
            ..Default::default()
        };
        let mut sim = Simulator::new(&model, &settings).unwrap();
        let (x1, stats) = sim.step(1, &model.x0, &model.v0).unwrap();
        assert!(stats.converged && stats.iterations > 0);
        let (h, g) = (model.h, model.gravity);
        for (j, (&x, (&x0, &v0))) in x1.iter().zip(model.x0.iter().zip(&model.v0)).enumerate() {
            let target = x0 + h * v0 + h * h * g[j % 3];
            assert!((x - target).abs() < 1e-10, "dof {j}: {x} vs {target}");
        }
    }

    /// A clamped beam sags under gravity: the step moves the free nodes down and leaves
    /// the clamped ones where they are.
    #[test]
    fn clamped_nodes_stay_and_free_nodes_fall() {
        let model = ModelBuilder::new(box_hex([3, 1, 1], 0.1, [0.0; 3]))
            .fix_where(|p| p[0] == 0.0)
            .build()
            .unwrap();
        let mut sim = Simulator::new(&model, &SolverSettings::default()).unwrap();
        let (x1, stats) = sim.step(1, &model.x0, &model.v0).unwrap();
        assert!(stats.converged);
        let fixed = &model.dirichlet[0].nodes;
        for i in 0..model.num_nodes() {
            let dz = x1[3 * i + 2] - model.x0[3 * i + 2];
            if fixed.contains(&i) {
                assert_eq!(dz, 0.0, "clamped node {i} moved");
            } else {
                assert!(dz < 0.0, "free node {i} did not fall: dz = {dz}");
            }
        }
    }
}
