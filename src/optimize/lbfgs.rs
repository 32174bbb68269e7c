//! `diffphd optimize`: argmin's L-BFGS (More–Thuente or Hager–Zhang line search) on the
//! unconstrained optimizer variables $u$ of [`super::transform`], over a [`Problem`].
//!
//! - **One rollout per point.** argmin asks for the cost and the gradient separately (often
//!   at the same point); every new point runs one forward + adjoint pass and the pair
//!   (loss, $\nabla_u\mathcal L$) is memoised, keyed by the exact bits of $u$, behind a
//!   `Mutex` (the last [`CACHE`] points).
//! - **Scaling.** The optimizer minimises $c\,\mathcal L(u)$ with
//!   $c=$ `initial_step`$/\|\nabla_u\mathcal L(u_0)\|_\infty$, so the first trial step
//!   $-c\nabla_u\mathcal L$ moves the most sensitive variable by `initial_step`; later
//!   L-BFGS steps are invariant to $c$. Records and stopping rules use the unscaled loss.
//! - **Stopping** (checked after every iteration, the first that holds wins):
//!   $\|\nabla_u\mathcal L\|_2\le$ `grad_tol`$\cdot\|\nabla_u\mathcal L(u_0)\|_2$ or
//!   $\le$ `abs_grad_tol`; $|\mathcal L_{k-1}-\mathcal L_k|\le$ `rel_loss_tol`$\cdot|\mathcal L_{k-1}|$;
//!   $\mathcal L\le$ `target_loss`; `max_iterations`; `max_evaluations` (also enforced inside
//!   a line search: the evaluation that would exceed it is refused and the run ends); a
//!   line search that fails (argmin ends L-BFGS with its message).
//! - **Failures.** A forward/adjoint failure ([`crate::solver::SolverError`]), a non-finite
//!   loss or a parameter leaving its physical range (ν ∉ (−1, ½), a density, modulus or
//!   damping coefficient ≤ 0 / < 0) ends the run with status `failed`; an interrupt flag
//!   (Ctrl-C) ends it with `interrupted`, abandoning the evaluation in progress at its next
//!   solver iteration (the flag is the evaluation's `crate::cancel::Cancel` token). In every case the log
//!   keeps the best evaluated point.

use super::params::Param;
use super::problem::Problem;
use super::transform::VarMap;
use crate::scene::{LineSearchKind, OptimizeSettings};
use argmin::core::{
    CostFunction, Error, Executor, Gradient, IterState, Problem as ArgminProblem, Solver, State,
    TerminationReason, TerminationStatus, KV,
};
use argmin::solver::linesearch::{HagerZhangLineSearch, MoreThuenteLineSearch};
use argmin::solver::quasinewton::LBFGS;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Points memoised by the objective.
pub const CACHE: usize = 8;

/// A parameter as the optimizer sees it.
#[derive(Clone, Debug, Serialize)]
pub struct ParamInfo {
    pub name: String,
    pub kind: &'static str,
    pub body: usize,
    /// Index of the declaring `[[parameter]]`.
    pub index: usize,
    pub component: usize,
    pub log: bool,
    pub lower: Option<f64>,
    pub upper: Option<f64>,
    pub scale: f64,
    /// Start value (user units).
    pub initial: f64,
    /// Value in the scene (user units).
    pub scene_value: f64,
    /// The map u → value, in words.
    pub transform: String,
}

/// One loss + gradient evaluation (one forward and one adjoint rollout).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EvalRecord {
    pub index: usize,
    /// L-BFGS iteration that requested it (0: the start point).
    pub iteration: usize,
    /// The loss, a `regularize` penalty included.
    pub loss: f64,
    /// The penalties' part of `loss` (only with a `regularize` declaration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regularization: Option<f64>,
    /// Parameter values (user units).
    pub parameters: Vec<f64>,
    /// $d\mathcal L/d\,$value per parameter (user units).
    pub gradient: Vec<f64>,
    /// Optimizer variables u and $d\mathcal L/du$.
    pub u: Vec<f64>,
    pub gradient_u: Vec<f64>,
    /// $\|d\mathcal L/du\|_2$.
    pub gradient_norm: f64,
    /// Assembly, ordering and factorization of the evaluation's global matrix (s).
    pub setup_seconds: f64,
    pub forward_seconds: f64,
    pub backward_seconds: f64,
    pub pd_iterations: usize,
    pub adjoint_iterations: usize,
    pub nonconverged_forward_frames: usize,
    pub nonconverged_backward_frames: usize,
    /// Seconds since the start of the run when the evaluation finished.
    pub elapsed_seconds: f64,
}

