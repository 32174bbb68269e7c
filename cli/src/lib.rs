//! Command-line interface (clap). Exit codes, stable for shell sweeps:
//! `0` success, `1` the run failed (divergence, adjoint not converged, gradient check
//! failed), `2` bad input (scene, mesh, arguments) or an environment problem (output
//! directory, backend), `3` forward steps missed their stopping test
//! (`solver.on_nonconvergence = "fail"`, the default: the run finished with status
//! "incomplete", or `"error"`: it stopped at the first such frame; the message names the
//! frames; `"warn"` reports them and exits 0).

pub mod doctor;
pub mod grad;
pub mod gradcheck;
pub mod memory;
pub mod mesh;
pub mod optimize;
pub mod plot;
pub mod reference;
pub mod simulate;

/// The run logs (`log.json` schema) live with `simulate`; this is their historical path.
pub use simulate::log;
pub mod sweep;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "diffphd",
    version,
    about = "Differentiable Projective Dynamics for heterogeneous soft bodies"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Options shared by the commands that run a scene.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Scene file (TOML, schema_version = 1).
    pub scene: PathBuf,
    /// Output directory (overrides `output.directory`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Number of frames (overrides `simulation.frames`).
    #[arg(long)]
    pub frames: Option<usize>,
    /// Worker threads (overrides `solver.threads`; 0 = all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
    /// Override any scene key: `--set body.0.material.youngs_modulus=2e6` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Linear-solver backend.
    #[arg(long, value_enum, default_value = "cpu")]
    pub backend: BackendArg,
    /// Refuse runs whose estimated memory exceeds this (e.g. 8G, 512M; default: the memory
    /// available). See docs/RELIABILITY.md.
    #[arg(long, value_parser = memory::parse_bytes, value_name = "BYTES")]
    pub max_memory: Option<u64>,
    /// Solver method (overrides `solver.method`): diffphd, diffpd, newton or auto.
    #[arg(long)]
    pub solver: Option<diffphd::scene::SolverMethod>,
    /// Replace the output of another run in the output directory (its diffphd files,
    /// stale frames included, are removed first). Without it such a directory is refused.
    #[arg(long)]
    pub overwrite: bool,
    /// Print the resolved scene (after overrides, with every default filled in) and the
    /// output directory, then exit without running or writing anything.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendArg {
    Cpu,
    Cuda,
    /// The GPU kernels run by the host emulator: for testing the GPU path without a GPU.
    Emulator,
}

// The variants' doc comments are the `--help` text (TOML names like `[[parameter]]`), not
// rustdoc links.
#[allow(rustdoc::broken_intra_doc_links)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Forward rollout: writes frames (VTU volumes by default, or PLY surfaces) and log.json.
    Simulate(RunArgs),
    /// One forward + backward pass: loss and gradient of the declared [[parameter]]s.
    Grad(grad::GradArgs),
    /// Adjoint gradients of the scene's [loss] against central finite differences.
    Gradcheck(gradcheck::GradcheckArgs),
    /// Mesh tools: info, check, convert, voxelize.
    Mesh {
        #[command(subcommand)]
        cmd: mesh::MeshCommand,
    },
    /// L-BFGS on the scene's [[parameter]]s: optimize.json, optimized.toml, final frames.
    Optimize(optimize::OptimizeArgs),
    /// SVG or PNG of a run's log: an optimize.json (loss, gradient norm, parameters with bounds
    /// and truth) or a simulation's log.json (energies and centre of mass against time).
    Plot(plot::PlotArgs),
    /// What this machine can run: CPU threads, CUDA driver and device, NVRTC, the GPU emulator.
    Doctor(doctor::DoctorArgs),
    /// Print the JSON Schema of the scene format (the copy in docs/scene.schema.json).
    Schema {
        /// Print the command-line reference instead (the copy in docs/cli.md).
        #[arg(long)]
        cli: bool,
    },
    /// Parameter sweeps: plan, run locally, emit for GNU parallel / Slurm, task, collect.
    Sweep {
        #[command(subcommand)]
        cmd: sweep::SweepCommand,
    },
}

/// A CLI failure with its exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub error: anyhow::Error,
}

impl Failure {
    pub fn input(e: impl Into<anyhow::Error>) -> Self {
        Failure {
            code: 2,
            error: e.into(),
        }
    }
    pub fn run(e: impl Into<anyhow::Error>) -> Self {
        Failure {
            code: 1,
            error: e.into(),
        }
    }
    /// Forward steps that missed their stopping test (exit code [`EXIT_NOT_CONVERGED`]).
    pub fn not_converged(e: impl Into<anyhow::Error>) -> Self {
        Failure {
            code: EXIT_NOT_CONVERGED,
            error: e.into(),
        }
    }
}

