//! `diffphd grad`: one forward and one backward pass — the loss, its gradient with respect
//! to the declared `[[parameter]]`s, per-phase timings and per-frame adjoint diagnostics
//! (`grad.json`). No finite differences.

use crate::failure::Failure;
use crate::run::{claim_output, effective_sets, provenance, set_threads, RunArgs};
use crate::{memory, simulate};
use anyhow::Context;
use diffphd::optimize::classes::material::youngs_modulus;
use diffphd::optimize::problem::Problem;
use std::path::PathBuf;

/// Arguments of `diffphd grad`.
#[derive(clap::Args, Debug, Clone)]
pub struct GradArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Also put the final state into grad.json (`final_state`: every node's position at the
    /// last frame, full precision, and the largest node displacement from rest over the
    /// rollout), for accuracy comparisons between solver settings
    /// (scripts/bench_frontier.sh).
    #[arg(long)]
    pub final_state: bool,
    /// Check the gradient against a central finite difference at tight forward tolerances
    /// (solver.residual_tol and solver.newton_tol 1e-12): per parameter with up to 3
    /// parameters, else along one seeded random direction; each with its own error bar from two
    /// steps. Exit 1 when a check's error exceeds --verify-threshold or the finite difference
    /// cannot certify it (docs/gradcheck.md, "grad --verify")
    #[arg(long)]
    pub verify: bool,
    /// --verify: the largest accepted error, relative to the larger of |FD| and 1e-3 of the
    /// largest |FD| (per parameter) or 1e-3 |g||d| (random direction)
    #[arg(long, value_name = "ERR", default_value_t = diffphd::optimize::verify::DEFAULT_THRESHOLD)]
    pub verify_threshold: f64,
    /// --verify: seed of the random direction
    #[arg(long, value_name = "SEED", default_value_t = 1)]
    pub verify_seed: u64,
}

