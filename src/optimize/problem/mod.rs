//! An inverse problem: a scene's model, its loss and its declared parameters, evaluated at
//! a parameter vector θ — the shared machinery of `gradcheck` and `optimize`.
//!
//! One evaluation = build the model at θ → refactor $A$ (spec §5.4: once per evaluation) →
//! forward rollout (tape) → loss → reverse sweep → $d\mathcal L/d\theta$.

mod error;
mod terms;

use error::setup;
pub use error::ProblemError;
pub use terms::{parse_forces, ForceSample};

use super::params::{expand, Param};
use crate::linalg::SystemPlan;
use crate::scene::{LoadedScene, LossTermSpec};
use crate::solver::config::BackwardConfig;
use crate::solver::loss::{seeded_uniform, Loss, Term};
use crate::solver::offload::DeviceTraffic;
use crate::solver::rollout;
use crate::solver::{Model, Simulator, SolverError};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use terms::{chamfer_term, force_term, simulate_reference, tracking_from_frames};

/// Result of one evaluation.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Evaluation {
    /// The method the forward and backward ran (`solver.method`, `auto` resolved).
    pub method: crate::model::SolverMethod,
    /// Why `solver.method = "auto"` chose it (absent for an explicit method).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method_reason: Option<String>,
    /// Why `backward.adjoint = "auto"` solved the frames as it did (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adjoint_reason: Option<String>,
    /// The loss, the penalties of `regularize` included.
    pub loss: f64,
    /// The penalties' part of `loss` (only with a `regularize` declaration).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regularization: Option<f64>,
    /// $d\mathcal L/d\theta$ (empty when not requested).
    pub gradient: Vec<f64>,
    /// Assembly, ordering and factorization of the global matrix (s; part of the forward).
    pub setup_seconds: f64,
    /// The accelerator's one-time setup (s; part of the forward): on a GPU backend its host
    /// factorization, the upload and build of the device factor and the self-check.
    pub accelerator_setup_seconds: f64,
    /// The whole forward, `setup_seconds` and `accelerator_setup_seconds` included (per-frame
    /// figures subtract both).
    pub forward_seconds: f64,
    /// Forward phases: local step, global solve, other (Anderson, gates, polish).
    pub forward_local_seconds: f64,
    pub forward_global_seconds: f64,
    pub forward_other_seconds: f64,
    pub backward_seconds: f64,
    /// The device's launches and copies in the forward and in the backward (GPU backends).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forward_traffic: Option<crate::solver::offload::DeviceTraffic>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backward_traffic: Option<crate::solver::offload::DeviceTraffic>,
    pub pd_iterations: usize,
    pub nonconverged_forward_frames: Vec<usize>,
    /// The first (frame, iteration) whose contact solve hit `contact.max_seconds`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contact_time_limit: Option<(usize, usize)>,
    pub adjoint_iterations: usize,
    pub nonconverged_backward_frames: Vec<usize>,
    /// Largest $|z|$ over the steps.
    pub max_abs_adjoint: f64,
    /// Samples whose prox Jacobian the backward filter changed, summed over steps.
    pub filtered_samples: usize,
    /// Bytes of states kept by the tape (see `backward.checkpoint_every`).
    pub tape_bytes: usize,
    /// Per parameter, the magnitude of the gradient's first-order error from the adjoint
    /// solves' residuals (only with [`Problem::estimate_error`]; docs/gradcheck.md "The
    /// gradient's error bar").
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gradient_error_estimate: Vec<f64>,
    /// How the estimate was made (only with [`Problem::estimate_error`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_estimate: Option<ErrorEstimateInfo>,
    /// Per-frame forward and adjoint diagnostics (spec §10.5 I4, I5).
    pub frames: Vec<FrameDiagnostics>,
    /// Node positions of the final frame (not serialised; `grad --final-state` writes them).
    #[serde(skip)]
    pub final_x: Vec<f64>,
    /// Largest node distance from the rest positions over the kept frames (every frame with
    /// `backward.checkpoint_every = 1`), in m: the scale of the motion, for relative state
    /// errors (not serialised; `grad --final-state` writes it).
    #[serde(skip)]
    pub max_displacement: f64,
}

