//! `diffphd simulate`: forward rollout with frame files (PLY or VTU, see [`diffphd::io::frames`])
//! and `log.json`.

pub mod log;
pub mod mpm;

use self::log::{FrameRecord, RunHeader, RunLog, Status, Summary};
use crate::failure::Failure;
use crate::memory;
use crate::run::{claim_output, effective_sets, interrupt_flag, set_threads, BackendArg, RunArgs};
use anyhow::Context;
use diffphd::diagnostics::Diagnostics;
use diffphd::gpu::Backend;
use diffphd::io::frames::FrameWriter;
use diffphd::io::write_atomic;
use diffphd::model::OnNonConvergence;
use diffphd::optimize::problem::Problem;
use diffphd::scene::{self, LoadedScene};
use diffphd::solver::rollout::{self, Flow, RolloutError};
use diffphd::solver::{Model, Simulator, SolverError, StepStats};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Load the scene with the command-line overrides (`--frames` becomes a `--set`).
pub fn load_scene(args: &RunArgs) -> Result<LoadedScene, Failure> {
    let ls = scene::load(&args.scene, &effective_sets(args)).map_err(Failure::input)?;
    for w in ls.scene.backward.deprecations() {
        eprintln!("warning: {w}");
    }
    Ok(ls)
}

/// The backend of a command that runs forward and backward (`grad`, `gradcheck`, `optimize`),
/// refusing one that cannot run here with the reason; [`accelerate_problem`] attaches it.
pub fn check_backend(b: BackendArg) -> Result<Backend, Failure> {
    simulate_backend(b)
}

/// The backend of `simulate`, refusing one that cannot run here with the reason.
pub fn simulate_backend(b: BackendArg) -> Result<Backend, Failure> {
    let name = match b {
        BackendArg::Cpu => "cpu",
        BackendArg::Emulator => "emulator",
        BackendArg::Cuda => "cuda",
    };
    diffphd::session::backend(name).map_err(session_input)
}

/// A session error that is the command line's bad input (exit 2).
fn session_input(e: diffphd::session::SessionError) -> Failure {
    Failure::input(anyhow::Error::new(e))
}

/// Hand the PD iteration's local step and global solve to the backend's device (the
/// session's, which refuses what the GPU path does not run), saying which unless `quiet`.
fn attach_offload(sim: &mut Simulator, backend: Backend, quiet: bool) -> Result<(), Failure> {
    let what = diffphd::session::attach_offload(sim, backend).map_err(session_input)?;
    if let (Some(what), false) = (what, quiet) {
        eprintln!("GPU path: {what}");
    }
    Ok(())
}

/// Run every evaluation of `problem` (forward and backward) on `backend`'s device: refuses
/// what the GPU path does not run up front (exit 2), then sets [`Problem::accelerate`].
/// Unless `quiet`, the first evaluation's device, solve paths and setup times go to stderr.
pub fn accelerate_problem(
    problem: &mut Problem,
    backend: Backend,
    quiet: bool,
) -> Result<(), Failure> {
    diffphd::session::accelerate_problem(problem, backend, move |what| {
        if !quiet {
            eprintln!("GPU path: {what}");
        }
    })
    .map_err(session_input)
}

fn write_log(dir: &Path, log: &RunLog) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(log).expect("log serializes");
    write_atomic(&dir.join("log.json"), text.as_bytes())
        .with_context(|| format!("cannot write {}", dir.join("log.json").display()))
        .map_err(Failure::input)
}

/// The state checks every frame passes before it is written (one copy, in the library).
pub use diffphd::session::{inverted_elements, unrepresentable_state};

