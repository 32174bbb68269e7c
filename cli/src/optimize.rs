//! `diffphd optimize`: L-BFGS on the scene's `[[parameter]]`s against its `[loss]`
//! (docs/optimize.md). Writes `optimize.json` (rewritten atomically after every evaluation),
//! `optimized.toml` (with the per-element files of `youngs_modulus_field` parameters beside it)
//! and the frame files (PLY or VTU) of the final rollout at the best parameters.
//!
//! Exit codes: 0 completed, 1 an evaluation failed (outputs still written with the best
//! point), 2 bad input, 130 interrupted by Ctrl-C or SIGTERM (outputs written with the best
//! point; a second signal exits at once, leaving the last complete `optimize.json`).

use crate::failure::Failure;
use crate::run::{
    claim_output, effective_sets, interrupt_flag, output_dir, provenance, set_threads, RunArgs,
};
use crate::{memory, simulate};
use anyhow::Context;
use diffphd::optimize::classes::material::youngs_modulus;
use diffphd::optimize::lbfgs::{self, EvalRecord, OptimizeLog, Resume, Status};
use diffphd::optimize::problem::Problem;
use diffphd::optimize::writeback;
use diffphd::solver::{rollout, Simulator};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct OptimizeArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// L-BFGS iteration cap (overrides `optimize.max_iterations`).
    #[arg(long)]
    pub max_iterations: Option<usize>,
    /// Evaluation cap (overrides `optimize.max_evaluations`).
    #[arg(long)]
    pub max_evaluations: Option<usize>,
    /// Continue the interrupted (or capped) run whose `optimize.json` is in the output
    /// folder: its evaluations are replayed from the record, not recomputed, and the run goes
    /// on where it stopped. The scene and overrides must define the same problem (only
    /// `[optimize]` and `[output]` may differ, e.g. a larger `--max-evaluations`).
    #[arg(long)]
    pub resume: bool,
    /// Check the gradient as `grad --verify` does (a central finite difference at tight
    /// forward tolerances, per parameter up to 3, else one seeded random direction) at the
    /// start point and every N-th iterate. A check that fails stops the run with exit 1
    /// naming the iterate and the numbers; `optimized.toml` and the frames then hold the
    /// last iterate that passed (docs/optimize.md "Verified gradients"). 0: never
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub verify_every: usize,
    /// --verify-every: the largest accepted error (as `grad --verify-threshold`)
    #[arg(long, value_name = "ERR", default_value_t = diffphd::optimize::verify::DEFAULT_THRESHOLD)]
    pub verify_threshold: f64,
}

/// One `--verify-every` check: the iterate and its verification.
#[derive(serde::Serialize)]
struct IterateCheck {
    iteration: usize,
    evaluation: usize,
    parameters: Vec<f64>,
    verify: diffphd::optimize::verify::Verification,
}

/// The check of iterate `it` of `log` (its evaluation's parameters and gradient, in θ).
fn verify_iterate(
    problem: &Problem,
    log: &OptimizeLog,
    iteration: usize,
    opts: &diffphd::optimize::verify::Options,
) -> Result<Option<IterateCheck>, diffphd::optimize::problem::ProblemError> {
    let Some(it) = log.iterations.iter().find(|i| i.iteration == iteration) else {
        return Ok(None);
    };
    let Some(ev) = log.evaluations.get(it.evaluation) else {
        return Ok(None);
    };
    let theta: Vec<f64> = problem
        .params
        .iter()
        .zip(&ev.parameters)
        .map(|(p, &v)| p.to_theta(v))
        .collect();
    // the log holds dL/dvalue; the check compares dL/dθ
    let g: Vec<f64> = problem
        .params
        .iter()
        .zip(ev.parameters.iter().zip(&ev.gradient))
        .map(|(p, (&v, &g))| if p.log { g * v } else { g })
        .collect();
    let verify = diffphd::optimize::verify::verify(problem, &theta, &g, opts)?;
    Ok(Some(IterateCheck {
        iteration,
        evaluation: it.evaluation,
        parameters: ev.parameters.clone(),
        verify,
    }))
}

