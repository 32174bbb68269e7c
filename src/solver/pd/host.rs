//! The host backend of the PD iteration ([`HostPd`]: its vectors in host memory) and the
//! step's stages it runs: the local step with its gather and the global solve — on the
//! attached accelerator's stages ([`crate::solver::offload::Offload::local_rhs`],
//! [`crate::solver::offload::Offload::solve`]) where there is one, on the CPU otherwise — the
//! NCP contact projection of the global step (spec §6.2 steps 10–18, with the accelerator's
//! factor when it offers one), the force residual and the dual gate's norms.

use super::iterate::{MapOut, NcpState, PdBackend, PdLoop, StepRhs};
use crate::contact;
use crate::linalg::{LinalgError, LinearSolver};
use crate::model::GateReference;
use crate::solver::context::{contact_settings, norm, StepContext};
use crate::solver::offload::OffloadError;
use crate::solver::records::error::SolverError;
use crate::solver::stages::anderson::TypeII;
use crate::solver::stages::gate::GateResiduals;
use crate::solver::stages::local;
use std::time::Instant;

/// The PD iteration's vectors in host memory (besides `PdLoop`'s $x_k$, $b_p$, $\hat x$):
/// $b=c_u+b_{p,u}(x_k)$, $g_k$, $x_{k+1}$, the product $\hat A g_k$ of the residual test, and
/// the run's contact-solve settings. Anderson's store is the host one of [`TypeII`].
pub(in crate::solver) struct HostPd {
    b: Vec<f64>,
    g: Vec<f64>,
    xn: Vec<f64>,
    ag: Vec<f64>,
    /// The contact solve of this run (its tolerance: `PdLoop::contact_tol` or
    /// `contact.tolerance`) and the tolerance the contact conditions are tested against.
    solve: Option<(contact::SolveSettings, f64)>,
}

impl HostPd {
    /// A host backend for vectors of length `n3`.
    pub(in crate::solver) fn new(n3: usize) -> Self {
        HostPd {
            b: Vec::new(),
            g: Vec::new(),
            xn: Vec::new(),
            ag: vec![0.0; n3],
            solve: None,
        }
    }
}

impl PdBackend for HostPd {
    fn start(
        &mut self,
        ctx: &mut StepContext<'_>,
        _frame: usize,
        _rhs: &StepRhs,
        it: &PdLoop,
        _window: usize,
    ) -> Result<(), SolverError> {
        let csettings = contact_settings(ctx.model);
        let tolerance = csettings.tolerance;
        let settings = contact::SolveSettings {
            tolerance: it.contact_tol.unwrap_or(csettings.tolerance),
            cancel: ctx.cancel.clone(),
            ..csettings
        };
        self.solve = Some((settings, tolerance));
        Ok(())
    }

    fn map(
        &mut self,
        ctx: &mut StepContext<'_>,
        frame: usize,
        rhs: &StepRhs,
        it: &mut PdLoop,
        tracked: bool,
    ) -> Result<MapOut, SolverError> {
        let k = it.k;
        let t0 = Instant::now();
        ctx.local_rhs(frame, k, &it.x, rhs, &mut it.bp)?;
        let t1 = Instant::now();
        // displacement form: A û = c_u + b_p,u(x), x̂ = x_t + û
        self.b = rhs.c.iter().zip(&it.bp).map(|(a, b)| a + b).collect();
        ctx.global_solve(frame, k, &self.b, &rhs.xd_u, &mut it.xhat)?;
        for (xh, xt) in it.xhat.iter_mut().zip(&rhs.x_t) {
            *xh += xt;
        }
        ctx.impose_prescribed(&mut it.xhat, &rhs.xd);
        let t2 = Instant::now();
        if let (Some(ncp), Some((settings, tolerance))) = (it.ncp.as_mut(), self.solve.as_ref()) {
            // Contact projection of the global step (spec §6.2 steps 10–18).
            let info = project_contact(
                ncp,
                ctx.contact_solver(),
                settings,
                &mut it.xhat,
                &mut it.newton_cache,
            )
            .map_err(|error| SolverError::solve(frame, k, error))?;
            it.contact_ok = info.residual <= *tolerance && !info.timed_out;
            if info.timed_out {
                it.cstats.time_limit_iteration.get_or_insert(k);
            }
            it.cstats.newton_iterations += info.iterations;
            it.cstats.factorizations += info.factorizations;
            it.cstats.products += info.products;
            it.cstats.seconds_solve += t2.elapsed().as_secs_f64();
        }
        if !it.xhat.iter().all(|v| v.is_finite()) {
            return Err(SolverError::Diverged {
                frame,
                iteration: k,
                element: ctx.first_bad_element(&it.xhat),
            });
        }
        self.g = it.xhat.iter().zip(&it.x).map(|(a, b)| a - b).collect();
        let mut out = MapOut::default();
        if tracked {
            ctx.system.apply_a(&self.g, &mut self.ag);
            ctx.zero_prescribed(&mut self.ag);
            out.residual = Some(norm(&self.ag));
            if it.r0.is_none() {
                out.floor = ctx.residual_floor(&rhs.x_t, &self.b);
            }
        }
        it.stats.time_local += (t1 - t0).as_secs_f64();
        it.stats.time_global += (t2 - t1).as_secs_f64();
        Ok(out)
    }