/// The error sweep behind [`Evaluation::gradient_error_estimate`].
#[derive(Clone, Debug, serde::Serialize)]
pub struct ErrorEstimateInfo {
    /// The signed first-order error $g^*-\tilde g$ per parameter (its magnitude is the
    /// estimate).
    pub signed: Vec<f64>,
    /// Largest relative residual $\|g_t-K_t\tilde z_t\|/\|g_t\|$ of a step's adjoint
    /// (frames solved directly: taken as 0).
    pub max_relative_adjoint_residual: f64,
    /// Frames whose adjoint is another system (NCP contact rows, glue pins): not modelled.
    pub skipped_frames: Vec<usize>,
    /// GMRES iterations of the correction solves, and the seconds of the whole error sweep
    /// (not part of `backward_seconds`).
    pub iterations: usize,
    pub seconds: f64,
}

/// Per-frame diagnostics of one evaluation.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FrameDiagnostics {
    pub frame: usize,
    pub pd_iterations: usize,
    pub pd_converged: bool,
    /// TR ratio ρ and blend α of the step (with `backward.filter = "trust_region"`).
    pub rho: Option<f64>,
    pub alpha: Option<f64>,
    /// Host seconds of the step outside the local and global phases (the Newton–Krylov
    /// phase, its direct fallback, the line searches' energies).
    pub seconds_other: f64,
    /// Newton–Krylov steps of the step (`mode = "accurate"`).
    pub newton_krylov_steps: usize,
    /// The direct fallback's Newton record where it ran (or the Newton method's): on the
    /// device path this is host factorizations (issue 15: the 56k box's forward on an H200).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newton: Option<crate::solver::stats::NewtonStats>,
    /// `solver.method = "auto"`: the method whose attempt at this step missed its stopping
    /// test before the other one solved it (`solver::stepper::auto`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retried_from: Option<crate::model::SolverMethod>,
    /// `solver.method = "auto"`: the method that solved the step (the backward used its
    /// adjoint), and the PD probe's iteration cap where the step began with one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<crate::model::SolverMethod>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_budget: Option<usize>,
    /// `solver.method = "auto"`: the iterations and wall seconds of the attempts that missed
    /// (a failed probe or a retry), not counted above.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missed_iterations: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missed_seconds: Option<f64>,
    /// `solver.diffpd_linear = "schwarz"`: the step's PCG solves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schwarz: Option<crate::solver::stats::PcgStats>,
    pub adjoint: Option<crate::solver::stats::AdjointStats>,
}

/// Model + loss + parameters.
pub struct Problem {
    pub ls: LoadedScene,
    pub base: Model,
    pub params: Vec<Param>,
    /// Smoothness penalties of field parameters (`[[parameter]] regularize`), added to the
    /// loss.
    pub regularizers: Vec<super::regularize::Regularizer>,
    pub loss: Loss,
    pub backward: BackwardConfig,
    /// Compute the forward TR statistics (needed by the `trust_region` filter).
    pub needs_tr: bool,
    /// Keep every K-th state (`backward.checkpoint_every`).
    pub checkpoint_every: usize,
    /// Ordering and symbolic analysis of the global matrix, built by the first evaluation
    /// and reused by the later ones (the pattern depends on the mesh and the Dirichlet sets
    /// only, not on the parameters).
    plan: Mutex<Option<Arc<SystemPlan>>>,
    /// `solver.method = "auto"` as the first evaluation resolved it, kept for every later
    /// one (a parameter that moves E would otherwise move the stiffness contrast and could
    /// switch the method between the iterates of one optimization).
    method_choice: Mutex<Option<crate::solver::auto::MethodChoice>>,
    /// `backward.adjoint = "auto"` as the first evaluation resolved it.
    adjoint_choice: Mutex<Option<crate::solver::auto::AdjointChoice>>,
    /// Bytes the direct adjoint's factor may take (`backward.adjoint = "auto"`); `None`: no
    /// limit known. The CLI sets it from `--max-memory` or the memory available.
    pub memory_budget: Option<u64>,
    /// Attaches an accelerator (`Simulator::offload`) to the simulator of every evaluation,
    /// so that its forward and backward run on it (`--backend`; set by the CLI, which knows
    /// the devices: this layer does not). `None`: the CPU path.
    pub accelerate: Option<Box<Accelerate>>,
    /// Estimate the gradient's error from the adjoint residuals with every gradient
    /// ([`crate::solver::adjoint::error_estimate`]; `grad` sets it).
    pub estimate_error: bool,
}

