//! `diffphd sweep`: plan a sweep file into a run table, run it on a local pool, emit it for
//! GNU parallel or a Slurm job array, run one task of it, and collect the results
//! (docs/sweeps.md). Every executor runs run `I` the same way (`execute`): the command as a
//! child process writing into `DIR/run_NNNN/`, its stdout/stderr kept there, its exit code and
//! wall time recorded in `sweep-status.json`. A finished run with the same hash is skipped.
//!
//! Exit codes: `0` every run succeeded (or was already done), `1` at least one run failed,
//! `2` bad sweep file, arguments or output directory.

use crate::failure::Failure;
use crate::run::interrupt_flag;
use anyhow::Context;
use diffphd::sweep::collect::{self, Metric, RunStatus, STATUS_FILE, TABLE_FILE};
use diffphd::sweep::plan::{self, Plan, PlanTable};
use diffphd::sweep::plot::PlotSpec;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

#[derive(clap::Subcommand, Debug)]
pub enum SweepCommand {
    /// Expand a sweep file into its run table (runs.csv, runs.json) without running anything.
    Plan(PlanArgs),
    /// Run every run of a sweep on a local pool of processes.
    Run(RunArgs),
    /// Run exactly one run of a sweep (what a scheduler's task calls).
    Task(TaskArgs),
    /// Write a GNU parallel job file or a Slurm array script for the sweep.
    Emit(EmitArgs),
    /// Gather a sweep's outputs into results.csv / results.json and plots (SVG, PNG with --png).
    Collect(CollectArgs),
}

// The fields' doc comments are the `--help` text (`out/sweeps/<name>`), not HTML.
#[allow(rustdoc::invalid_html_tags)]
#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    /// Sweep file (`*.sweep.toml`).
    pub sweep: PathBuf,
    /// Sweep output directory (default: the sweep file's `output`, else out/sweeps/<name>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Replace the run table of another sweep in the output directory.
    #[arg(long)]
    pub overwrite: bool,
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Runs at once (default: cores / threads_per_run, at least 1).
    #[arg(long, short)]
    pub jobs: Option<usize>,
    /// Print only failures and the summary.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(clap::Args, Debug)]
pub struct TaskArgs {
    /// Sweep file (`*.sweep.toml`).
    pub sweep: PathBuf,
    /// Run index (0-based, as in runs.csv; `$SLURM_ARRAY_TASK_ID`).
    #[arg(long)]
    pub index: usize,
    /// Sweep output directory (default: the sweep file's `output`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Let the run replace another run's output in its directory.
    #[arg(long)]
    pub overwrite: bool,
}

#[derive(clap::Args, Debug)]
pub struct EmitArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Write `parallel.jobs` and `parallel.sh` (GNU parallel, `--joblog` compatible).
    #[arg(long, conflicts_with = "slurm", required_unless_present = "slurm")]
    pub parallel: bool,
    /// Write `sweep.sbatch` (a Slurm job array running `sweep task --index`).
    #[arg(long)]
    pub slurm: bool,
    /// The diffphd binary the jobs call (default: this binary's absolute path).
    #[arg(long)]
    pub binary: Option<PathBuf>,
    /// GNU parallel `--jobs` (default: cores / threads_per_run).
    #[arg(long, short)]
    pub jobs: Option<usize>,
    /// Slurm `--time` per task (overrides `[slurm] time`).
    #[arg(long)]
    pub time: Option<String>,
    /// Slurm `--mem` per task (overrides `[slurm] mem`).
    #[arg(long)]
    pub mem: Option<String>,
    /// Slurm `--cpus-per-task` (overrides `[slurm] cpus_per_task`; default threads_per_run).
    #[arg(long)]
    pub cpus_per_task: Option<usize>,
    /// At most this many array tasks at once (`%K`; overrides `[slurm] max_parallel`).
    #[arg(long)]
    pub max_parallel: Option<usize>,
    /// Slurm partition (overrides `[slurm] partition`).
    #[arg(long)]
    pub partition: Option<String>,
    /// Largest array a submission may have (the cluster's MaxArraySize - 1); bigger sweeps
    /// are submitted in chunks with `SWEEP_OFFSET`.
    #[arg(long, default_value_t = 1000)]
    pub max_array_size: usize,
}

