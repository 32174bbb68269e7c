//! Reliability promises of docs/RELIABILITY.md (issue 18): no silent garbage (values the
//! frame files cannot hold are refused or reported, never written as `inf` with exit 0),
//! divergence and NaN reported with frame, iteration and element and complete partial
//! outputs.

use crate::common;
use common::run_cli;

/// A random-linear loss and the density parameter (`--set` expressions).
const DENSITY_GRADIENT: [&str; 2] = [
    r#"loss.term=[{ type = "random_linear" }]"#,
    r#"parameter=[{ kind = "density" }]"#,
];

/// A clamped 3×1×1 hex beam, 3 frames.
fn beam() -> String {
    common::fixture("scenes/reliability/beam", &[])
}

/// Every `frame_*.vtu` (the default format) or `frame_*.ply` present parses completely and
/// holds only finite numbers.
fn frames_are_complete_and_finite(dir: &std::path::Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.ends_with(".tmp"), "temp file left: {name}");
        if !name.starts_with("frame_") {
            continue;
        }
        let pts: Vec<[f64; 3]> = if name.ends_with(".vtu") {
            super::common::vtu_points(&p)
        } else if name.ends_with(".ply") {
            diffphd::io::ply::read_node_positions(&p)
                .unwrap_or_else(|e| panic!("{name} does not parse: {e}"))
                .into_iter()
                .map(|(_, x)| x)
                .collect()
        } else {
            continue;
        };
        assert!(!pts.is_empty());
        for x in &pts {
            assert!(x.iter().all(|c| c.is_finite()), "{name}: {x:?}");
        }
        n += 1;
    }
    n
}

/// E = 1e300, an initial velocity of 1e39 and a rotation rate of 1e300 are finite in f64 but
/// not in the frame files' f32: refused as input (exit 2) naming the key, not written as
/// `inf` with exit 0.
#[test]
fn values_beyond_f32_are_refused_with_their_key() {
    for (set, key) in [
        (
            "body.0.material.youngs_modulus=1e300",
            "body.material.youngs_modulus",
        ),
        (
            "body.0.initial.velocity=[1e39, 0, 0]",
            "body.initial.velocity[0]",
        ),
        (
            "body.0.dirichlet.0.motion={ type = \"rotate\", axis = [1, 0, 0], rate = 1e300 }",
            "body.dirichlet.motion.rate",
        ),
    ] {
        let r = run_cli("simulate", &beam(), &[], &["--set", set]);
        assert_eq!(r.code, 2, "{set}: {}", r.stderr);
        let key = key
            .replace("body.", "body[0].")
            .replace("dirichlet.", "dirichlet[0].");
        assert!(r.stderr.contains(&key), "{set}: {} lacks {key}", r.stderr);
        assert_eq!(r.stderr.trim().lines().count(), 1, "{}", r.stderr);
        assert!(!r.out().join("frame_00000.vtu").exists(), "{set}");
    }
}