/// Exit code of a run whose forward steps missed their stopping test.
pub const EXIT_NOT_CONVERGED: i32 = 3;

impl Failure {
    /// A solver error as a failure: [`EXIT_NOT_CONVERGED`] for a step that missed its test
    /// under `on_nonconvergence = "error"`, 1 otherwise.
    pub fn solver(e: diffphd::solver::SolverError, context: String) -> Self {
        // a start inside an obstacle or another body is bad input (2), whichever command
        let code = e.exit_code();
        Failure {
            code,
            error: anyhow::Error::new(e).context(context),
        }
    }
}

/// glibc's allocator hands the top of its heap back to the kernel when more than the trim
/// threshold (128 KiB, raised only after a large block goes back) lies free there, and
/// serves blocks above the mmap threshold by `mmap`. A solve that allocates its work space
/// per call at the top of the heap and frees it (the contact solve's GMRES basis, its $W$
/// products, the local step's projections) then moves the heap's end down and up again every
/// call, and every page it touches again is a fresh page fault: a 46-frame napkin `simulate`
/// took 374 000 page faults and 1.1 s of system time for the 31 000 of session 19's binary
/// (issue 34, "no slower"). Fixed thresholds — blocks up to 32 MiB from the heap, 64 MiB kept
/// free at its top, what glibc's own adjustment reaches at most — make the heap's size
/// follow the run's peak instead: 2 800 page faults. The peak memory is unchanged (the
/// heap never grows past what the run holds at once plus the threshold's slack at its top,
/// which is returned memory the kernel has not yet been asked for). Results are unchanged:
/// where a block lies changes no arithmetic.
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const MMAP_THRESHOLD: libc::c_int = 32 << 20;
        const TRIM_THRESHOLD: libc::c_int = 64 << 20;
        // SAFETY: mallopt only sets two of the allocator's parameters, under the allocator's
        // own lock (glibc's mallopt is thread-safe); blocks already handed out are not
        // touched. A refusal (return 0) keeps glibc's defaults, which are correct, only
        // slower.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
            libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
        }
    }
}

/// Entry point; returns the process exit code.
pub fn main() -> i32 {
    tune_allocator();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let result = match cli.command {
        Command::Simulate(args) if args.dry_run => dry_run("simulate", &args),
        Command::Grad(args) if args.run.dry_run => dry_run("grad", &args.run),
        Command::Gradcheck(args) if args.run.dry_run => dry_run("gradcheck", &args.run),
        Command::Optimize(args) if args.run.dry_run => {
            dry_run("optimize", &optimize::with_caps(&args))
        }
        Command::Simulate(args) => simulate::run(&args).map(|_| ()),
        Command::Gradcheck(args) => gradcheck::run(&args).map(|_| ()),
        Command::Grad(args) => grad::run(&args),
        Command::Mesh { cmd } => mesh::run(&cmd),
        Command::Optimize(args) => optimize::run(&args).map(|_| ()),
        Command::Plot(args) => plot::run(&args),
        Command::Doctor(args) => doctor::run(&args),
        Command::Sweep { cmd } => sweep::run(&cmd),
        Command::Schema { cli } => {
            if cli {
                print!("{}", reference::markdown());
            } else {
                print!("{}", diffphd::scene::json_schema());
            }
            Ok(())
        }
    };
    match result {
        Ok(()) => 0,
        Err(f) => {
            eprintln!("error: {:#}", f.error);
            f.code
        }
    }
}

/// `--dry-run`: the resolved scene as TOML on stdout, preceded by comment lines naming the
/// command, overrides, scene hash and output directory. Writes nothing.
fn dry_run(command: &str, args: &RunArgs) -> Result<(), Failure> {
    let ls = simulate::load_scene(args)?;
    let sets = simulate::effective_sets(args);
    let out = output_dir(args, &ls);
    let text = toml::to_string(&ls.scene)
        .map_err(|e| Failure::input(anyhow::anyhow!("cannot print the resolved scene: {e}")))?;
    println!("# diffphd {command} --dry-run: {}", ls.path.display());
    println!("# overrides: [{}]", sets.join(", "));
    println!("# scene hash: {}", ls.hash);
    println!("# output directory: {}", out.display());
    print!("{text}");
    Ok(())
}

/// The output directory of a run: `--out`, else the scene's `output.directory`.
pub fn output_dir(args: &RunArgs, ls: &diffphd::scene::LoadedScene) -> PathBuf {
    args.out
        .clone()
        .unwrap_or_else(|| PathBuf::from(&ls.scene.output.directory))
}