/// One accepted L-BFGS iterate (iteration 0 is the start point).
#[derive(Clone, Debug, Serialize)]
pub struct IterRecord {
    pub iteration: usize,
    /// Index of the evaluation at this iterate.
    pub evaluation: usize,
    /// Evaluations done so far.
    pub evaluations: usize,
    pub loss: f64,
    pub gradient_norm: f64,
    pub parameters: Vec<f64>,
    pub elapsed_seconds: f64,
}

/// Best evaluated point so far.
#[derive(Clone, Debug, Serialize)]
pub struct Best {
    pub evaluation: usize,
    pub loss: f64,
    pub parameters: Vec<f64>,
    pub gradient_norm: f64,
}

#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Running,
    Completed,
    Interrupted,
    Failed,
}

/// Totals of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub evaluations: usize,
    pub iterations: usize,
    pub initial_loss: Option<f64>,
    pub best_loss: Option<f64>,
    pub seconds_total: f64,
    pub mean_forward_seconds: f64,
    pub mean_backward_seconds: f64,
    pub pd_iterations: usize,
    pub adjoint_iterations: usize,
}

/// The optimization log (`optimize.json`), complete after every evaluation.
#[derive(Clone, Debug, Serialize)]
pub struct OptimizeLog {
    /// Caller-provided run information (command, scene, hash, …).
    pub header: serde_json::Value,
    pub settings: OptimizeSettings,
    pub parameters: Vec<ParamInfo>,
    /// The factor c of the minimised c·L.
    pub cost_scale: Option<f64>,
    pub status: Status,
    /// Why the run stopped.
    pub termination: Option<String>,
    pub error: Option<String>,
    pub best: Option<Best>,
    pub summary: Summary,
    pub iterations: Vec<IterRecord>,
    pub evaluations: Vec<EvalRecord>,
}

/// Errors before the first evaluation (they name the scene key).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{key}: {msg}")]
    Invalid { key: String, msg: String },
}

/// Why the objective refused to evaluate.
#[derive(Clone, Debug)]
enum Stop {
    Interrupted,
    EvaluationCap,
    Failed(String),
}

/// Callback after every change of the log (new evaluation or iteration).
pub type OnUpdate<'a> = dyn FnMut(&OptimizeLog) + Send + 'a;

struct Shared<'a> {
    log: OptimizeLog,
    cache: VecDeque<(Vec<f64>, f64, Vec<f64>)>,
    /// Evaluations of an earlier run (`optimize --resume`) not yet requested again.
    replay: VecDeque<EvalRecord>,
    stop: Option<Stop>,
    iteration: usize,
    cost_scale: f64,
    grad0: f64,
    t0: Instant,
    on_update: &'a mut OnUpdate<'a>,
}

/// A parameter value outside its physical range (names the parameter).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("parameter {name:?} reached {value}, outside its physical range; declare `lower`/`upper` for parameter[{index}]")]
pub struct DomainError {
    pub name: String,
    pub index: usize,
    pub value: f64,
}

/// Physical range of a parameter value (its class's [`super::classes::Domain`]); `Err`
/// names the parameter.
fn check_domain(p: &Param, v: f64) -> Result<(), DomainError> {
    let ok = p.class.domain().contains(v);
    if ok && v.is_finite() {
        Ok(())
    } else {
        Err(DomainError {
            name: p.name.clone(),
            index: p.index,
            value: v,
        })
    }
}

/// Value-space description of a map.
fn describe(p: &Param) -> String {
    let w = if p.scale == 1.0 {
        "u".to_string()
    } else {
        format!("{}·u", p.scale)
    };
    let (lo, hi) = (p.lower, p.upper);
    let body = match (lo, hi, p.log) {
        (None, None, false) => w,
        (None, None, true) => format!("exp({w})"),
        (Some(l), None, false) => format!("{l} + exp({w})"),
        (None, Some(h), false) => format!("{h} - exp({w})"),
        (Some(l), Some(h), false) => format!("{l} + ({h} - {l})·sigmoid({w})"),
        (Some(l), None, true) => format!("exp(ln {l} + exp({w}))"),
        (None, Some(h), true) => format!("exp(ln {h} - exp({w}))"),
        (Some(l), Some(h), true) => format!("exp(ln {l} + (ln {h} - ln {l})·sigmoid({w}))"),
    };
    format!("value = {body}")
}

