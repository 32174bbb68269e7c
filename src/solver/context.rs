//! The step context: model, derived parameters, the factored PD system and the solver state
//! every method shares, with the step context written once: external and penalty forces,
//! the constant right-hand side, Dirichlet values, contact begin/finish (spec §6.2) and
//! restitution. The methods (`pd/`, `newton/`, `diffpd/`, each a
//! [`crate::solver::stepper::Stepper`] with its own state) take it; the
//! [`crate::solver::Simulator`] above them holds it with the method's stepper.

use super::assembly;
use super::hessian::NewtonSystem;
use super::offload::Offload;
use super::records::config::SolverConfig;
use super::records::error::SolverError;
use super::records::stats::StepStats;
use crate::contact::{self, ncp::FbParams, ContactRecord, ContactSet, ContactStats};
use crate::linalg::schwarz::SchwarzSystem;
use crate::linalg::{CscMatrix, GlobalSystem, SystemPlan};
use crate::model::{Derived, Model, SolverSettings};
use nalgebra::Vector3;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// What every method shares: model, derived parameters, factored system and solver state.
/// [`crate::solver::Simulator`] dereferences to it.
pub struct StepContext<'m> {
    pub model: &'m Model,
    pub derived: Derived,
    pub system: GlobalSystem,
    /// Stiffness-damping Laplacian $\hat K_\beta$ (for the $\tfrac1h\mathcal Dx_t$ term).
    pub kbeta: CscMatrix,
    pub config: SolverConfig,
    /// Prescribed DoF indices into node-major vectors.
    pub prescribed: Vec<usize>,
    /// Time spent assembling and factoring (s).
    pub setup_seconds: f64,
    /// Compute the TR ratio ρ and blend α at the end of every step (needed by the
    /// `trust_region` backward filter; costs one extra local step and one product with A).
    pub compute_tr: bool,
    /// Contact candidates: boundary nodes without prescribed DoFs (contact on a prescribed
    /// DoF has no effect and is skipped).
    pub contact_nodes: Vec<usize>,
    /// Multipliers of the previous step per (node, obstacle), for warm starts.
    contact_warm: HashMap<(usize, usize), [f64; 3]>,
    /// Warm starts of the per-sample projections (the local step).
    pub(crate) warm: Vec<Vector3<f64>>,
    /// Hessian pattern and reusable symbolic factor of Newton's steps, shared with the PD
    /// method's direct fallback (`solver.direct_fallback`).
    pub(crate) newton_system: Option<Box<NewtonSystem>>,
    /// The same for the direct adjoint (`backward.direct_after`, the Newton baseline's
    /// adjoint): its pattern, ordering and symbolic factor are the rollout's, computed at its
    /// first direct solve and reused by every later one (numeric refactorization only).
    pub(crate) adjoint_system: std::sync::Mutex<Option<Box<NewtonSystem>>>,
    /// `solver.diffpd_linear = "schwarz"`: the Schwarz system of the prescribed DoFs it was
    /// built for (`diffpd::schwarz_system`; rebuilt when the glue contact pins others).
    pub(crate) schwarz: std::sync::Mutex<Option<SchwarzCache>>,
    /// Accelerator of the PD iteration's local step and global solve (`--backend`), if any.
    pub offload: Option<Box<dyn Offload + Send + Sync + 'm>>,
    /// The caller's cancellation token, polled once per iteration of every loop of a step
    /// and of its backward ([`crate::cancel`]); a tripped poll is
    /// [`SolverError::Cancelled`]. Taken from [`crate::cancel::Cancel::current`] when the
    /// simulator is built; a caller may replace it.
    pub cancel: crate::cancel::Cancel,
}

/// The Schwarz system of `solver.diffpd_linear = "schwarz"` with the prescribed DoFs it was
/// built for (`diffpd::schwarz_system`).
pub type SchwarzCache = (Vec<usize>, Arc<SchwarzSystem>);

