//! Adjoint gradients against central finite differences (issue 3, items 1–3), using the
//! same machinery as `diffphd gradcheck`. Small hex and tet scenes, homogeneous and 100×
//! heterogeneous, corotated and Neo-Hookean, damping on and off, 5 frames, tight solver
//! tolerances with Newton polish, exact (unfiltered) prox Jacobians.

use crate::common;
use diffphd::optimize::problem::Problem;

/// The beam of `scenes/gradients/beam.toml` (every parameter kind of the beam declared)
/// with `element`, `model`, the band's modulus scale and the damping; `extra` sets last.
fn scene(
    element: &str,
    model: &str,
    het_scale: f64,
    alpha: f64,
    beta: f64,
    extra: &[&str],
) -> String {
    let cells = if element == "hex8" {
        "[4, 1, 1]"
    } else {
        "[3, 1, 1]"
    };
    let sets = [
        format!("body.0.mesh.element={element}"),
        format!("body.0.mesh.cells={cells}"),
        format!("body.0.material.model={model}"),
        format!("body.0.region.0.scale={het_scale}"),
        format!("body.0.damping.alpha={alpha}"),
        format!("body.0.damping.beta={beta}"),
    ];
    common::fixture_sets("scenes/gradients/beam", &sets, extra)
}

#[test]
fn hex_corotated_heterogeneous_damped() {
    let rep =
        common::gradcheck_text(&scene("hex8", "corotated", 0.01, 20.0, 0.002, &[]), 1e-5, 4).0;
    common::assert_all_pass("hex corotated 100x damped", &rep);
}

#[test]
fn tet_neohookean_heterogeneous_damped() {
    let rep = common::gradcheck_text(
        &scene("tet4", "neohookean", 0.01, 20.0, 0.002, &[]),
        1e-5,
        4,
    )
    .0;
    common::assert_all_pass("tet NH 100x damped", &rep);
}

#[test]
fn hex_neohookean_homogeneous_undamped() {
    let text = scene("hex8", "neohookean", 1.0, 0.0, 0.0, &[]);
    // Damping parameters are checked at zero (one-sided physics is still smooth in α, β).
    let rep = common::gradcheck_text(&text, 1e-5, 4).0;
    common::assert_all_pass("hex NH homogeneous", &rep);
}

#[test]
fn tet_corotated_homogeneous_undamped() {
    let rep = common::gradcheck_text(&scene("tet4", "corotated", 1.0, 0.0, 0.0, &[]), 1e-5, 4).0;
    common::assert_all_pass("tet corotated homogeneous", &rep);
}

/// Issue 14 item 6: with DiffPD's uniform nodal mass (`mass = "uniform"`, every node ρV̄)
/// the adjoint gradients of everything that touches the mass (density, mass damping α,
/// gravity) and of an elastic parameter match central differences, hex and tet.
#[test]
fn uniform_mass_gradients_hex_and_tet() {
    let params = r#"parameter=[
        { kind = "density" },
        { kind = "youngs_modulus", log = true },
        { kind = "damping_alpha" },
        { kind = "gravity", component = 2 },
    ]"#;
    for (element, model) in [("hex8", "corotated"), ("tet4", "neohookean")] {
        let text = scene(
            element,
            model,
            0.1,
            20.0,
            0.002,
            &["body.0.material.mass=\"uniform\"", params],
        );
        assert!(text.contains("mass = \"uniform\"") && !text.contains("initial_velocity"));
        let (rep, problem) = common::gradcheck_text(&text, 1e-5, 4);
        common::assert_all_pass(&format!("{element} {model} uniform mass"), &rep);
        assert_eq!(rep.rows.len(), 4);
        // the convention is in effect: the lumped body moves differently
        let lumped =
            Problem::new(common::load(&text, &["body.0.material.mass=\"lumped\""])).unwrap();
        let l = lumped.evaluate(&lumped.theta0(), false).unwrap().loss;
        let u = problem.evaluate(&problem.theta0(), false).unwrap().loss;
        assert!(
            (l - u).abs() > 1e-3 * u.abs(),
            "lumped {l:e} vs uniform {u:e}"
        );
    }
}