/// Run a forward simulation and write its outputs. Returns the final log (`None` for an
/// MPM/rigid scene, which `simulate_mpm` runs and logs).
pub fn run(args: &RunArgs) -> Result<Option<RunLog>, Failure> {
    let backend = simulate_backend(args.backend)?;
    let ls = load_scene(args)?;
    if ls.scene.is_mpm() {
        return mpm::run(args, ls).map(|()| None);
    }
    let threads = set_threads(ls.scene.solver.threads);
    let model = Model::from_scene(&ls).map_err(|e| {
        Failure::input(anyhow::Error::new(e).context(format!("{}", ls.path.display())))
    })?;
    if !args.quiet {
        for w in &model.warnings {
            eprintln!("warning: {w}");
        }
    }
    // A slip of units (E = 1 meant as 1 MPa) is shown even with --quiet: the run would
    // "complete" simulating something else.
    let units = diffphd::diagnostics::implausible_units(&model);
    for w in &units {
        eprintln!("warning: {w}");
    }
    let derived = model.derive(&model.params);
    let setup = |e| Failure::input(anyhow::Error::new(e).context("setting up the solver"));
    let t_plan = Instant::now();
    let plan = Simulator::plan(&model, &derived).map_err(setup)?;
    let plan_seconds = t_plan.elapsed().as_secs_f64();
    memory::check(
        &format!("{}: the simulation", ls.path.display()),
        &memory::simulation(&model, &ls.scene.solver, &plan),
        args.max_memory,
        "use a coarser mesh or a larger --max-memory",
    )?;
    let out: PathBuf = claim_output("simulate", args, &ls)?;
    let t_run = Instant::now();
    let mut sim =
        Simulator::with_plan(&model, derived, &ls.scene.solver, Some(plan)).map_err(setup)?;
    sim.setup_seconds += plan_seconds;
    attach_offload(&mut sim, backend, args.quiet)?;
    let traffic0 = sim.offload.as_ref().and_then(|o| o.traffic());
    let mut header = run_header(args, &ls, &sim, threads, backend);
    header.warnings.extend(units);
    let x = model.x0.clone();
    let v = model.v0.clone();
    if let Some(what) = unrepresentable_state(&model, &x, &v, None) {
        return Err(Failure::input(anyhow::anyhow!(
            "{}: initial state: {what}",
            ls.path.display()
        )));
    }
    let initial_diagnostics = diffphd::diagnostics::diagnostics(&model, &sim.derived.mass, &x, &v);
    let mut frames_out = FrameOutput::new(&model, &ls);
    if frames_out.write_frames {
        frames_out
            .write(&out, 0, 0.0, (&x, &v), None)
            .map_err(Failure::input)?;
    }
    let mut p = Progress {
        frames_out,
        log: RunLog {
            header,
            status: Status::Running,
            error: None,
            initial_diagnostics,
            frames: vec![],
            summary: Summary::default(),
        },
        bar: progress_bar(args.quiet, model.frames),
        out,
        t_run,
        quiet: args.quiet,
    };
    write_log(&p.out, &p.log)?;
    let interrupt = interrupt_flag();
    if let Some(flag) = &interrupt {
        // the solver's iterations poll the interrupt too: a long step ends at its next
        // iteration (SolverError::Cancelled) instead of running to its end
        sim.cancel = diffphd::cancel::Cancel::with_flag(flag.clone());
    }
    let frames = model.frames;
    let start = (x, v);
    let ended = rollout::run(&mut sim, 0, frames, start, |e| {
        p.frame(e, traffic0.as_ref(), &ls.path)?;
        let stop = e.frame < frames
            && interrupt
                .as_ref()
                .is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst));
        if stop {
            p.log.status = Status::Interrupted;
            p.log.error = Some(format!("interrupted after frame {}", e.frame));
        }
        write_log(&p.out, &p.log)?;
        Ok(if stop { Flow::Stop } else { Flow::Continue })
    });
    match ended {
        Err(RolloutError::Step { frame, error }) if error.is_cancelled() => {
            // interrupted inside frame `frame`: it is not written; the earlier frames are
            p.log.status = Status::Interrupted;
            p.log.error = Some(format!("interrupted in frame {frame} ({error})"));
            p.log.summary.seconds_total = p.t_run.elapsed().as_secs_f64();
            write_log(&p.out, &p.log)?;
            p.abandon();
            return Err(Failure {
                code: 130,
                error: anyhow::anyhow!(
                    "interrupted in frame {frame}/{}; frames and log.json so far in {}",
                    model.frames,
                    p.out.display()
                ),
            });
        }
        Err(RolloutError::Step { error, .. }) => {
            p.record_failure(error.to_string())?;
            p.abandon();
            return Err(Failure::solver(error, format!("{}", ls.path.display())));
        }
        Err(RolloutError::Sink(f)) => return Err(f),
        Ok(end) if end.stopped => {
            p.abandon();
            return Err(Failure {
                code: 130,
                error: anyhow::anyhow!(
                    "interrupted after frame {}/{}; frames and log.json so far in {}",
                    end.frame,
                    model.frames,
                    p.out.display()
                ),
            });
        }
        Ok(_) => {}
    }
    if let Some(b) = &p.bar {
        b.finish();
    }
    finish(p, &sim, &ls.path).map(Some)
}