/// The objective handed to argmin: u → c·L(θ(u)).
struct Objective<'p, 'a> {
    problem: &'p Problem,
    maps: Vec<VarMap>,
    settings: OptimizeSettings,
    interrupt: Option<Arc<AtomicBool>>,
    shared: Arc<Mutex<Shared<'a>>>,
}

impl Objective<'_, '_> {
    fn thetas(&self, u: &[f64]) -> Vec<f64> {
        self.maps.iter().zip(u).map(|(m, &x)| m.theta(x)).collect()
    }

    /// Memoised (loss, dL/du) at u, evaluating on a miss.
    fn eval(&self, u: &[f64]) -> Result<(f64, Vec<f64>), Error> {
        let mut sh = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, l, g)) = sh.cache.iter().find(|(k, _, _)| same_bits(k, u)) {
            return Ok((*l, g.clone()));
        }
        if let Some(s) = &sh.stop {
            return Err(Error::msg(format!("{s:?}")));
        }
        let refuse = |sh: &mut Shared, s: Stop| {
            let msg = format!("{s:?}");
            sh.stop = Some(s);
            Err(Error::msg(msg))
        };
        if self
            .interrupt
            .as_ref()
            .is_some_and(|f| f.load(Ordering::SeqCst))
        {
            return refuse(&mut sh, Stop::Interrupted);
        }
        if sh.log.evaluations.len() >= self.settings.max_evaluations {
            return refuse(&mut sh, Stop::EvaluationCap);
        }
        let theta = self.thetas(u);
        let values = self.problem.values_at(&theta);
        for (p, &v) in self.problem.params.iter().zip(&values) {
            if let Err(m) = check_domain(p, v) {
                return refuse(&mut sh, Stop::Failed(m.to_string()));
            }
        }
        if let Some(rec) = take_replayed(&mut sh.replay, u) {
            return Ok(push_evaluation(&mut sh, rec));
        }
        // The lock is held across the rollout: argmin calls cost and gradient one after
        // the other, so it only serialises those calls.
        let n_eval = sh.log.evaluations.len();
        // the interrupt also ends the evaluation in progress, at its next solver iteration
        let evaluate = || self.problem.evaluate(&theta, true);
        let ev = match &self.interrupt {
            Some(flag) => crate::cancel::Cancel::with_flag(flag.clone()).install(evaluate),
            None => evaluate(),
        };
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) if e.is_cancelled() => return refuse(&mut sh, Stop::Interrupted),
            Err(e) => return refuse(&mut sh, Stop::Failed(format!("evaluation {n_eval}: {e}"))),
        };
        if !ev.loss.is_finite() || ev.gradient.iter().any(|g| !g.is_finite()) {
            return refuse(
                &mut sh,
                Stop::Failed(format!(
                    "evaluation {n_eval}: non-finite loss or gradient (loss {})",
                    ev.loss
                )),
            );
        }
        let grad_u: Vec<f64> = self
            .maps
            .iter()
            .zip(u)
            .zip(&ev.gradient)
            .map(|((m, &x), g)| m.dtheta_du(x) * g)
            .collect();
        let gradient = self
            .problem
            .params
            .iter()
            .zip(&values)
            .zip(&ev.gradient)
            .map(|((p, &v), &g)| if p.log { g / v } else { g })
            .collect();
        let gnorm = grad_u.iter().map(|g| g * g).sum::<f64>().sqrt();
        let rec = EvalRecord {
            index: sh.log.evaluations.len(),
            iteration: sh.iteration,
            loss: ev.loss,
            regularization: ev.regularization,
            parameters: values,
            gradient,
            u: u.to_vec(),
            gradient_u: grad_u,
            gradient_norm: gnorm,
            setup_seconds: ev.setup_seconds,
            forward_seconds: ev.forward_seconds,
            backward_seconds: ev.backward_seconds,
            pd_iterations: ev.pd_iterations,
            adjoint_iterations: ev.adjoint_iterations,
            nonconverged_forward_frames: ev.nonconverged_forward_frames.len(),
            nonconverged_backward_frames: ev.nonconverged_backward_frames.len(),
            elapsed_seconds: sh.t0.elapsed().as_secs_f64(),
        };
        Ok(push_evaluation(&mut sh, rec))
    }
}

