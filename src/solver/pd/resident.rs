//! The resident backend of the PD iteration ([`ResidentBackend`], issue 15, docs/gpu.md
//! "Resident PD iteration"): the vectors of the one loop [`super::iterate::pd_iterate`] kept
//! on the accelerator through [`crate::solver::offload::ResidentPd`] (a GPU, or the host
//! emulator running the same kernels). Per iteration only a few norms, Anderson's new dot
//! products and its coefficients cross; the iterate comes back when the run of iterations
//! ends. The step runs it when the accelerator offers it, the step has no NCP contact and no
//! trust-region statistics are asked for ([`StepContext::runs_resident`]).

use super::iterate::{MapOut, PdBackend, PdLoop, StepRhs};
use crate::model::GateReference;
use crate::solver::context::StepContext;
use crate::solver::offload::{MapNorms, OffloadError, ResidentPd, ResidentStep};
use crate::solver::records::error::SolverError;
use crate::solver::stages::anderson::TypeII;
use crate::solver::stages::gate::{GateResiduals, DISPLACEMENT_FLOOR, RESIDUAL_FLOOR};
use std::time::Instant;

/// The accelerator's resident loop of `ctx`, or the error of a context without one.
fn resident<'a>(
    ctx: &'a mut StepContext<'_>,
    frame: usize,
    k: usize,
) -> Result<&'a mut dyn ResidentPd, SolverError> {
    ctx.accelerator_mut()
        .and_then(|o| o.resident())
        .ok_or_else(|| SolverError::offload(frame, k, OffloadError::NoResident))
}

/// The PD iteration's vectors on the accelerator; the backend keeps the norms of the last
/// map (the dual gate's inputs). Anderson's store is the resident loop itself.
#[derive(Default)]
pub(in crate::solver) struct ResidentBackend {
    norms: Option<MapNorms>,
}

impl StepContext<'_> {
    /// Whether the PD iterations of a step run on the accelerator's resident loop: one is
    /// attached and offers it, the step has no NCP contact and no trust-region statistics are
    /// asked for.
    pub(in crate::solver) fn runs_resident(&mut self, it: &PdLoop) -> bool {
        it.ncp.is_none()
            && !self.compute_tr
            && self
                .accelerator_mut()
                .is_some_and(|o| o.resident().is_some())
    }
}

impl PdBackend for ResidentBackend {
    /// Upload the step's constants and $x^0$ on its first run, the iterate a host phase moved
    /// on a later one.
    fn start(
        &mut self,
        ctx: &mut StepContext<'_>,
        frame: usize,
        rhs: &StepRhs,
        it: &PdLoop,
        window: usize,
    ) -> Result<(), SolverError> {
        let res = resident(ctx, frame, it.k)?;
        let out = if it.k == 0 {
            res.begin(&ResidentStep {
                window,
                x0: &it.x,
                x_t: &rhs.x_t,
                c: &rhs.c,
                st: &rhs.st,
                xd: &rhs.xd,
                xd_u: &rhs.xd_u,
            })
        } else {
            res.set_x(&it.x)
        };
        out.map_err(|error| SolverError::offload(frame, it.k, error))
    }

    fn map(
        &mut self,
        ctx: &mut StepContext<'_>,
        frame: usize,
        _rhs: &StepRhs,
        it: &mut PdLoop,
        tracked: bool,
    ) -> Result<MapOut, SolverError> {
        let k = it.k;
        let t0 = Instant::now();
        let norms = resident(ctx, frame, k)?
            .pd_map(tracked, tracked && it.r0.is_none())
            .map_err(|error| SolverError::offload(frame, k, error))?;
        finite(ctx, frame, k, &norms)?;
        self.norms = Some(norms);
        it.stats.time_local += t0.elapsed().as_secs_f64();
        Ok(MapOut {
            residual: norms.residual,
            floor: RESIDUAL_FLOOR * norms.floor_reference.unwrap_or(0.0),
        })
    }

    /// Anderson's mix on the resident store, then $x_{k+1}$ with $\bar x_D$ imposed.
    fn mix(
        &mut self,
        ctx: &mut StepContext<'_>,
        frame: usize,
        aa: &mut TypeII,
        _rhs: &StepRhs,
        it: &PdLoop,
    ) -> Result<(), SolverError> {
        let k = it.k;
        let res = resident(ctx, frame, k)?;
        let err = |error: OffloadError| SolverError::offload(frame, k, error);
        aa.core_mut().advance(res).map_err(err)?;
        res.accept().map_err(err)
    }

    /// The dual gate (spec Eq. 22) from the norms of the last map, as
    /// [`StepContext::gate_residuals`] forms it on the host.
    fn gate(&self, ctx: &StepContext<'_>, _rhs: &StepRhs, _it: &PdLoop) -> GateResiduals {
        let Some(n) = self.norms.as_ref() else {
            // no map yet: nothing is met
            return GateResiduals {
                position: f64::INFINITY,
                projection: f64::INFINITY,
            };
        };
        let (xref, floor) = match ctx.config.gate_reference {
            GateReference::Position => (n.x, 0.0),
            GateReference::Displacement => (n.disp, DISPLACEMENT_FLOOR * n.x),
        };
        ctx.config.gate.evaluate(n.g, xref, floor, n.dbp, n.bp_prev)
    }

    /// The resident loop's `accept` (in [`PdBackend::mix`]) already moved the iterate.
    fn accept(&mut self, _ctx: &StepContext<'_>, _it: &mut PdLoop, _done: bool) {}

    /// The iterate comes back from the device.
    fn finish(
        &mut self,
        ctx: &mut StepContext<'_>,
        frame: usize,
        it: &mut PdLoop,
    ) -> Result<(), SolverError> {
        it.x = resident(ctx, frame, it.k)?
            .x()
            .map_err(|error| SolverError::offload(frame, it.k, error))?;
        Ok(())
    }
}

/// A non-finite PD map ends the step as on the host: a local step that is not finite is
/// named by the CPU's reference step, a diverged global step by its first bad element.
fn finite(
    ctx: &mut StepContext<'_>,
    frame: usize,
    k: usize,
    n: &MapNorms,
) -> Result<(), SolverError> {
    let offload = |error: OffloadError| SolverError::offload(frame, k, error);
    if !n.bp.is_finite() {
        let x = resident(ctx, frame, k)?.x().map_err(offload)?;
        return Err(ctx.device_local_failure(frame, k, &x));
    }
    if !n.g.is_finite() {
        let xhat = resident(ctx, frame, k)?.xhat().map_err(offload)?;
        return Err(SolverError::Diverged {
            frame,
            iteration: k,
            element: ctx.first_bad_element(&xhat),
        });
    }
    Ok(())
}