/// The end of a completed run: status `completed`, or `incomplete` (exit 3) when frames
/// missed the stopping test under `on_nonconvergence = "fail"`; the final log and summary.
fn finish(p: Progress, sim: &Simulator, scene: &Path) -> Result<RunLog, Failure> {
    let Progress {
        out,
        mut log,
        t_run,
        quiet,
        ..
    } = p;
    let missed: Vec<usize> = log
        .frames
        .iter()
        .filter(|f| !f.converged)
        .map(|f| f.frame)
        .collect();
    let fail = !missed.is_empty() && sim.config.on_nonconvergence == OnNonConvergence::Fail;
    log.status = if fail {
        Status::Incomplete
    } else {
        Status::Completed
    };
    log.summary.seconds_total = t_run.elapsed().as_secs_f64();
    if fail {
        let mut msg = not_converged_message(&missed, &log);
        let hit = log.frames.iter().find_map(|f| {
            let k = f.contact.as_ref()?.time_limit_iteration?;
            Some((f.frame, k))
        });
        if let Some((frame, k)) = hit {
            msg = format!(
                "{msg}; first {} (raise contact.max_seconds)",
                contact_time_limit_message(frame, k, sim.model.contact.max_seconds)
            );
        }
        log.error = Some(msg.clone());
        write_log(&out, &log)?;
        return Err(Failure::not_converged(anyhow::anyhow!(
            "{}: {msg}",
            scene.display()
        )));
    }
    write_log(&out, &log)?;
    if !quiet {
        let s = &log.summary;
        eprintln!(
            "done: {} frames, {} ({} non-converged), local {:.3}s, global {:.3}s, other {:.3}s{}, setup {:.3}s, total {:.3}s -> {}",
            s.frames_done, iterations_summary(&log), s.nonconverged_frames, s.seconds_local, s.seconds_global, s.seconds_other,
            if diffphd::contact::enabled(sim.model) { format!(", contact {:.3}s", s.seconds_contact) } else { String::new() },
            log.header.setup_seconds, s.seconds_total, out.display()
        );
        if let Some(t) = &s.device_traffic {
            eprintln!("device: {}", t.summary());
        }
    }
    Ok(log)
}

/// The header of a simulate run's `log.json`.
fn run_header(
    args: &RunArgs,
    ls: &LoadedScene,
    sim: &Simulator,
    threads: usize,
    backend: Backend,
) -> RunHeader {
    let model = sim.model;
    RunHeader {
        diffphd_version: diffphd::io::VERSION.into(),
        git_commit: diffphd::io::git_commit().map(String::from),
        command: "simulate".into(),
        scene: ls.path.display().to_string(),
        scene_hash: ls.hash.clone(),
        overrides: effective_sets(args),
        threads,
        backend,
        nodes: model.num_nodes(),
        elements: model.num_elements(),
        samples: model.num_samples(),
        dt: model.h,
        frames_requested: model.frames,
        heterogeneous: sim.derived.heterogeneous,
        anderson_window: sim.config.window,
        gate_reference: sim.config.gate_reference,
        solver_method: sim.config.method.as_str().into(),
        method_reason: sim.config.choice.as_ref().map(|c| c.reason.clone()),
        method_quantities: sim.config.choice.as_ref().map(|c| c.quantities.clone()),
        setup_seconds: sim.setup_seconds,
        factor_nnz: sim.system.nnz_factor,
        warnings: model.warnings.clone(),
    }
}