#[derive(clap::Args, Debug)]
pub struct CollectArgs {
    /// A sweep's output directory (holding runs.json).
    pub dir: PathBuf,
    /// Extra metric `NAME=FILE:JSON.PATH` (repeatable), e.g. `g0=grad.json:evaluation.gradient.0`.
    #[arg(long = "metric")]
    pub metrics: Vec<String>,
    /// Plot `METRIC:AXIS` (line) or `METRIC:AXIS:AXIS` (heat map), repeatable; adds to
    /// the sweep file's `[collect] plots`. Written as SVG (and PNG with `--png`).
    #[arg(long = "plot")]
    pub plots: Vec<String>,
    /// Also write every plot as PNG (next to its SVG).
    #[arg(long)]
    pub png: bool,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(cmd: &SweepCommand) -> Result<(), Failure> {
    match cmd {
        SweepCommand::Plan(a) => plan_cmd(a),
        SweepCommand::Run(a) => run_cmd(a),
        SweepCommand::Task(a) => task_cmd(a),
        SweepCommand::Emit(a) => emit_cmd(a),
        SweepCommand::Collect(a) => collect_cmd(a),
    }
}

/// Load and expand a sweep; the output directory (`--out` or the sweep's own).
fn load(sweep: &Path, out: Option<&PathBuf>) -> Result<(Plan, PathBuf), Failure> {
    let sw = diffphd::sweep::load(sweep).map_err(Failure::input)?;
    let dir = out.cloned().unwrap_or_else(|| sw.default_output());
    let plan = plan::expand(&sw).map_err(Failure::input)?;
    Ok((plan, dir))
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|c| c.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    })
}

/// Create `dir` and write runs.json / runs.csv. A table of another sweep file is replaced
/// only with `overwrite`.
fn write_tables(dir: &Path, table: &PlanTable, overwrite: bool) -> Result<(), Failure> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create sweep directory {}", dir.display()))
        .map_err(Failure::input)?;
    if !overwrite {
        if let Ok(old) = collect::read_table(dir) {
            if absolute(Path::new(&old.sweep)) != absolute(Path::new(&table.sweep)) {
                return Err(Failure::input(anyhow::anyhow!(
                    "sweep directory {} holds the run table of another sweep ({}); pass --overwrite to replace it or choose another --out",
                    dir.display(),
                    old.sweep
                )));
            }
        }
    }
    let json = serde_json::to_string_pretty(table).expect("table serializes");
    for (name, text) in [(TABLE_FILE, json), ("runs.csv", plan::runs_csv(table))] {
        diffphd::io::write_atomic(&dir.join(name), text.as_bytes())
            .with_context(|| format!("cannot write {}", dir.join(name).display()))
            .map_err(Failure::input)?;
    }
    Ok(())
}

fn table_of(plan: &Plan) -> Result<PlanTable, Failure> {
    let mut t = plan.table().map_err(Failure::input)?;
    t.sweep = absolute(&plan.sweep.path).display().to_string();
    t.scene = absolute(&plan.sweep.scene).display().to_string();
    Ok(t)
}

fn warn_invalid(t: &PlanTable) {
    for r in &t.runs {
        if let Some(why) = &r.check.invalid {
            eprintln!("warning: run {} ({}) will fail: {why}", r.id, r.dir);
        }
    }
}

fn plan_cmd(a: &PlanArgs) -> Result<(), Failure> {
    let (plan, dir) = load(&a.sweep, a.out.as_ref())?;
    let t = table_of(&plan)?;
    write_tables(&dir, &t, a.overwrite)?;
    warn_invalid(&t);
    println!(
        "{} runs of `{}` on {} ({} axes) -> {}",
        t.runs.len(),
        t.command.as_str(),
        plan.sweep.scene.display(),
        t.axes.len(),
        dir.join("runs.csv").display()
    );
    Ok(())
}

/// How one run went.
enum Outcome {
    /// Finished earlier with the same hash.
    Skipped,
    Done(RunStatus),
}

