//! Contact steps on the accelerator's resident loop (issue 38 item 6; docs/gpu.md "Contact
//! on the device"). The projection of spec §6.2 steps 10–18 inside the resident PD map
//! ([`super::resident::ResidentBackend`]): the accelerator keeps $X=A^{-1}J^T$ and
//! $\hat x$, forms $\delta_0=J\hat x-d$ and applies $\hat x\mathrel{+}=X\lambda$; the host
//! solves the small dense NCP $\Phi(\delta_0+W\lambda,\lambda)=0$
//! (`contact::solve_from_delta`, the same semismooth Newton iteration as the host backend's
//! dense solve). Per PD iteration $m$ numbers cross each way, in one copy each, whatever the
//! number of contacts.

use super::iterate::PdLoop;
use crate::contact::{self, ContactSet, Delassus};
use crate::model::ContactSolver;
use crate::solver::context::StepContext;
use crate::solver::offload::{MapNorms, OffloadError};
use crate::solver::records::error::SolverError;
use std::time::Instant;

/// With `[contact] solver = "auto"`, steps of at most this many contact rows run the dense
/// form on the device (the host's limit is [`contact::AUTO_DENSE_ROWS`]): there the
/// columns are one multi-RHS pass of the device factor, not one host solve per node, and
/// $W$ ($m^2$ numbers, 8 MB at this size) crosses once per step.
pub const DEVICE_DENSE_ROWS: usize = 1024;

impl StepContext<'_> {
    /// The step's Delassus operator for `set`: on the accelerator ([`Delassus::Resident`],
    /// $W$ from [`crate::solver::offload::ResidentPd::contact_begin`]) when the step's PD
    /// iterations can run on its resident loop (no trust-region statistics) and the set
    /// takes the dense form there ([`DEVICE_DENSE_ROWS`]); otherwise [`Delassus::new`] with
    /// [`StepContext::contact_solver`].
    pub(in crate::solver) fn step_delassus(
        &mut self,
        frame: usize,
        set: &ContactSet,
    ) -> Result<Delassus, SolverError> {
        let dense = match set.solver {
            ContactSolver::Dense => true,
            ContactSolver::Iterative => false,
            ContactSolver::Auto => set.nrows() <= DEVICE_DENSE_ROWS,
        };
        if dense && !set.is_empty() && !self.compute_tr {
            let res = self.accelerator_mut().and_then(|o| o.resident());
            if let Some(w) = res.and_then(|r| r.contact_begin(set)) {
                return w
                    .map(Delassus::Resident)
                    .map_err(|error| SolverError::offload(frame, 0, error));
            }
        }
        Delassus::new(set, self.contact_solver())
            .map_err(|error| SolverError::solve(frame, 0, error))
    }
}

/// One PD map of a contact step on the resident loop ([`Delassus::Resident`]): $b_p(x_k)$
/// and the unconstrained $\hat x$ on the device, $\delta_0$ down, the NCP solved on the host
/// into the step's multipliers with `settings`, $\lambda$ up, $\hat x\mathrel{+}=X\lambda$,
/// then $g_k$ and the map's norms (`flags` = residual, floor reference, as
/// [`crate::solver::offload::ResidentPd::pd_map`]). Records the contact statistics and
/// `it.contact_ok` (the solve's residual against `tolerance`) as the host backend does.
pub(in crate::solver) fn resident_contact_map(
    ctx: &mut StepContext<'_>,
    frame: usize,
    it: &mut PdLoop,
    (settings, tolerance): (&contact::SolveSettings, f64),
    (residual, floor): (bool, bool),
) -> Result<MapNorms, SolverError> {
    let k = it.k;
    let offload = |error: OffloadError| SolverError::offload(frame, k, error);
    let Some((set, Delassus::Resident(w), lambda)) = it.ncp.as_mut() else {
        return Err(offload(OffloadError::NotBegun));
    };
    let res = ctx.accelerator_mut().and_then(|o| o.resident());
    let res = res.ok_or(OffloadError::NoResident).map_err(offload)?;
    let d0 = res.contact_delta().map_err(offload)?;
    let t0 = Instant::now();
    let info = contact::solve_from_delta(set, w, d0, lambda, settings, &mut it.newton_cache)
        .map_err(|error| SolverError::solve(frame, k, error))?;
    it.contact_ok = info.residual <= tolerance && !info.timed_out;
    if info.timed_out {
        it.cstats.time_limit_iteration.get_or_insert(k);
    }
    it.cstats.newton_iterations += info.iterations;
    it.cstats.factorizations += info.factorizations;
    it.cstats.products += info.products;
    it.cstats.seconds_solve += t0.elapsed().as_secs_f64();
    res.contact_project(lambda, residual, floor)
        .map_err(offload)
}