/// The progress bar of an interactive run (`None` with `--quiet` or without a terminal).
fn progress_bar(quiet: bool, frames: usize) -> Option<indicatif::ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = indicatif::ProgressBar::new(frames as u64);
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} frames {msg} [{elapsed_precise}, eta {eta}]",
        )
        .expect("template"),
    );
    Some(pb)
}

/// The `log.json` record of frame `frame` from its step statistics.
fn frame_record(
    sim: &Simulator,
    frame: usize,
    stats: &StepStats,
    inverted: Option<(usize, usize)>,
    file: Option<String>,
    diagnostics: Diagnostics,
) -> FrameRecord {
    FrameRecord {
        diagnostics,
        inverted_elements: inverted,
        frame,
        time: frame as f64 * sim.model.h,
        iterations: stats.iterations,
        converged: stats.converged,
        gate_position: stats.gate.position,
        gate_projection: stats.gate.projection,
        anderson_guard_firings: stats.anderson_guard_firings,
        polish: (sim.config.newton_polish > 0)
            .then_some((stats.polish_steps, stats.polish_residual)),
        residual: stats.residual.map(|relative| log::ResidualRecord {
            relative,
            newton_krylov_steps: stats.polish_steps,
            gmres_iterations: stats.polish_gmres_iterations,
        }),
        seconds_local: stats.time_local,
        seconds_global: stats.time_global,
        seconds_other: stats.time_other,
        file,
        contact: stats.contact.clone(),
        newton: stats.newton.as_ref().map(newton_record),
        retried_from: stats.retried_from,
        method: stats.method,
        probe_budget: stats.probe_budget,
        missed_iterations: stats.missed_iterations,
        missed_seconds: stats.missed_seconds,
        schwarz: stats.schwarz,
    }
}

/// The frame files of a run (`[output]`): the writer, which frames, and the contact-force
/// field (zeros where a frame has no contact record, absent without obstacles).
struct FrameOutput {
    writer: FrameWriter,
    /// `[output] frames`.
    write_frames: bool,
    /// `[output] every`.
    every: usize,
    has_obstacles: bool,
    zero_force: Vec<f64>,
    /// Number of nodes.
    nodes: usize,
}

impl FrameOutput {
    fn new(model: &Model, ls: &LoadedScene) -> FrameOutput {
        FrameOutput {
            writer: FrameWriter::new(model, &ls.scene.output),
            write_frames: ls.scene.output.frames,
            every: ls.scene.output.every,
            has_obstacles: diffphd::contact::enabled(model),
            zero_force: vec![0.0; model.x0.len()],
            nodes: model.num_nodes(),
        }
    }

    /// Write frame `frame` at time `t` into `out` with the nodal contact forces `fc`
    /// (zeros when `None` and the scene has obstacles); returns the file name.
    fn write(
        &mut self,
        out: &Path,
        frame: usize,
        t: f64,
        (x, v): (&[f64], &[f64]),
        fc: Option<&[f64]>,
    ) -> anyhow::Result<String> {
        let fc = if self.has_obstacles {
            Some(fc.unwrap_or(&self.zero_force[..]))
        } else {
            None
        };
        self.writer
            .write(out, frame, t, x, v, fc)
            .with_context(|| format!("cannot write frame {frame} into {}", out.display()))
    }
}

