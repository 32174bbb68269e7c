//! A simulation session without the command line: load a scene (with `--set`-style
//! overrides), build its [`Model`], set up a [`Simulator`] on a backend and roll it out,
//! reporting every frame's state to a callback. What the Python package (`python/`) calls;
//! the steps and messages mirror `diffphd simulate` (`src/cli/simulate.rs`: `run`,
//! `simulate_backend`, `check_gpu_model`, `device_offload`, `unrepresentable_state`,
//! `inverted_elements`, `not_converged_message`) so that the two give bitwise-identical
//! states for the same scene and thread count, and the command line can be switched to it.
//!
//! Threads: [`with_threads`] runs a closure on a rayon pool of its own (a per-call thread
//! count), where the command line configures the global pool once.
//!
//! Cancellation: [`with_threads_cancellable`] also installs a [`Cancel`] token for the call;
//! every simulator the closure builds polls it once per solver iteration, and a tripped
//! token ends the call with [`SolverError::Cancelled`] (exit code 130) inside the step in
//! progress. The scene, model and problem are not changed by a cancelled call.

use crate::cancel::Cancel;
use crate::diagnostics::{diagnostics, Diagnostics};
use crate::gpu::Backend;
use crate::io::frames::FrameWriter;
use crate::model::{OnNonConvergence, SolverMethod};
use crate::optimize::problem::{Problem, ProblemError};
use crate::scene::{LoadedScene, ModelError, Output, SceneError};
use crate::solver::cotangent::CotangentSource;
use crate::solver::offload::OffloadError;
use crate::solver::rollout::{self, Flow, RolloutError};
use crate::solver::{Model, Simulator, SolverError, StepStats};
use std::path::Path;

/// Errors of a session, each displaying as the command line's one-line message.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The scene file or an override is invalid.
    #[error(transparent)]
    Scene(#[from] SceneError),
    /// The scene resolved to an invalid model (mesh, selectors, per-element files).
    #[error("{path}: {source}")]
    Model { path: String, source: ModelError },
    /// The backend cannot run here, or not this model (exit 2 on the command line).
    #[error("{0}")]
    Backend(String),
    /// The scene's `[[parameter]]`s or `[loss]` are invalid.
    #[error("{path}: {source}")]
    Problem { path: String, source: ProblemError },
    /// Assembly or factorization of the global matrix failed.
    #[error("setting up the solver: {0}")]
    Setup(SolverError),
    /// A step failed (divergence, a non-converged step under `on_nonconvergence = "error"`,
    /// a body starting in contact, ...).
    #[error("{path}: {source}")]
    Solver { path: String, source: SolverError },
    /// The initial state or a step's state is not representable (non-finite or beyond the
    /// 32-bit floats of the frame files).
    #[error("{path}: {msg}")]
    State { path: String, msg: String },
    /// The thread pool could not be built.
    #[error("cannot start {threads} threads: {msg}")]
    Threads { threads: usize, msg: String },
    /// A frame file could not be written.
    #[error("cannot write frame {frame} into {dir}: {msg}")]
    Write {
        frame: usize,
        dir: String,
        msg: String,
    },
}

impl SessionError {
    /// The command line's exit code for this error: 3 for a step that missed its stopping
    /// test (or hit the contact time cap), 2 for bad input or environment, 1 for a failed run.
    pub fn exit_code(&self) -> i32 {
        match self {
            SessionError::Solver { source, .. } => source.exit_code(),
            SessionError::State { .. } => 1,
            _ => 2,
        }
    }
}

