//! Command-line interface (clap). Exit codes, stable for shell sweeps:
//! `0` success, `1` the run failed (divergence, adjoint not converged, gradient check
//! failed), `2` bad input (scene, mesh, arguments) or an environment problem (output
//! directory, backend), `3` forward steps missed their stopping test
//! (`solver.on_nonconvergence = "fail"`, the default: the run finished with status
//! "incomplete", or `"error"`: it stopped at the first such frame; the message names the
//! frames; `"warn"` reports them and exits 0).
//!
//! One way down: this file dispatches ([`main`]); [`command`] holds the clap grammar (and the
//! reference generated from it); one module per command below it; beneath them all, what the
//! commands share — [`run`] (the arguments and plumbing of a run: overrides, output
//! directory, provenance, interrupt, threads), [`memory`] (the memory refusals) and
//! [`failure`] (the error and its exit code).

pub mod command;
pub mod doctor;
pub mod failure;
pub mod grad;
pub mod gradcheck;
pub mod memory;
pub mod mesh;
pub mod optimize;
pub mod plot;
pub mod run;
pub mod simulate;
pub mod sweep;

/// The run logs (`log.json` schema) live with `simulate`; this is their historical path.
pub use simulate::log;

use clap::Parser;
use command::{Cli, Command};
use failure::Failure;
use run::RunArgs;

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
                print!("{}", command::markdown());
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
    let sets = run::effective_sets(args);
    let out = run::output_dir(args, &ls);
    let text = toml::to_string(&ls.scene)
        .map_err(|e| Failure::input(anyhow::anyhow!("cannot print the resolved scene: {e}")))?;
    println!("# diffphd {command} --dry-run: {}", ls.path.display());
    println!("# overrides: [{}]", sets.join(", "));
    println!("# scene hash: {}", ls.hash);
    println!("# output directory: {}", out.display());
    print!("{text}");
    Ok(())
}
