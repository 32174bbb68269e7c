//! `diffphd gradcheck`: adjoint gradients of the scene's `[loss]` with respect to its
//! `[[parameter]]`s against central finite differences.

use crate::failure::Failure;
use crate::run::{claim_output, effective_sets, provenance, set_threads, RunArgs};
use crate::{memory, simulate};
use anyhow::Context;
use diffphd::optimize::gradcheck::{self, Options};
use diffphd::optimize::problem::Problem;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct GradcheckArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Check only this parameter (name as printed; repeatable).
    #[arg(long = "param")]
    pub params: Vec<String>,
    /// Finite-difference step in the working variable (default: per parameter kind).
    #[arg(long)]
    pub eps: Option<f64>,
    /// Relative tolerance of the verdict.
    #[arg(long, default_value_t = 1e-4)]
    pub rtol: f64,
    /// Absolute tolerance of the verdict.
    #[arg(long, default_value_t = 0.0)]
    pub atol: f64,
    /// Decades of finite-difference steps swept below the base step (0 = one step).
    #[arg(long, default_value_t = 4)]
    pub decades: usize,
    /// A parameter whose gradient is zero by construction (name as printed; repeatable): its
    /// row passes only when adjoint and finite difference are both zero; any other row whose
    /// two values are both zero fails ("zero reference").
    #[arg(long = "expect-zero")]
    pub expect_zero: Vec<String>,
}

/// Largest `--decades`: steps below 1e-16 of the base step are all rounding.
pub const MAX_DECADES: usize = 16;

/// Refuse numeric arguments that make the check meaningless (exit 2, before any work).
fn check_args(args: &GradcheckArgs) -> Result<(), Failure> {
    let bad = |flag: &str, v: f64, want: &str| {
        Failure::input(anyhow::anyhow!("{flag} {v}: expected {want}"))
    };
    if let Some(e) = args.eps {
        if !(e.is_finite() && e > 0.0) {
            return Err(bad("--eps", e, "a finite step > 0"));
        }
    }
    if !(args.rtol.is_finite() && args.rtol >= 0.0) {
        return Err(bad("--rtol", args.rtol, "a finite tolerance >= 0"));
    }
    if !(args.atol.is_finite() && args.atol >= 0.0) {
        return Err(bad("--atol", args.atol, "a finite tolerance >= 0"));
    }
    if args.decades > MAX_DECADES {
        return Err(Failure::input(anyhow::anyhow!(
            "--decades {}: expected at most {MAX_DECADES}",
            args.decades
        )));
    }
    Ok(())
}

pub fn run(args: &GradcheckArgs) -> Result<gradcheck::Report, Failure> {
    check_args(args)?;
    let backend = simulate::check_backend(args.run.backend)?;
    let ls = simulate::load_scene(&args.run)?;
    let threads = set_threads(ls.scene.solver.threads);
    let path = ls.path.display().to_string();
    let mut problem = Problem::new(ls)
        .map_err(|e| Failure::input(anyhow::Error::new(e).context(path.clone())))?;
    problem.memory_budget = memory::check_problem(&problem, args.run.max_memory)?;
    simulate::accelerate_problem(&mut problem, backend, args.run.quiet)?;
    for (flag, list) in [
        ("--param", &args.params),
        ("--expect-zero", &args.expect_zero),
    ] {
        for p in list {
            if !problem.params.iter().any(|q| &q.name == p) {
                let names: Vec<&str> = problem.params.iter().map(|q| q.name.as_str()).collect();
                return Err(Failure::input(anyhow::anyhow!(
                    "{flag} {p:?}: no such parameter; the scene declares {names:?}"
                )));
            }
        }
    }
    if problem.params.is_empty() {
        return Err(Failure::input(anyhow::anyhow!(
            "{path}: declare at least one [[parameter]] to check"
        )));
    }
    let out: PathBuf = claim_output("gradcheck", &args.run, &problem.ls)?;
    let opts = Options {
        only: args.params.clone(),
        eps: args.eps,
        rtol: args.rtol,
        atol: args.atol,
        decades: args.decades,
        expect_zero: args.expect_zero.clone(),
    };
    let report = gradcheck::check(&problem, &opts)
        .map_err(|e| Failure::run(anyhow::Error::new(e).context(path.clone())))?;
    let mut value = provenance(
        "gradcheck",
        &problem.ls,
        &effective_sets(&args.run),
        threads,
        backend,
    );
    if let serde_json::Value::Object(fields) = serde_json::to_value(&report).expect("report") {
        value.as_object_mut().expect("object").extend(fields);
    }
    let json = serde_json::to_string_pretty(&value).expect("report serializes");
    diffphd::io::write_atomic(&out.join("gradcheck.json"), json.as_bytes())
        .with_context(|| "cannot write gradcheck.json")
        .map_err(Failure::input)?;
    if !args.run.quiet {
        print!("{}", gradcheck::table(&report));
    }
    if !report.all_pass {
        return Err(Failure::run(anyhow::anyhow!(
            "gradient check failed (see {})",
            out.join("gradcheck.json").display()
        )));
    }
    Ok(report)
}