/// What a step's contact treatment leaves for [`StepContext::contact_finish`].
pub(crate) struct ContactOutcome {
    /// NCP contact set and converged multipliers.
    pub ncp: Option<(ContactSet, Vec<f64>)>,
    /// Explicit penalty forces and pairs (penalty model).
    pub penalty_force: Option<(Vec<f64>, usize)>,
    /// Solve counts and times of the step.
    pub stats: ContactStats,
}

/// Settings of the per-iteration NCP contact solve from `[contact]`.
pub(crate) fn contact_settings(model: &Model) -> contact::SolveSettings {
    contact::SolveSettings {
        fb: FbParams {
            smoothing: model.contact.smoothing,
            s_floor: model.contact.s_floor,
        },
        tolerance: model.contact.tolerance,
        max_newton: model.contact.max_newton,
        max_seconds: model.contact.max_seconds,
        cancel: crate::cancel::Cancel::never(),
    }
}

/// The simulator's own system and prescribed list while [`StepContext::pin_nodes`] has
/// swapped in a pinned one.
pub struct PinnedNodes {
    system: GlobalSystem,
    prescribed: Vec<usize>,
}

/// Euclidean norm.
pub fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

impl<'m> StepContext<'m> {
    /// The linear-algebra plan of `model`'s PD matrix with `derived` (ordering and symbolic
    /// analysis, no numeric factorization): what [`StepContext::with_plan`] factors on. The
    /// caller can estimate the factor's memory ([`SystemPlan::factor_bytes`]) before it is
    /// allocated, then pass the plan on.
    pub fn plan(model: &Model, derived: &Derived) -> Result<Arc<SystemPlan>, SolverError> {
        let (a, _) = assembly::pd_matrices(model, derived, model.h);
        Ok(Arc::new(SystemPlan::new(&a, model.dirichlet_sets())?))
    }

    /// Assemble and factor $A$ of `model` with `derived` (spec §6.1
    /// SETUP) on `plan` (its ordering and symbolic analysis) when the plan fits the model's
    /// pattern and Dirichlet sets; otherwise (or without a plan) a new plan is built. The
    /// plan used is [`GlobalSystem::plan`]. `config.method` is the requested method; the
    /// simulator resolves `auto` when it registers its stepper.
    pub fn with_plan(
        model: &'m Model,
        derived: Derived,
        settings: &SolverSettings,
        plan: Option<Arc<SystemPlan>>,
    ) -> Result<Self, SolverError> {
        let t0 = Instant::now();
        let (a, kbeta) = assembly::pd_matrices(model, &derived, model.h);
        let sets = model.dirichlet_sets();
        let system = match plan {
            Some(p) if p.fits(&a, &sets) => GlobalSystem::with_plan(a, p)?,
            _ => GlobalSystem::new(a, sets.clone())?,
        };
        let mut prescribed: Vec<usize> = (0..3)
            .flat_map(|d| sets[d].nodes.iter().map(move |&i| 3 * i + d))
            .collect();
        prescribed.sort_unstable();
        let config = SolverConfig::from_settings(settings, derived.heterogeneous);
        let contact_nodes: Vec<usize> = model
            .boundary_nodes
            .iter()
            .copied()
            .filter(|&i| (0..3).all(|d| prescribed.binary_search(&(3 * i + d)).is_err()))
            .collect();
        if let Some(p) = crate::contact::initial::deepest_penetration(
            model,
            &model.obstacles,
            &contact_nodes,
            &model.x0,
            model.contact_margin,
        ) {
            return Err(SolverError::InitialPenetration(Box::new(p)));
        }
        if model.contact.bodies {
            if let Some(o) = crate::contact::initial::deepest_body_overlap(
                model,
                &contact_nodes,
                &model.x0,
                model.contact_margin,
            ) {
                return Err(SolverError::InitialOverlap(Box::new(o)));
            }
        }
        Ok(StepContext {
            contact_nodes,
            contact_warm: HashMap::new(),
            model,
            warm: vec![Vector3::zeros(); model.num_samples()],
            derived,
            system,
            kbeta,
            config,
            prescribed,
            setup_seconds: t0.elapsed().as_secs_f64(),
            compute_tr: false,
            newton_system: None,
            adjoint_system: std::sync::Mutex::new(None),
            schwarz: std::sync::Mutex::new(None),
            offload: None,
            cancel: crate::cancel::Cancel::current(),
        })
    }