/// Run `f` on a rayon pool of `threads` threads (0: every available core) and return its
/// result with the pool's size. The solver's parallel loops and the factorization
/// (`rayon::current_num_threads`, faer's `Par::rayon`, which runs on the current pool) use
/// the pool `f` runs on, never rayon's global one.
pub fn with_threads<R: Send>(
    threads: usize,
    f: impl FnOnce() -> R + Send,
) -> Result<(R, usize), SessionError> {
    let n = if threads == 0 {
        std::thread::available_parallelism()
            .map(|v| v.get())
            .unwrap_or(1)
    } else {
        threads
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build()
        .map_err(|e| SessionError::Threads {
            threads: n,
            msg: e.to_string(),
        })?;
    Ok(pool.install(|| (f(), rayon::current_num_threads())))
}

/// [`with_threads`] with `cancel` installed for `f` ([`Cancel::install`]: the simulators
/// built inside poll it).
pub fn with_threads_cancellable<R: Send>(
    threads: usize,
    cancel: &Cancel,
    f: impl FnOnce() -> R + Send,
) -> Result<(R, usize), SessionError> {
    with_threads(threads, || cancel.install(f))
}

/// The provenance fields every output of a run carries (`log.json`, `grad.json`,
/// `optimize.json`, the Python results): version, commit, command, scene path and hash,
/// every override, threads and backend. One definition for the command line and Python.
pub fn provenance(
    command: &str,
    ls: &LoadedScene,
    sets: &[String],
    threads: usize,
    backend: Backend,
) -> serde_json::Value {
    serde_json::json!({
        "diffphd_version": crate::io::VERSION,
        "git_commit": crate::io::git_commit(),
        "command": command,
        "scene": ls.path.display().to_string(),
        "scene_hash": ls.hash,
        "overrides": sets,
        "threads": threads,
        "backend": backend,
    })
}

/// The backend named `name` (`cpu`, `cuda`, `emulator`), refusing one that cannot run here
/// with the command line's message (`simulate_backend`).
pub fn backend(name: &str) -> Result<Backend, SessionError> {
    match name {
        "cpu" => Ok(Backend::Cpu),
        "emulator" => Ok(Backend::Emulator),
        "cuda" => match crate::gpu::cuda_status() {
            Err(why) => Err(SessionError::Backend(format!(
                "--backend cuda requested but CUDA is unavailable: {why}"
            ))),
            Ok(()) => Ok(Backend::Cuda),
        },
        other => Err(SessionError::Backend(format!(
            "--backend {other}: unknown backend (expected cpu, cuda or emulator)"
        ))),
    }
}

/// The model of a loaded scene (`Model::from_scene`), its error naming the scene file.
pub fn build_model(ls: &LoadedScene) -> Result<Model, SessionError> {
    Model::from_scene(ls).map_err(|source| SessionError::Model {
        path: ls.path.display().to_string(),
        source,
    })
}

/// Refuse what the GPU path does not run (the command line's `check_gpu_model`).
pub fn check_gpu_model(
    model: &Model,
    method: SolverMethod,
    backend: Backend,
) -> Result<(), SessionError> {
    if backend == Backend::Cpu {
        return Ok(());
    }
    if !matches!(method, SolverMethod::Diffphd | SolverMethod::Auto) {
        return Err(SessionError::Backend(format!(
            "--backend {backend:?}: the GPU path runs the PD method only (solver.method = \"diffphd\")"
        )));
    }
    if let Some(why) = crate::gpu::local::unsupported(model) {
        return Err(SessionError::Backend(format!(
            "--backend {backend:?}: {why}"
        )));
    }
    Ok(())
}

/// The device offload of `sim` on `backend` (`None` for the CPU), or why it cannot be made;
/// the command line and the Python package both attach devices through it.
pub fn device_offload(
    sim: &Simulator,
    backend: Backend,
) -> Result<Option<Box<dyn crate::solver::offload::Offload + Send + Sync>>, OffloadError> {
    use crate::gpu::offload::{inverse_budget, DeviceOffload};
    use crate::gpu::Counted;
    Ok(match backend {
        Backend::Cpu => None,
        Backend::Emulator => {
            let dev = Counted::new(crate::gpu::Emulator);
            let budget = inverse_budget(&dev);
            Some(Box::new(DeviceOffload::new(dev, sim, budget)?))
        }
        #[cfg(feature = "cuda")]
        Backend::Cuda => {
            let dev = Counted::new(crate::gpu::cuda::Cuda::new(0)?);
            let budget = inverse_budget(&dev);
            Some(Box::new(DeviceOffload::new(dev, sim, budget)?))
        }
        #[cfg(not(feature = "cuda"))]
        Backend::Cuda => {
            return Err(OffloadError::Unsupported(
                "not available in this build".into(),
            ))
        }
    })
}

/// Hand `sim`'s PD iteration to `backend`'s device (the command line's `attach_offload`);
/// nothing for the CPU. Returns the device's description, if any.
pub fn attach_offload(
    sim: &mut Simulator,
    backend: Backend,
) -> Result<Option<String>, SessionError> {
    if backend != Backend::Cpu {
        sim.resolve_for_device();
    }
    check_gpu_model(sim.model, sim.config.method, backend)?;
    let off = device_offload(sim, backend)
        .map_err(|why| SessionError::Backend(format!("--backend {backend:?}: {why}")))?;
    let what = off.as_ref().map(|o| o.describe());
    sim.offload = off;
    Ok(what)
}

/// Run every evaluation of `problem` (forward and backward) on `backend`'s device (the
/// command line's `accelerate_problem`): refuses what the GPU path does not run up front,
/// then sets [`Problem::accelerate`]. `report` is called once, with the device's
/// description, when the first evaluation attaches it.
pub fn accelerate_problem(
    problem: &mut Problem,
    backend: Backend,
    report: impl Fn(&str) + Send + Sync + 'static,
) -> Result<(), SessionError> {
    if backend == Backend::Cpu {
        return Ok(());
    }
    check_gpu_model(&problem.base, problem.ls.scene.solver.method, backend)?;
    let said = std::sync::atomic::AtomicBool::new(false);
    problem.accelerate = Some(Box::new(move |sim: &mut Simulator| {
        sim.resolve_for_device();
        sim.offload = device_offload(sim, backend)?;
        if let Some(off) = &sim.offload {
            if !said.swap(true, std::sync::atomic::Ordering::Relaxed) {
                report(&off.describe());
            }
        }
        Ok(())
    }));
    Ok(())
}

/// The differentiable problem of a loaded scene (`[[parameter]]`s and `[loss]`), its error
/// naming the scene file (as `diffphd grad`).
pub fn problem(ls: LoadedScene) -> Result<Problem, SessionError> {
    let path = ls.path.display().to_string();
    Problem::new(ls).map_err(|source| SessionError::Problem { path, source })
}

/// One frame of a rollout as reported to the callback of [`simulate`].
pub struct FrameState<'a> {
    /// Frame number (0: the initial state).
    pub frame: usize,
    /// Time `frame · h` (s).
    pub time: f64,
    /// Positions and velocities, node-major (`3·node + axis`).
    pub x: &'a [f64],
    pub v: &'a [f64],
    /// Nodal contact forces of the step (scenes with obstacles; zeros at frame 0 and for
    /// steps without a contact record), node-major.
    pub contact_force: Option<&'a [f64]>,
    /// The step's statistics (`None` for frame 0).
    pub stats: Option<&'a StepStats>,
    /// Elements with det F ≤ 0 after the step: their number and the first.
    pub inverted: Option<(usize, usize)>,
    /// The frame's physics diagnostics (energies, centre of mass, momenta, strains;
    /// [`crate::diagnostics`]).
    pub diagnostics: &'a Diagnostics,
}

