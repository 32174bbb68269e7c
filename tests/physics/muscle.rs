//! Muscle actuation (issue 5, spec §3.5): the end-to-end adjoint gradient of muscle
//! activations (and of E, ν, ρ next to them) against central finite differences, and a
//! small Routing Tendon: activations of four fibre columns that bring the tip of a clamped
//! beam onto a target.

use crate::common;
use diffphd::optimize::lbfgs::{optimize, Status};
use diffphd::optimize::problem::Problem;

/// A vertical 1×1×4 beam clamped at the bottom, two muscle groups (x halves) with vertical
/// fibres and one circumferential group; tight tolerances as in tests/optimize/gradients.rs.
fn gradcheck_scene(element: &str, model: &str) -> String {
    common::fixture(
        "scenes/muscle/beam",
        &[
            &format!("body.0.mesh.element={element}"),
            &format!("body.0.material.model={model}"),
        ],
    )
}

fn assert_gradients(text: &str, rtol: f64) {
    let (rep, problem) = common::gradcheck_text(text, rtol, 4);
    assert_eq!(problem.base.muscles.len(), 3);
    common::assert_all_pass("muscles", &rep);
    assert!(rep.rows[..3].iter().all(|r| r.adjoint.abs() > 0.0));
}

#[test]
fn muscle_activation_gradients_hex_corotated() {
    assert_gradients(&gradcheck_scene("hex8", "corotated"), 1e-6);
}

#[test]
fn muscle_activation_gradients_tet_neohookean() {
    // The NH prox limits this scene to ~1e-5 with or without muscles (measured without
    // muscles: density 9e-6, ν 6e-6 relative error), so 5e-5 here.
    assert_gradients(&gradcheck_scene("tet4", "neohookean"), 5e-5);
}

/// Activations per time knot (linear interpolation in time): two groups with three and
/// four knots whose spacing does not align with the frames (τ = 0.023 s, h = 0.01 s, 7
/// frames: the steps use weights s ∈ (0, 1), the last one beyond the last knot of the
/// first group). The adjoint gradient of the first group's middle knot (`knot = 1`) and of
/// all four knots of the second (log) — the chain rule through the interpolation weights —
/// against central differences.
#[test]
fn muscle_knot_activation_gradients() {
    let text = &common::fixture("scenes/muscle/knots", &[]);
    let (rep, problem) = common::gradcheck_text(text, 1e-6, 4);
    let m = &problem.base.muscles;
    assert_eq!((m[0].knots.len(), m[1].knots.len()), (3, 4));
    assert!((m[0].knot_interval - 0.023).abs() < 1e-15);
    // default spacing: the four knots spread over frames * dt = 0.07 s
    assert!((m[1].knot_interval - 0.07 / 3.0).abs() < 1e-15);
    assert_eq!(rep.rows.len(), 1 + 4);
    assert_eq!(rep.rows[0].name, "muscle_activation[0].muscle0.knot1");
    assert_eq!(rep.rows[1].name, "log muscle_activation[0].muscle1.knot0");
    common::assert_all_pass("muscle knots", &rep);
    // every knot influences the loss (none lies entirely beyond the horizon)
    assert!(rep.rows.iter().all(|r| r.adjoint.abs() > 1e-3));
    // optimized.toml: knot k goes into entry k of the activation array, model reproduced
    let vals: Vec<f64> = (0..5).map(|i| 0.7 + 0.1 * i as f64).collect();
    let wb = diffphd::optimize::writeback::write_back(&problem, &vals).unwrap();
    assert!(wb.exact, "{:?}", wb.notes);
    let ls = common::load(&wb.toml, &[]);
    let ms = &ls.scene.bodies[0].muscles;
    assert_eq!(ms[0].activation.values(), vec![1.0, vals[0], 0.9]);
    assert_eq!(ms[1].activation.values(), vals[1..].to_vec());
}