pub fn run(grad_args: &GradArgs) -> Result<(), Failure> {
    let args = &grad_args.run;
    let backend = simulate::check_backend(args.backend)?;
    let thr = grad_args.verify_threshold;
    if !(thr.is_finite() && thr > 0.0) {
        return Err(Failure::input(anyhow::anyhow!(
            "--verify-threshold {thr}: expected a finite number > 0"
        )));
    }
    let ls = simulate::load_scene(args)?;
    let threads = set_threads(ls.scene.solver.threads);
    let path = ls.path.display().to_string();
    let mut problem = Problem::new(ls)
        .map_err(|e| Failure::input(anyhow::Error::new(e).context(path.clone())))?;
    problem.memory_budget = memory::check_problem(&problem, args.max_memory)?;
    simulate::accelerate_problem(&mut problem, backend, args.quiet)?;
    // the error sweep on the CPU path only: on a device its products would enter the
    // backward's traffic record (docs/gradcheck.md "The gradient's error bar")
    problem.estimate_error = problem.accelerate.is_none();
    if problem.params.is_empty() {
        return Err(Failure::input(anyhow::anyhow!(
            "{path}: declare at least one [[parameter]] to differentiate the loss with respect to"
        )));
    }
    let out: PathBuf = claim_output("grad", args, &problem.ls)?;
    let mut warnings = diffphd::optimize::verify::frozen_e_ref_warnings(&problem);
    warnings.extend(youngs_modulus::old_meaning_warnings(
        &problem.params,
        &problem.base,
    ));
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    problem
        .resolve_method()
        .map_err(|e| Failure::input(anyhow::Error::new(e).context(path.clone())))?;
    let theta = problem.theta0();
    let ev = problem
        .evaluate(&theta, true)
        .map_err(|e| Failure::solver(e, path.clone()))?;
    let verification = if grad_args.verify {
        let opts = diffphd::optimize::verify::Options {
            seed: grad_args.verify_seed,
            threshold: grad_args.verify_threshold,
        };
        Some(
            diffphd::optimize::verify::verify(&problem, &theta, &ev.gradient, &opts)
                .map_err(|e| Failure::run(anyhow::Error::new(e).context(path.clone())))?,
        )
    } else {
        None
    };
    let names: Vec<&str> = problem.params.iter().map(|p| p.name.as_str()).collect();
    let mut json = provenance("grad", &problem.ls, &effective_sets(args), threads, backend);
    json.as_object_mut().expect("object").extend(
        serde_json::json!({
        "method": ev.method,
        "method_reason": ev.method_reason,
        "parameters": names,
        "theta": theta,
        "values": problem.values_at(&theta),
        "evaluation": ev,
        })
        .as_object()
        .expect("object")
        .clone(),
    );
    if grad_args.final_state {
        json.as_object_mut().expect("object").insert(
            "final_state".into(),
            serde_json::json!({
                "frame": problem.base.frames,
                "max_displacement": ev.max_displacement,
                "positions": ev.final_x,
            }),
        );
    }
    if !warnings.is_empty() {
        json.as_object_mut()
            .expect("object")
            .insert("warnings".into(), serde_json::json!(warnings));
    }
    if let Some(v) = &verification {
        json.as_object_mut()
            .expect("object")
            .insert("verify".into(), serde_json::json!(v));
    }
    diffphd::io::write_atomic(
        &out.join("grad.json"),
        serde_json::to_string_pretty(&json)
            .expect("json")
            .as_bytes(),
    )
    .context("cannot write grad.json")
    .map_err(Failure::input)?;
    if !args.quiet {
        println!("loss = {:.10e}", ev.loss);
        let uncovered = ev
            .error_estimate
            .as_ref()
            .map_or(0, |e| e.skipped_frames.len());
        if uncovered > 0 {
            println!(
                "  (error estimates: {uncovered} of {} frames not covered: their adjoint has contact rows or glue pins)",
                ev.frames.len()
            );
        }
        for (i, (n, g)) in names.iter().zip(&ev.gradient).enumerate() {
            match ev.gradient_error_estimate.get(i) {
                Some(e) => println!("  dL/d{n} = {g:.10e}  (error estimate {e:.1e})"),
                None => println!("  dL/d{n} = {g:.10e}"),
            }
        }
        let frames = ev.frames.len().max(1) as f64;
        println!(
            "forward {:.3}s (local {:.3}s, global {:.3}s, other {:.3}s; {} PD iterations), backward {:.3}s ({:.1} ms/frame, {} adjoint iterations), tape {} bytes",
            ev.forward_seconds,
            ev.forward_local_seconds,
            ev.forward_global_seconds,
            ev.forward_other_seconds,
            ev.pd_iterations,
            ev.backward_seconds,
            1e3 * ev.backward_seconds / frames,
            ev.adjoint_iterations,
            ev.tape_bytes
        );
        for (phase, t) in [
            ("forward", &ev.forward_traffic),
            ("backward", &ev.backward_traffic),
        ] {
            if let Some(t) = t {
                println!("device, {phase}: {}", t.summary());
            }
        }
        if !ev.nonconverged_backward_frames.is_empty() {
            println!(
                "WARNING: adjoint did not converge in frames {:?}",
                ev.nonconverged_backward_frames
            );
        }
    }
    if let Some(v) = &verification {
        if !args.quiet {
            print!("{}", v.table());
        }
        if !v.passed() {
            return Err(Failure::run(anyhow::anyhow!(
                "gradient verification failed (grad.json \"verify\"):\n{}",
                v.table().trim_end()
            )));
        }
    }
    if !ev.nonconverged_backward_frames.is_empty() {
        return Err(Failure::run(anyhow::anyhow!(
            "adjoint did not converge in frames {:?}",
            ev.nonconverged_backward_frames
        )));
    }
    if !ev.nonconverged_forward_frames.is_empty()
        && problem.ls.scene.solver.on_nonconvergence == diffphd::model::OnNonConvergence::Fail
    {
        let cap = ev
            .contact_time_limit
            .map(|(f, k)| {
                let cap = problem.ls.scene.contact.max_seconds;
                format!(" ({})", simulate::contact_time_limit_message(f, k, cap))
            })
            .unwrap_or_default();
        return Err(Failure::not_converged(anyhow::anyhow!(
            "forward frames {:?} did not meet the solver's stopping test{cap} (the gradient in grad.json is of the unconverged states); set solver.on_nonconvergence = \"warn\" to accept them",
            ev.nonconverged_forward_frames
        )));
    }
    Ok(())
}
