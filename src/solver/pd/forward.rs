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

use super::host::HostPd;
use super::iterate::{pd_iterate, Exit, NcpState, PdLoop, StepRhs, Stop};
use super::resident::ResidentBackend;
use crate::contact::{ContactStats, Delassus};
use crate::linalg::{LinalgError, LinearSolver};
use crate::model::{OnNonConvergence, SolverMode};
use crate::solver::context::{contact_settings, norm, ContactOutcome, StepContext};
use crate::solver::newton;
use crate::solver::offload::OffloadError;
use crate::solver::records::error::SolverError;
use crate::solver::records::stats::{StepStats, TrStats};
use crate::solver::stages::anderson::TypeII;
use crate::solver::stages::local;
use nalgebra::Matrix3;
use std::time::Instant;

/// The backend of a step's PD iterations ([`super::iterate::PdBackend`]), picked once per
/// step: every run of iterations of the step is the one generic loop on it.
enum Backend {
    Host(HostPd),
    Resident(ResidentBackend),
}

impl Backend {
    /// [`pd_iterate`] on this backend.
    fn run(
        &mut self,
        ctx: &mut StepContext<'_>,
        aa: &mut TypeII,
        frame: usize,
        rhs: &StepRhs,
        it: &mut PdLoop,
        stop: Stop,
    ) -> Result<Exit, SolverError> {
        match self {
            Backend::Host(b) => pd_iterate(ctx, b, aa, frame, rhs, it, stop),
            Backend::Resident(b) => pd_iterate(ctx, b, aa, frame, rhs, it, stop),
        }
    }
}

impl StepContext<'_> {
    /// One implicit-Euler step of the PD method producing frame `frame` (1-based) from
    /// $(x_t, v_t)$. Returns $x_{t+1}$ and the step statistics.
    ///
    /// `mode = "paper"`: Anderson-PD until the dual gate (then the optional `newton_polish`).
    /// `mode = "accurate"`: Anderson-PD until the dual gate, then Newton–Krylov steps
    /// ([`StepContext::newton_krylov`]) until the force-balance test
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
        // the backend of this step's PD iterations, picked once: the accelerator's resident
        // loop where it runs this step, the host's vectors otherwise
        let mut backend = if self.runs_resident(&it) {
            Backend::Resident(ResidentBackend::default())
        } else {
            Backend::Host(HostPd::new(it.x.len()))
        };
        let converged = loop {
            let exit = backend.run(self, aa, frame, &rhs, &mut it, stop)?;
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

    /// `mode = "accurate"` at the dual gate: Newton–Krylov steps ([`StepContext::newton_krylov`])
    /// from `it.x` towards the force-balance target ([`StepContext::residual_target`]), unless
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
        let muscle_time = self.derived.muscle_time;
        if let Some(off) = self.accelerator_mut() {
            off.set_muscle_time(muscle_time);
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
                let del = Delassus::new(&set, self.contact_solver())
                    .map_err(|error| SolverError::solve(frame, 0, error))?;
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
        let e_prev = crate::solver::adjoint::trust_region::pd_energy(self, x_prev, &y, x_t)?;
        let e_k = crate::solver::adjoint::trust_region::pd_energy(self, x_k, &y, x_t)?;
        Ok(crate::solver::adjoint::trust_region::blend(
            pred,
            e_prev - e_k,
            e_prev,
        ))
    }
}

/// What [`StepContext::begin_pd`] prepares for the PD iteration.
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

impl StepContext<'_> {
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