/// Create and claim the output directory of a run (`diffphd::io::outdir`): refuses, with exit
/// code 2, a directory holding another run's output unless `--overwrite`.
pub fn claim_output(
    command: &str,
    args: &RunArgs,
    ls: &diffphd::scene::LoadedScene,
) -> Result<PathBuf, Failure> {
    let out = output_dir(args, ls);
    let me = diffphd::io::outdir::RunMarker {
        scene: ls.path.display().to_string(),
        scene_hash: ls.hash.clone(),
        overrides: simulate::effective_sets(args),
        commands: vec![command.to_string()],
        diffphd_version: diffphd::io::VERSION.to_string(),
        hash_without_threads: ls.hash_without_threads(),
    };
    let removed = diffphd::io::outdir::claim(&out, &me, args.overwrite).map_err(Failure::input)?;
    if !removed.is_empty() && !args.quiet {
        eprintln!(
            "{}: removed {} file(s) of an earlier run from {}",
            if args.overwrite {
                "--overwrite"
            } else {
                "the same run at another thread count"
            },
            removed.len(),
            out.display()
        );
    }
    Ok(out)
}

/// Reproducibility fields every output file carries: binary version, git commit, scene,
/// scene hash, every override, threads and backend.
pub fn provenance(
    command: &str,
    ls: &diffphd::scene::LoadedScene,
    sets: &[String],
    threads: usize,
    backend: diffphd::gpu::Backend,
) -> serde_json::Value {
    serde_json::json!({
        "diffphd_version": diffphd::io::VERSION,
        "git_commit": diffphd::io::git_commit(),
        "command": command,
        "scene": ls.path.display().to_string(),
        "scene_hash": ls.hash,
        "overrides": sets,
        "threads": threads,
        "backend": backend,
    })
}

/// Seconds between the first interrupt signal and a forced exit.
pub const GRACE_SECONDS: u64 = 10;

/// The process-wide interrupt flag, set by SIGINT (Ctrl-C), SIGTERM or SIGHUP (installed
/// once). `simulate` and `optimize` poll it between frames / evaluations and, through a
/// `diffphd::cancel::Cancel` token on the flag, inside every solver iteration (the step or
/// evaluation in progress is abandoned), record status `interrupted` and exit 130; a second
/// signal, or [`GRACE_SECONDS`] without the run stopping (a stage that does not poll: a
/// factorization, a device call), exits at once (130), leaving the last
/// complete files, with `log.json` at `"running"` (docs/RELIABILITY.md: a log that says
/// "running" after the process ended is an incomplete run).
pub fn interrupt_flag() -> Option<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, OnceLock};
    static FLAG: OnceLock<Option<Arc<AtomicBool>>> = OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        ctrlc::set_handler(move || {
            if f.swap(true, Ordering::SeqCst) {
                // Second signal: leave now; every file on disk is complete.
                std::process::exit(130);
            }
            eprintln!("\ninterrupt: stopping at the next solver iteration; the frame or evaluation in progress is dropped (interrupt again to quit now; quitting anyway in {GRACE_SECONDS} s)");
            // A step that does not end (a stuck solve) must not make the process deaf to
            // SIGTERM: leave after a grace period; every file on disk is complete.
            std::thread::spawn(|| {
                std::thread::sleep(std::time::Duration::from_secs(GRACE_SECONDS));
                eprintln!("interrupt: the current step did not finish in {GRACE_SECONDS} s; quitting");
                std::process::exit(130);
            });
        })
        .ok()
        .map(|_| flag)
    })
    .clone()
}

/// Configure the global rayon pool (first call wins). The calling thread (the command's own)
/// is the pool's thread 0 (`use_current_thread`): a parallel loop called from it runs there,
/// its halves stolen by the other `n - 1` threads, instead of being handed to another thread
/// and waited for. At `--threads 1` the pool is the calling thread alone, so every parallel
/// loop runs inline, as a serial loop, with no thread hand-over per call (issue 34, "no
/// slower": a handed-over job costs a futex wake-up and a context switch each way, and the PD
/// iteration, the adjoint and Newton's assembly make thousands of such calls per rollout).
/// Which thread runs a loop changes no result: the loops' work split depends on the pool's
/// size only.
pub fn set_threads(n: usize) -> usize {
    let n = if n == 0 {
        std::thread::available_parallelism()
            .map(|v| v.get())
            .unwrap_or(1)
    } else {
        n
    };
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .use_current_thread()
        .build_global();
    rayon::current_num_threads()
}