    /// The attached accelerator ([`StepContext::offload`], `--backend`), if any: every stage
    /// the solver hands to it goes through this or [`StepContext::accelerator_mut`].
    pub fn accelerator(&self) -> Option<&(dyn Offload + Send + Sync + 'm)> {
        self.offload.as_deref()
    }

    /// The attached accelerator, mutably (the forward's stages: local step, global solve,
    /// the resident PD loop, the muscle time).
    pub fn accelerator_mut(&mut self) -> Option<&mut (dyn Offload + Send + Sync + 'm)> {
        self.offload.as_deref_mut()
    }

    /// `Err(ContactTimeLimit)` for a step whose contact solve hit `contact.max_seconds`
    /// under `on_nonconvergence = "error"` (the other modes record it in the step's contact
    /// statistics and leave the step non-converged). Shared by the PD path and Newton.
    pub(crate) fn contact_time_limit(
        &self,
        frame: usize,
        stats: &StepStats,
    ) -> Result<(), SolverError> {
        let hit = stats.contact.as_ref().and_then(|c| c.time_limit_iteration);
        match hit {
            Some(iteration)
                if self.config.on_nonconvergence == crate::model::OnNonConvergence::Error =>
            {
                Err(SolverError::ContactTimeLimit {
                    frame,
                    iteration,
                    max_seconds: self.model.contact.max_seconds,
                })
            }
            _ => Ok(()),
        }
    }

    /// Hold the nodes `pinned` fixed (all three axes) as extra Dirichlet DoFs: the PD matrix
    /// factored with them added to the Dirichlet sets and the enlarged prescribed list are
    /// swapped in; the originals are returned for [`StepContext::unpin_nodes`]. DiffPD's glue
    /// contact (diffpd-notes §1.9) solves its steps so, and the backward linearizes such a
    /// step the same way ([`crate::solver::stepper::Stepper::pinned_nodes`]): the reduced system
    /// $A_{\bar C\bar C}$ of Eq. 35, here refactored per active set instead of DiffPD's
    /// Woodbury update (Alg. 4; same matrix).
    pub fn pin_nodes(&mut self, pinned: &[usize]) -> Result<PinnedNodes, SolverError> {
        // the same unreduced A the simulator factored; only the Dirichlet sets grow
        let a = self.system.a.clone();
        let mut sets = self.model.dirichlet_sets();
        let mut pres = self.prescribed.clone();
        for set in sets.iter_mut() {
            set.nodes.extend_from_slice(pinned);
            set.nodes.sort_unstable();
            set.nodes.dedup();
        }
        for &i in pinned {
            pres.extend([3 * i, 3 * i + 1, 3 * i + 2]);
        }
        pres.sort_unstable();
        pres.dedup();
        let sys = GlobalSystem::new(a, sets)?;
        Ok(PinnedNodes {
            system: std::mem::replace(&mut self.system, sys),
            prescribed: std::mem::replace(&mut self.prescribed, pres),
        })
    }

    /// Undo [`StepContext::pin_nodes`].
    pub fn unpin_nodes(&mut self, saved: PinnedNodes) {
        self.system = saved.system;
        self.prescribed = saved.prescribed;
    }

    /// Zero the prescribed (Dirichlet) entries of a node-major vector: the free-DoF part
    /// of a residual, step or adjoint right-hand side.
    pub fn zero_prescribed(&self, v: &mut [f64]) {
        for &k in &self.prescribed {
            v[k] = 0.0;
        }
    }

    /// Set the prescribed entries of `x` to their Dirichlet values `xd`.
    pub fn impose_prescribed(&self, x: &mut [f64], xd: &[f64]) {
        for &k in &self.prescribed {
            x[k] = xd[k];
        }
    }