/// A state that leaves the f32 range mid-run (forces within range, a huge product) is
/// reported as a failed run naming frame, iteration, node and element; the frames before it
/// are complete and finite, log.json says failed.
#[test]
fn state_beyond_f32_mid_run_fails_with_frame_and_element() {
    // A ramp to 3e37 N on a beam without stiffness (E = 1e-20) and ρ = 1e-3: x ≈ h²F/m is
    // finite in f64 but beyond f32 from frame 1 on.
    let scene = common::fixture(
        "scenes/reliability/beam",
        &[
            r#"body.0.force=[{ select = { face = "x_max" }, force = [0.0, 0.0, 3e37], profile = { type = "ramp", duration = 0.03 } }]"#,
            "body.0.material.youngs_modulus=1e-20",
            "body.0.material.density=1e-3",
        ],
    );
    let r = run_cli("simulate", &scene, &[], &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    for needle in ["frame ", "iteration", "node ", "element "] {
        assert!(r.stderr.contains(needle), "{:?} lacks {needle:?}", r.stderr);
    }
    let log = r.log();
    assert_eq!(log["status"], "failed");
    assert!(log["error"].as_str().unwrap().contains("32-bit"));
    assert!(frames_are_complete_and_finite(&r.out()) >= 1);
}

/// A gate ratio that is not a number is written as a string ("inf"), never as `null`.
#[test]
fn non_finite_gate_ratios_are_not_null() {
    let r = run_cli(
        "simulate",
        &beam(),
        &[],
        // about PD's gate ratios: pin the PD method (`auto` would retry with Newton)
        &[
            "--set",
            "solver.max_iterations=1",
            "--set",
            "solver.method=\"diffphd\"",
        ],
    );
    // no frame can converge in one iteration: the run finishes as "incomplete", exit 3
    // (solver.on_nonconvergence = "fail", the default since issue 14)
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("frame 1 after 1 PD iterations"),
        "{}",
        r.stderr
    );
    let log = r.log();
    assert_eq!(log["status"], "incomplete");
    for f in log["frames"].as_array().unwrap() {
        for k in ["gate_position", "gate_projection"] {
            assert!(!f[k].is_null(), "{k} is null: {f}");
            assert!(f[k].is_number() || f[k] == "inf" || f[k] == "nan", "{f}");
        }
        assert_eq!(
            f["gate_position"], "inf",
            "never evaluated with 1 iteration"
        );
        assert_eq!(f["converged"], false);
    }
}

/// NaN or inf written into a scene (TOML has `nan` and `inf` literals) is refused with the
/// key, wherever it is (a force, gravity, a velocity).
#[test]
fn nan_and_inf_in_the_scene_are_refused() {
    for set in [
        "body.0.force=[{ select = { face = \"x_max\" }, force = [0.0, nan, 0.0] }]",
        "simulation.gravity=[0.0, 0.0, -inf]",
        "body.0.initial.velocity=[inf, 0, 0]",
    ] {
        let r = run_cli("simulate", &beam(), &[], &["--set", set]);
        assert_eq!(r.code, 2, "{set}: {}", r.stderr);
        assert!(r.stderr.contains("finite"), "{set}: {}", r.stderr);
        assert!(!r.out().join("log.json").exists());
    }
}