/// What every executor shares.
struct Exec {
    exe: PathBuf,
    dir: PathBuf,
    plan: Plan,
    overwrite: bool,
}

/// A run directory that already holds a finished run with this hash.
fn finished(dir: &Path, hash: &str, plan: &Plan) -> bool {
    let Some(st) = std::fs::read_to_string(dir.join(STATUS_FILE))
        .ok()
        .and_then(|t| serde_json::from_str::<RunStatus>(&t).ok())
    else {
        return false;
    };
    if st.exit_code != 0 || st.hash != hash {
        return false;
    }
    let main = plan.sweep.spec.command.main_output();
    let Some(doc) = std::fs::read_to_string(dir.join(main))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
    else {
        return false;
    };
    match doc.get("status").and_then(|s| s.as_str()) {
        Some(s) => s == "completed",
        None => true,
    }
}

/// Run `id` of the plan as a child process; records its status in its directory.
fn execute(ex: &Exec, id: usize) -> Result<Outcome, Failure> {
    let plan = &ex.plan;
    let check = plan.check_run(id).map_err(Failure::input)?;
    let rd = ex.dir.join(plan::run_dir_name(id, plan.runs.len()));
    std::fs::create_dir_all(&rd)
        .with_context(|| format!("cannot create {}", rd.display()))
        .map_err(Failure::input)?;
    if finished(&rd, &check.hash, plan) {
        return Ok(Outcome::Skipped);
    }
    let _ = std::fs::remove_file(rd.join(STATUS_FILE));
    let spec = &plan.sweep.spec;
    let mut args: Vec<String> = vec![
        spec.command.as_str().into(),
        absolute(&plan.sweep.scene).display().to_string(),
        "--out".into(),
        rd.display().to_string(),
        "--quiet".into(),
        "--threads".into(),
        spec.threads_per_run.to_string(),
    ];
    for s in plan.run_sets(id) {
        args.push("--set".into());
        args.push(s);
    }
    args.extend(spec.args.iter().cloned());
    if ex.overwrite {
        args.push("--overwrite".into());
    }
    let open = |name: &str| {
        std::fs::File::create(rd.join(name))
            .with_context(|| format!("cannot create {}", rd.join(name).display()))
            .map_err(Failure::input)
    };
    let (stdout, stderr) = (open("stdout.log")?, open("stderr.log")?);
    let t0 = Instant::now();
    let status = std::process::Command::new(&ex.exe)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .status()
        .with_context(|| format!("cannot start {}", ex.exe.display()))
        .map_err(Failure::input)?;
    let seconds = t0.elapsed().as_secs_f64();
    let exit_code = status.code().unwrap_or(-1);
    let error = (exit_code != 0).then(|| {
        std::fs::read_to_string(rd.join("stderr.log"))
            .ok()
            .and_then(|t| {
                t.lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .map(String::from)
            })
            .unwrap_or_else(|| format!("exit status {status}"))
    });
    let mut command_line = vec![ex.exe.display().to_string()];
    command_line.extend(args);
    let st = RunStatus {
        run: id,
        hash: check.hash,
        exit_code,
        seconds,
        command_line,
        error,
        diffphd_version: diffphd::io::VERSION.into(),
        git_commit: diffphd::io::git_commit().map(String::from),
    };
    let text = serde_json::to_string_pretty(&st).expect("status serializes");
    diffphd::io::write_atomic(&rd.join(STATUS_FILE), text.as_bytes())
        .with_context(|| format!("cannot write {}", rd.join(STATUS_FILE).display()))
        .map_err(Failure::input)?;
    Ok(Outcome::Done(st))
}

fn this_exe() -> Result<PathBuf, Failure> {
    std::env::current_exe()
        .context("cannot locate the diffphd binary")
        .map_err(Failure::input)
}

fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn describe(t: &PlanTable, id: usize) -> String {
    let r = &t.runs[id];
    t.axes
        .iter()
        .zip(&r.values)
        .map(|(a, v)| format!("{}={}", a.name, plan::json_text(v)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn run_cmd(a: &RunArgs) -> Result<(), Failure> {
    let (plan, dir) = load(&a.plan.sweep, a.plan.out.as_ref())?;
    let t = table_of(&plan)?;
    write_tables(&dir, &t, a.plan.overwrite)?;
    let dir = absolute(&dir);
    let n = t.runs.len();
    let tpr = plan.sweep.spec.threads_per_run;
    let cores = cores();
    let jobs = a.jobs.unwrap_or((cores / tpr).max(1)).max(1);
    if !a.quiet {
        warn_invalid(&t);
        eprintln!(
            "sweep: {n} runs of `{}`, {jobs} jobs x {tpr} thread(s) per run = {} of {cores} cores -> {}",
            t.command.as_str(),
            jobs * tpr,
            dir.display()
        );
    }
    if jobs * tpr > cores {
        eprintln!(
            "warning: {jobs} jobs x {tpr} threads = {} > {cores} cores: runs will compete for cores (wall times are not comparable)",
            jobs * tpr
        );
    }
    let ex = Exec {
        exe: this_exe()?,
        dir: dir.clone(),
        plan,
        overwrite: a.plan.overwrite,
    };
    let bar = (!a.quiet && std::io::stderr().is_terminal()).then(|| {
        let pb = indicatif::ProgressBar::new(n as u64);
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {pos}/{len} runs {msg} [{elapsed_precise}, eta {eta}]",
            )
            .expect("template"),
        );
        pb
    });
    // SIGINT/SIGTERM: start no further run, let the running ones end (they stop after
    // their current frame, each recording its status), then say what to rerun.
    let interrupt = interrupt_flag();
    let interrupted = || interrupt.as_ref().is_some_and(|f| f.load(Ordering::SeqCst));
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Result<Outcome, Failure>)>> = Mutex::new(Vec::new());
    let say = |line: String, failure: bool| match &bar {
        Some(b) => b.println(line),
        None if !a.quiet || failure => eprintln!("{line}"),
        None => {}
    };
    std::thread::scope(|s| {
        for _ in 0..jobs.min(n) {
            s.spawn(|| loop {
                if interrupted() {
                    break;
                }
                let id = next.fetch_add(1, Ordering::SeqCst);
                if id >= n {
                    break;
                }
                let r = execute(&ex, id);
                let k = done.fetch_add(1, Ordering::SeqCst) + 1;
                let what = describe(&t, id);
                let name = &t.runs[id].dir;
                match &r {
                    Ok(Outcome::Skipped) => {
                        say(format!("[{k}/{n}] {name} already done ({what})"), false)
                    }
                    Ok(Outcome::Done(st)) if st.exit_code == 0 => say(
                        format!("[{k}/{n}] {name} ok in {:.1}s ({what})", st.seconds),
                        false,
                    ),
                    Ok(Outcome::Done(st)) => say(
                        format!(
                            "[{k}/{n}] {name} FAILED (exit {}) in {:.1}s ({what}): {}",
                            st.exit_code,
                            st.seconds,
                            st.error.as_deref().unwrap_or("")
                        ),
                        true,
                    ),
                    Err(f) => say(format!("[{k}/{n}] {name} not started: {:#}", f.error), true),
                }
                if let Some(b) = &bar {
                    b.inc(1);
                }
                results.lock().expect("results lock").push((id, r));
            });
        }
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let mut results = results.into_inner().expect("results lock");
    results.sort_by_key(|(id, _)| *id);
    let (mut ok, mut skipped, mut failed) = (0, 0, Vec::new());
    for (id, r) in &results {
        match r {
            Ok(Outcome::Skipped) => skipped += 1,
            Ok(Outcome::Done(st)) if st.exit_code == 0 => ok += 1,
            Ok(Outcome::Done(st)) => {
                failed.push(format!("{} (exit {})", t.runs[*id].dir, st.exit_code))
            }
            Err(_) => failed.push(format!("{} (not started)", t.runs[*id].dir)),
        }
    }
    // The one-line summary also under --quiet: it is the run's result.
    eprintln!(
        "sweep: {ok} ok, {skipped} already done, {} failed{}{} -> diffphd sweep collect {}",
        failed.len(),
        if failed.is_empty() { "" } else { ": " },
        failed.join(", "),
        dir.display()
    );
    if interrupted() {
        return Err(Failure {
            code: 130,
            error: anyhow::anyhow!(
                "interrupted: {} of {n} runs not started or stopped; rerun `diffphd sweep run {} --out {}` to finish them (finished runs are skipped)",
                n - ok - skipped,
                a.plan.sweep.display(),
                dir.display()
            ),
        });
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Failure::run(anyhow::anyhow!(
            "{} of {n} runs failed (their stderr.log and sweep-status.json are in their directories)",
            failed.len()
        )))
    }
}

fn task_cmd(a: &TaskArgs) -> Result<(), Failure> {
    let (plan, dir) = load(&a.sweep, a.out.as_ref())?;
    plan.run(a.index).map_err(Failure::input)?;
    let ex = Exec {
        exe: this_exe()?,
        dir: absolute(&dir),
        plan,
        overwrite: a.overwrite,
    };
    let name = plan::run_dir_name(a.index, ex.plan.runs.len());
    match execute(&ex, a.index)? {
        Outcome::Skipped => {
            eprintln!("{name}: already done");
            Ok(())
        }
        Outcome::Done(st) if st.exit_code == 0 => {
            eprintln!("{name}: ok in {:.1}s", st.seconds);
            Ok(())
        }
        Outcome::Done(st) => Err(Failure {
            code: if st.exit_code > 0 { st.exit_code } else { 1 },
            error: anyhow::anyhow!(
                "{name} failed (exit {}): {}",
                st.exit_code,
                st.error.unwrap_or_default()
            ),
        }),
    }
}

/// Single-quote for POSIX shells.
fn sh(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// What both emitters need: the sweep's absolute paths, its run count and the one-run command.
struct Emit<'a> {
    a: &'a EmitArgs,
    spec: &'a diffphd::sweep::SweepSpec,
    command: &'static str,
    sweep: PathBuf,
    dir: PathBuf,
    n: usize,
    /// `diffphd sweep task SWEEP --out DIR` (shell-quoted; `--index I` follows).
    task: String,
}

impl Emit<'_> {
    /// Write `name` into the sweep directory (executable when `exec`).
    fn write(&self, name: &str, text: &str, exec: bool) -> Result<PathBuf, Failure> {
        let p = self.dir.join(name);
        diffphd::io::write_atomic(&p, text.as_bytes())
            .with_context(|| format!("cannot write {}", p.display()))
            .map_err(Failure::input)?;
        #[cfg(unix)]
        if exec {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755));
        }
        Ok(p)
    }
}

