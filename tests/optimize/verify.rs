//! `grad --verify` and the frozen-`e_ref` warning (issue 37 item 5): the adjoint gradient of
//! shipped scenes at their defaults agrees with a tight central difference within 1e-3 per
//! parameter; a deliberately loose backward tolerance makes `grad --verify` exit 1 with the
//! numbers; `grad` warns when a Young's-modulus parameter moves the element that sets a
//! body's default damping reference.

use crate::common;
use std::process::Command;

fn grad(scene: &str, args: &[&str]) -> (i32, String, String, serde_json::Value) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let o = Command::new(common::bin())
        .current_dir(common::repo())
        .arg("grad")
        .arg(scene)
        .arg("--out")
        .arg(&out)
        .args(["--threads", "1"])
        .args(args)
        .output()
        .expect("run diffphd");
    let json = std::fs::read_to_string(out.join("grad.json"))
        .map(|t| serde_json::from_str(&t).expect("grad.json is JSON"))
        .unwrap_or(serde_json::Value::Null);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        json,
    )
}

fn checks(json: &serde_json::Value) -> Vec<serde_json::Value> {
    json["verify"]["checks"]
        .as_array()
        .expect("verify.checks")
        .clone()
}

#[test]
fn loose_backward_tolerance_makes_grad_verify_exit_1_with_the_numbers() {
    let (code, stdout, stderr, json) = grad(
        "scenes/cantilever.toml",
        &[
            "--frames",
            "1",
            "--verify",
            "--set",
            "backward.rel_tol=1e-2",
            // a loose tolerance of the PD method's GMRES adjoint (pinned: under `auto` the
            // cantilever's frames are Newton's, whose adjoint is a direct solve)
            "--solver",
            "diffphd",
            "--set",
            "backward.adjoint=\"gmres\"",
        ],
    );
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stderr.contains("gradient verification failed") && stderr.contains("DISAGREE"),
        "{stderr}"
    );
    let cs = checks(&json);
    let worst = cs
        .iter()
        .map(|c| c["error"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(worst > 1e-3, "{cs:?}");
    // the message carries the numbers of grad.json
    let bad = cs
        .iter()
        .find(|c| c["verdict"] == "disagree")
        .expect("a disagreeing check");
    let shown = format!("{:.2e}", bad["error"].as_f64().unwrap());
    assert!(stderr.contains(&shown), "{shown} in {stderr}");
    // the same run passes with a threshold above its error
    let (code, _, stderr, _) = grad(
        "scenes/cantilever.toml",
        &[
            "--frames",
            "1",
            "--verify",
            "--verify-threshold",
            &format!("{}", 2.0 * worst),
            "--set",
            "backward.rel_tol=1e-2",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    // a threshold that is not a positive number is bad input
    let (code, _, stderr, _) = grad(
        "scenes/cantilever.toml",
        &["--frames", "1", "--verify", "--verify-threshold", "0"],
    );
    assert_eq!(code, 2, "{stderr}");
}

/// Issue 37 item 5: `grad`'s per-parameter error estimate (docs/gradcheck.md "The
/// gradient's error bar") against the true error of a deliberately loose backward
/// (`backward.rel_tol = 1e-4`, GMRES on the PD method), the truth being the direct adjoint
/// of the same forward (exact to round-off). Measured 2026-12-06: cantilever (2 frames)
/// within 1 %, twist bands (3 frames, 1000× contrast) within 5 % on every parameter.
#[test]
fn grad_error_estimate_matches_the_error_of_a_loose_backward() {
    for (scene, frames) in [
        ("scenes/cantilever.toml", "2"),
        ("scenes/twist_bands_tet.toml", "3"),
    ] {
        let run = |adjoint: &[&str]| {
            let mut args = vec!["--frames", frames, "--quiet"];
            args.extend(["--set", "solver.method=diffphd"]);
            for a in adjoint {
                args.extend(["--set", a]);
            }
            let (code, stdout, stderr, json) = grad(scene, &args);
            assert_eq!(code, 0, "{scene} {adjoint:?}: {stdout}{stderr}");
            json
        };
        let loose = run(&["backward.adjoint=gmres", "backward.rel_tol=1e-4"]);
        let exact = run(&["backward.adjoint=direct"]);
        let num = |j: &serde_json::Value, k: &str| -> Vec<f64> {
            j["evaluation"][k]
                .as_array()
                .unwrap_or_else(|| panic!("{scene}: evaluation.{k}"))
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect()
        };
        let (g, g_star) = (num(&loose, "gradient"), num(&exact, "gradient"));
        let est = num(&loose, "gradient_error_estimate");
        let signed: Vec<f64> = loose["evaluation"]["error_estimate"]["signed"]
            .as_array()
            .expect("error_estimate.signed")
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert!(
            loose["evaluation"]["error_estimate"]["max_relative_adjoint_residual"]
                .as_f64()
                .unwrap()
                > 1e-6,
            "{scene}: {loose}"
        );
        // the direct adjoint's residual is round-off: its estimate is (at most) that
        for (e, gs) in num(&exact, "gradient_error_estimate").iter().zip(&g_star) {
            assert!(
                *e <= 1e-12 * gs.abs(),
                "{scene}: direct adjoint estimate {e}"
            );
        }
        assert_eq!(g.len(), est.len());
        for i in 0..g.len() {
            let truth = g_star[i] - g[i];
            eprintln!(
                "{scene} [{i}]: g {:.6e}, true error {truth:.3e}, estimate {:.3e}",
                g[i], signed[i]
            );
            // a loose backward: the error is far above round-off ...
            assert!(
                truth.abs() > 1e-5 * g_star[i].abs(),
                "{scene} [{i}]: {truth}"
            );
            // ... and the estimate has its sign and its size within 20 %
            assert!(
                (signed[i] - truth).abs() <= 0.2 * truth.abs(),
                "{scene} [{i}]: estimate {} vs true {truth}",
                signed[i]
            );
            assert_eq!(est[i], signed[i].abs());
        }
    }
}

#[test]
fn grad_warns_when_a_youngs_parameter_moves_the_default_damping_reference() {
    let scene = "tests/fixtures/e_ref_soft_region.toml";
    let warned = |args: &[&str]| {
        let (code, stdout, stderr, json) = grad(scene, args);
        assert_eq!(code, 0, "{args:?}: {stdout}{stderr}");
        let w = stderr.contains("default damping reference e_ref");
        assert_eq!(
            w,
            json.get("warnings").is_some(),
            "{args:?}: {stderr} / {json}"
        );
        w
    };
    // the soft region's E is the parameter: it sets e_ref
    assert!(warned(&["--quiet"]));
    // the whole body's E (covers the soft region too)
    assert!(warned(&[
        "--quiet",
        "--set",
        "parameter=[{kind=\"youngs_modulus\", log=true}]"
    ]));
    // e_ref given in the scene: nothing frozen by default
    assert!(!warned(&["--quiet", "--set", "body.0.damping.e_ref=1e4"]));
    // no stiffness-proportional damping: e_ref has no effect
    assert!(!warned(&["--quiet", "--set", "body.0.damping.beta=0.0"]));
    // a parameter that leaves E alone
    assert!(!warned(&[
        "--quiet",
        "--set",
        "parameter=[{kind=\"density\", log=true}]"
    ]));
}

/// Issue 37 "must show" 4: `grad --verify` on every shipped scene with `[[parameter]]`s, at CI
/// frame counts, each check within 1e-3 with the FD's own bar within 1e-3. Scenes not run,
/// and why, are listed in `SKIPPED` (the test fails if a scene with parameters is neither
/// run nor listed).
#[test]
fn grad_verify_on_every_shipped_scene_with_parameters() {
    // (scene, frames, extra --set): CI frame counts
    const RUN: &[(&str, &str, &[&str])] = &[
        ("cantilever", "1", &[]),
        // log E only: the component DiffPD's comparison differentiates (issue 37); nu and rho
        // of the same material classes are verified on `cantilever` (one frame of this 8k-DoF
        // scene at the verify's 1e-12 costs 2 s per forward, 4 forwards per parameter)
        (
            "cantilever_diffpd",
            "1",
            &["parameter=[{kind=\"youngs_modulus\", log=true}]"],
        ),
        ("initial_state_bunny", "2", &[]),
        ("initial_state_flight", "2", &[]),
        ("real2sim_probe", "20", &[]), // its captures are frames 12 and 20
        ("routing_tendon", "2", &[]),
        ("sysid_bouncing_ball", "12", &[]), // first contact at about frame 8
        ("sysid_bouncing_ball_bands", "12", &[]),
        ("sysid_cantilever", "2", &[]),
        ("torus_locomotion", "2", &[]),
        ("twist_bands_tet", "2", &[]),
    ];
    const SKIPPED: &[(&str, &str)] = &[
        (
            "armadillo_twist",
            "44k DoF at 1000x contrast: one grad takes minutes (scripts/bench_frontier.sh)",
        ),
        (
            "bouncing_ball",
            "sysid_bouncing_ball's ball 3.5 cm higher: before its first contact (about frame 15, 5.4k DoF) E, nu, rho do not move the loss (gradient 1e-15, the FD is round-off); the ball with contact is verified through sysid_bouncing_ball(_bands)",
        ),
        (
            "dice",
            "its captures are frames 12 and 20: 20 frames of grad --verify took 100 s under load",
        ),
        (
            "plant",
            "its mesh (DiffPD's plant.bin) is not in the repository",
        ),
    ];
    let dir = common::repo().join("scenes");
    let mut with_params: Vec<String> = std::fs::read_dir(&dir)
        .expect("scenes/")
        .filter_map(|e| {
            let p = e.expect("entry").path();
            let text = std::fs::read_to_string(&p).ok()?;
            let has = p.extension().is_some_and(|x| x == "toml")
                && toml::from_str::<toml::Table>(&text)
                    .is_ok_and(|t| t.get("parameter").and_then(|v| v.as_array()).is_some());
            has.then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    with_params.sort();
    let mut covered: Vec<String> = RUN
        .iter()
        .map(|r| r.0.to_string())
        .chain(SKIPPED.iter().map(|s| s.0.to_string()))
        .collect();
    covered.sort();
    assert_eq!(
        with_params, covered,
        "scenes with [[parameter]]s vs this test's lists"
    );
    for (name, why) in SKIPPED {
        eprintln!("SKIPPED {name}: {why}");
    }
    // The runs (single-threaded CLIs, about 34 s of one core in all), two at a time so that
    // this test is not a one-core tail of the optimize binary; checked in RUN's order.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut runs: Vec<(usize, (i32, String, String, serde_json::Value))> =
        std::thread::scope(|s| {
            let worker = || {
                let mut done = Vec::new();
                loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((name, frames, sets)) = RUN.get(k) else {
                        break;
                    };
                    let t0 = std::time::Instant::now();
                    let mut args = vec!["--frames", frames, "--verify"];
                    for s in *sets {
                        args.extend(["--set", s]);
                    }
                    let r = grad(&format!("scenes/{name}.toml"), &args);
                    eprintln!("{name}: exit {}, {:.1} s", r.0, t0.elapsed().as_secs_f64());
                    done.push((k, r));
                }
                done
            };
            let workers = [s.spawn(worker), s.spawn(worker)];
            workers
                .into_iter()
                .flat_map(|w| w.join().expect("a verify worker"))
                .collect()
        });
    runs.sort_by_key(|r| r.0);
    assert_eq!(runs.len(), RUN.len());
    let mut failures = Vec::new();
    for (k, (code, stdout, stderr, json)) in runs {
        let name = RUN[k].0;
        if code != 0 || json.is_null() {
            failures.push(format!("{name}: exit {code}: {stdout}{stderr}"));
            continue;
        }
        let cs = checks(&json);
        // per parameter up to 3 parameters (one check each), else one random direction
        let np = json["parameters"].as_array().map_or(0, |p| p.len());
        let want = if np <= 3 { np } else { 1 };
        if cs.len() != want || !stdout.contains("AGREE") {
            failures.push(format!(
                "{name}: {} checks for {np} parameters: {stdout}",
                cs.len()
            ));
        }
        let estimates = json["evaluation"]["gradient_error_estimate"].as_array();
        let fd_max = cs
            .iter()
            .map(|c| c["finite_difference"].as_f64().unwrap_or(0.0).abs())
            .fold(0.0, f64::max);
        for (i, c) in cs.iter().enumerate() {
            let (err, bar) = (
                c["error"].as_f64().unwrap_or(f64::INFINITY),
                c["relative_error_bar"].as_f64().unwrap_or(f64::INFINITY),
            );
            let fd = c["finite_difference"].as_f64().unwrap_or(0.0);
            // a real comparison: non-zero adjoint and FD, and the FD's bar resolves 1e-3
            let adj = c["adjoint"].as_f64().unwrap_or(0.0);
            if c["verdict"] != "agree" || err > 1e-3 || bar > 1e-3 || fd == 0.0 || adj == 0.0 {
                failures.push(format!("{name}: {c}"));
            }
            // the error estimate against the verified error, per parameter: where the FD
            // resolves a discrepancy (above its bar and above 1e-4) the estimate is within
            // 3x of it; otherwise the estimate claims no more than the FD could have seen
            // (at most its bar, or 1e-4). real2sim_probe: verified 2.9e-4 within an FD bar
            // of 5.5e-4, estimate 0 (Newton, direct adjoint).
            if json["verify"]["mode"] == "per parameter" {
                let est = estimates
                    .and_then(|e| e.get(i))
                    .and_then(|e| e.as_f64())
                    .unwrap_or(f64::INFINITY)
                    / fd.abs().max(1e-3 * fd_max);
                let ok = if err > bar && err > 1e-4 {
                    est <= 3.0 * err && err <= 3.0 * est
                } else {
                    est <= bar.max(1e-4)
                };
                if !ok {
                    failures.push(format!(
                        "{name}: error estimate {est:.2e} vs verified {err:.2e} (FD bar {bar:.2e})"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// `optimize --verify-every N`: the checks are in optimize.json; a deliberately loose backward
/// tolerance stops the run with exit 1 naming the iterate and the numbers, keeping no
/// optimized.toml when the start point already fails.
#[test]
fn optimize_verify_every_checks_iterates_and_stops_on_a_bad_gradient() {
    let run = |sets: &[&str]| {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cmd = Command::new(common::bin());
        cmd.current_dir(common::repo())
            .args(["optimize", "scenes/sysid_cantilever.toml", "--out"])
            .arg(dir.path().join("out"))
            .args(["--threads", "1", "--quiet", "--frames", "3"])
            .args(["--max-iterations", "2", "--verify-every", "1"])
            // the loose tolerance below is the PD method's GMRES adjoint's (pinned)
            .args(["--solver", "diffphd", "--set", "backward.adjoint=\"gmres\""]);
        for s in sets {
            cmd.args(["--set", s]);
        }
        let o = cmd.output().expect("run diffphd");
        let log: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("out/optimize.json")).expect("optimize.json"),
        )
        .expect("JSON");
        let toml = dir.path().join("out/optimized.toml").exists();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stderr).into_owned(),
            log,
            toml,
        )
    };
    let (code, err, log, toml) = run(&[]);
    assert_eq!(code, 0, "{err}");
    let v = log["verify"].as_array().expect("verify");
    let iters: Vec<u64> = v.iter().map(|c| c["iteration"].as_u64().unwrap()).collect();
    let done = log["iterations"].as_array().unwrap().len() as u64;
    assert_eq!(iters, (0..done).collect::<Vec<_>>(), "{log}");
    for c in v {
        assert_eq!(c["verify"]["checks"][0]["verdict"], "agree", "{c}");
    }
    assert!(toml);
    let (code, err, log, toml) = run(&["backward.rel_tol=1e-1"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("gradient verification failed at iteration 0")
            && err.contains("DISAGREE")
            && err.contains("no optimized.toml"),
        "{err}"
    );
    assert_eq!(
        log["verify"][0]["verify"]["checks"][0]["verdict"],
        "disagree"
    );
    assert!(!toml);
}