/// NaN injected into the forces at run time (below the scene checks) is reported by the
/// step with frame, PD iteration and element.
#[test]
fn nan_injected_into_forces_is_reported_with_frame_iteration_and_element() {
    let text = common::fixture(
        "scenes/reliability/beam",
        &[r#"body.0.force=[{ select = { face = "x_max" }, force = [0.0, 0.0, -1.0] }]"#],
    );
    let ls = common::load(&text, &[]);
    for bad in [f64::NAN, f64::INFINITY] {
        let mut model = diffphd::solver::Model::from_scene(&ls).unwrap();
        model.forces[0].forces[1][2] = bad;
        let mut sim = diffphd::solver::Simulator::new(&model, &ls.scene.solver).unwrap();
        let err = sim
            .step(1, &model.x0, &model.v0)
            .err()
            .unwrap_or_else(|| panic!("{bad}: the step accepted a non-finite force"));
        let msg = err.to_string();
        for needle in ["frame 1", "iteration", "element"] {
            assert!(msg.contains(needle), "{bad}: {msg:?} lacks {needle:?}");
        }
    }
}

/// Implicit Euler is unconditionally stable: a time step far beyond any explicit limit
/// (h = 1e6 s on a clamped beam) converges to the quasi-static answer with finite frames;
/// one where the mass term vanishes against the stiffness on a free body (h = 1e20 s) makes
/// the system matrix singular and is refused as input (exit 2) naming the matrix, before
/// any frame; one whose state leaves the representable range fails with frame, iteration
/// and element (`state_beyond_f32_mid_run_fails_with_frame_and_element`).
#[test]
fn absurd_time_steps_are_stable_or_refused() {
    let r = run_cli("simulate", &beam(), &[], &["--set", "simulation.dt=1e6"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let log = r.log();
    assert_eq!(log["status"], "completed");
    assert!(log["frames"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["converged"] == true));
    assert_eq!(frames_are_complete_and_finite(&r.out()), 4);
    let free = common::fixture("scenes/reliability/beam", &["body.0.dirichlet=[]"]);
    let r = run_cli("simulate", &free, &[], &["--set", "simulation.dt=1e20"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("matrix"), "{}", r.stderr);
    assert!(!r.out().join("frame_00001.vtu").exists());
}

/// An element that inverts mid-run is reported in log.json (`inverted_elements`: count and
/// first element) from the frame it appears in; frames before it carry no record.
#[test]
fn element_inverted_mid_run_is_reported_with_frame_and_element() {
    let scene = common::fixture(
        "scenes/reliability/beam",
        &[r#"body.0.force=[{ select = { face = "x_max" }, force = [-30.0, 0.0, 0.0] }]"#],
    );
    // the frame where the element inverts does not converge (it did not before issue 14
    // either, then reported with exit 0): accept it, this test is about the report
    let r = run_cli(
        "simulate",
        &scene,
        &[],
        &[
            "--frames",
            "8",
            "--set",
            "solver.on_nonconvergence=\"warn\"",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let log = r.log();
    let frames = log["frames"].as_array().unwrap();
    let first = frames
        .iter()
        .position(|f| !f["inverted_elements"].is_null())
        .expect("an element inverts");
    assert!(first >= 1, "not inverted from the start");
    let rec = &frames[first]["inverted_elements"];
    assert!(rec[0].as_u64().unwrap() >= 1);
    assert!(
        rec[1].as_u64().unwrap() < 3,
        "an element of the beam: {rec}"
    );
}

// ---- Kill safety and signals -----------------------------------------------------------

/// [`beam`] with `frames` frames and 12×4×4 cells, every frame written.
fn long_beam(frames: usize) -> String {
    common::fixture(
        "scenes/reliability/beam",
        &[
            &format!("simulation.frames={frames}"),
            "body.0.mesh.cells=[12, 4, 4]",
        ],
    )
}

/// Spawn `diffphd <args>` with stderr piped.
fn spawn(args: &[&std::ffi::OsStr]) -> std::process::Child {
    std::process::Command::new(common::bin())
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_for(path: &std::path::Path, what: &str) {
    let t0 = std::time::Instant::now();
    while !path.exists() {
        assert!(t0.elapsed().as_secs() < 120, "{what} never appeared");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn signal(child: &std::process::Child, sig: &str) {
    let st = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(st.success());
}

fn read_json(path: &std::path::Path) -> serde_json::Value {
    let t = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&t)
        .unwrap_or_else(|e| panic!("{} is not complete JSON: {e}", path.display()))
}

/// `simulate` handles SIGINT and SIGTERM like `optimize`: it finishes the frame, records
/// status "interrupted" in log.json, exits 130, and leaves complete frames.
#[test]
fn simulate_sigint_and_sigterm_are_recorded_as_interrupted() {
    for sig in ["INT", "TERM"] {
        let dir = tempfile::tempdir().unwrap();
        let sp = dir.path().join("s.toml");
        std::fs::write(&sp, long_beam(100_000)).unwrap();
        let out = dir.path().join("out");
        let child = spawn(&[
            "simulate".as_ref(),
            sp.as_os_str(),
            "--quiet".as_ref(),
            "--out".as_ref(),
            out.as_os_str(),
        ]);
        wait_for(&out.join("frame_00003.vtu"), "frame 3");
        signal(&child, sig);
        let res = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&res.stderr);
        assert_eq!(res.status.code(), Some(130), "SIG{sig}: {stderr}");
        let log = read_json(&out.join("log.json"));
        assert_eq!(log["status"], "interrupted", "SIG{sig}");
        let frames = log["frames"].as_array().unwrap();
        assert!(frames.len() >= 3 && frames.len() < 100_000);
        for f in frames {
            common::vtu_points(&out.join(f["file"].as_str().unwrap()));
        }
        assert!(frames_are_complete_and_finite(&out) >= frames.len());
    }
}

/// A write error (frame 2's file name is taken by a directory) ends the run with log.json
/// recording the failure (it stayed "running") and no temp file left behind.
#[test]
fn write_error_marks_the_log_failed_and_leaves_no_temp_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(out.join("frame_00002.vtu")).unwrap();
    let sp = dir.path().join("s.toml");
    std::fs::write(&sp, beam()).unwrap();
    let res = std::process::Command::new(common::bin())
        .args([
            "simulate".as_ref(),
            sp.as_os_str(),
            "--quiet".as_ref(),
            "--out".as_ref(),
            out.as_os_str(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert_eq!(res.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("frame 2"), "{stderr}");
    let log = read_json(&out.join("log.json"));
    assert_eq!(log["status"], "failed");
    assert!(log["error"].as_str().unwrap().contains("frame 2"));
    for e in std::fs::read_dir(&out).unwrap() {
        let n = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!n.ends_with(".tmp"), "temp file left: {n}");
    }
}

/// SIGKILL mid-run (no handler can run): every result file present parses completely and
/// the logs record the run as incomplete — status "running" with no end record, which
/// docs/RELIABILITY.md defines as incomplete once the process is gone. (`simulate`'s
/// frame-level variant is `killed_run_leaves_valid_frames_and_log` in tests/cli/outputs/output.rs.)
#[test]
fn sigkill_leaves_complete_files_and_an_incomplete_status() {
    // simulate
    let dir = tempfile::tempdir().unwrap();
    let sp = dir.path().join("s.toml");
    std::fs::write(&sp, long_beam(100_000)).unwrap();
    let out = dir.path().join("sim");
    let mut child = spawn(&[
        "simulate".as_ref(),
        sp.as_os_str(),
        "--quiet".as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    wait_for(&out.join("frame_00004.vtu"), "frame 4");
    child.kill().unwrap();
    child.wait().unwrap();
    let log = read_json(&out.join("log.json"));
    assert_eq!(log["status"], "running");
    assert!(log["summary"].is_object());
    assert!(frames_are_complete_and_finite_ignoring_tmp(&out) >= 4);

    // optimize
    let scene = common::fixture(
        "scenes/reliability/beam",
        &[
            "simulation.frames=40",
            r#"loss={ reference = { set = ["body.0.material.youngs_modulus=2e5"] }, term = [{ type = "tracking" }] }"#,
            r#"parameter=[{ kind = "youngs_modulus", log = true }]"#,
            "optimize={ max_evaluations = 100000, max_iterations = 100000, grad_tol = 0.0 }",
        ],
    );
    std::fs::write(&sp, scene).unwrap();
    let out = dir.path().join("opt");
    let mut child = spawn(&[
        "optimize".as_ref(),
        sp.as_os_str(),
        "--quiet".as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    let json = out.join("optimize.json");
    let t0 = std::time::Instant::now();
    loop {
        if let Ok(t) = std::fs::read_to_string(&json) {
            let v: serde_json::Value = serde_json::from_str(&t).expect("always complete JSON");
            if v["evaluations"].as_array().is_some_and(|a| a.len() >= 3) {
                break;
            }
        }
        assert!(t0.elapsed().as_secs() < 120, "no evaluations recorded");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.kill().unwrap();
    let res = child.wait_with_output().unwrap();
    assert!(!String::from_utf8_lossy(&res.stderr).contains("panicked"));
    let v = read_json(&json);
    assert_eq!(v["status"], "running", "a killed optimize is not completed");
    assert!(v["evaluations"].as_array().unwrap().len() >= 3);
    for e in std::fs::read_dir(&out).unwrap() {
        let p = e.unwrap().path();
        match p.extension().and_then(|e| e.to_str()) {
            Some("json") => {
                read_json(&p);
            }
            Some("toml") => {
                diffphd::scene::load(&p, &[]).expect("optimized.toml is complete");
            }
            _ => {}
        }
    }
    frames_are_complete_and_finite_ignoring_tmp(&out);

    // `optimize --resume` continues the killed run: the recorded evaluations are kept (not
    // recomputed) and the run goes on to its new cap.
    let done = v["evaluations"].as_array().unwrap().len();
    let cap = (done + 2).to_string();
    let res = std::process::Command::new(env!("CARGO_BIN_EXE_diffphd"))
        .args(["optimize".as_ref(), sp.as_os_str(), "--quiet".as_ref()])
        .args(["--out".as_ref(), out.as_os_str()])
        .args(["--resume", "--max-evaluations", &cap])
        .output()
        .unwrap();
    assert_eq!(
        res.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let w = read_json(&json);
    assert_eq!(w["status"], "completed");
    assert_eq!(w["header"]["resumed_evaluations"], done);
    assert_eq!(w["evaluations"].as_array().unwrap().len(), done + 2);
    for i in 0..done {
        assert_eq!(
            w["evaluations"][i], v["evaluations"][i],
            "evaluation {i} replayed as recorded"
        );
    }
}

/// As [`frames_are_complete_and_finite`], but a `*.tmp` (a write SIGKILL cut short; never a
/// result file) is allowed.
fn frames_are_complete_and_finite_ignoring_tmp(dir: &std::path::Path) -> usize {
    let scratch = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let n = p.file_name().unwrap().to_string_lossy().into_owned();
        if n.starts_with("frame_") && (n.ends_with(".vtu") || n.ends_with(".ply")) {
            std::fs::copy(&p, scratch.path().join(&n)).unwrap();
        }
    }
    frames_are_complete_and_finite(scratch.path())
}

// ---- Bodies that start in contact ------------------------------------------------------

/// A 2×2×2 block with its lower face at height `z`, above a ground plane.
fn block_at(z: f64, extra: &[&str]) -> String {
    let origin = [format!("body.0.mesh.origin=[0.0, 0.0, {z}]")];
    common::fixture_sets("scenes/reliability/block_at", &origin, extra)
}

/// A body that starts inside an obstacle is refused before the first step (exit 2), naming
/// body, node and obstacle — it used to spend minutes in one dense contact solve. A start
/// touching the obstacle (within `contact.margin`) still runs.
#[test]
fn body_starting_inside_an_obstacle_is_refused_with_body_node_and_obstacle() {
    let t0 = std::time::Instant::now();
    let r = run_cli("simulate", &block_at(-1.0, &[]), &[], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    for needle in [
        "body 0",
        "\"block\"",
        "node ",
        "obstacle 0",
        "\"ground\"",
        "below",
    ] {
        assert!(r.stderr.contains(needle), "{:?} lacks {needle:?}", r.stderr);
    }
    assert!(t0.elapsed().as_secs() < 30, "refused at once");
    // The same through the inverse-problem path (every evaluation builds a simulator).
    let scene = block_at(-1.0, &DENSITY_GRADIENT);
    let r = run_cli("grad", &scene, &[], &[]);
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("starts inside obstacle 0"),
        "{}",
        r.stderr
    );
    // Touching (1e-4 m deep, the margin is half an edge = 2.5 cm): resolved by the solve.
    let r = run_cli("simulate", &block_at(-1e-4, &[]), &[], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

// ---- Memory guards -----------------------------------------------------------------------

/// The rollout tape is estimated before the run and refused above `--max-memory` (exit 2,
/// the estimate in the message, nothing written); a bad `--max-memory` is bad input.
#[test]
fn tape_over_max_memory_is_refused_with_the_estimate() {
    let scene = common::fixture("scenes/reliability/beam", &DENSITY_GRADIENT);
    for cmd in ["grad", "gradcheck", "optimize"] {
        let r = run_cli(cmd, &scene, &[], &["--max-memory", "1K"]);
        assert_eq!(r.code, 2, "{cmd}: {}", r.stderr);
        assert!(
            r.stderr.contains("estimate") && r.stderr.contains("--max-memory"),
            "{cmd}: {}",
            r.stderr
        );
        assert!(!r.out().exists(), "{cmd}: nothing written");
    }
    let r = run_cli("grad", &scene, &[], &["--max-memory", "1K"]);
    for part in ["model and solver state", "Cholesky factor", "rollout tape"] {
        assert!(r.stderr.contains(part), "{part}: {}", r.stderr);
    }
    let r = run_cli("grad", &scene, &[], &["--max-memory", "1G"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for bad in ["0", "lots", "-5M"] {
        let r = run_cli("grad", &scene, &[], &[&format!("--max-memory={bad}")]);
        assert_eq!(r.code, 2, "{bad}: {}", r.stderr);
    }
}

/// A 2×2×1 slab clamped at its bottom and a 1×1×1 cube whose lowest face is at height `z`
/// (the slab's top is at 0.05 m), `[contact] bodies = true`, margin 5 mm.
fn cube_on_slab(z: f64, extra: &[&str]) -> String {
    let origin = [format!("body.1.mesh.origin=[0.032, 0.028, {z}]")];
    common::fixture_sets("scenes/reliability/cube_on_slab", &origin, extra)
}

/// Two bodies that overlap at frame 0 (`[contact] bodies = true`) are refused before the
/// first step (exit 2), naming the body, its node, the other body and its nearest boundary
/// triangle — a node deep inside another body is no contact candidate, so the overlap was
/// kept silently. An overlap within `contact.margin` is resolved by the contact solve.
#[test]
fn bodies_overlapping_at_the_start_are_refused_with_body_node_and_triangle() {
    // the cube's lower face 25 mm inside the 50 mm slab
    let r = run_cli("simulate", &cube_on_slab(0.025, &[]), &[], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert_eq!(r.stderr.trim().lines().count(), 1, "{}", r.stderr);
    for needle in [
        "starts inside body",
        "\"cube\"",
        "\"slab\"",
        "node ",
        "boundary triangle ",
        "contact.margin",
    ] {
        assert!(r.stderr.contains(needle), "{:?} lacks {needle:?}", r.stderr);
    }
    // the same through the inverse-problem path: bad input there too
    let scene = cube_on_slab(
        0.025,
        &[
            r#"loss.term=[{ type = "random_linear" }]"#,
            r#"parameter=[{ kind = "density", body = 1 }]"#,
        ],
    );
    let r = run_cli("grad", &scene, &[], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("starts inside body"), "{}", r.stderr);
    // 1 mm deep (within the 5 mm margin) and resting on top: both run
    for z in [0.049, 0.0501] {
        let r = run_cli("simulate", &cube_on_slab(z, &[]), &[], &[]);
        assert_ne!(r.code, 2, "z = {z}: {}", r.stderr);
        assert!(!r.stderr.contains("starts inside"), "{}", r.stderr);
    }
}

/// A contact solve that runs out of its wall-clock cap (`contact.max_seconds`, here 1 ns)
/// stops, the step ends non-converged, and the run reports frame, iteration and the cap and
/// follows `solver.on_nonconvergence`: `"fail"` (default) finishes with exit 3 and status
/// "incomplete", `"error"` stops at the first frame (exit 3), `"warn"` exits 0 with a
/// warning. Both forms of the contact solve (dense LU and matrix-free GMRES) and the Newton
/// stepper are capped.
#[test]
fn contact_solve_over_its_time_cap_is_reported_with_frame_iteration_and_cap() {
    // resting 1 mm inside the ground: every step needs a contact solve
    let scene = block_at(-1e-3, &[]);
    // `cmd` on `text` under a 1 ns contact cap, plus one more `--set`
    let capped = |cmd: &str, text: &str, set: Option<&str>| {
        let mut args = vec!["--set", "contact.max_seconds=1e-9"];
        args.extend(set.iter().flat_map(|s| ["--set", *s]));
        run_cli(cmd, text, &[], &args)
    };
    for solver in ["dense", "iterative"] {
        let form = format!("contact.solver=\"{solver}\"");
        let r = capped("simulate", &scene, Some(&form));
        assert_eq!(r.code, 3, "{solver}: {}", r.stderr);
        for needle in ["frame 1, iteration ", "contact.max_seconds = 0.000000001 s"] {
            assert!(
                r.stderr.contains(needle),
                "{solver}: {:?} lacks {needle:?}",
                r.stderr
            );
        }
        let log = r.log();
        assert_eq!(log["status"], "incomplete", "{solver}");
        let frames = log["frames"].as_array().unwrap();
        assert_eq!(frames.len(), 2, "{solver}: the run goes on");
        for f in frames {
            assert_eq!(f["converged"], false, "{solver}: {f}");
            assert!(
                f["contact"]["time_limit_iteration"].is_u64(),
                "{solver}: {f}"
            );
        }
        assert_eq!(frames_are_complete_and_finite(&r.out()), 3, "{solver}");
    }
    let r = capped(
        "simulate",
        &scene,
        Some("solver.on_nonconvergence=\"error\""),
    );
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "frame 1, iteration 0: the contact solve hit its time cap contact.max_seconds"
        ),
        "{}",
        r.stderr
    );
    assert_eq!(r.log()["frames"].as_array().unwrap().len(), 0);
    let r = capped(
        "simulate",
        &scene,
        Some("solver.on_nonconvergence=\"warn\""),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.log()["status"], "completed");
    assert!(r.log()["frames"][1]["contact"]["time_limit_iteration"].is_u64());
    let r = capped("simulate", &scene, Some("solver.method=\"newton\""));
    assert_eq!(r.code, 3, "newton: {}", r.stderr);
    assert!(
        r.stderr.contains("contact.max_seconds"),
        "newton: {}",
        r.stderr
    );
    // the inverse-problem path reports it too
    let inverse = block_at(-1e-3, &DENSITY_GRADIENT);
    let r = capped("grad", &inverse, None);
    assert_eq!(r.code, 3, "grad: {}", r.stderr);
    assert!(
        r.stderr
            .contains("frame 1, iteration 0: the contact solve hit its time cap"),
        "grad: {}",
        r.stderr
    );
    // the default cap is generous: the same scene converges
    let r = run_cli("simulate", &scene, &[], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("max_seconds"), "{}", r.stderr);
    for bad in ["0", "-1", "nan"] {
        let r = run_cli(
            "simulate",
            &scene,
            &[],
            &["--set", &format!("contact.max_seconds={bad}")],
        );
        assert_eq!(r.code, 2, "{bad}: {}", r.stderr);
        assert!(r.stderr.contains("max_seconds"), "{bad}: {}", r.stderr);
    }
}

/// `simulate` estimates the model, the solver state and the Cholesky factor (nnz of L from
/// the symbolic analysis, before the numeric factorization allocates it) and refuses above
/// `--max-memory` (exit 2, one line with the estimate and its parts, nothing written); a
/// limit above the estimate runs. The estimate of a 16×8×8 hex beam (1,377 nodes, 8,192
/// samples) is a few MiB: more than 2 MiB, less than 64 MiB.
#[test]
fn model_and_factor_over_max_memory_are_refused_with_the_estimate() {
    let scene = common::fixture(
        "scenes/reliability/beam",
        &[
            "body.0.mesh.cells=[16, 8, 8]",
            "body.0.mesh.dx=0.01",
            "simulation.frames=1",
        ],
    );
    let r = run_cli("simulate", &scene, &[], &["--max-memory", "2M"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert_eq!(r.stderr.trim().lines().count(), 1, "{}", r.stderr);
    for needle in [
        "needs about",
        "estimate: model and solver state",
        "Cholesky factor",
        "--max-memory (2.0 MiB)",
    ] {
        assert!(r.stderr.contains(needle), "{:?} lacks {needle:?}", r.stderr);
    }
    assert!(!r.out().exists(), "nothing written");
    let r = run_cli("simulate", &scene, &[], &["--max-memory", "64M"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}