/// How a rollout ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Every frame ran; `missed` lists the frames that did not meet the stopping test
    /// (accepted unless `on_nonconvergence = "fail"`, see [`Rollout::incomplete_message`]).
    Completed,
    /// The callback asked to stop after frame `frame`.
    Stopped { frame: usize },
}

/// What [`simulate`] returns besides the frames it reported.
#[derive(Clone, Debug)]
pub struct Rollout {
    pub outcome: Outcome,
    /// Frames whose step did not meet the stopping test.
    pub missed: Vec<usize>,
    /// Iterations of every step, in the method's own unit (for the messages).
    pub iterations: Vec<usize>,
    /// The method that solved every step (under `auto`, per frame; for the messages).
    pub frame_methods: Vec<crate::model::SolverMethod>,
    /// `on_nonconvergence` of the scene.
    pub on_nonconvergence: OnNonConvergence,
    /// Seconds of the one-time setup (ordering, symbolic and numeric factorization).
    pub setup_seconds: f64,
    /// Nonzeros of the factor.
    pub factor_nnz: usize,
    /// Whether the PD weights are heterogeneous.
    pub heterogeneous: bool,
    /// Anderson window and method actually used.
    pub anderson_window: usize,
    pub solver_method: String,
    /// The method (for the messages: "PD iterations" or "Newton iterations").
    pub method: crate::model::SolverMethod,
    /// The device's description (GPU backends).
    pub device: Option<String>,
    /// Warnings of the run (the model's repairs, inverted elements, contact time caps).
    pub warnings: Vec<String>,
    /// The physics diagnostics of every frame reported to the callback (frame 0 first;
    /// [`crate::diagnostics`]).
    pub diagnostics: Vec<Diagnostics>,
}