fn emit_cmd(a: &EmitArgs) -> Result<(), Failure> {
    let (plan, dir) = load(&a.plan.sweep, a.plan.out.as_ref())?;
    let t = table_of(&plan)?;
    write_tables(&dir, &t, a.plan.overwrite)?;
    warn_invalid(&t);
    let dir = absolute(&dir);
    let exe = match &a.binary {
        Some(b) => b.clone(),
        None => this_exe()?,
    };
    let sweep = absolute(&plan.sweep.path);
    let task = format!(
        "{} sweep task {} --out {}",
        sh(&exe.display().to_string()),
        sh(&sweep.display().to_string()),
        sh(&dir.display().to_string())
    );
    let e = Emit {
        a,
        spec: &plan.sweep.spec,
        command: t.command.as_str(),
        sweep,
        dir,
        n: t.runs.len(),
        task,
    };
    if a.parallel {
        emit_parallel(&e)
    } else {
        emit_slurm(&e)
    }
}

/// `parallel.jobs` (one `sweep task` line per run) and the `parallel.sh` driver.
fn emit_parallel(e: &Emit) -> Result<(), Failure> {
    let (n, task) = (e.n, &e.task);
    let jobs =
        e.a.jobs
            .unwrap_or((cores() / e.spec.threads_per_run).max(1));
    let lines: String = (0..n).map(|i| format!("{task} --index {i}\n")).collect();
    let jobs_file = e.write("parallel.jobs", &lines, false)?;
    let joblog = e.dir.join("parallel.joblog");
    let script = format!(
        "#!/bin/sh\n# GNU parallel driver of {sweep} ({n} runs of `{cmd}`), written by diffphd sweep emit --parallel.\n\
         # Extra arguments go to parallel, e.g. --sshloginfile nodes.txt (the binary, sweep file\n\
         # and output directory must be at the same paths on every machine: a shared filesystem).\n\
         # Re-running skips finished runs (diffphd's own resume); parallel's --resume-failed works too.\n\
         exec parallel --joblog {jl} --jobs {jobs} \"$@\" :::: {jf}\n",
        sweep = e.sweep.display(),
        cmd = e.command,
        jl = sh(&joblog.display().to_string()),
        jf = sh(&jobs_file.display().to_string()),
    );
    let sp = e.write("parallel.sh", &script, true)?;
    println!(
        "wrote {} ({n} jobs) and {}",
        jobs_file.display(),
        sp.display()
    );
    println!(
        "run:  parallel --joblog {} --jobs {jobs} :::: {}",
        sh(&joblog.display().to_string()),
        sh(&jobs_file.display().to_string())
    );
    println!(
        "then: diffphd sweep collect {}",
        sh(&e.dir.display().to_string())
    );
    Ok(())
}

