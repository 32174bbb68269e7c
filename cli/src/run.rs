//! What every command that runs a scene shares: its arguments ([`RunArgs`]), the overrides
//! they stand for, the output directory and its claim, the provenance fields of every output
//! file, the interrupt flag and the thread pool.

use crate::failure::Failure;
use crate::memory;
use std::path::PathBuf;

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

/// All `--set` expressions of a run, including those `--frames`/`--threads` stand for.
pub fn effective_sets(args: &RunArgs) -> Vec<String> {
    let mut sets = args.sets.clone();
    if let Some(f) = args.frames {
        sets.push(format!("simulation.frames={f}"));
    }
    if let Some(t) = args.threads {
        sets.push(format!("solver.threads={t}"));
    }
    if let Some(m) = args.solver {
        sets.push(format!("solver.method=\"{}\"", m.as_str()));
    }
    sets
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
        overrides: effective_sets(args),
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

/// The provenance fields of every output (the library's [`diffphd::session::provenance`],
/// which Python's results carry too).
pub use diffphd::session::provenance;

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