/// What a run produced.
pub struct Outcome {
    pub log: OptimizeLog,
    pub out: PathBuf,
}

fn write_json(path: &Path, log: &OptimizeLog) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(log).expect("log serializes");
    diffphd::io::write_atomic(path, text.as_bytes())
}

/// The run arguments with `--max-iterations`/`--max-evaluations` turned into `--set`s.
pub fn with_caps(args: &OptimizeArgs) -> RunArgs {
    let mut run = args.run.clone();
    if let Some(n) = args.max_iterations {
        run.sets.push(format!("optimize.max_iterations={n}"));
    }
    if let Some(n) = args.max_evaluations {
        run.sets.push(format!("optimize.max_evaluations={n}"));
    }
    run
}

pub fn run(args: &OptimizeArgs) -> Result<Outcome, Failure> {
    let backend = simulate::check_backend(args.run.backend)?;
    let thr = args.verify_threshold;
    if !(thr.is_finite() && thr > 0.0) {
        return Err(Failure::input(anyhow::anyhow!(
            "--verify-threshold {thr}: expected a finite number > 0"
        )));
    }
    let run = with_caps(args);
    let ls = simulate::load_scene(&run)?;
    let threads = set_threads(ls.scene.solver.threads);
    let path = ls.path.display().to_string();
    let mut problem = Problem::new(ls)
        .map_err(|e| Failure::input(anyhow::Error::new(e).context(path.clone())))?;
    for w in youngs_modulus::old_meaning_warnings(&problem.params, &problem.base) {
        eprintln!("warning: {path}: {w}");
    }
    problem.memory_budget = memory::check_problem(&problem, run.max_memory)?;
    simulate::accelerate_problem(&mut problem, backend, run.quiet)?;
    problem
        .resolve_method()
        .map_err(|e| Failure::input(anyhow::Error::new(e).context(path.clone())))?;
    let (_, _, params) = lbfgs::setup(&problem)
        .map_err(|e| Failure::input(anyhow::Error::new(e).context(path.clone())))?;
    let (out, resume) = if args.resume {
        let out = output_dir(&run, &problem.ls);
        let resume = read_resume(&out.join("optimize.json"), &problem, &params)?;
        (out, resume)
    } else {
        (
            claim_output("optimize", &run, &problem.ls)?,
            Resume::default(),
        )
    };
    let replayed = resume.evaluations.len();
    let json_path = out.join("optimize.json");
    let settings = problem.ls.scene.optimize.clone();
    let header = header(&problem, &run, threads, backend, replayed);
    let bar = (!run.quiet && std::io::stderr().is_terminal())
        .then(|| progress_bar(settings.max_iterations));
    let quiet = run.quiet;
    let mut write_error: Option<std::io::Error> = None;
    let mut seen_iters = 0usize;
    // --verify-every: the checks so far, the first failure (or error), and the stop flag
    let stop = interrupt_flag()
        .unwrap_or_else(|| std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)));
    let verify_opts = diffphd::optimize::verify::Options {
        seed: 1,
        threshold: args.verify_threshold,
    };
    let mut checks: Vec<IterateCheck> = Vec::new();
    let mut verify_failure: Option<anyhow::Error> = None;
    let problem_ref = &problem;
    let mut on_update = |log: &OptimizeLog| {
        if let Err(e) = write_json(&json_path, log) {
            write_error.get_or_insert(e);
        }
        let Some(it) = log.iterations.last() else {
            return;
        };
        let every = args.verify_every;
        if every > 0
            && verify_failure.is_none()
            && log.iterations.len() > seen_iters
            && it.iteration % every == 0
            && checks.iter().all(|c| c.iteration != it.iteration)
        {
            match verify_iterate(problem_ref, log, it.iteration, &verify_opts) {
                Ok(Some(c)) => {
                    if !quiet {
                        eprint!("iteration {}: {}", c.iteration, c.verify.table());
                    }
                    if !c.verify.passed() {
                        verify_failure = Some(anyhow::anyhow!(
                            "gradient verification failed at iteration {} (evaluation {}; optimize.json \"verify\"):\n{}",
                            c.iteration,
                            c.evaluation,
                            c.verify.table().trim_end()
                        ));
                        stop.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    checks.push(c);
                }
                Ok(None) => {}
                Err(e) => {
                    verify_failure = Some(anyhow::Error::new(e).context(format!(
                        "gradient verification at iteration {}",
                        it.iteration
                    )));
                    stop.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            }
        }
        let msg = format!(
            "loss {:.6e} |grad| {:.3e} evals {}",
            it.loss,
            it.gradient_norm,
            log.evaluations.len()
        );
        match &bar {
            Some(b) => {
                b.set_position(it.iteration as u64);
                b.set_message(msg);
            }
            None if !quiet && log.iterations.len() > seen_iters => {
                eprintln!("iteration {}: {msg}", it.iteration);
            }
            None => {}
        }
        seen_iters = log.iterations.len();
    };
    let log = lbfgs::optimize_resumed(
        &problem,
        &settings,
        header,
        Some(stop.clone()),
        &mut on_update,
        resume,
    )
    .map_err(|e| Failure::input(anyhow::Error::new(e).context(path.clone())))?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if let Some(e) = write_error {
        return Err(Failure::input(
            anyhow::Error::new(e).context(format!("cannot write {}", json_path.display())),
        ));
    }
    if args.verify_every > 0 {
        // optimize.json with the checks
        let mut v = serde_json::to_value(&log).expect("log serializes");
        v.as_object_mut()
            .expect("object")
            .insert("verify".into(), serde_json::json!(checks));
        let text = serde_json::to_string_pretty(&v).expect("json");
        diffphd::io::write_atomic(&json_path, text.as_bytes())
            .with_context(|| format!("cannot write {}", json_path.display()))
            .map_err(Failure::input)?;
    }
    if let Some(failure) = verify_failure {
        // outputs at the last iterate whose gradient passed
        let good = checks.iter().rev().find(|c| c.verify.passed());
        if let Some(c) = good {
            write_outputs(&problem, &c.parameters, &log, &out).map_err(Failure::input)?;
        }
        let kept = match good {
            Some(c) => format!("optimized.toml holds iteration {}", c.iteration),
            None => "no iterate passed: no optimized.toml".to_string(),
        };
        return Err(Failure::run(anyhow::anyhow!("{failure:#}\n({kept})")));
    }
    // Outputs at the best point.
    if let Some(best) = &log.best {
        write_outputs(&problem, &best.parameters, &log, &out).map_err(Failure::input)?;
    }
    if !quiet {
        report(&log, &out);
    }
    match log.status {
        Status::Completed | Status::Running => Ok(Outcome { log, out }),
        Status::Interrupted => Err(Failure {
            code: 130,
            error: anyhow::anyhow!(
                "interrupted; best parameters so far in {}",
                json_path.display()
            ),
        }),
        Status::Failed => Err(Failure::run(anyhow::anyhow!(
            "{} (best parameters so far in {})",
            log.error.as_deref().unwrap_or("optimization failed"),
            json_path.display()
        ))),
    }
}

/// `optimize.json`'s header: provenance, problem sizes, the problem hash `--resume` checks
/// and how many evaluations were replayed.
fn header(
    problem: &Problem,
    run: &RunArgs,
    threads: usize,
    backend: diffphd::gpu::Backend,
    replayed: usize,
) -> serde_json::Value {
    let mut header = provenance(
        "optimize",
        &problem.ls,
        &effective_sets(run),
        threads,
        backend,
    );
    header.as_object_mut().expect("object").extend(
        serde_json::json!({
            "nodes": problem.base.num_nodes(),
            "elements": problem.base.num_elements(),
            "frames": problem.base.frames,
            "dt": problem.base.h,
            "problem_hash": problem.ls.problem_hash(),
            "method": problem.resolved_method(),
            "method_reason": problem.method_choice().map(|c| c.reason),
            "resumed_evaluations": replayed,
        })
        .as_object()
        .expect("object")
        .clone(),
    );
    header
}

fn progress_bar(max_iterations: usize) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::new(max_iterations as u64);
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:30} iter {pos}/{len} {msg} [{elapsed_precise}, eta {eta}]",
        )
        .expect("template"),
    );
    pb
}

