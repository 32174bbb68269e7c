//! The PD iteration on the accelerator's resident loop (issue 15, docs/gpu.md "Resident PD
//! iteration"): the same algorithm as [`Simulator::pd_iterate`] — the PD map, the
//! force-balance test of `mode = "accurate"`, Anderson (Eqs. 18–21) and the dual gate
//! (Eq. 22) — with the vectors kept on the device through
//! [`crate::solver::offload::ResidentPd`]. Per iteration only a few norms, Anderson's new dot
//! products and its coefficients cross; the iterate comes back when the run of iterations
//! ends. Steps with NCP contact or trust-region statistics run [`Simulator::pd_iterate`].

use super::anderson::TypeII;
use crate::model::GateReference;
use crate::solver::error::SolverError;
use crate::solver::forward::{Exit, PdLoop, StepRhs, Stop};
use crate::solver::gate::{GateResiduals, DISPLACEMENT_FLOOR, RESIDUAL_FLOOR};
use crate::solver::offload::{MapNorms, OffloadError, ResidentStep};
use crate::solver::simulator::Simulator;
use std::time::Instant;

/// The accelerator's resident loop of `sim`, or the error of a simulator without one.
macro_rules! resident {
    ($sim:expr, $frame:expr, $k:expr) => {
        $sim.offload
            .as_deref_mut()
            .and_then(|o| o.resident())
            .ok_or_else(|| {
                SolverError::offload(
                    $frame,
                    $k,
                    $crate::solver::offload::OffloadError::NoResident,
                )
            })
    };
}

impl Simulator<'_> {
    /// Whether the PD iterations of a step run on the accelerator's resident loop: one is
    /// attached and offers it, the step has no NCP contact and no trust-region statistics are
    /// asked for.
    pub(in crate::solver) fn runs_resident(&mut self, it: &PdLoop) -> bool {
        it.ncp
            .as_ref()
            .is_none_or(|(_, d, _)| matches!(d, crate::contact::Delassus::Resident(_)))
            && !self.compute_tr
            && self
                .offload
                .as_deref_mut()
                .is_some_and(|o| o.resident().is_some())
    }

    /// [`Simulator::pd_iterate`] on the resident loop: from `it.x` (uploaded at the start of
    /// the step, or after a host phase moved it) until `stop` says so or the cap; `it.x` is
    /// the iterate when it returns.
    pub(in crate::solver) fn pd_iterate_resident(
        &mut self,
        aa: &mut TypeII,
        frame: usize,
        rhs: &StepRhs,
        it: &mut PdLoop,
        stop: Stop,
    ) -> Result<Exit, SolverError> {
        let err = |k: usize| move |error: OffloadError| SolverError::offload(frame, k, error);
        let window = aa.window();
        let res = resident!(self, frame, it.k)?;
        if it.k == 0 {
            let step = ResidentStep {
                window,
                x0: &it.x,
                x_t: &rhs.x_t,
                c: &rhs.c,
                st: &rhs.st,
                xd: &rhs.xd,
                xd_u: &rhs.xd_u,
            };
            res.begin(&step).map_err(err(0))?;
        } else {
            res.set_x(&it.x).map_err(err(it.k))?;
        }
        let mut exit = Exit::Cap;
        while it.k < self.config.max_iterations {
            let k = it.k;
            self.cancel
                .poll(crate::cancel::Stage::Pd, k)
                .map_err(|c| SolverError::cancelled(frame, c))?;
            let t0 = Instant::now();
            let tracked = stop != Stop::Gate;
            let flags = (tracked, tracked && it.r0.is_none());
            let norms = if it.ncp.is_some() {
                // contact on the device: δ0 down, the NCP on the host, λ up (device_contact.rs)
                self.resident_contact_map(frame, it, flags)?
            } else {
                let res = resident!(self, frame, k)?;
                res.pd_map(flags.0, flags.1).map_err(err(k))?
            };
            self.resident_finite(frame, k, &norms)?;
            let t1 = Instant::now();
            let mut converged = false;
            let mut gate_met = false;
            if let Some(rn) = norms.residual {
                if it.r0.is_none() {
                    it.r0 = Some(rn);
                    it.floor = RESIDUAL_FLOOR * norms.floor_reference.unwrap_or(0.0);
                }
                it.residual = rn / it.r0.unwrap_or(1.0).max(f64::MIN_POSITIVE);
                converged =
                    stop == Stop::Residual && rn <= self.residual_target(it) && it.contact_ok;
            }
            let res = resident!(self, frame, k)?;
            aa.core_mut().advance(res).map_err(err(k))?;
            res.accept().map_err(err(k))?;
            if k >= 1 {
                it.last_gate = self.resident_gate(&norms);
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
            it.stats.time_local += (t1 - t0).as_secs_f64();
            it.stats.time_other += t1.elapsed().as_secs_f64();
            it.k += 1;
            if it.cstats.time_limit_iteration.is_some() {
                // a contact solve out of time ends the step, non-converged (as on the host)
                break;
            }
            if converged || gate_met {
                exit = if converged {
                    Exit::Converged
                } else {
                    Exit::GateMet
                };
                break;
            }
        }
        let res = resident!(self, frame, it.k)?;
        // a contact step returns the contact-projected map, as the host loop does
        let projected = it.ncp.is_some() && !matches!(exit, Exit::Cap);
        it.x = if projected { res.xhat() } else { res.x() }.map_err(err(it.k))?;
        Ok(exit)
    }

    /// A non-finite PD map ends the step as on the host: a local step that is not finite is
    /// named by the CPU's reference step, a diverged global step by its first bad element.
    fn resident_finite(&mut self, frame: usize, k: usize, n: &MapNorms) -> Result<(), SolverError> {
        let offload = |error: OffloadError| SolverError::offload(frame, k, error);
        if !n.bp.is_finite() {
            let x = resident!(self, frame, k)?.x().map_err(offload)?;
            return Err(self.device_local_failure(frame, k, &x));
        }
        if !n.g.is_finite() {
            let xhat = resident!(self, frame, k)?.xhat().map_err(offload)?;
            return Err(SolverError::Diverged {
                frame,
                iteration: k,
                element: self.first_bad_element(&xhat),
            });
        }
        Ok(())
    }

    /// The dual gate (spec Eq. 22) from the norms of a resident map, as
    /// [`Simulator::gate_residuals`] forms it on the host.
    fn resident_gate(&self, n: &MapNorms) -> GateResiduals {
        let (xref, floor) = match self.config.gate_reference {
            GateReference::Position => (n.x, 0.0),
            GateReference::Displacement => (n.disp, DISPLACEMENT_FLOOR * n.x),
        };
        self.config
            .gate
            .evaluate(n.g, xref, floor, n.dbp, n.bp_prev)
    }
}