/// Small Routing Tendon: a 2×2×6 hex beam (dx = 2 cm) clamped at the bottom, four muscle
/// columns with vertical fibres. The target is the tip position produced by activations
/// (0.8, 1.0, 0.9, 1.1); the optimization starts relaxed (all 1) and must bring the mean
/// tip position within 0.1 dx of the target.
#[test]
fn small_routing_tendon_reaches_its_target() {
    let dx = 0.02;
    let columns: Vec<String> = [(0, 0), (1, 0), (0, 1), (1, 1)]
        .iter()
        .enumerate()
        .map(|(j, (x, y))| {
            let (x0, y0) = (*x as f64 * dx, *y as f64 * dx);
            format!(
                "{{ name = \"column{j}\", select = {{ box = {{ min = [{x0}, {y0}, -1], max = [{}, {}, 1] }} }}, fiber = [0.0, 0.0, 1.0], stiffness = 1e5 }}",
                x0 + dx,
                y0 + dx
            )
        })
        .collect();
    let params: Vec<String> = (0..4)
        .map(|j| {
            format!("{{ kind = \"muscle_activation\", muscle = {j}, lower = 0.5, upper = 1.5 }}")
        })
        .collect();
    let text = common::fixture(
        "scenes/muscle/tendon",
        &[
            &format!("body.0.muscle=[{}]", columns.join(", ")),
            &format!("parameter=[{}]", params.join(", ")),
        ],
    );
    // Target: the tip mean at the "true" activations.
    let truth = [0.8, 1.0, 0.9, 1.1];
    let sets: Vec<String> = truth
        .iter()
        .enumerate()
        .map(|(j, a)| format!("body.0.muscle.{j}.activation={a}"))
        .collect();
    let sets: Vec<&str> = sets.iter().map(|s| s.as_str()).collect();
    let p_true = Problem::new(common::load(&text, &sets)).unwrap();
    let model = p_true.model_at(&p_true.theta0());
    let mut sim = diffphd::solver::Simulator::new(&model, &p_true.ls.scene.solver).unwrap();
    let ro = diffphd::solver::rollout::forward(&mut sim, model.frames, 1, &p_true.loss).unwrap();
    let x = ro.final_x();
    let tip: Vec<usize> = (0..model.num_nodes())
        .filter(|&i| (model.rest[i][2] - 0.12).abs() < 1e-9)
        .collect();
    let mut target = [0.0; 3];
    for &i in &tip {
        for d in 0..3 {
            target[d] += x[3 * i + d] / tip.len() as f64;
        }
    }
    let rest_tip = [0.02, 0.02, 0.12];
    let moved = (0..3)
        .map(|d| (target[d] - rest_tip[d]).powi(2))
        .sum::<f64>()
        .sqrt();
    assert!(
        moved > 0.2 * dx,
        "the true activations must move the tip: {moved}"
    );
    let set_target = format!(
        "loss.term.0.target=[{}, {}, {}]",
        target[0], target[1], target[2]
    );
    let problem = Problem::new(common::load(&text, &[set_target.as_str()])).unwrap();
    let t0 = std::time::Instant::now();
    let mut cb = |_: &diffphd::optimize::lbfgs::OptimizeLog| {};
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
    let dist = (2.0 * best.loss).sqrt();
    let start = (2.0 * log.evaluations[0].loss).sqrt();
    eprintln!(
        "tendon: tip distance {start:.3e} -> {dist:.3e} m (dx = {dx}), activations {:?}, {} iterations, {} evaluations, {:.1}s; {:?}",
        best.parameters,
        log.iterations.len() - 1,
        log.evaluations.len(),
        t0.elapsed().as_secs_f64(),
        log.termination
    );
    assert!(dist < 0.1 * dx, "tip distance {dist}");
    // optimized.toml content: activations written into [[body.muscle]], model reproduced.
    let wb = diffphd::optimize::writeback::write_back(&problem, &best.parameters).unwrap();
    assert!(wb.exact, "{:?}", wb.notes);
    let ls = common::load(&wb.toml, &[]);
    for (m, a) in ls.scene.bodies[0].muscles.iter().zip(&best.parameters) {
        assert_eq!(m.activation.values(), vec![*a]);
    }
    assert!(dist < 1e-3 * start);
}

#[test]
fn bad_muscle_input_names_the_key() {
    let base = gradcheck_scene("hex8", "corotated");
    let cases: [(&[&str], &str); 9] = [
        (&["parameter.1.muscle=7"], "parameter[1].muscle"),
        (
            &["body.0.muscle.2.stiffness=-1.0"],
            "body[0].muscle[2].stiffness",
        ),
        (
            &["body.0.muscle.1.fiber=[0.0, 0.0, 0.0]"],
            "body[0].muscle[1].fiber",
        ),
        (
            &["body.0.muscle.1.select={ box = { min = [5.0, 5, 5], max = [6, 6, 6] } }"],
            "body[0].muscle[1].select",
        ),
        (
            &["body.0.muscle.2.activation=[]"],
            "body[0].muscle[2].activation",
        ),
        (
            &[
                "body.0.muscle.2.activation=[0.8, 0.9]",
                "body.0.muscle.2.knot_interval=-0.1",
            ],
            "body[0].muscle[2].knot_interval",
        ),
        (
            &["body.0.muscle.2.knot_interval=0.1"],
            "body[0].muscle[2].knot_interval",
        ),
        (&["parameter.1.knot=1"], "parameter[1].knot"),
        (&["parameter.5.knot=0"], "parameter[5].knot"),
    ];
    for (sets, needle) in cases {
        // the fixture is the hex corotated beam
        let text = common::fixture("scenes/muscle/beam", sets);
        assert_ne!(text, base, "{needle}: pattern not found");
        let r = common::run_cli("gradcheck", &text, &[], &[]);
        assert_eq!(r.code, 2, "{needle}: {}", r.stderr);
        assert!(r.stderr.contains(needle), "{needle}: {}", r.stderr);
    }
}