/// Issue 3 item 2. Large volume expansion at ν = 0.49 makes the NH stretch Hessian
/// $H_\sigma(\sigma^*)$ indefinite. Observed (and asserted): the *exact* adjoint still
/// converges with the fixed-point iteration and matches finite differences; the
/// trust-region filter acts on most samples and biases the material gradients by tens of
/// percent (the filter trades exactness for a contractive iteration the exact path did not
/// need here). See docs/NOTES.md.
#[test]
fn indefinite_prox_hessian_exact_vs_trust_region() {
    let text = &common::fixture("scenes/gradients/indefinite_prox", &[]);
    let exact = common::gradcheck_text(text, 1e-5, 4).0;
    common::assert_all_pass("exact adjoint, indefinite H_sigma", &exact);
    assert_eq!(exact.evaluation.filtered_samples, 0);
    let ls = common::load(text, &["backward.filter=\"trust_region\""]);
    let problem = Problem::new(ls).unwrap();
    let ev = problem.evaluate(&problem.theta0(), true).unwrap();
    assert!(
        ev.nonconverged_backward_frames.is_empty(),
        "TR backward must converge"
    );
    assert!(
        ev.filtered_samples > 100,
        "the filter must act on the expanded samples: {}",
        ev.filtered_samples
    );
    for (row, g) in exact.rows.iter().zip(&ev.gradient) {
        let bias = (g - row.adjoint).abs() / row.adjoint.abs();
        eprintln!(
            "{}: exact {:.6e}, trust_region {:.6e}, bias {:.1}%",
            row.name,
            row.adjoint,
            g,
            100.0 * bias
        );
        assert!(bias.is_finite());
    }
    let e_bias = (ev.gradient[0] - exact.rows[0].adjoint).abs() / exact.rows[0].adjoint.abs();
    assert!(e_bias > 0.01, "filter had no effect on dL/dE");
}

/// Issue 3 item 3: per-frame adjoint statistics are recorded, and a frame whose adjoint
/// does not converge is reported (here: forced by an iteration cap of 1 with no fallback
/// budget).
#[test]
fn nonconverged_adjoint_frames_are_reported() {
    let text = scene("hex8", "corotated", 0.01, 0.0, 0.0, &[]);
    let ls = common::load(
        &text,
        &[
            // the PD method's iterative adjoint (pinned: `auto` may pick Newton's or the
            // direct adjoint, which have no iteration cap)
            "solver.method=\"diffphd\"",
            "backward.adjoint=\"gmres\"",
            "backward.max_iterations=1",
            "backward.rel_tol=1e-14",
            // the direct fallback would converge the frames this test needs unconverged
            "backward.direct_after=0",
        ],
    );
    let problem = Problem::new(ls).unwrap();
    let ev = problem.evaluate(&problem.theta0(), true).unwrap();
    assert!(
        !ev.nonconverged_backward_frames.is_empty(),
        "a capped adjoint must be reported"
    );
    assert!(ev.max_abs_adjoint > 0.0);
}

/// `backward.checkpoint_every = K` keeps fewer states and recomputes segments: same
/// gradient (to the forward tolerance), smaller tape.
#[test]
fn checkpointing_gives_the_same_gradient_with_a_smaller_tape() {
    let text = scene(
        "hex8",
        "corotated",
        0.01,
        5.0,
        0.001,
        &["simulation.frames=7"],
    );
    let full = Problem::new(common::load(&text, &[])).unwrap();
    let ck = Problem::new(common::load(&text, &["backward.checkpoint_every=3"])).unwrap();
    let a = full.evaluate(&full.theta0(), true).unwrap();
    let b = ck.evaluate(&ck.theta0(), true).unwrap();
    assert!((a.loss - b.loss).abs() <= 1e-12 * a.loss.abs());
    for (ga, gb) in a.gradient.iter().zip(&b.gradient) {
        assert!(
            (ga - gb).abs() <= 1e-8 * ga.abs().max(1e-12),
            "{ga} vs {gb}"
        );
    }
    assert!(
        b.tape_bytes < a.tape_bytes,
        "{} vs {}",
        b.tape_bytes,
        a.tape_bytes
    );
    assert_eq!(a.frames.len(), 7);
    assert!(a.frames.iter().all(|f| f
        .adjoint
        .as_ref()
        .is_some_and(|s| s.converged && s.iterations > 0)));
}