/// The replayed evaluation at exactly `u` (bitwise), removed from the queue.
fn take_replayed(replay: &mut VecDeque<EvalRecord>, u: &[f64]) -> Option<EvalRecord> {
    let i = replay.iter().position(|r| same_bits(&r.u, u))?;
    replay.remove(i)
}

fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Record an evaluation (new or replayed): best point, memo, summary, callback. Returns
/// (loss, dL/du).
fn push_evaluation(sh: &mut Shared, mut rec: EvalRecord) -> (f64, Vec<f64>) {
    rec.index = sh.log.evaluations.len();
    rec.iteration = sh.iteration;
    if sh.log.best.as_ref().is_none_or(|b| rec.loss < b.loss) {
        sh.log.best = Some(Best {
            evaluation: rec.index,
            loss: rec.loss,
            parameters: rec.parameters.clone(),
            gradient_norm: rec.gradient_norm,
        });
    }
    let out = (rec.loss, rec.gradient_u.clone());
    sh.cache
        .push_back((rec.u.clone(), rec.loss, rec.gradient_u.clone()));
    if sh.cache.len() > CACHE {
        sh.cache.pop_front();
    }
    sh.log.evaluations.push(rec);
    refresh_summary(sh);
    let Shared { log, on_update, .. } = &mut *sh;
    on_update(log);
    out
}

fn refresh_summary(sh: &mut Shared) {
    let ev = &sh.log.evaluations;
    let n = ev.len().max(1) as f64;
    sh.log.summary = Summary {
        evaluations: ev.len(),
        iterations: sh.log.iterations.len().saturating_sub(1),
        initial_loss: ev.first().map(|e| e.loss),
        best_loss: sh.log.best.as_ref().map(|b| b.loss),
        seconds_total: sh.t0.elapsed().as_secs_f64(),
        mean_forward_seconds: ev.iter().map(|e| e.forward_seconds).sum::<f64>() / n,
        mean_backward_seconds: ev.iter().map(|e| e.backward_seconds).sum::<f64>() / n,
        pd_iterations: ev.iter().map(|e| e.pd_iterations).sum(),
        adjoint_iterations: ev.iter().map(|e| e.adjoint_iterations).sum(),
    };
}

impl CostFunction for Objective<'_, '_> {
    type Param = Vec<f64>;
    type Output = f64;
    fn cost(&self, u: &Vec<f64>) -> Result<f64, Error> {
        let c = self
            .shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .cost_scale;
        self.eval(u).map(|(l, _)| c * l)
    }
}

impl Gradient for Objective<'_, '_> {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;
    fn gradient(&self, u: &Vec<f64>) -> Result<Vec<f64>, Error> {
        let c = self
            .shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .cost_scale;
        self.eval(u).map(|(_, g)| g.iter().map(|x| c * x).collect())
    }
}

type LState = IterState<Vec<f64>, Vec<f64>, (), (), (), f64>;

/// L-BFGS with this module's stopping rules and iteration records.
struct Driver<'a, S> {
    inner: S,
    settings: OptimizeSettings,
    shared: Arc<Mutex<Shared<'a>>>,
}

impl<'a, O, S: Solver<O, LState>> Solver<O, LState> for Driver<'a, S> {
    fn name(&self) -> &str {
        "L-BFGS"
    }

    fn init(
        &mut self,
        problem: &mut ArgminProblem<O>,
        state: LState,
    ) -> Result<(LState, Option<KV>), Error> {
        self.inner.init(problem, state)
    }

    fn next_iter(
        &mut self,
        problem: &mut ArgminProblem<O>,
        state: LState,
    ) -> Result<(LState, Option<KV>), Error> {
        let k = state.get_iter() as usize + 1;
        self.shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iteration = k;
        let (state, kv) = self.inner.next_iter(problem, state)?;
        if !state.terminated() {
            let mut sh = self.shared.lock().unwrap_or_else(|p| p.into_inner());
            let u = state.get_param().cloned().unwrap_or_default();
            record_iteration(&mut sh, k, &u);
        }
        Ok((state, kv))
    }