/// The closure of [`Problem::accelerate`]: attach an accelerator to a simulator, or say why not.
pub type Accelerate =
    dyn Fn(&mut Simulator) -> Result<(), crate::solver::offload::OffloadError> + Send + Sync;

impl Problem {
    /// Build from a loaded scene; `[loss]` and `[[parameter]]` must be present.
    pub fn new(ls: LoadedScene) -> Result<Self, ProblemError> {
        Self::build(ls, true)
    }

    /// The scene's `[[parameter]]`s (none is allowed) with an empty loss: for a caller who
    /// supplies the cotangents itself (`session::Tape`); the scene's `[loss]`, if any, is
    /// neither read nor checked.
    pub fn without_loss(ls: LoadedScene) -> Result<Self, ProblemError> {
        Self::build(ls, false)
    }

    fn build(ls: LoadedScene, with_loss: bool) -> Result<Self, ProblemError> {
        let base = Model::from_scene(&ls)?;
        let spec = match (with_loss, ls.scene.loss.clone()) {
            (false, _) => crate::scene::LossSpec {
                terms: vec![],
                reference: None,
            },
            (true, spec) => spec.ok_or_else(|| setup("loss", "the scene has no [loss] section"))?,
        };
        if with_loss && spec.terms.is_empty() {
            return Err(setup("loss.term", "declare at least one [[loss.term]]"));
        }
        let params = expand(&ls.scene.parameters, &base).map_err(|(k, m)| setup(&k, m))?;
        let regularizers = super::regularize::build(&ls.scene.parameters, &params, &base)
            .map_err(|(k, m)| setup(&k, m))?;
        let mut terms = Vec::new();
        let mut reference: Option<Vec<Vec<f64>>> = None;
        for (i, t) in spec.terms.iter().enumerate() {
            let key = format!("loss.term[{i}]");
            terms.push(match t {
                LossTermSpec::Tracking { weight, reference_dir } => {
                    if let Some(dir) = reference_dir {
                        tracking_from_frames(&base, &ls.resolve(dir), *weight, &key)?
                    } else {
                        if reference.is_none() {
                            let sets = spec.reference.as_ref().map(|r| r.set.clone()).ok_or_else(|| {
                                setup(&key, "a tracking term needs `reference_dir` or a [loss.reference] section")
                            })?;
                            reference = Some(simulate_reference(&ls, &base, &sets)?);
                        }
                        let xs = reference.as_ref().expect("reference is set just above when it was None");
                        let n = base.num_nodes();
                        let frames = (1..xs.len()).map(|t| (t, (0..n).map(|i| [xs[t][3 * i], xs[t][3 * i + 1], xs[t][3 * i + 2]]).collect())).collect();
                        Term::Tracking { weight: *weight, nodes: (0..n).collect(), frames }
                    }
                }
                LossTermSpec::CenterOfMass { weight, body, target } => {
                    let b = base.bodies.get(*body).ok_or_else(|| setup(&format!("{key}.body"), format!("body {body} does not exist")))?;
                    let nodes: Vec<usize> = b.nodes.clone().collect();
                    let d = base.derive(&base.params);
                    let weights = nodes.iter().map(|&i| d.mass[i] / base.params.density[*body]).collect();
                    Term::CenterOfMass { weight: *weight, nodes, weights, target: *target }
                }
                LossTermSpec::CenterOfMassDirection { weight, body, direction } => {
                    let b = base.bodies.get(*body).ok_or_else(|| setup(&format!("{key}.body"), format!("body {body} does not exist")))?;
                    let len = direction.iter().map(|v| v * v).sum::<f64>().sqrt();
                    if !(len.is_finite() && len > 0.0) {
                        return Err(setup(&format!("{key}.direction"), "expected a finite non-zero vector"));
                    }
                    let nodes: Vec<usize> = b.nodes.clone().collect();
                    let d = base.derive(&base.params);
                    let weights = nodes.iter().map(|&i| d.mass[i] / base.params.density[*body]).collect();
                    Term::CenterOfMassDirection { weight: *weight, nodes, weights, direction: direction.map(|v| v / len) }
                }
                LossTermSpec::NodeTarget { weight, body, select, target } => {
                    let b = base.bodies.get(*body).ok_or_else(|| setup(&format!("{key}.body"), format!("body {body} does not exist")))?;
                    let pts: Vec<[f64; 3]> = b.nodes.clone().map(|i| base.rest[i]).collect();
                    let (lo, hi) = bbox(&pts);
                    let tol = 1e-9 * (0..3).map(|d| hi[d] - lo[d]).fold(0.0, f64::max);
                    let local = select.select(&format!("{key}.select"), &pts, tol, &ls.base_dir).map_err(|(k, m)| setup(&k, m))?;
                    if local.is_empty() {
                        return Err(setup(&format!("{key}.select"), "selects no node"));
                    }
                    Term::NodeTarget { weight: *weight, nodes: local.iter().map(|i| i + b.nodes.start).collect(), target: *target }
                }
                LossTermSpec::Chamfer { weight, body, captures, capture_dir, reduction } => {
                    chamfer_term(&ls, &base, (*weight, *body, captures, capture_dir.as_deref(), *reduction), &key)?
                }
                LossTermSpec::ContactForce { weight, obstacle, direction, file } => {
                    force_term(&ls, &base, (*weight, *obstacle, *direction, file), &key)?
                }
                LossTermSpec::RandomLinear { weight, seed } => {
                    let n3 = 3 * base.num_nodes();
                    Term::RandomLinear { weight: *weight, cx: seeded_uniform(*seed, n3), cv: seeded_uniform(seed.wrapping_add(0x5DEECE66D), n3) }
                }
            });
        }
        let b = &ls.scene.backward;
        let backward = BackwardConfig {
            rel_tol: b.rel_tol,
            abs_tol: b.abs_tol,
            max_iterations: b.max_iterations,
            window: b.anderson_window,
            gamma_max: ls.scene.solver.anderson_gamma_max,
            filter: b.filter,
            gmres_restart: b.gmres_restart,
            method: b.method,
            // `adjoint = "auto"` is resolved per evaluation (`backward_config`)
            direct_after: b.direct_after.unwrap_or(crate::model::DEFAULT_DIRECT_AFTER),
            direct_first: b.direct_after.is_none()
                && b.adjoint == crate::model::AdjointSolve::Direct,
            device_direct_after: b.device_direct_after,
            device_gmres_restart: b.device_gmres_restart,
        };
        let needs_tr = b.filter == crate::model::HessianFilterMode::TrustRegion;
        let ls_checkpoint = b.checkpoint_every.max(1);
        Ok(Problem {
            ls,
            base,
            params,
            regularizers,
            loss: Loss { terms },
            backward,
            needs_tr,
            checkpoint_every: ls_checkpoint,
            plan: Mutex::new(None),
            method_choice: Mutex::new(None),
            adjoint_choice: Mutex::new(None),
            memory_budget: None,
            accelerate: None,
            estimate_error: false,
        })
    }