impl Rollout {
    /// The command line's exit-3 message when frames missed the stopping test under
    /// `on_nonconvergence = "fail"` (`None` otherwise): "N of M frames did not meet ...".
    pub fn incomplete_message(&self) -> Option<String> {
        if self.missed.is_empty() || self.on_nonconvergence != OnNonConvergence::Fail {
            return None;
        }
        let first = self.missed[0];
        let its = self.iterations.get(first - 1).copied().unwrap_or(0);
        let method = self
            .frame_methods
            .get(first - 1)
            .copied()
            .unwrap_or(self.method);
        Some(not_converged_message(
            &self.missed,
            self.iterations.len(),
            its,
            method,
        ))
    }
}

/// "N of M frames did not meet the solver's stopping test (first: frame F after K ...)": the
/// exit-3 message of `simulate` (command line, `log.json`) and of Python's rollouts.
/// `missed` are the frames (1-based, ascending, non-empty), `first_iterations` and `method`
/// those of the first missed frame (under `auto` the method whose attempt the frame kept).
pub fn not_converged_message(
    missed: &[usize],
    frames: usize,
    first_iterations: usize,
    method: SolverMethod,
) -> String {
    let list: Vec<String> = missed.iter().take(20).map(|f| f.to_string()).collect();
    format!(
        "{} of {frames} frames did not meet the solver's stopping test (first: frame {} after {first_iterations} {}; frames {}{}); run status \"incomplete\". Raise {}, or set solver.on_nonconvergence = \"warn\" to accept them",
        missed.len(),
        missed.first().copied().unwrap_or(0),
        method.iterations_name(),
        list.join(", "),
        if missed.len() > 20 { ", ..." } else { "" },
        method.iteration_cap_key(),
    )
}

/// Roll `model` (of scene `ls`) out over its `frames` on `backend`, calling `on_frame` with
/// the initial state and the state after every step; `on_frame` returns `false` to stop.
/// The steps are those of `diffphd simulate`: $v_{t+1}=(x_{t+1}-x_t)/h$ after
/// [`Simulator::step`], the same set-up (plan, factor, offload) and the same failure on a
/// state that is non-finite or beyond the frame files' 32-bit floats. Runs on the current
/// rayon pool (see [`with_threads`]).
pub fn simulate(
    ls: &LoadedScene,
    model: &Model,
    backend: Backend,
    mut on_frame: impl FnMut(&FrameState) -> bool,
) -> Result<Rollout, SessionError> {
    let path = ls.path.display().to_string();
    let derived = model.derive(&model.params);
    let t_plan = std::time::Instant::now();
    let plan = Simulator::plan(model, &derived).map_err(SessionError::Setup)?;
    let plan_seconds = t_plan.elapsed().as_secs_f64();
    let mut sim = Simulator::with_plan(model, derived, &ls.scene.solver, Some(plan))
        .map_err(SessionError::Setup)?;
    sim.setup_seconds += plan_seconds;
    let device = attach_offload(&mut sim, backend)?;
    let x = model.x0.clone();
    let v = model.v0.clone();
    if let Some(what) = unrepresentable_state(model, &x, &v, None) {
        return Err(SessionError::State {
            path,
            msg: format!("initial state: {what}"),
        });
    }
    let has_obstacles = crate::contact::enabled(model);
    let zeros = vec![0.0; x.len()];
    let mut out = Rollout {
        outcome: Outcome::Completed,
        missed: vec![],
        iterations: vec![],
        frame_methods: vec![],
        on_nonconvergence: sim.config.on_nonconvergence,
        setup_seconds: sim.setup_seconds,
        factor_nnz: sim.system.nnz_factor,
        heterogeneous: sim.derived.heterogeneous,
        anderson_window: sim.config.window,
        solver_method: sim.config.method.as_str().into(),
        method: sim.config.method,
        device,
        warnings: model
            .warnings
            .iter()
            .cloned()
            .chain(crate::diagnostics::implausible_units(model))
            .collect(),
        diagnostics: vec![],
    };
    let d0 = diagnostics(model, &sim.derived.mass, &x, &v);
    let first = FrameState {
        frame: 0,
        time: 0.0,
        x: &x,
        v: &v,
        contact_force: has_obstacles.then_some(&zeros[..]),
        stats: None,
        inverted: None,
        diagnostics: &d0,
    };
    let go_on = on_frame(&first);
    out.diagnostics.push(d0);
    if !go_on {
        out.outcome = Outcome::Stopped { frame: 0 };
        return Ok(out);
    }
    let frames = model.frames;
    let sim_method = sim.config.method;
    let ended = rollout::run(&mut sim, 0, frames, (x, v), |e| {
        let (frame, stats) = (e.frame, e.stats);
        let fc = stats
            .contact_record
            .as_ref()
            .map(|r| r.nodal_forces(model.num_nodes()));
        if let Some(what) = unrepresentable_state(model, e.x, e.v, fc.as_deref()) {
            return Err(SessionError::State {
                path: path.clone(),
                msg: format!(
                    "frame {frame}, after {} {}: the state diverged: {what}",
                    stats.iterations,
                    stats.method.unwrap_or(sim_method).iterations_name()
                ),
            });
        }
        if let Some(k) = stats.contact.as_ref().and_then(|c| c.time_limit_iteration) {
            let cap = model.contact.max_seconds;
            out.warnings.push(
                SolverError::ContactTimeLimit {
                    frame,
                    iteration: k,
                    max_seconds: cap,
                }
                .to_string(),
            );
        }
        let inverted = inverted_elements(model, e.x);
        if let Some((n, el)) = inverted {
            out.warnings.push(format!(
                "frame {frame} (after {} {}): {n} inverted element(s) (det F <= 0), first: element {el}",
                stats.iterations,
                stats.method.unwrap_or(sim_method).iterations_name()
            ));
        }
        out.iterations.push(stats.iterations);
        out.frame_methods.push(stats.method.unwrap_or(sim_method));
        if !stats.converged {
            out.missed.push(frame);
        }
        let d = Diagnostics::of_event(&e);
        let state = FrameState {
            frame,
            time: e.time,
            x: e.x,
            v: e.v,
            contact_force: if has_obstacles {
                Some(fc.as_deref().unwrap_or(&zeros[..]))
            } else {
                None
            },
            stats: Some(stats),
            inverted,
            diagnostics: &d,
        };
        let go_on = on_frame(&state);
        out.diagnostics.push(d);
        Ok(if go_on { Flow::Continue } else { Flow::Stop })
    });
    match ended {
        Err(RolloutError::Step { error, .. }) => {
            return Err(SessionError::Solver {
                path: path.clone(),
                source: error,
            })
        }
        Err(RolloutError::Sink(e)) => return Err(e),
        Ok(end) if end.stopped => out.outcome = Outcome::Stopped { frame: end.frame },
        Ok(_) => {}
    }
    Ok(out)
}