/// What the frame loop of [`run`] reports to: the output folder and its log, the progress
/// bar (or stderr unless `--quiet`), the run's start time.
struct Progress {
    frames_out: FrameOutput,
    out: PathBuf,
    log: RunLog,
    bar: Option<indicatif::ProgressBar>,
    t_run: Instant,
    quiet: bool,
}

impl Progress {
    /// One frame of the rollout: checks, the frame file, warnings and the log record.
    fn frame(
        &mut self,
        e: rollout::FrameEvent<'_, '_>,
        traffic0: Option<&diffphd::solver::offload::DeviceTraffic>,
        scene: &Path,
    ) -> Result<(), Failure> {
        let (sim, frame, stats) = (e.sim, e.frame, e.stats);
        let model = sim.model;
        self.check_state(model, frame, (e.x, e.v), stats, scene)?;
        let file = self.frame_file(frame, e.time, (e.x, e.v), stats)?;
        if let Some(k) = stats.contact.as_ref().and_then(|c| c.time_limit_iteration) {
            self.warn(&contact_time_limit_message(
                frame,
                k,
                model.contact.max_seconds,
            ));
        }
        let inverted = inverted_elements(model, e.x);
        if let Some((n, el)) = inverted {
            self.warn(&format!(
                "frame {frame} (after {} {}): {n} inverted element(s) (det F <= 0), first: element {el}",
                stats.iterations,
                stats.method.unwrap_or(sim.config.method).iterations_name()
            ));
        }
        let rec = frame_record(sim, frame, stats, inverted, file, Diagnostics::of_event(&e));
        self.report(frame, model.frames, &rec);
        self.log.push(rec);
        self.log.summary.seconds_total = self.t_run.elapsed().as_secs_f64();
        if let (Some(t0), Some(t)) = (traffic0, sim.offload.as_ref().and_then(|o| o.traffic())) {
            self.log.summary.device_traffic = Some(t.since(t0));
        }
        Ok(())
    }

    /// Fail the run (exit 1, log `failed`) when the state after frame `frame` is not
    /// representable (non-finite or beyond the output's range; see [`unrepresentable_state`]).
    fn check_state(
        &mut self,
        model: &Model,
        frame: usize,
        (x, v): (&[f64], &[f64]),
        stats: &StepStats,
        scene: &Path,
    ) -> Result<(), Failure> {
        let fc_check = stats
            .contact_record
            .as_ref()
            .map(|r| r.nodal_forces(model.num_nodes()));
        if let Some(what) = unrepresentable_state(model, x, v, fc_check.as_deref()) {
            let msg = format!(
                "frame {frame}, after PD iteration {}: the state diverged: {what}",
                stats.iterations
            );
            self.record_failure(msg.clone())?;
            self.abandon();
            return Err(Failure::run(anyhow::anyhow!("{}: {msg}", scene.display())));
        }
        Ok(())
    }

    /// Write frame `frame` at time `t` when `[output]` asks for it (with the step's nodal
    /// contact forces); its file name, or `None` when not written.
    fn frame_file(
        &mut self,
        frame: usize,
        t: f64,
        (x, v): (&[f64], &[f64]),
        stats: &StepStats,
    ) -> Result<Option<String>, Failure> {
        if !(self.frames_out.write_frames && frame.is_multiple_of(self.frames_out.every)) {
            return Ok(None);
        }
        let fc = stats
            .contact_record
            .as_ref()
            .map(|r| r.nodal_forces(self.frames_out.nodes));
        match self
            .frames_out
            .write(&self.out, frame, t, (x, v), fc.as_deref())
        {
            Ok(name) => Ok(Some(name)),
            Err(e) => {
                // The log must not stay "running": record the failure (best effort,
                // the disk may be what failed).
                let _ = self.record_failure(format!("{e:#}"));
                self.abandon();
                Err(Failure::input(e))
            }
        }
    }

    /// Mark the log failed with `msg` (and the total time so far) and write it.
    fn record_failure(&mut self, msg: String) -> Result<(), Failure> {
        self.log.status = Status::Failed;
        self.log.error = Some(msg);
        self.log.summary.seconds_total = self.t_run.elapsed().as_secs_f64();
        write_log(&self.out, &self.log)
    }