    /// Plan the linear algebra at θ₀ (ordering and symbolic analysis, no numeric factor)
    /// and keep it for the evaluations: lets the caller estimate the factor's memory
    /// before the first evaluation allocates it.
    pub fn prepare_plan(&self) -> Result<Arc<SystemPlan>, SolverError> {
        let model = self.model_at(&self.theta0());
        let derived = model.derive(&model.params);
        let plan = Simulator::plan(&model, &derived)?;
        *self.plan.lock().unwrap_or_else(|e| e.into_inner()) = Some(plan.clone());
        Ok(plan)
    }

    /// The linear-algebra plan of the last evaluation (or of [`Problem::prepare_plan`];
    /// `None` before either).
    pub fn plan(&self) -> Option<Arc<SystemPlan>> {
        self.plan.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// How `solver.method = "auto"` was resolved (by the first evaluation; `None` before it
    /// and for an explicit method).
    pub fn method_choice(&self) -> Option<crate::solver::auto::MethodChoice> {
        self.method_choice
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Use `choice` for `solver.method = "auto"` in every evaluation (a problem derived from
    /// another, e.g. `grad --verify`'s tight one, keeps the other's method).
    pub fn pin_method_choice(&self, choice: Option<crate::solver::auto::MethodChoice>) {
        *self.method_choice.lock().unwrap_or_else(|e| e.into_inner()) = choice;
    }

    /// `solver.method = "auto"` resolved on the base model before any evaluation (its
    /// symbolic analysis is kept for the evaluations): what `grad` and `optimize` log up
    /// front. `None` for an explicit method.
    pub fn resolve_method(&self) -> Result<Option<crate::solver::auto::MethodChoice>, SolverError> {
        if self.ls.scene.solver.method != crate::model::SolverMethod::Auto {
            return Ok(None);
        }
        if let Some(c) = self.method_choice() {
            return Ok(Some(c));
        }
        let plan = match self.plan() {
            Some(p) => p,
            None => self.prepare_plan()?,
        };
        let mut q = crate::solver::auto::MethodQuantities::of(&self.base, &plan);
        q.device = self.accelerate.is_some();
        let c = crate::solver::auto::choose_method(&q);
        self.pin_method_choice(Some(c.clone()));
        Ok(Some(c))
    }

    /// `solver.method = "auto"`: give `sim` (built on a model of this problem) the method
    /// the problem's first evaluation chose, or record `sim`'s choice when it is the first.
    /// Explicit methods: nothing.
    pub fn pin_method(&self, sim: &mut Simulator) {
        let Some(own) = &sim.config.choice else {
            return;
        };
        let mut pinned = self.method_choice.lock().unwrap_or_else(|e| e.into_inner());
        let c = match &*pinned {
            Some(c) => c.clone(),
            None => {
                // with an accelerator (`accelerate`), the device rule
                let mut q = own.quantities.clone();
                q.device = self.accelerate.is_some();
                crate::solver::auto::choose_method(&q)
            }
        };
        sim.set_method_choice(c.clone());
        *pinned = Some(c);
    }

    /// The backward settings of an evaluation on `sim`: the scene's, with `backward.adjoint
    /// = "auto"` resolved (once, by the first evaluation; `solver::auto::choose_adjoint` over
    /// `sim`'s symbolic analysis, its device and [`Problem::memory_budget`]). The choice, if
    /// any, is returned for the logs.
    pub fn backward_config(
        &self,
        sim: &Simulator,
    ) -> (BackwardConfig, Option<crate::solver::auto::AdjointChoice>) {
        let b = &self.ls.scene.backward;
        let mut cfg = self.backward.clone();
        if b.adjoint != crate::model::AdjointSolve::Auto || b.direct_after.is_some() {
            return (cfg, None);
        }
        let mut pinned = self
            .adjoint_choice
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let c = pinned
            .get_or_insert_with(|| {
                let mut q = crate::solver::auto::MethodQuantities::of(sim.model, sim.system.plan());
                q.device = sim.offload.is_some();
                crate::solver::auto::choose_adjoint(&q, self.memory_budget)
            })
            .clone();
        cfg.direct_first = c.direct_first;
        cfg.direct_after = c.direct_after;
        (cfg, Some(c))
    }

    /// The scene's `solver.method` with `auto` replaced by the method it resolved to (what
    /// `optimize` writes into `optimized.toml`).
    pub fn resolved_method(&self) -> crate::model::SolverMethod {
        match self.method_choice() {
            Some(c) => c.method,
            None => self.ls.scene.solver.method,
        }
    }

    /// The scalar parameters' names, in θ order.
    pub fn names(&self) -> Vec<&str> {
        self.params.iter().map(|p| p.name.as_str()).collect()
    }

    /// Working variables of the scene's values.
    pub fn theta0(&self) -> Vec<f64> {
        self.params
            .iter()
            .map(|p| p.to_theta(p.value(&self.base)))
            .collect()
    }

    /// Parameter values (user units) at θ.
    pub fn values_at(&self, theta: &[f64]) -> Vec<f64> {
        self.params
            .iter()
            .zip(theta)
            .map(|(p, &t)| p.from_theta(t))
            .collect()
    }

    /// The model at θ.
    pub fn model_at(&self, theta: &[f64]) -> Model {
        super::params::apply_all(&self.params, &self.base, &self.values_at(theta))
    }

    /// Evaluate the loss, and the gradient if `with_gradient`.
    pub fn evaluate(&self, theta: &[f64], with_gradient: bool) -> Result<Evaluation, SolverError> {
        let model = self.model_at(theta);
        let t0 = Instant::now();
        let plan = self.plan();
        let derived = model.derive(&model.params);
        let mut sim = Simulator::with_plan(&model, derived, &self.ls.scene.solver, plan)?;
        *self.plan.lock().unwrap_or_else(|e| e.into_inner()) = Some(sim.system.plan().clone());
        self.pin_method(&mut sim);
        sim.compute_tr = self.needs_tr && with_gradient;
        let t_attach = Instant::now();
        if let Some(attach) = &self.accelerate {
            attach(&mut sim).map_err(SolverError::Accelerator)?;
        }
        let accelerator_setup_seconds = t_attach.elapsed().as_secs_f64();
        let traffic = |sim: &Simulator| sim.offload.as_ref().and_then(|o| o.traffic());
        let traffic0 = traffic(&sim);
        let ro = rollout::forward(&mut sim, model.frames, self.checkpoint_every, &self.loss)?;
        let loss = ro.loss;
        let forward_seconds = t0.elapsed().as_secs_f64();
        let traffic1 = traffic(&sim);
        let span = |a: &Option<DeviceTraffic>, b: &Option<DeviceTraffic>| {
            Some(b.as_ref()?.since(a.as_ref()?))
        };
        let pd_iterations = ro.steps.iter().map(|s| s.iterations).sum();
        let nonconverged_forward_frames = ro
            .steps
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.converged)
            .map(|(t, _)| t + 1)
            .collect();
        let (penalty, penalty_grad) = if self.regularizers.is_empty() {
            (None, vec![])
        } else {
            let values = self.values_at(theta);
            let (r, g) = super::regularize::total(&self.regularizers, &self.params, &values);
            (Some(r), g)
        };
        let mut ev = Evaluation {
            method: sim.config.method,
            method_reason: sim.config.choice.as_ref().map(|c| c.reason.clone()),
            adjoint_reason: None,
            loss: loss + penalty.unwrap_or(0.0),
            regularization: penalty,
            gradient: vec![],
            setup_seconds: sim.setup_seconds,
            accelerator_setup_seconds,
            forward_seconds,
            forward_local_seconds: ro.steps.iter().map(|s| s.time_local).sum(),
            forward_global_seconds: ro.steps.iter().map(|s| s.time_global).sum(),
            forward_other_seconds: ro.steps.iter().map(|s| s.time_other).sum(),
            backward_seconds: 0.0,
            forward_traffic: span(&traffic0, &traffic1),
            backward_traffic: None,
            pd_iterations,
            nonconverged_forward_frames,
            contact_time_limit: ro
                .steps
                .iter()
                .enumerate()
                .find_map(|(t, s)| Some((t + 1, s.contact.as_ref()?.time_limit_iteration?))),
            adjoint_iterations: 0,
            nonconverged_backward_frames: vec![],
            max_abs_adjoint: 0.0,
            filtered_samples: 0,
            tape_bytes: ro.tape_bytes(),
            gradient_error_estimate: vec![],
            error_estimate: None,
            frames: ro
                .steps
                .iter()
                .enumerate()
                .map(|(t, st)| FrameDiagnostics {
                    frame: t + 1,
                    pd_iterations: st.iterations,
                    pd_converged: st.converged,
                    rho: st.tr.map(|r| r.rho),
                    alpha: st.tr.map(|r| r.alpha),
                    seconds_other: st.time_other,
                    newton_krylov_steps: st.polish_steps,
                    newton: st.newton.clone(),
                    retried_from: st.retried_from,
                    method: st.method,
                    probe_budget: st.probe_budget,
                    missed_iterations: st.missed_iterations,
                    missed_seconds: st.missed_seconds,
                    schwarz: st.schwarz,
                    adjoint: None,
                })
                .collect(),
            final_x: ro.final_x().to_vec(),
            max_displacement: max_displacement(&model.rest, ro.kept.values().map(|(x, _)| x)),
        };
        if with_gradient {
            let t1 = Instant::now();
            let (backward, adjoint) = self.backward_config(&sim);
            ev.adjoint_reason = adjoint.map(|c| c.reason);
            let br = rollout::backward_estimated(
                &mut sim,
                &ro,
                &self.loss,
                &backward,
                self.estimate_error,
            )?;
            ev.tape_bytes = ro.tape_bytes();
            let values = self.values_at(theta);
            if let Some(es) = &br.error {
                let signed: Vec<f64> = self
                    .params
                    .iter()
                    .zip(&values)
                    .map(|(p, &v)| p.gradient(&model, &es.grads, v))
                    .collect();
                ev.gradient_error_estimate = signed.iter().map(|e| e.abs()).collect();
                ev.error_estimate = Some(ErrorEstimateInfo {
                    signed,
                    max_relative_adjoint_residual: es.max_relative_residual,
                    skipped_frames: es.skipped_frames.clone(),
                    iterations: es.iterations,
                    seconds: es.seconds,
                });
            }
            ev.gradient = self
                .params
                .iter()
                .zip(&values)
                .map(|(p, &v)| p.gradient(&model, &br.grads, v))
                .collect();
            for (g, r) in ev.gradient.iter_mut().zip(&penalty_grad) {
                *g += r;
            }
            // the error sweep is reported on its own (`error_estimate.seconds`)
            let sweep = ev.error_estimate.as_ref().map_or(0.0, |e| e.seconds);
            ev.backward_seconds = t1.elapsed().as_secs_f64() - sweep;
            ev.backward_traffic = span(&traffic1, &traffic(&sim));
            ev.adjoint_iterations = br.adjoint.iter().map(|a| a.iterations).sum();
            ev.nonconverged_backward_frames = br.nonconverged();
            ev.max_abs_adjoint = br.adjoint.iter().map(|a| a.max_abs_z).fold(0.0, f64::max);
            ev.filtered_samples = br.adjoint.iter().map(|a| a.filtered_samples).sum();
            for a in br.adjoint {
                let f = a.frame;
                ev.frames[f - 1].adjoint = Some(a);
            }
        }
        Ok(ev)
    }
}

/// Largest $\|x_{t,i} - X_i\|$ over the given states $x_t$ (flat, 3 per node) and nodes.
fn max_displacement<'a>(rest: &[[f64; 3]], states: impl Iterator<Item = &'a Vec<f64>>) -> f64 {
    states
        .flat_map(|x| {
            rest.iter().zip(x.chunks_exact(3)).map(|(r, p)| {
                ((p[0] - r[0]).powi(2) + (p[1] - r[1]).powi(2) + (p[2] - r[2]).powi(2)).sqrt()
            })
        })
        .fold(0.0, f64::max)
}

fn bbox(p: &[[f64; 3]]) -> ([f64; 3], [f64; 3]) {
    let mut lo = [f64::INFINITY; 3];
    let mut hi = [f64::NEG_INFINITY; 3];
    for q in p {
        for d in 0..3 {
            lo[d] = lo[d].min(q[d]);
            hi[d] = hi[d].max(q[d]);
        }
    }
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest node distance from rest over all states, not only the last one.
    #[test]
    fn max_displacement_is_over_nodes_and_states() {
        let rest = [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]];
        let states = [
            vec![0.0, 0.0, 0.0, 1.0, 3.0, 4.0],
            vec![0.0, 0.0, 1.0, 1.0, 0.0, 0.0],
        ];
        assert_eq!(max_displacement(&rest, states.iter()), 5.0);
        assert_eq!(max_displacement(&rest, states[1..].iter()), 1.0);
    }

    /// Loss evaluations after the first reuse the first one's ordering and symbolic
    /// analysis (the same `Arc`), and give bitwise the loss and gradient of a problem that
    /// plans from scratch.
    #[test]
    fn later_evaluations_reuse_the_linear_algebra_plan() {
        let text = &crate::scene::overrides::fixture("scenes/unit/plan_reuse", &[]);
        let load = || crate::scene::load_str(text, std::path::Path::new("t.toml"), &[]).unwrap();
        let problem = Problem::new(load()).unwrap();
        assert!(problem.plan().is_none());
        let theta0 = problem.theta0();
        problem.evaluate(&theta0, true).unwrap();
        let plan = problem.plan().expect("planned by the first evaluation");
        let theta1: Vec<f64> = theta0.iter().map(|t| t + 0.3).collect();
        let second = problem.evaluate(&theta1, true).unwrap();
        assert!(Arc::ptr_eq(&plan, &problem.plan().unwrap()));
        let fresh = Problem::new(load())
            .unwrap()
            .evaluate(&theta1, true)
            .unwrap();
        assert_eq!(second.loss, fresh.loss);
        assert_eq!(second.gradient, fresh.gradient);
    }
}