/// The first node whose position, velocity or contact force is non-finite or beyond the
/// 32-bit floats of the frame files: a message naming it, its first element and the value
/// (the command line's and Python's one check).
pub fn unrepresentable_state(
    model: &Model,
    x: &[f64],
    v: &[f64],
    fc: Option<&[f64]>,
) -> Option<String> {
    let bad = |a: f64| !(a.is_finite() && a.abs() <= crate::scene::MAX_MAGNITUDE);
    let fields = [
        ("position", Some(x)),
        ("velocity", Some(v)),
        ("contact force", fc),
    ];
    for (name, f) in fields {
        let Some(f) = f else { continue };
        if let Some(k) = f.iter().position(|&a| bad(a)) {
            let node = k / 3;
            let element = (0..model.num_elements())
                .find(|&e| model.element(e).contains(&node))
                .map(|e| format!(" (element {e})"))
                .unwrap_or_default();
            return Some(format!(
                "node {node}{element}: {name} component {} = {:e} is non-finite or beyond the 32-bit float range of the frame files",
                k % 3,
                f[k]
            ));
        }
    }
    None
}

/// Elements with a sample whose deformation gradient has det F ≤ 0 in state `x`: their
/// number and the first one, if any.
pub fn inverted_elements(model: &Model, x: &[f64]) -> Option<(usize, usize)> {
    let mut count = 0;
    let mut first = None;
    let mut last = usize::MAX;
    for s in 0..model.num_samples() {
        let e = model.samples.elem[s];
        if e == last {
            continue;
        }
        if model.deformation_gradient(s, x).determinant() <= 0.0 {
            count += 1;
            first.get_or_insert(e);
            last = e;
        }
    }
    first.map(|e| (count, e))
}