    fn abandon(&self) {
        if let Some(b) = &self.bar {
            b.abandon();
        }
    }

    /// A warning above the progress bar, or on stderr unless `--quiet`.
    fn warn(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(format!("warning: {msg}")),
            None if !self.quiet => eprintln!("warning: {msg}"),
            None => {}
        }
    }

    /// Progress of frame `frame` of `frames` (a warning when it did not converge).
    fn report(&self, frame: usize, frames: usize, rec: &FrameRecord) {
        let msg = format!(
            "frame {frame}/{frames}: {} {}{}",
            rec.iterations,
            rec.method
                .unwrap_or_else(|| method_of(&self.log))
                .iterations_name(),
            if rec.converged {
                ""
            } else {
                " (NOT converged)"
            }
        );
        match &self.bar {
            Some(b) => {
                b.set_position(frame as u64);
                b.set_message(format!("{} it", rec.iterations));
                if !rec.converged {
                    b.println(format!("warning: {msg}"));
                }
            }
            None if !self.quiet => eprintln!("{msg}"),
            None => {}
        }
    }
}

/// "frame F, iteration K: the contact solve hit ..." (warning and exit-3 message): the text
/// of [`SolverError::ContactTimeLimit`], which `on_nonconvergence = "error"` raises.
pub(super) fn contact_time_limit_message(frame: usize, iteration: usize, cap: f64) -> String {
    SolverError::ContactTimeLimit {
        frame,
        iteration,
        max_seconds: cap,
    }
    .to_string()
}

/// "N of M frames did not converge (first: frame F after K iterations); ..." for the log and
/// the exit-3 message.
fn not_converged_message(missed: &[usize], log: &RunLog) -> String {
    let rec = log.frames.get(missed[0] - 1);
    let its = rec.map(|f| f.iterations).unwrap_or(0);
    // the method of the first missed frame (under `auto` the one whose attempt it kept)
    let method = rec.and_then(|f| f.method).unwrap_or_else(|| method_of(log));
    diffphd::session::not_converged_message(missed, log.frames.len(), its, method)
}

/// "N PD iterations", or under `auto` with both methods "N PD iterations + M Newton
/// iterations" (each frame counted in the unit of the method that solved it).
fn iterations_summary(log: &RunLog) -> String {
    let run = method_of(log);
    let mut totals: Vec<(diffphd::model::SolverMethod, usize)> = Vec::new();
    for f in &log.frames {
        let m = f.method.unwrap_or(run);
        match totals
            .iter_mut()
            .find(|(n, _)| n.iterations_name() == m.iterations_name())
        {
            Some(t) => t.1 += f.iterations,
            None => totals.push((m, f.iterations)),
        }
    }
    if totals.is_empty() {
        return format!("0 {}", run.iterations_name());
    }
    let parts: Vec<String> = totals
        .iter()
        .map(|(m, n)| format!("{n} {}", m.iterations_name()))
        .collect();
    parts.join(" + ")
}

/// The run's `solver.method` (its header records the name the method gave).
fn method_of(log: &RunLog) -> diffphd::model::SolverMethod {
    log.header.solver_method.parse().unwrap_or_default()
}

/// The log record of a step's Newton statistics.
fn newton_record(n: &diffphd::solver::stats::NewtonStats) -> log::NewtonRecord {
    log::NewtonRecord {
        iterations: n.iterations,
        converged: n.converged,
        relative_gradient: n.relative_gradient,
        line_search_halvings: n.line_search_halvings,
        projected_elements: n.projected_elements,
        modified_elements: n.modified_elements,
        indefinite_factorizations: n.indefinite_factorizations,
        regularizations: n.regularizations,
        factorizations: n.factorizations,
        stop: n.stop,
        roundoff_floor: n.roundoff_floor,
    }
}