    fn terminate(&mut self, state: &LState) -> TerminationStatus {
        let sh = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        let s = &self.settings;
        let done = |why: String| TerminationStatus::Terminated(TerminationReason::SolverExit(why));
        let Some(last) = sh.log.iterations.last() else {
            return TerminationStatus::NotTerminated;
        };
        let g = last.gradient_norm;
        if g == 0.0 && last.loss > 0.0 {
            return done(format!(
                "the gradient is exactly 0 at loss {:.3e}: the adjoint right-hand side fell below backward.abs_tol (lower it to go on)",
                last.loss
            ));
        }
        if g <= s.grad_tol * sh.grad0 {
            return done(format!(
                "gradient norm {g:.3e} <= grad_tol {:.1e} x initial {:.3e}",
                s.grad_tol, sh.grad0
            ));
        }
        if g <= s.abs_grad_tol {
            return done(format!(
                "gradient norm {g:.3e} <= abs_grad_tol {:.1e}",
                s.abs_grad_tol
            ));
        }
        if let Some(t) = s.target_loss {
            if last.loss <= t {
                return done(format!("loss {:.6e} <= target_loss {t:.3e}", last.loss));
            }
        }
        if state.get_iter() >= 1 && sh.log.iterations.len() >= 2 {
            let prev = sh.log.iterations[sh.log.iterations.len() - 2].loss;
            if (prev - last.loss).abs() <= s.rel_loss_tol * prev.abs() {
                return done(format!(
                    "relative loss change {:.3e} <= rel_loss_tol {:.1e}",
                    (prev - last.loss).abs() / prev.abs().max(f64::MIN_POSITIVE),
                    s.rel_loss_tol
                ));
            }
        }
        if sh.log.evaluations.len() >= s.max_evaluations {
            return done(format!("max_evaluations ({}) reached", s.max_evaluations));
        }
        TerminationStatus::NotTerminated
    }
}

fn record_iteration(sh: &mut Shared, k: usize, u: &[f64]) {
    let Some(e) = sh.log.evaluations.iter().rev().find(|e| same_bits(&e.u, u)) else {
        return;
    };
    let rec = IterRecord {
        iteration: k,
        evaluation: e.index,
        evaluations: sh.log.evaluations.len(),
        loss: e.loss,
        gradient_norm: e.gradient_norm,
        parameters: e.parameters.clone(),
        elapsed_seconds: sh.t0.elapsed().as_secs_f64(),
    };
    sh.log.iterations.push(rec);
    refresh_summary(sh);
    let Shared { log, on_update, .. } = &mut *sh;
    on_update(log);
}

/// Start point u₀, maps and descriptions of the parameters.
pub type Setup = (Vec<f64>, Vec<VarMap>, Vec<ParamInfo>);

/// Start values (user units) and maps of the parameters; errors name `parameter[i]`.
pub fn setup(problem: &Problem) -> Result<Setup, SetupError> {
    let mut u0 = Vec::new();
    let mut maps = Vec::new();
    let mut info = Vec::new();
    for p in &problem.params {
        let key = format!("parameter[{}]", p.index);
        let start = p.initial.unwrap_or(p.base_value);
        let m = VarMap::new(p.lower, p.upper, p.log, p.scale);
        if p.log && start <= 0.0 {
            return Err(SetupError::Invalid {
                key: format!("{key}.initial"),
                msg: format!("`log = true` needs a positive start value, got {start}"),
            });
        }
        let u = m
            .u_of_start(p.to_theta(start))
            .ok_or_else(|| SetupError::Invalid {
                key: format!(
                    "{key}.{}",
                    if p.initial.is_some() {
                        "initial"
                    } else {
                        "lower"
                    }
                ),
                msg: format!(
                    "the start value {start} of {:?} must lie strictly inside [{}, {}]",
                    p.name,
                    p.lower.map_or("-inf".into(), |v| v.to_string()),
                    p.upper.map_or("inf".into(), |v| v.to_string())
                ),
            })?;
        check_domain(p, start).map_err(|e| SetupError::Invalid {
            key: format!("{key}.initial"),
            msg: e.to_string(),
        })?;
        info.push(ParamInfo {
            name: p.name.clone(),
            kind: p.key(),
            body: p.body,
            index: p.index,
            component: p.component,
            log: p.log,
            lower: p.lower,
            upper: p.upper,
            scale: p.scale,
            initial: start,
            scene_value: p.base_value,
            transform: describe(p),
        });
        u0.push(u);
        maps.push(m);
    }
    Ok((u0, maps, info))
}