/// `sweep.sbatch` (a Slurm job array of at most `--max-array-size` tasks) and the `sbatch`
/// lines that submit it in chunks.
fn emit_slurm(e: &Emit) -> Result<(), Failure> {
    let (a, n) = (e.a, e.n);
    let cpus = a
        .cpus_per_task
        .or(e.spec.slurm.cpus_per_task)
        .unwrap_or(e.spec.threads_per_run);
    if cpus < e.spec.threads_per_run {
        eprintln!(
            "warning: --cpus-per-task {cpus} < threads_per_run {}: tasks will oversubscribe their cores",
            e.spec.threads_per_run
        );
    }
    if a.max_array_size == 0 {
        return Err(Failure::input(anyhow::anyhow!(
            "--max-array-size must be at least 1"
        )));
    }
    let chunk = n.min(a.max_array_size).max(1);
    let throttle = a
        .max_parallel
        .or(e.spec.slurm.max_parallel)
        .map(|k| format!("%{k}"))
        .unwrap_or_default();
    let script = sbatch_script(e, cpus, chunk, &throttle);
    let p = e.write("sweep.sbatch", &script, true)?;
    println!("wrote {} ({n} array tasks)", p.display());
    let mut off = 0;
    while off < n {
        let len = (n - off).min(chunk);
        if off == 0 && len == chunk {
            println!("submit: sbatch {}", sh(&p.display().to_string()));
        } else {
            println!(
                "submit: sbatch --array=0-{}{throttle} --export=ALL,SWEEP_OFFSET={off} {}",
                len - 1,
                sh(&p.display().to_string())
            );
        }
        off += len;
    }
    println!(
        "then:   diffphd sweep collect {}",
        sh(&e.dir.display().to_string())
    );
    Ok(())
}