/// Write the frames `frames` (number, time, positions, velocities, contact forces; node-major)
/// of `model` into `dir` as `diffphd simulate` does (`[output] format` and `vtu_encoding`); the file names.
/// `dir` must exist. Unlike the command line, it neither claims the folder nor writes
/// `log.json`.
pub fn write_frames<'a>(
    model: &Model,
    output: &Output,
    dir: &Path,
    frames: impl IntoIterator<Item = (usize, f64, &'a [f64], &'a [f64], Option<&'a [f64]>)>,
) -> Result<Vec<String>, SessionError> {
    let mut writer = FrameWriter::new(model, output);
    let mut names = vec![];
    for (frame, t, x, v, fc) in frames {
        let name = writer
            .write(dir, frame, t, x, v, fc)
            .map_err(|e| SessionError::Write {
                frame,
                dir: dir.display().to_string(),
                msg: format!("{e:#}"),
            })?;
        names.push(name);
    }
    Ok(names)
}

/// The differentiable problem of a scene for caller-supplied cotangents: its
/// `[[parameter]]`s (none is allowed) and no loss ([`Problem::without_loss`]).
pub fn parameters(ls: LoadedScene) -> Result<Problem, SessionError> {
    let path = ls.path.display().to_string();
    Problem::without_loss(ls).map_err(|source| SessionError::Problem { path, source })
}

/// A recorded rollout to differentiate: the model it ran (parameters applied, any state or
/// activation the caller replaced) and its tape with every state kept, from frame `start`
/// to frame `last`.
pub struct Tape {
    pub model: Model,
    pub rollout: rollout::Rollout,
}

/// Gradients of a caller's loss $\mathcal L$ from its cotangents (see
/// [`crate::solver::cotangent`]): named per-parameter gradients and the start state's.
#[derive(Clone, Debug)]
pub struct CotangentGradient {
    /// The problem's parameter names, and $d\mathcal L/d\theta$ for each (θ = ln value for
    /// `log = true`, else the value: what `diffphd grad` reports).
    pub names: Vec<String>,
    pub gradient: Vec<f64>,
    /// $d\mathcal L/dx_s$ and $d\mathcal L/dv_s$ of the start state (node-major). From frame
    /// 0 the start state is the model's initial state, and `dx` includes the dependence of
    /// prescribed (Dirichlet) values on it; from a later frame it does not (they follow the
    /// model's initial state, not the given one).
    pub dx: Vec<f64>,
    pub dv: Vec<f64>,
    /// Every class's gradient (per element, per body, per muscle knot, ...).
    pub all: crate::solver::gradient::Gradients,
    /// Frames whose adjoint solve did not converge.
    pub nonconverged: Vec<usize>,
}

impl Tape {
    /// Run `model` from the state `state` of frame `start` (`None`: the model's initial state,
    /// which requires `start = 0`) to frame `last`, keeping every state. Runs on the current
    /// rayon pool and, when [`Problem::accelerate`] is set, on its device.
    pub fn record(
        problem: &Problem,
        model: Model,
        start: usize,
        state: Option<(Vec<f64>, Vec<f64>)>,
        last: usize,
    ) -> Result<Tape, SessionError> {
        let path = problem.ls.path.display().to_string();
        let fail = |source| SessionError::Solver {
            path: path.clone(),
            source,
        };
        let state = state.unwrap_or_else(|| (model.x0.clone(), model.v0.clone()));
        if let Some(what) = unrepresentable_state(&model, &state.0, &state.1, None) {
            return Err(SessionError::State {
                path,
                msg: format!("frame {start}: {what}"),
            });
        }
        let mut sim = simulator(problem, &model).map_err(fail)?;
        let ro = rollout::forward_from(
            &mut sim,
            start,
            state,
            last,
            1,
            &crate::solver::loss::Loss::default(),
        )
        .map_err(fail)?;
        drop(sim);
        Ok(Tape { model, rollout: ro })
    }

    /// The states $(x_t, v_t)$ of frames `start..=last` ($v_t$ as [`rollout::FrameEvent::v`]).
    pub fn states(&self) -> impl Iterator<Item = (usize, &[f64], &[f64])> {
        self.rollout
            .kept
            .iter()
            .map(|(&t, (x, v))| (t, x.as_slice(), v.as_slice()))
    }