/// Evaluations of an earlier, interrupted run of the same problem (`optimize --resume`).
///
/// The optimizer is deterministic, so it asks again for exactly the points it asked for
/// before; each of those is answered from the record (bitwise the same loss and gradient)
/// instead of a rollout, and the run goes on from the last recorded evaluation as if it had
/// never stopped. A point the record does not hold (different optimizer settings) is
/// evaluated afresh.
#[derive(Clone, Debug, Default)]
pub struct Resume {
    pub evaluations: Vec<EvalRecord>,
}

impl Resume {
    /// Seconds the earlier run had spent (its last evaluation's clock).
    fn elapsed(&self) -> f64 {
        self.evaluations.last().map_or(0.0, |e| e.elapsed_seconds)
    }
}

/// Run the optimization. `on_update` sees the log after every evaluation and iteration;
/// `interrupt`, when set, stops the run before the next evaluation. Returns the final log
/// (status completed, interrupted or failed; never panics on solver failures).
pub fn optimize<'a>(
    problem: &Problem,
    settings: &OptimizeSettings,
    header: serde_json::Value,
    interrupt: Option<Arc<AtomicBool>>,
    on_update: &'a mut OnUpdate<'a>,
) -> Result<OptimizeLog, SetupError> {
    optimize_resumed(
        problem,
        settings,
        header,
        interrupt,
        on_update,
        Resume::default(),
    )
}

/// As [`optimize`], replaying the evaluations of `resume` first (see [`Resume`]).
pub fn optimize_resumed<'a>(
    problem: &Problem,
    settings: &OptimizeSettings,
    header: serde_json::Value,
    interrupt: Option<Arc<AtomicBool>>,
    on_update: &'a mut OnUpdate<'a>,
    resume: Resume,
) -> Result<OptimizeLog, SetupError> {
    if problem.params.is_empty() {
        return Err(SetupError::Invalid {
            key: "parameter".into(),
            msg: "declare at least one [[parameter]] to optimize".into(),
        });
    }
    settings
        .validate()
        .map_err(|(key, msg)| SetupError::Invalid { key, msg })?;
    let (u0, maps, info) = setup(problem)?;
    // Read again at the end: argmin can stop on its own (iteration cap, line-search exit)
    // after a Ctrl-C without asking for another evaluation, and the run is still interrupted.
    let interrupt_flag = interrupt.clone();
    let t0 = Instant::now()
        .checked_sub(std::time::Duration::from_secs_f64(
            resume.elapsed().max(0.0),
        ))
        .unwrap_or_else(Instant::now);
    let shared = Arc::new(Mutex::new(Shared {
        log: empty_log(header, settings, info),
        cache: VecDeque::new(),
        replay: resume.evaluations.into(),
        stop: None,
        iteration: 0,
        cost_scale: 1.0,
        grad0: 0.0,
        t0,
        on_update,
    }));
    let objective = Objective {
        problem,
        maps,
        settings: settings.clone(),
        interrupt,
        shared: shared.clone(),
    };
    let outcome = match objective.eval(&u0) {
        Err(e) => Err(e),
        Ok((l0, g0)) => start_lbfgs(objective, settings, &shared, u0, l0, &g0),
    };
    let mut sh = shared.lock().unwrap_or_else(|p| p.into_inner());
    let flagged = interrupt_flag
        .as_ref()
        .is_some_and(|f| f.load(Ordering::SeqCst));
    finish(&mut sh, settings, flagged, outcome);
    Ok(sh.log.clone())
}

/// The log of a run that has not evaluated anything yet.
fn empty_log(
    header: serde_json::Value,
    settings: &OptimizeSettings,
    parameters: Vec<ParamInfo>,
) -> OptimizeLog {
    OptimizeLog {
        header,
        settings: settings.clone(),
        parameters,
        cost_scale: None,
        status: Status::Running,
        termination: None,
        error: None,
        best: None,
        summary: Summary::default(),
        iterations: vec![],
        evaluations: vec![],
    }
}