    fn mix(
        &mut self,
        ctx: &mut StepContext<'_>,
        _frame: usize,
        aa: &mut TypeII,
        rhs: &StepRhs,
        it: &PdLoop,
    ) -> Result<(), SolverError> {
        self.xn = aa.step(&it.x, &self.g);
        ctx.impose_prescribed(&mut self.xn, &rhs.xd);
        Ok(())
    }

    fn gate(&self, ctx: &StepContext<'_>, rhs: &StepRhs, it: &PdLoop) -> GateResiduals {
        ctx.gate_residuals(&it.x, &rhs.x_t, &self.g, (&it.bp, &it.bp_prev), &rhs.st)
    }

    fn accept(&mut self, ctx: &StepContext<'_>, it: &mut PdLoop, done: bool) {
        std::mem::swap(&mut it.bp, &mut it.bp_prev);
        let mut xn = std::mem::take(&mut self.xn);
        if done && it.ncp.is_some() {
            // return the contact-projected global step: it satisfies the contact
            // conditions to the contact tolerance, whatever the PD tolerance
            xn = it.xhat.clone();
        }
        if ctx.compute_tr {
            it.x_before = std::mem::replace(&mut it.x, xn);
            it.b_before = std::mem::take(&mut self.b);
        } else {
            it.x = xn;
        }
    }

    fn finish(
        &mut self,
        _ctx: &mut StepContext<'_>,
        _frame: usize,
        _it: &mut PdLoop,
    ) -> Result<(), SolverError> {
        Ok(())
    }
}

impl StepContext<'_> {
    /// Round-off floor of the force-balance test, relative to the absolute-form
    /// $b=b_u+Ax_t$: the iterates are stored as positions, whose rounding ($\epsilon\|x\|$)
    /// $A$ turns into a residual of that order.
    pub(in crate::solver) fn residual_floor(&self, x_t: &[f64], b_u: &[f64]) -> f64 {
        let mut bf = vec![0.0; x_t.len()];
        self.system.apply_a(x_t, &mut bf);
        for (f, bu) in bf.iter_mut().zip(b_u) {
            *f += bu;
        }
        self.zero_prescribed(&mut bf);
        crate::solver::stages::gate::RESIDUAL_FLOOR * norm(&bf)
    }

    /// Dual-gate residuals of a PD iteration (spec Eq. 22): the position gate on the
    /// un-accelerated PD step $g_k=\Phi(x_k)-x_k$ (the mixed step $x_{k+1}-x_k$ can be tiny
    /// while Anderson stagnates far from the fixed point; measured: finite differences off by
    /// 40 % with that gate), relative to $\|x_k\|$ or $\|x_k-x_t\|$ (`gate_reference`), and
    /// the projection gate on the change of $b_p$ relative to $\|b_p\|$ (`bp`, `bp_prev` are in
    /// displacement form, $b_{p,u}=b_p-$`st`: the change is the same, the reference is
    /// $\|b_{p,u}+$`st`$\|$).
    pub(in crate::solver) fn gate_residuals(
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
                crate::solver::stages::gate::DISPLACEMENT_FLOOR * norm(x),
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
    pub(in crate::solver) fn local_rhs(
        &mut self,
        frame: usize,
        k: usize,
        x: &[f64],
        rhs: &StepRhs,
        bp: &mut [f64],
    ) -> Result<(), SolverError> {
        if let Some(off) = self.accelerator_mut() {
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
    pub(in crate::solver) fn global_solve(
        &mut self,
        frame: usize,
        k: usize,
        b: &[f64],
        xd: &[f64],
        x: &mut [f64],
    ) -> Result<(), SolverError> {
        match self.accelerator_mut() {
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
        match self.accelerator().and_then(|o| o.linear_solver()) {
            Some(s) => s,
            None => &self.system,
        }
    }

    /// Force residual $b(x)-Ax=c_u+b_{p,u}(x)-A(x-x_t)$ ([`StepRhs`]) on the free DoFs and
    /// $\|c_u+b_{p,u}(x)\|$ (free DoFs). The local step runs where the PD iteration's does
    /// ([`StepContext::local_rhs`]: on the accelerator if there is one; the CPU path's
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
}

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