/// The end-of-run summary on stderr: status, counts, timings, the best point.
fn report(log: &OptimizeLog, out: &Path) {
    let s = &log.summary;
    eprintln!(
        "{:?}: {} ({} iterations, {} evaluations, {:.2}s forward + {:.2}s backward per evaluation)",
        log.status,
        log.termination.as_deref().unwrap_or(""),
        s.iterations,
        s.evaluations,
        s.mean_forward_seconds,
        s.mean_backward_seconds
    );
    if let Some(b) = &log.best {
        eprintln!(
            "best loss {:.6e} (initial {:.6e}) at evaluation {}:",
            b.loss,
            s.initial_loss.unwrap_or(f64::NAN),
            b.evaluation
        );
        for (p, v) in log.parameters.iter().zip(&b.parameters) {
            eprintln!("  {:<40} {v:.8e}  (start {:.6e})", p.name, p.initial);
        }
    }
    eprintln!("-> {}", out.display());
}

/// What `--resume` needs from an earlier run's `optimize.json`.
#[derive(serde::Deserialize)]
struct EarlierRun {
    header: EarlierHeader,
    parameters: Vec<EarlierParam>,
    evaluations: Vec<EvalRecord>,
}

#[derive(serde::Deserialize)]
struct EarlierHeader {
    problem_hash: Option<String>,
}