    /// Inertial target $\mathbf y=x_t+hv_t+h^2M^{-1}f_{ext}$ of an implicit-Euler step.
    pub fn inertial_target(&self, x_t: &[f64], v_t: &[f64], f_ext: &[f64]) -> Vec<f64> {
        let h = self.model.h;
        let m = &self.derived.mass;
        (0..x_t.len())
            .map(|j| x_t[j] + h * v_t[j] + h * h * f_ext[j] / m[j / 3])
            .collect()
    }

    /// Constant part of the RHS: $c=\tfrac1{h^2}My+\tfrac1h(\alpha Mx_t+\hat K_\beta x_t)$ with
    /// $y=x_t+hv_t+h^2M^{-1}f$ (Eqs. 3, 31).
    pub fn rhs_constant(&self, x_t: &[f64], v_t: &[f64], f_ext: &[f64]) -> Vec<f64> {
        let h = self.model.h;
        let n = self.model.num_nodes();
        let m = &self.derived.mass;
        let mut c = vec![0.0; 3 * n];
        let mut t = vec![0.0; n];
        for d in 0..3 {
            self.kbeta.matvec_axis(x_t, d, &mut t);
            for i in 0..n {
                let k = 3 * i + d;
                let y = x_t[k] + h * v_t[k] + h * h * f_ext[k] / m[i];
                c[k] = m[i] * y / (h * h) + (self.derived.node_alpha[i] * m[i] * x_t[k] + t[i]) / h;
            }
        }
        c
    }

    /// Explicit penalty contact forces of the step from $t$ (`[contact] model = "penalty"`
    /// with obstacles), added to `f_ext`; returns (forces, pairs), `None` for other models.
    pub(crate) fn penalty_forces(
        &self,
        t_start: f64,
        x_t: &[f64],
        v_t: &[f64],
        f_ext: &mut [f64],
    ) -> Option<(Vec<f64>, usize)> {
        let model = self.model;
        if !contact::penalty_enabled(model) {
            return None;
        }
        let mut fp = vec![0.0; f_ext.len()];
        let start = contact::StepStart {
            t: t_start,
            x: x_t,
            v: v_t,
        };
        let (pairs, _) = contact::penalty::add_forces(model, &self.contact_nodes, &start, &mut fp);
        f_ext.iter_mut().zip(&fp).for_each(|(a, b)| *a += b);
        Some((fp, pairs))
    }

    /// NCP contact set of the step from $t$ (spec §6.2 step 3): obstacle candidates with
    /// frozen frames, body–body candidates with `[contact] bodies`, and the multipliers
    /// warm-started from the previous step. `None` without NCP contact or candidates. Shared
    /// by the PD path and the Newton baseline.
    pub(crate) fn contact_begin(
        &self,
        t_start: f64,
        x_t: &[f64],
        v_t: &[f64],
    ) -> Option<(ContactSet, Vec<f64>)> {
        let model = self.model;
        if !contact::enabled(model) || contact::penalty_enabled(model) {
            return None;
        }
        let start = contact::StepStart {
            t: t_start,
            x: x_t,
            v: v_t,
        };
        let mut set = ContactSet::build(
            model,
            &model.obstacles,
            &self.contact_nodes,
            &model.contact_kappa,
            model.contact_margin,
            &start,
        );
        if model.contact.bodies {
            contact::bodies::add_candidates(
                &mut set,
                model,
                &self.contact_nodes,
                &model.contact_kappa,
                model.contact_margin,
                &start,
            );
        }
        if set.is_empty() {
            return None;
        }
        let mut lambda = vec![0.0; set.nrows()];
        for j in 0..set.len() {
            if let Some(w) = self.contact_warm.get(&(set.node[j], set.obstacle[j])) {
                for (a, r) in set.rows(j).enumerate() {
                    lambda[r] = w[a];
                }
            }
        }
        Some((set, lambda))
    }

