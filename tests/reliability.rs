//! Reliability promises of docs/RELIABILITY.md (issue 18): no silent garbage (values the
//! frame files cannot hold are refused or reported, never written as `inf` with exit 0),
//! divergence and NaN reported with frame, iteration and element and complete partial
//! outputs.

mod common;
use common::run_cli;

/// A clamped 3×1×1 hex beam, 3 frames.
const BEAM: &str = r#"schema_version = 1
[simulation]
dt = 0.01
frames = 3
[[body]]
[body.mesh]
generator = "box"
element = "hex8"
cells = [3, 1, 1]
dx = 0.05
[body.material]
model = "corotated"
youngs_modulus = 1e5
poisson_ratio = 0.3
density = 1000.0
[[body.dirichlet]]
select = { face = "x_min" }
"#;

/// Every `frame_*.ply` present parses completely and holds only finite numbers.
fn frames_are_complete_and_finite(dir: &std::path::Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.ends_with(".tmp"), "temp file left: {name}");
        if !(name.starts_with("frame_") && name.ends_with(".ply")) {
            continue;
        }
        let pts = diffphd::io::ply::read_node_positions(&p)
            .unwrap_or_else(|e| panic!("{name} does not parse: {e}"));
        assert!(!pts.is_empty());
        for (_, x) in &pts {
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
        let r = run_cli("simulate", BEAM, &[], &["--set", set]);
        assert_eq!(r.code, 2, "{set}: {}", r.stderr);
        let key = key
            .replace("body.", "body[0].")
            .replace("dirichlet.", "dirichlet[0].");
        assert!(r.stderr.contains(&key), "{set}: {} lacks {key}", r.stderr);
        assert_eq!(r.stderr.trim().lines().count(), 1, "{}", r.stderr);
        assert!(!r.out().join("frame_00000.ply").exists(), "{set}");
    }
}

/// A state that leaves the f32 range mid-run (forces within range, a huge product) is
/// reported as a failed run naming frame, iteration, node and element; the frames before it
/// are complete and finite, log.json says failed.
#[test]
fn state_beyond_f32_mid_run_fails_with_frame_and_element() {
    // A ramp to 3e37 N on a beam without stiffness (E = 1e-20) and ρ = 1e-3: x ≈ h²F/m is
    // finite in f64 but beyond f32 from frame 1 on.
    let scene = format!(
        "{BEAM}[[body.force]]\nselect = {{ face = \"x_max\" }}\nforce = [0.0, 0.0, 3e37]\nprofile = {{ type = \"ramp\", duration = 0.03 }}\n"
    )
    .replace("youngs_modulus = 1e5", "youngs_modulus = 1e-20")
    .replace("density = 1000.0", "density = 1e-3");
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
    let r = run_cli("simulate", BEAM, &[], &["--set", "solver.max_iterations=1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let log = r.log();
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
        let r = run_cli("simulate", BEAM, &[], &["--set", set]);
        assert_eq!(r.code, 2, "{set}: {}", r.stderr);
        assert!(r.stderr.contains("finite"), "{set}: {}", r.stderr);
        assert!(!r.out().join("log.json").exists());
    }
}

/// NaN injected into the forces at run time (below the scene checks) is reported by the
/// step with frame, PD iteration and element.
#[test]
fn nan_injected_into_forces_is_reported_with_frame_iteration_and_element() {
    let text = format!(
        "{BEAM}[[body.force]]\nselect = {{ face = \"x_max\" }}\nforce = [0.0, 0.0, -1.0]\n"
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
    let r = run_cli("simulate", BEAM, &[], &["--set", "simulation.dt=1e6"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let log = r.log();
    assert_eq!(log["status"], "completed");
    assert!(log["frames"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["converged"] == true));
    assert_eq!(frames_are_complete_and_finite(&r.out()), 4);
    let free = BEAM.replace("[[body.dirichlet]]\nselect = { face = \"x_min\" }\n", "");
    let r = run_cli("simulate", &free, &[], &["--set", "simulation.dt=1e20"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("matrix"), "{}", r.stderr);
    assert!(!r.out().join("frame_00001.ply").exists());
}

/// An element that inverts mid-run is reported in log.json (`inverted_elements`: count and
/// first element) from the frame it appears in; frames before it carry no record.
#[test]
fn element_inverted_mid_run_is_reported_with_frame_and_element() {
    let scene = format!(
        "{BEAM}[[body.force]]\nselect = {{ face = \"x_max\" }}\nforce = [-30.0, 0.0, 0.0]\n"
    );
    let r = run_cli("simulate", &scene, &[], &["--frames", "8"]);
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
