//! `diffphd optimize` (issue 5): contact-free system identification of E and ν from a
//! reference trajectory the tool generates itself (item 1: E within 1 %, ν within 2 %,
//! starting 3× off), an initial-state problem, the outputs (optimize.json, optimized.toml,
//! PLY frames, plot), Ctrl-C, failures and bad input.

use crate::common;
use common::{bin, run_cli};
use diffphd::optimize::lbfgs::{optimize, Status};
use diffphd::optimize::problem::Problem;
use diffphd::optimize::writeback::write_back;
use std::process::Command;

const E_TRUE: f64 = 1e5;
const NU_TRUE: f64 = 0.4;

/// 6×2×2 hex cantilever, released from a 30° twist under gravity, 10 frames. The scene
/// says E = 3e5, ν = 0.3; the reference trajectory is the same scene at E = 1e5, ν = 0.4.
fn sysid() -> String {
    common::fixture("scenes/optimize/sysid", &[])
}

fn read_json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("file exists")).expect("valid JSON")
}

/// Item 1 through the real binary: recovery, a valid monotone-best log, optimized.toml that
/// reloads with the optimized values, the final rollout's PLY frames, and the plot.
#[test]
fn sysid_recovers_e_and_nu_from_3x_off() {
    let t0 = std::time::Instant::now();
    let r = run_cli("optimize", &sysid(), &[], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let log = read_json(&r.out().join("optimize.json"));
    assert_eq!(log["status"], "completed");
    let best = &log["best"]["parameters"];
    let (e, nu) = (best[0].as_f64().unwrap(), best[1].as_f64().unwrap());
    let evals = log["evaluations"].as_array().unwrap();
    let iters = log["iterations"].as_array().unwrap();
    eprintln!(
        "recovered E = {e:.6e} (err {:.2e}), nu = {nu:.6} (err {:.2e}); {} iterations, {} evaluations, {:.3}s fwd + {:.3}s bwd per evaluation, {:.1}s total; {}",
        (e / E_TRUE - 1.0).abs(),
        (nu / NU_TRUE - 1.0).abs(),
        iters.len() - 1,
        evals.len(),
        log["summary"]["mean_forward_seconds"].as_f64().unwrap(),
        log["summary"]["mean_backward_seconds"].as_f64().unwrap(),
        t0.elapsed().as_secs_f64(),
        log["termination"]
    );
    assert!((e / E_TRUE - 1.0).abs() < 0.01, "E = {e}");
    assert!((nu / NU_TRUE - 1.0).abs() < 0.02, "nu = {nu}");
    // Start point and one record per evaluation with the documented fields.
    assert!((evals[0]["parameters"][0].as_f64().unwrap() / 3e5 - 1.0).abs() < 1e-12);
    for (i, ev) in evals.iter().enumerate() {
        assert_eq!(ev["index"].as_u64().unwrap() as usize, i);
        for k in [
            "loss",
            "forward_seconds",
            "backward_seconds",
            "gradient_norm",
        ] {
            assert!(ev[k].as_f64().unwrap().is_finite(), "{k}");
        }
        assert!(ev["pd_iterations"].as_u64().unwrap() > 0);
        assert!(ev["adjoint_iterations"].as_u64().unwrap() > 0);
        assert_eq!(ev["gradient"].as_array().unwrap().len(), 2);
    }
    // Monotone: accepted iterates never increase the loss; `best` is the minimum.
    let losses: Vec<f64> = iters.iter().map(|i| i["loss"].as_f64().unwrap()).collect();
    assert!(losses.windows(2).all(|w| w[1] <= w[0]), "{losses:?}");
    let min = evals
        .iter()
        .map(|e| e["loss"].as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    assert_eq!(log["best"]["loss"].as_f64().unwrap(), min);
    assert!(min < 1e-8 * losses[0]);
    // optimized.toml reloads with the optimized values.
    let text = std::fs::read_to_string(r.out().join("optimized.toml")).unwrap();
    assert!(text.contains("Rebuilt model matches the optimized one: yes"));
    let ls = common::load(&text, &[]);
    let m = &ls.scene.bodies[0].material;
    assert!((m.youngs_modulus / e - 1.0).abs() < 1e-12);
    assert!((m.poisson_ratio / nu - 1.0).abs() < 1e-12);
    assert!(ls.scene.parameters.iter().all(|p| p.initial.is_none()));
    // Final rollout's frames.
    for t in 0..=10 {
        assert!(
            r.out().join(format!("frame_{t:05}.vtu")).exists(),
            "frame {t}"
        );
    }
    // Plot.
    let svg = r.out().join("loss.svg");
    let st = Command::new(bin())
        .args(["plot"])
        .arg(r.out().join("optimize.json"))
        .arg("-o")
        .arg(&svg)
        .status()
        .unwrap();
    assert!(st.success());
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg") && s.contains("poisson_ratio[0]"));
}

/// A free-flying 2×2×2 hex block under gravity: the initial velocity and height that put
/// the centre of mass on a target after 10 frames (DiffPD's Bunny, without the ground).
fn flight() -> String {
    common::fixture("scenes/optimize/flight", &[])
}

#[test]
fn initial_state_reaches_the_target_and_writes_back() {
    let ls = common::load(&flight(), &[]);
    let problem = Problem::new(ls).unwrap();
    let mut n = 0usize;
    let mut cb = |_: &diffphd::optimize::lbfgs::OptimizeLog| n += 1;
    let log = optimize(
        &problem,
        &problem.ls.scene.optimize,
        serde_json::Value::Null,
        None,
        &mut cb,
    )
    .unwrap();
    assert_eq!(log.status, Status::Completed, "{:?}", log.error);
    let best = log.best.clone().unwrap();
    // loss = ½|c − c*|²: a distance below 1 mm.
    assert!(
        (2.0 * best.loss).sqrt() < 1e-3,
        "distance {}",
        (2.0 * best.loss).sqrt()
    );
    assert!(n >= log.evaluations.len());
    eprintln!(
        "flight: {} evaluations, {} iterations, distance {:.2e} m, values {:?}",
        log.evaluations.len(),
        log.iterations.len() - 1,
        (2.0 * best.loss).sqrt(),
        best.parameters
    );
    // Written back: initial.velocity = scene value + optimized offset; translation absolute.
    let wb = write_back(&problem, &best.parameters).unwrap();
    assert!(wb.exact, "{:?}", wb.notes);
    let ls2 = common::load(&wb.toml, &[]);
    let init = &ls2.scene.bodies[0].initial;
    assert!((init.velocity[0] - (0.5 + best.parameters[0])).abs() < 1e-12);
    assert!((init.translation[2] - best.parameters[2]).abs() < 1e-12);
    let p2 = Problem::new(ls2).unwrap();
    let ev = p2.evaluate(&p2.theta0(), false).unwrap();
    assert!((ev.loss - best.loss).abs() <= 1e-9 * best.loss.max(1e-12));
}

/// E factors on a body and on a region overridden by a later absolute region cannot be
/// rewritten in place; the fallback appends regions and the rebuilt model still matches.
#[test]
fn youngs_modulus_write_back_is_exact_with_overlapping_regions() {
    let text = &common::fixture("scenes/optimize/overlapping_regions", &[]);
    let problem = Problem::new(common::load(text, &[])).unwrap();
    let values = vec![
        2.0 * problem.params[0].base_value,
        0.5 * problem.params[1].base_value,
        1.5 * problem.params[2].base_value,
        2.5,
        0.01,
    ];
    let wb = write_back(&problem, &values).unwrap();
    assert!(wb.exact, "{:?}", wb.notes);
    assert!(wb.notes.iter().any(|n| n.contains("appended")));
    // Without overlap in-place rewriting is exact and needs no appended region.
    let single = common::fixture(
        "scenes/optimize/overlapping_regions",
        &[r#"parameter=[
            { kind = "youngs_modulus" },
            { kind = "youngs_modulus", region = 1 },
            { kind = "force_scale" },
            { kind = "damping_beta" },
        ]"#],
    );
    let problem = Problem::new(common::load(&single, &[])).unwrap();
    let wb = write_back(&problem, &[2e5, 9e5, 2.5, 0.01]).unwrap();
    assert!(wb.exact, "{:?}", wb.notes);
    assert!(
        !wb.notes.iter().any(|n| n.contains("appended")),
        "{:?}",
        wb.notes
    );
}

/// Ctrl-C (SIGINT) leaves a valid optimize.json with status "interrupted" and the best
/// point, and exit code 130.
#[test]
fn sigint_leaves_a_valid_log_with_the_best_point() {
    let dir = tempfile::tempdir().unwrap();
    let sp = dir.path().join("scene.toml");
    std::fs::write(&sp, sysid().replace("frames = 10", "frames = 4")).unwrap();
    let out = dir.path().join("out");
    let child = Command::new(bin())
        .arg("optimize")
        .arg(&sp)
        .arg("--out")
        .arg(&out)
        .arg("--quiet")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let json = out.join("optimize.json");
    let t0 = std::time::Instant::now();
    loop {
        if let Ok(t) = std::fs::read_to_string(&json) {
            let v: serde_json::Value = serde_json::from_str(&t).expect("always valid JSON");
            if v["evaluations"].as_array().is_some_and(|a| a.len() >= 2) {
                break;
            }
        }
        assert!(t0.elapsed().as_secs() < 60, "no evaluation recorded");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let st = Command::new("kill")
        .arg("-INT")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(st.success());
    let res = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert_eq!(res.status.code(), Some(130), "{stderr}");
    let v = read_json(&json);
    assert_eq!(v["status"], "interrupted");
    assert!(v["best"]["parameters"].as_array().unwrap().len() == 2);
    common::assert_optimized_scene(&out, &v["best"]);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A parameter without bounds stepping out of its physical range ends the run cleanly:
/// exit 1, status "failed", best point kept and written.
#[test]
fn leaving_the_physical_range_fails_cleanly() {
    let scene = &sysid()
        .replace("lower = 0.1\nupper = 0.45\n", "")
        .replace("frames = 10", "frames = 3")
        .replace("grad_tol = 1e-6", "grad_tol = 1e-6\ninitial_step = 5.0");
    let r = run_cli("optimize", scene, &[], &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("parameter[1]"), "{}", r.stderr);
    let v = read_json(&r.out().join("optimize.json"));
    assert_eq!(v["status"], "failed");
    assert!(v["error"].as_str().unwrap().contains("physical range"));
    assert!(v["best"]["loss"].as_f64().is_some());
    common::assert_optimized_scene(&r.out(), &v["best"]);
}

#[test]
fn bad_bounds_name_the_key() {
    for (from, to, needle) in [
        ("upper = 0.45", "upper = 0.05", "parameter[1].upper"),
        (
            "upper = 0.45",
            "upper = 0.45\ninitial = 0.47",
            "parameter[1].initial",
        ),
        ("lower = 1e4", "lower = -1.0", "parameter[0].lower"),
        ("grad_tol = 1e-6", "grad_tol = -1.0", "optimize.grad_tol"),
        (
            "upper = 1e7",
            "upper = 1e7\ninitial = [1.0, 2.0, 3.0]",
            "parameter[0].initial",
        ),
        (
            "max_iterations = 40",
            "max_iterations = 40\nline_search = \"bisection\"",
            "line_search",
        ),
    ] {
        let r = run_cli("optimize", &sysid().replace(from, to), &[], &[]);
        assert_eq!(r.code, 2, "{needle}: {}", r.stderr);
        assert!(r.stderr.contains(needle), "{needle}: {}", r.stderr);
        assert!(!r.stderr.contains("panicked"));
    }
}

/// The iteration and evaluation caps end the run as `completed` with the cap named, and the
/// evaluation cap is never exceeded (also inside a line search).
#[test]
fn iteration_and_evaluation_caps() {
    let scene = &sysid().replace("frames = 10", "frames = 3");
    let r = run_cli("optimize", scene, &[], &["--max-iterations", "1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = read_json(&r.out().join("optimize.json"));
    assert_eq!(v["status"], "completed");
    assert_eq!(v["termination"], "max_iterations (1) reached");
    assert_eq!(v["iterations"].as_array().unwrap().len(), 2);
    let r = run_cli("optimize", scene, &[], &["--max-evaluations", "3"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = read_json(&r.out().join("optimize.json"));
    assert_eq!(v["status"], "completed");
    assert_eq!(v["termination"], "max_evaluations (3) reached");
    assert!(v["evaluations"].as_array().unwrap().len() <= 3);
    assert_eq!(v["settings"]["max_evaluations"], 3);
}

/// Regression: `optimized.toml` is written to the output directory, so the scene's relative
/// mesh path (`../meshes/...`) must not be copied verbatim. Chaining an optimization from the
/// torus run's `optimized.toml` failed with "mesh file not found". The written scene must load
/// and build the same model from another folder.
#[test]
fn optimized_scene_loads_from_another_folder() {
    let path = common::repo().join("scenes/initial_state_bunny.toml");
    let ls = diffphd::scene::load(&path, &[]).expect("scene loads");
    assert!(
        ls.effective_toml.contains("../meshes/"),
        "the scene names a relative mesh"
    );
    let problem = diffphd::optimize::problem::Problem::new(ls).expect("problem builds");
    let values = problem.values_at(&problem.theta0());
    let wb = diffphd::optimize::writeback::write_back(&problem, &values).unwrap();
    assert!(wb.exact, "{:?}", wb.notes);
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("out/run/optimized.toml");
    let ls2 = diffphd::scene::load_str(&wb.toml, &elsewhere, &[])
        .expect("optimized.toml loads from the output folder");
    let m2 = diffphd::solver::Model::from_scene(&ls2).expect("and builds");
    assert_eq!(m2.x0.len(), problem.base.x0.len());
    let d = m2
        .x0
        .iter()
        .zip(&problem.base.x0)
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(d < 1e-12, "initial positions differ by {d:e}");
}

/// The same for a node-selection file (`nodes_file`, here inside a `[[body.dirichlet]]`): every
/// relative input path at any depth of `optimized.toml` is made absolute.
#[test]
fn optimized_scene_keeps_selector_files_reachable() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fixed.txt"), "# clamped\n0 1 2 3\n").unwrap();
    let scene = dir.path().join("scene.toml");
    std::fs::write(&scene, common::fixture("scenes/optimize/nodes_file", &[])).unwrap();
    let problem =
        diffphd::optimize::problem::Problem::new(diffphd::scene::load(&scene, &[]).unwrap())
            .unwrap();
    let wb = diffphd::optimize::writeback::write_back(&problem, &[1234.0]).unwrap();
    assert!(wb.exact, "{:?}", wb.notes);
    let other = tempfile::tempdir().unwrap();
    let ls2 = diffphd::scene::load_str(&wb.toml, &other.path().join("optimized.toml"), &[])
        .expect("loads from another folder");
    let m2 = diffphd::solver::Model::from_scene(&ls2).expect("the nodes file is found");
    assert!((m2.params.density[0] - 1234.0).abs() < 1e-9);
}

/// Regression: a Ctrl-C that arrives while argmin is about to stop on its own (here: the
/// iteration cap right after the flag is raised) left `status = "completed"` in the torus
/// run's `optimize.json`, because the flag was only read before the next evaluation. The
/// final status reads the flag too: interrupted, with the best point kept.
#[test]
fn interrupt_before_a_natural_stop_is_reported() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let ls = common::load(&flight(), &[]);
    let problem = Problem::new(ls).unwrap();
    let mut settings = problem.ls.scene.optimize.clone();
    settings.max_iterations = 1;
    let flag = Arc::new(AtomicBool::new(false));
    let raise = flag.clone();
    // raise the flag when iteration 1 (the last one allowed) is recorded
    let mut cb = move |log: &diffphd::optimize::lbfgs::OptimizeLog| {
        if log.iterations.len() >= 2 {
            raise.store(true, Ordering::SeqCst);
        }
    };
    let log = optimize(
        &problem,
        &settings,
        serde_json::Value::Null,
        Some(flag),
        &mut cb,
    )
    .unwrap();
    assert_eq!(log.status, Status::Interrupted, "{:?}", log.termination);
    assert!(log.best.is_some());
    assert_eq!(log.iterations.len(), 2);
}