#[derive(serde::Deserialize)]
struct EarlierParam {
    name: String,
    initial: f64,
}

/// The evaluations to replay from `path`, after checking that the earlier run optimized the
/// same problem (problem hash, parameter names and start values). Errors are input errors
/// (exit 2) naming the file and what differs.
fn read_resume(
    path: &Path,
    problem: &Problem,
    info: &[lbfgs::ParamInfo],
) -> Result<Resume, Failure> {
    let fail = |msg: String| Failure::input(anyhow::anyhow!("{}: {msg}", path.display()));
    let text = std::fs::read_to_string(path)
        .map_err(|e| fail(format!("cannot read the run to resume ({e})")))?;
    let earlier: EarlierRun = serde_json::from_str(&text).map_err(|e| {
        fail(format!(
            "not an optimize.json this version can resume ({e})"
        ))
    })?;
    let here = problem.ls.problem_hash();
    match earlier.header.problem_hash {
        Some(h) if h == here => {}
        Some(h) => {
            return Err(fail(format!(
                "header.problem_hash {} differs from this scene's {} (resume needs the same scene and overrides; only [optimize] and [output] may change)",
                &h[..h.len().min(12)],
                &here[..12]
            )))
        }
        None => return Err(fail("header.problem_hash is missing (written by an older diffphd)".into())),
    }
    if earlier.parameters.len() != info.len() {
        return Err(fail(format!(
            "parameters: {} there, {} in this scene",
            earlier.parameters.len(),
            info.len()
        )));
    }
    for (i, (a, b)) in earlier.parameters.iter().zip(info).enumerate() {
        if a.name != b.name || a.initial.to_bits() != b.initial.to_bits() {
            return Err(fail(format!(
                "parameters[{i}]: {:?} starting at {} there, {:?} starting at {} here",
                a.name, a.initial, b.name, b.initial
            )));
        }
    }
    Ok(Resume {
        evaluations: earlier.evaluations,
    })
}