    /// End of a step with contact (spec §6.2 steps 24–27): record the converged multipliers
    /// (the tape of the backward), apply restitution, keep the warm start, and fill the
    /// step's contact statistics (solve counts and times from `cstats`, max penetration
    /// at $t+h$). Shared by the PD path and the Newton baseline.
    pub(crate) fn contact_finish(
        &mut self,
        frame: usize,
        outcome: ContactOutcome,
        (x_t, v_t): (&[f64], &[f64]),
        x: &mut [f64],
        stats: &mut StepStats,
    ) {
        let ContactOutcome {
            ncp,
            penalty_force,
            stats: mut cstats,
        } = outcome;
        let model = self.model;
        if !contact::enabled(model) {
            return;
        }
        let fb = contact_settings(model).fb;
        let t_end = frame as f64 * model.h;
        if let Some((set, lambda)) = ncp {
            let rec = ContactRecord::new(set, lambda, x, &fb);
            self.restitution(&rec, x_t, v_t, x);
            self.contact_warm.clear();
            for j in 0..rec.set.len() {
                let mut w = [0.0; 3];
                for (a, r) in rec.set.rows(j).enumerate() {
                    w[a] = rec.lambda[r];
                }
                self.contact_warm
                    .insert((rec.set.node[j], rec.set.obstacle[j]), w);
            }
            let mut st = rec.stats.clone();
            st.newton_iterations = cstats.newton_iterations;
            st.factorizations = cstats.factorizations;
            st.products = cstats.products;
            st.seconds_setup = cstats.seconds_setup;
            st.seconds_solve = cstats.seconds_solve;
            st.time_limit_iteration = cstats.time_limit_iteration;
            cstats = st;
            stats.contact_record = Some(Box::new(rec));
        } else {
            self.contact_warm.clear();
        }
        if let Some((fp, pairs)) = penalty_force {
            cstats.candidates = pairs;
            cstats.active = pairs;
            stats.contact_record = Some(Box::new(ContactRecord {
                penalty_forces: Some(fp),
                ..Default::default()
            }));
        }
        cstats.max_penetration =
            contact::max_penetration(&model.obstacles, &model.boundary_nodes, x, t_end);
        if model.contact.bodies {
            cstats.max_penetration = cstats
                .max_penetration
                .max(contact::bodies::max_penetration(model, x));
        }
        stats.contact = Some(cstats);
    }

    /// Restitution post-correction (spec §6.2 step 24, S0 §7.1): for an active contact on an
    /// obstacle with $e_r>0$ and approaching normal velocity $v^{in}_n<0$, raise the outgoing
    /// normal velocity to $-e_rv^{in}_n$. Not differentiated (the backward treats the
    /// corrected state as the step's output).
    fn restitution(&self, rec: &ContactRecord, x_t: &[f64], v_t: &[f64], x: &mut [f64]) {
        let h = self.model.h;
        let set = &rec.set;
        for j in 0..set.len() {
            if set.obstacle[j] == contact::BODY {
                continue;
            }
            let e = self.model.obstacles[set.obstacle[j]].restitution;
            if e <= 0.0 || rec.state[j] == contact::State::Separated {
                continue;
            }
            let i = set.node[j];
            let n = set.normal[j];
            let u_obs = set.obstacle_motion[j];
            let vt = Vector3::new(v_t[3 * i], v_t[3 * i + 1], v_t[3 * i + 2]);
            let v_in = n.dot(&(vt - u_obs / h));
            if v_in >= 0.0 {
                continue;
            }
            let dx = Vector3::new(
                x[3 * i] - x_t[3 * i],
                x[3 * i + 1] - x_t[3 * i + 1],
                x[3 * i + 2] - x_t[3 * i + 2],
            );
            let v_out = n.dot(&(dx - u_obs)) / h;
            if v_out < -e * v_in {
                let corr = n * (h * (-e * v_in - v_out));
                for d in 0..3 {
                    x[3 * i + d] += corr[d];
                }
            }
        }
    }

    pub(crate) fn first_bad_element(&self, x: &[f64]) -> Option<usize> {
        (0..self.model.num_samples())
            .find(|&s| {
                !self
                    .model
                    .deformation_gradient(s, x)
                    .iter()
                    .all(|v| v.is_finite())
            })
            .map(|s| self.model.samples.elem[s])
    }
}