    /// The reverse sweep of the tape for the cotangents of `source`, at the working variables
    /// `theta` the tape's model was built at ([`Problem::model_at`]), with the scene's
    /// `[backward]` settings. A fresh simulator (the same factor) on the tape's model: the
    /// result does not depend on how often it is called.
    pub fn gradient(
        &self,
        problem: &Problem,
        theta: &[f64],
        source: &dyn CotangentSource,
    ) -> Result<CotangentGradient, SessionError> {
        let path = problem.ls.path.display().to_string();
        let fail = |source| SessionError::Solver {
            path: path.clone(),
            source,
        };
        let mut sim = simulator(problem, &self.model).map_err(fail)?;
        let (backward, _) = problem.backward_config(&sim);
        let br = rollout::backward(&mut sim, &self.rollout, source, &backward).map_err(fail)?;
        let values = problem.values_at(theta);
        let gradient = problem
            .params
            .iter()
            .zip(&values)
            .map(|(p, &v)| p.gradient(&self.model, &br.grads, v))
            .collect();
        let from_start = self.rollout.start == 0;
        Ok(CotangentGradient {
            names: problem.params.iter().map(|p| p.name.clone()).collect(),
            gradient,
            dx: if from_start {
                br.grads.x0.clone()
            } else {
                br.x_start.clone()
            },
            dv: br.v_start.clone(),
            nonconverged: br.nonconverged(),
            all: br.grads,
        })
    }
}

/// A simulator for `model` with the problem's plan, trust-region statistics and device.
fn simulator<'m>(problem: &Problem, model: &'m Model) -> Result<Simulator<'m>, SolverError> {
    let derived = model.derive(&model.params);
    let mut sim = Simulator::with_plan(model, derived, &problem.ls.scene.solver, problem.plan())?;
    problem.pin_method(&mut sim);
    sim.compute_tr = problem.needs_tr;
    if let Some(attach) = &problem.accelerate {
        attach(&mut sim).map_err(SolverError::Accelerator)?;
    }
    Ok(sim)
}

/// `diffphd grad` for a caller's loss: roll the scene out from its initial state at the
/// working variables `theta` and differentiate the cotangents of `source`.
pub fn grad(
    problem: &Problem,
    theta: &[f64],
    source: &dyn CotangentSource,
) -> Result<(Tape, CotangentGradient), SessionError> {
    let model = problem.model_at(theta);
    let last = model.frames;
    let tape = Tape::record(problem, model, 0, None, last)?;
    let g = tape.gradient(problem, theta, source)?;
    Ok((tape, g))
}

/// One step from a given state: $(x_{t+1}, v_{t+1})$ from $(x_t, v_t)$ at frame `frame` (its
/// time: prescribed motions, muscle knots, moving obstacles), with the model at `theta` and,
/// if given, `activations` setting every knot of each muscle group to one constant
/// activation for the step. Returns the step's tape: [`Tape::gradient`] with cotangents of frame
/// `frame + 1` ([`crate::solver::cotangent::DenseCotangents`] with `start = frame + 1`) gives $d\mathcal L/dx_t$,
/// $d\mathcal L/dv_t$, the parameters' and (the sum over [`CotangentGradient::all`]'s
/// `muscle_activation[g]`) the activations' gradients.
pub fn step(
    problem: &Problem,
    theta: &[f64],
    frame: usize,
    state: (Vec<f64>, Vec<f64>),
    activations: Option<&[f64]>,
) -> Result<Tape, SessionError> {
    let mut model = problem.model_at(theta);
    if let Some(a) = activations {
        if a.len() != model.muscles.len() {
            return Err(SessionError::State {
                path: problem.ls.path.display().to_string(),
                msg: format!(
                    "controls: expected {} muscle activations (one per muscle group), got {}",
                    model.muscles.len(),
                    a.len()
                ),
            });
        }
        for (g, &v) in model.muscles.iter_mut().zip(a) {
            // every knot (their count is the gradients' shape): a(t) = v through the step,
            // and dL/dv is the sum of the knots' gradients
            g.knots.iter_mut().for_each(|k| *k = v);
        }
    }
    let n3 = model.x0.len();
    if state.0.len() != n3 || state.1.len() != n3 {
        return Err(SessionError::State {
            path: problem.ls.path.display().to_string(),
            msg: format!(
                "state: expected {n3} values of x and of v, got {} and {}",
                state.0.len(),
                state.1.len()
            ),
        });
    }
    Tape::record(problem, model, frame, Some(state), frame + 1)
}
