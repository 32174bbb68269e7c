//! `solver.method = "auto"` and `backward.adjoint` (issue 37 items 1 and 2): the choice is
//! the rule's (`diffphd::solver::auto`) on the scene's deterministic quantities, it is logged
//! with its reason, the run it makes is the explicit method's bit for bit, a step the chosen
//! method misses is retried with the other one, `optimize` pins the resolved method in
//! `optimized.toml`, a device runs PD, and the direct adjoint gives the GMRES adjoint's
//! gradient.

use crate::common;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `diffphd <cmd> <scene> --out <tmp>/out --threads 1 --quiet <args>`: exit code, stderr,
/// and the temp dir.
fn run(cmd: &str, scene: &str, args: &[&str]) -> (i32, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = Command::new(common::bin())
        .current_dir(common::repo())
        .args([cmd, scene, "--out"])
        .arg(dir.path().join("out"))
        .args(["--threads", "1", "--quiet"])
        .args(args)
        .output()
        .expect("run diffphd");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        dir,
    )
}

fn json(dir: &Path, file: &str) -> serde_json::Value {
    let p: PathBuf = dir.join("out").join(file);
    let t = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&t).expect("JSON")
}

const AUTO: &str = "solver.method=\"auto\"";

/// The cantilever (2,268 DoF, homogeneous, cost ratio 131 ≤ 300) resolves to Newton and the
/// twist bands (100× contrast) too, by their rules; the first frame equals `--solver newton`
/// bit for bit (the second probes PD under the per-frame rule: its record says so and names
/// the method that solved it); an explicit method logs no reason.
#[test]
fn auto_logs_the_rules_choice_and_runs_it() {
    let (code, err, auto) = run(
        "simulate",
        "scenes/cantilever.toml",
        &["--frames", "2", "--set", AUTO],
    );
    assert_eq!(code, 0, "{err}");
    let h = &json(auto.path(), "log.json")["header"];
    assert_eq!(h["solver_method"], "newton", "{h}");
    let why = h["method_reason"].as_str().expect("method_reason");
    assert!(why.contains("costs 131 PD iterations"), "{why}");
    let (code, err, newton) = run(
        "simulate",
        "scenes/cantilever.toml",
        &["--frames", "2", "--solver", "newton"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(json(newton.path(), "log.json")["header"]
        .get("method_reason")
        .is_none());
    let f = "frame_00001.vtu";
    let a = std::fs::read(auto.path().join("out").join(f)).expect(f);
    let b = std::fs::read(newton.path().join("out").join(f)).expect(f);
    assert!(a == b, "{f}: auto and --solver newton differ");
    let log = json(auto.path(), "log.json");
    let frames = log["frames"].as_array().expect("frames");
    assert_eq!(frames[0]["method"], "newton", "{}", frames[0]);
    assert!(frames[0].get("probe_budget").is_none(), "{}", frames[0]);
    // frame 2 probes PD with a quarter of frame 1's cost (NEWTON_FACTORIZATION_COST per factorization)
    let factorizations = frames[0]["newton"]["factorizations"].as_f64().unwrap();
    let budget = (0.25 * diffphd::solver::auto::NEWTON_FACTORIZATION_COST * factorizations) as u64;
    let probe = frames[1]["probe_budget"].as_u64().expect("frame 2 probes");
    assert!(
        probe.abs_diff(budget) <= factorizations as u64,
        "{probe} vs {budget}"
    );
    let second = frames[1]["method"].as_str().expect("method");
    // a failed probe's work is reported with the Newton attempt that replaced it
    let missed = frames[1].get("missed_iterations").and_then(|m| m.as_u64());
    if second == "newton" {
        let m = missed.expect("a failed probe reports its iterations");
        assert!((1..=probe).contains(&m), "{m} of budget {probe}");
        assert!(frames[1]["missed_seconds"].as_f64().unwrap() > 0.0);
    } else {
        assert!(missed.is_none(), "{}", frames[1]);
    }
    assert!(frames[0].get("missed_seconds").is_none(), "{}", frames[0]);
    let counts = &log["summary"]["method_frames"];
    assert_eq!(counts["probes"], 1, "{counts}");
    assert_eq!(
        counts[second],
        if second == "newton" { 2 } else { 1 },
        "{counts}"
    );
    let (code, err, bands) = run(
        "simulate",
        "scenes/twist_bands_tet.toml",
        &["--frames", "1", "--set", AUTO],
    );
    assert_eq!(code, 0, "{err}");
    let h = &json(bands.path(), "log.json")["header"];
    assert_eq!(h["solver_method"], "newton");
    assert!(
        h["method_reason"].as_str().unwrap().contains("contrast"),
        "{h}"
    );
}

/// A step the chosen method misses (Newton capped at one iteration) is solved again from its
/// start by accurate PD: frame 1 converges and carries `retried_from = "newton"`; PD is then
/// current, so frame 2 is PD's without a retry; the states are PD's own (an explicit
/// `--solver newton` with the same cap fails with exit 3).
#[test]
fn a_step_auto_misses_is_retried_with_the_other_method() {
    let cap = "solver.newton_max_iterations=1";
    let (code, err, dir) = run(
        "simulate",
        "scenes/cantilever.toml",
        &["--frames", "2", "--set", AUTO, "--set", cap],
    );
    assert_eq!(code, 0, "{err}");
    let log = json(dir.path(), "log.json");
    for (i, f) in log["frames"].as_array().unwrap().iter().enumerate() {
        if i == 0 {
            assert_eq!(f["retried_from"], "newton", "{f}");
            // the missed attempt: Newton's one capped iteration
            assert_eq!(f["missed_iterations"], 1, "{f}");
            assert!(f["missed_seconds"].as_f64().unwrap() > 0.0, "{f}");
        } else {
            // after Newton's miss PD is current: no second miss to retry
            assert!(f.get("retried_from").is_none(), "{f}");
            assert!(f.get("missed_iterations").is_none(), "{f}");
        }
        assert_eq!(f["method"], "diffphd", "{f}");
        assert_eq!(f["converged"], true, "{f}");
        assert!(f.get("newton").is_none(), "PD's statistics expected: {f}");
    }
    let (code, _, pd) = run(
        "simulate",
        "scenes/cantilever.toml",
        &["--frames", "2", "--solver", "diffphd"],
    );
    assert_eq!(code, 0);
    // the retried states are PD's to its stopping test: centre of mass within 1e-6 of the
    // motion (both converged to residual_tol 1e-8)
    let com = |log: &serde_json::Value, f: usize| -> Vec<f64> {
        log["frames"][f]["diagnostics"]["center_of_mass"]
            .as_array()
            .unwrap_or_else(|| panic!("center_of_mass in {}", log["frames"][f]))
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect()
    };
    let pd_log = json(pd.path(), "log.json");
    let (a, b) = (com(&log, 1), com(&pd_log, 1));
    let start = com(&pd_log, 0);
    let motion = b
        .iter()
        .zip(&start)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max);
    assert!(motion > 0.0);
    for (x, y) in a.iter().zip(&b) {
        assert!(
            (x - y).abs() <= 1e-6 * motion,
            "{a:?} vs {b:?} (motion {motion})"
        );
    }
    let (code, err, _) = run(
        "simulate",
        "scenes/cantilever.toml",
        &["--frames", "2", "--solver", "newton", "--set", cap],
    );
    assert_eq!(code, 3, "an explicit method is not retried: {err}");
}

/// `grad` and `optimize` log the method and why; `optimize` writes the resolved method into
/// `optimized.toml`, which then runs it explicitly. (The sysid cantilever: its small stiffness
/// number makes `auto` pick PD since session 19's rule check; the test holds whichever method
/// the rule picks to the same record in all three places.)
#[test]
fn grad_and_optimize_log_and_pin_the_resolved_method() {
    let (code, err, dir) = run(
        "grad",
        "scenes/sysid_cantilever.toml",
        &["--frames", "2", "--set", AUTO],
    );
    assert_eq!(code, 0, "{err}");
    let g = json(dir.path(), "grad.json");
    let method = g["method"].as_str().expect("grad.json method").to_string();
    assert!(method == "newton" || method == "diffphd", "{method}");
    assert!(g["method_reason"].as_str().is_some(), "{g}");
    let (code, err, dir) = run(
        "optimize",
        "scenes/sysid_cantilever.toml",
        &["--frames", "2", "--max-iterations", "1", "--set", AUTO],
    );
    assert_eq!(code, 0, "{err}");
    let o = json(dir.path(), "optimize.json");
    assert_eq!(o["header"]["method"], method.as_str(), "{}", o["header"]);
    assert!(o["header"]["method_reason"].as_str().is_some());
    let written = dir.path().join("out").join("optimized.toml");
    let ls = diffphd::scene::load(&written, &[]).expect("optimized.toml loads");
    let pinned = match method.as_str() {
        "newton" => diffphd::model::SolverMethod::Newton,
        _ => diffphd::model::SolverMethod::Diffphd,
    };
    assert_eq!(ls.scene.solver.method, pinned);
}

/// On a device `auto` is PD (the emulator backend runs the device code on the host).
#[test]
fn auto_on_a_device_is_pd() {
    let (code, err, dir) = run(
        "simulate",
        "scenes/cantilever.toml",
        &["--frames", "1", "--backend", "emulator", "--set", AUTO],
    );
    assert_eq!(code, 0, "{err}");
    let h = &json(dir.path(), "log.json")["header"];
    assert_eq!(h["solver_method"], "diffphd", "{h}");
    assert!(
        h["method_reason"].as_str().unwrap().contains("device"),
        "{h}"
    );
}

/// `backward.adjoint = "direct"` factors every frame and lands on the GMRES adjoint's
/// gradient (to GMRES's tolerance); `"auto"` says why it chose; the deprecated
/// `direct_after` still works, with a warning.
#[test]
fn the_direct_adjoint_gives_the_gmres_gradient() {
    let grad = |sets: &[&str]| {
        // tests PD's adjoint options (`backward.adjoint` applies to the PD method; the
        // cantilever resolves to Newton under `auto`)
        let mut args = vec!["--frames", "3", "--solver", "diffphd"];
        for s in sets {
            args.extend(["--set", s]);
        }
        let (code, err, dir) = run("grad", "scenes/cantilever.toml", &args);
        assert_eq!(code, 0, "{sets:?}: {err}");
        (json(dir.path(), "grad.json"), err)
    };
    let g = |j: &serde_json::Value| -> Vec<f64> {
        j["evaluation"]["gradient"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect()
    };
    let methods = |j: &serde_json::Value| -> Vec<String> {
        j["evaluation"]["frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["adjoint"]["method"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let (gm, _) = grad(&["backward.adjoint=\"gmres\""]);
    let (dr, _) = grad(&["backward.adjoint=\"direct\""]);
    assert!(
        methods(&dr).iter().all(|m| m == "direct"),
        "{:?}",
        methods(&dr)
    );
    assert!(
        methods(&gm).iter().any(|m| m != "direct"),
        "{:?}",
        methods(&gm)
    );
    let (a, b) = (g(&gm), g(&dr));
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(scale > 0.0);
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() <= 1e-5 * scale, "gmres {a:?} direct {b:?}");
    }
    let (au, _) = grad(&["backward.adjoint=\"auto\""]);
    let why = au["evaluation"]["adjoint_reason"].as_str().expect("reason");
    assert!(why.contains("direct"), "{why}");
    assert_eq!(g(&au), b, "auto chose direct: the same gradient");
    let (_, err) = grad(&["backward.direct_after=1"]);
    assert!(
        err.contains("backward.direct_after = 1 is deprecated"),
        "{err}"
    );
}