/// Slurm job name: the sweep file's stem with characters Slurm dislikes replaced by `_`.
fn job_name(sweep: &Path) -> String {
    sweep
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or("sweep")
        .trim_end_matches(".toml")
        .trim_end_matches(".sweep")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The text of `sweep.sbatch`: `#SBATCH` options (command line over `[slurm]`), then one
/// `sweep task` per array index shifted by `SWEEP_OFFSET`.
fn sbatch_script(e: &Emit, cpus: usize, chunk: usize, throttle: &str) -> String {
    let (a, sl) = (e.a, &e.spec.slurm);
    let mut s = String::from("#!/bin/bash\n");
    s.push_str(&format!(
        "#SBATCH --job-name=diffphd-{}\n",
        job_name(&e.sweep)
    ));
    s.push_str(&format!("#SBATCH --array=0-{}{throttle}\n", chunk - 1));
    s.push_str(&format!("#SBATCH --cpus-per-task={cpus}\n"));
    s.push_str("#SBATCH --ntasks=1\n");
    if let Some(v) = a.time.as_ref().or(sl.time.as_ref()) {
        s.push_str(&format!("#SBATCH --time={v}\n"));
    }
    if let Some(v) = a.mem.as_ref().or(sl.mem.as_ref()) {
        s.push_str(&format!("#SBATCH --mem={v}\n"));
    }
    if let Some(v) = a.partition.as_ref().or(sl.partition.as_ref()) {
        s.push_str(&format!("#SBATCH --partition={v}\n"));
    }
    if let Some(v) = &sl.account {
        s.push_str(&format!("#SBATCH --account={v}\n"));
    }
    for x in &sl.extra {
        s.push_str(&format!("#SBATCH {x}\n"));
    }
    s.push_str(&format!(
        "#SBATCH --output={}\n",
        e.dir.join("slurm-%A_%a.out").display()
    ));
    s.push_str(&format!(
        "# {} runs of `{}` from {}; written by diffphd sweep emit --slurm.\n\
         # Each array task runs exactly one run; a finished run is skipped when resubmitted.\n\
         # Sweeps larger than one array are submitted in chunks: SWEEP_OFFSET shifts the index.\n\
         set -u\n\
         I=$(( SLURM_ARRAY_TASK_ID + ${{SWEEP_OFFSET:-0}} ))\n\
         exec {} --index \"$I\"\n",
        e.n,
        e.command,
        e.sweep.display(),
        e.task
    ));
    s
}

fn collect_cmd(a: &CollectArgs) -> Result<(), Failure> {
    let table = collect::read_table(&a.dir).map_err(|e| {
        Failure::input(anyhow::anyhow!(
            "{e} (write it with `diffphd sweep plan SWEEP --out DIR`)"
        ))
    })?;
    let mut metrics = Vec::new();
    for m in table.collect.metrics.iter().chain(&a.metrics) {
        metrics.push(Metric::parse(m).map_err(|e| Failure::input(anyhow::anyhow!(e)))?);
    }
    let mut plots = Vec::new();
    for p in table.collect.plots.iter().chain(&a.plots) {
        let spec = PlotSpec::parse(p).map_err(|e| Failure::input(anyhow::anyhow!(e)))?;
        if !plots.contains(&spec) {
            plots.push(spec);
        }
    }
    let results = collect::collect(&a.dir, &table, &metrics);
    let write = |name: &str, text: &[u8]| -> Result<(), Failure> {
        diffphd::io::write_atomic(&a.dir.join(name), text)
            .with_context(|| format!("cannot write {}", a.dir.join(name).display()))
            .map_err(Failure::input)
    };
    write("results.csv", results.to_csv().as_bytes())?;
    let json = serde_json::json!({
        "diffphd_version": diffphd::io::VERSION,
        "git_commit": diffphd::io::git_commit(),
        "sweep": table.sweep,
        "scene": table.scene,
        "command": table.command,
        "axes": table.axes,
        "columns": results.columns,
        "runs": results.to_json(),
    });
    write(
        "results.json",
        serde_json::to_string_pretty(&json)
            .expect("results serialize")
            .as_bytes(),
    )?;
    let mut written = vec!["results.csv".to_string(), "results.json".to_string()];
    // the base scene, for the truth and bounds of a line plot's axis (none if unreadable)
    let scene: Option<toml::Value> = std::fs::read_to_string(&table.scene)
        .ok()
        .and_then(|t| toml::from_str(&t).ok());
    let mut formats = vec![("svg", crate::plot::Format::Svg)];
    if a.png {
        formats.push(("png", crate::plot::Format::Png));
    }
    for p in &plots {
        for (ext, format) in &formats {
            let bytes = crate::plot::sweep::render(&results, &table, p, scene.as_ref(), *format)
                .map_err(Failure::input)?;
            write(&p.file_name(ext), &bytes)?;
            written.push(p.file_name(ext));
        }
    }
    let status = results.column("status").expect("status column");
    let count = |s: &str| results.rows.iter().filter(|r| r[status] == s).count();
    if !a.quiet {
        println!(
            "{} runs: {} ok, {} failed, {} not run, {} stale -> {} in {}",
            results.rows.len(),
            count("ok"),
            count("failed"),
            count("not run"),
            count("stale"),
            written.join(", "),
            a.dir.display()
        );
    }
    Ok(())
}