/// A clamped, damped hex beam with log E and ν as parameters, and `sets` (the loss).
fn track(sets: &[&str]) -> String {
    common::fixture("scenes/gradients/track", sets)
}

/// Tracking loss against a reference simulated with `[loss.reference]` overrides.
#[test]
fn tracking_loss_against_override_reference() {
    let text = track(&[
        r#"loss={ reference = { set = ["body.0.material.youngs_modulus=1e6"] }, term = [{ type = "tracking" }] }"#,
    ]);
    let rep = common::gradcheck_text(&text, 1e-5, 4).0;
    common::assert_all_pass("tracking vs override reference", &rep);
    assert!(rep.loss > 0.0);
    // d loss / d log E must point towards the reference (E_ref > E): negative.
    assert!(rep.rows[0].adjoint < 0.0);
}

/// Tracking loss against the frames written by `diffphd simulate`: the default `.vtu` frames
/// pass the gradient check, and give the loss and gradient a PLY reference of the same run
/// gives (both track the boundary nodes in the same order), up to the PLY's float32
/// positions: relative 1e-5 here (measured 2.3e-7 for the loss, 6e-8 for the gradient).
#[test]
fn tracking_loss_against_vtu_and_ply_frames() {
    let dir = tempfile::tempdir().unwrap();
    let refscene = dir.path().join("ref.toml");
    std::fs::write(&refscene, track(&[])).unwrap();
    let reference = |name: &str, format: &[&str]| {
        let st = std::process::Command::new(common::bin())
            .args(["simulate", refscene.to_str().unwrap(), "--quiet", "--out"])
            .arg(dir.path().join(name))
            .args(["--set", "body.0.material.youngs_modulus=1e6"])
            .args(format)
            .status()
            .unwrap();
        assert!(st.success());
        track(&[&format!(
            r#"loss.term=[{{ type = "tracking", reference_dir = "{}" }}]"#,
            dir.path().join(name).display()
        )])
    };
    let vtu = reference("vtu", &[]);
    assert!(dir.path().join("vtu/frame_00006.vtu").exists());
    let ply = reference("ply", &["--set", "output.format=\"ply\""]);
    let (rep, problem) = common::gradcheck_text(&vtu, 1e-4, 4);
    common::assert_all_pass("tracking vs VTU frames", &rep);
    assert!(rep.loss > 0.0);
    let theta = problem.theta0();
    let a = problem.evaluate(&theta, true).unwrap();
    let b = Problem::new(common::load(&ply, &[]))
        .unwrap()
        .evaluate(&theta, true)
        .unwrap();
    eprintln!(
        "loss vtu {:e} ply {:e}; gradient vtu {:e} ply {:e}",
        a.loss, b.loss, a.gradient[0], b.gradient[0]
    );
    assert!(
        (a.loss / b.loss - 1.0).abs() < 1e-5,
        "{} vs {}",
        a.loss,
        b.loss
    );
    assert!((a.gradient[0] / b.gradient[0] - 1.0).abs() < 1e-5);
}

/// `diffphd gradcheck` exit codes: 0 when every parameter passes, 1 when one fails
/// (forced by an absurd tolerance), and the JSON report is written either way.
#[test]
fn gradcheck_cli_exit_codes_and_report() {
    let text = track(&[r#"loss.term=[{ type = "random_linear", seed = 1 }]"#]);
    let ok = common::run_cli("gradcheck", &text, &[], &["--rtol", "1e-4"]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ok.out().join("gradcheck.json")).unwrap())
            .unwrap();
    assert_eq!(rep["rows"].as_array().unwrap().len(), 2);
    let bad = common::run_cli("gradcheck", &text, &[], &["--rtol", "1e-300"]);
    assert_eq!(bad.code, 1, "{}", bad.stderr);
    // the failing run still writes its report, with the verdict
    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bad.out().join("gradcheck.json")).unwrap())
            .unwrap();
    assert_eq!(rep["all_pass"], false);
    assert_eq!(rep["rows"].as_array().unwrap().len(), 2);
    let unknown = common::run_cli("gradcheck", &text, &[], &["--param", "nope"]);
    assert_eq!(unknown.code, 2);
    assert!(unknown.stderr.contains("nope"));
}