/// `s` as one POSIX shell word: as is when it holds only safe characters, else in single
/// quotes, so the suggested `--set` lines can be pasted into a shell.
fn shell_word(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "._=+-:/,@%".contains(c);
    if s.chars().all(safe) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// `optimized.toml` and the final rollout's frame files at `values` (user units).
fn write_outputs(
    problem: &Problem,
    values: &[f64],
    log: &OptimizeLog,
    out: &Path,
) -> anyhow::Result<()> {
    let wb = writeback::write_back(problem, values)?;
    let mut text = String::new();
    text.push_str(&format!(
        "# Written by `diffphd optimize` from {} (status {:?}: {}).\n",
        problem.ls.path.display(),
        log.status,
        log.termination.as_deref().unwrap_or("")
    ));
    text.push_str(&format!(
        "# diffphd {} (git {}); source scene hash {}\n",
        diffphd::io::VERSION,
        diffphd::io::git_commit().unwrap_or("unknown"),
        problem.ls.hash
    ));
    text.push_str("# Optimized parameters (user units):\n");
    for (p, v) in log.parameters.iter().zip(values) {
        text.push_str(&format!(
            "#   {} = {v:.10e}  (start {:e})\n",
            p.name, p.initial
        ));
    }
    if let Some(b) = &log.best {
        text.push_str(&format!("# Loss at these values: {:.10e}\n", b.loss));
    }
    text.push_str("# [optimized] the same values as overrides of the source scene:\n");
    for s in &wb.sets {
        text.push_str(&format!("#   --set {}\n", shell_word(s)));
    }
    for n in &wb.notes {
        text.push_str(&format!("# note: {n}\n"));
    }
    text.push_str(&format!(
        "# Rebuilt model matches the optimized one: {}\n\n",
        if wb.exact { "yes" } else { "NO (see notes)" }
    ));
    text.push_str(&wb.toml);
    for f in &wb.files {
        diffphd::io::write_atomic(&out.join(&f.name), f.text.as_bytes())
            .with_context(|| format!("cannot write {}", out.join(&f.name).display()))?;
    }
    diffphd::io::write_atomic(&out.join("optimized.toml"), text.as_bytes())
        .with_context(|| format!("cannot write {}", out.join("optimized.toml").display()))?;
    if !problem.ls.scene.output.frames {
        return Ok(());
    }
    let theta: Vec<f64> = problem
        .params
        .iter()
        .zip(values)
        .map(|(p, &v)| p.to_theta(v))
        .collect();
    let model = problem.model_at(&theta);
    let ro = Simulator::new(&model, &problem.ls.scene.solver).and_then(|mut sim| {
        problem.pin_method(&mut sim);
        if let Some(attach) = &problem.accelerate {
            attach(&mut sim).map_err(diffphd::solver::SolverError::Accelerator)?;
        }
        rollout::forward(&mut sim, model.frames, 1, &problem.loss)
    });
    let ro = match ro {
        Ok(r) => r,
        Err(e) => {
            eprintln!("warning: the final rollout failed, no frames written: {e}");
            return Ok(());
        }
    };
    let mut frames_out = diffphd::io::frames::FrameWriter::new(&model, &problem.ls.scene.output);
    let every = problem.ls.scene.output.every;
    for (t, (x, v)) in ro.kept.iter().filter(|(t, _)| *t % every == 0) {
        if let Some(what) = simulate::unrepresentable_state(&model, x, v, None) {
            eprintln!("warning: the final rollout's frame {t} cannot be written ({what}); frames from {t} on are not written");
            break;
        }
        frames_out
            .write(out, *t, *t as f64 * model.h, x, v, None)
            .with_context(|| format!("cannot write frame {t} into {}", out.display()))?;
    }
    Ok(())
}