/// From the start point's loss `l0` and gradient `g0`: fix the cost scale
/// $c=$ `initial_step`$/\|g_0\|_\infty$, record iteration 0 and run L-BFGS with the
/// configured line search. Returns why L-BFGS stopped.
fn start_lbfgs<'a, 'p>(
    objective: Objective<'p, 'a>,
    settings: &OptimizeSettings,
    shared: &Arc<Mutex<Shared<'a>>>,
    u0: Vec<f64>,
    l0: f64,
    g0: &[f64],
) -> Result<String, Error> {
    let ginf = g0.iter().fold(0.0f64, |a, g| a.max(g.abs()));
    let c = {
        let mut sh = shared.lock().unwrap_or_else(|p| p.into_inner());
        sh.grad0 = g0.iter().map(|g| g * g).sum::<f64>().sqrt();
        sh.cost_scale = if ginf > 0.0 {
            settings.initial_step / ginf
        } else {
            1.0
        };
        sh.log.cost_scale = Some(sh.cost_scale);
        record_iteration(&mut sh, 0, &u0);
        sh.cost_scale
    };
    if ginf == 0.0 {
        return Ok("the gradient is zero at the start point".into());
    }
    let cg: Vec<f64> = g0.iter().map(|g| c * g).collect();
    let (m, cost0, s) = (settings.lbfgs_memory, c * l0, settings.clone());
    match settings.line_search {
        LineSearchKind::MoreThuente => {
            let inner = LBFGS::new(MoreThuenteLineSearch::new(), m)
                .with_tolerance_grad(0.0)?
                .with_tolerance_cost(0.0)?;
            drive(objective, inner, s, shared.clone(), u0, cost0, cg)
        }
        LineSearchKind::HagerZhang => {
            let inner = LBFGS::new(HagerZhangLineSearch::new(), m)
                .with_tolerance_grad(0.0)?
                .with_tolerance_cost(0.0)?;
            drive(objective, inner, s, shared.clone(), u0, cost0, cg)
        }
    }
}

/// Status, termination and error of the finished run (a failed evaluation wins over an
/// interrupt, an interrupt over everything else), then the last callback.
fn finish(
    sh: &mut Shared,
    settings: &OptimizeSettings,
    interrupted: bool,
    outcome: Result<String, Error>,
) {
    let stop = match sh.stop.clone() {
        Some(Stop::Failed(m)) => Some(Stop::Failed(m)),
        _ if interrupted => Some(Stop::Interrupted),
        s => s,
    };
    let (status, termination, error) = match (stop, outcome) {
        (Some(Stop::Interrupted), _) => (Status::Interrupted, "interrupted (SIGINT)".into(), None),
        (Some(Stop::Failed(m)), _) => (Status::Failed, "an evaluation failed".into(), Some(m)),
        (Some(Stop::EvaluationCap), _) => (
            Status::Completed,
            format!("max_evaluations ({}) reached", settings.max_evaluations),
            None,
        ),
        (None, Ok(why)) => (Status::Completed, why, None),
        (None, Err(e)) => (
            Status::Failed,
            "the optimizer failed".into(),
            Some(format!("{e:#}")),
        ),
    };
    sh.log.status = status;
    sh.log.termination = Some(termination);
    sh.log.error = error;
    refresh_summary(sh);
    let Shared { log, on_update, .. } = &mut *sh;
    on_update(log);
}

fn drive<'a, O, S>(
    objective: O,
    inner: S,
    settings: OptimizeSettings,
    shared: Arc<Mutex<Shared<'a>>>,
    u0: Vec<f64>,
    cost0: f64,
    grad0: Vec<f64>,
) -> Result<String, Error>
where
    S: Solver<O, LState>,
{
    let max_iters = settings.max_iterations as u64;
    let driver = Driver {
        inner,
        settings,
        shared,
    };
    let res = Executor::new(objective, driver)
        .configure(|c| c.param(u0).cost(cost0).gradient(grad0).max_iters(max_iters))
        .run()?;
    Ok(match res.state.get_termination_reason() {
        Some(TerminationReason::MaxItersReached) => {
            format!("max_iterations ({max_iters}) reached")
        }
        Some(TerminationReason::SolverExit(s)) => s.clone(),
        Some(r) => r.text().to_string(),
        None => "stopped".into(),
    })
}
