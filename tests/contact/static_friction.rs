//! Static and dynamic friction (issue 38 item 5, must-show 4 and 6): a block on an incline
//! with μ_s > tan θ > μ_k stays at rest, slides with a = g (sin θ − μ_k cos θ) once pushed,
//! and bad values of the new keys are one-line errors with exit 2. The gradients w.r.t. μ_s
//! and μ_k are FD-checked in the parameter registry (`src/optimize/classes/fd.rs`), the law's
//! derivative beside it (`src/contact/ncp.rs`).

use crate::common;
use diffphd::solver::loss::Loss;
use diffphd::solver::{rollout, Model, Simulator};

const FIXTURE: &str = "tests/fixtures/static_friction_incline.toml";
/// Incline angle of the fixture.
const THETA_DEG: f64 = 30.0;

/// The fixture's model and its positions at every frame (0 = initial).
fn run(sets: &[&str]) -> (Model, Vec<Vec<f64>>) {
    let path = common::repo().join(FIXTURE);
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let ls = diffphd::scene::load(&path, &sets).expect("fixture loads");
    let model = Model::from_scene(&ls).expect("model builds");
    let mut sim = Simulator::new(&model, &ls.scene.solver).expect("factor");
    let ro = rollout::forward(&mut sim, model.frames, 1, &Loss::default()).expect("rollout");
    (model.clone(), ro.all_states().expect("every frame kept"))
}

/// Down-slope coordinate of the mass-weighted centroid (m).
fn along_slope(m: &Model, x: &[f64]) -> f64 {
    let mass = m.derive(&m.params).mass;
    let tot: f64 = mass.iter().sum();
    let th = THETA_DEG.to_radians();
    // down the slope: tangent to the plane with normal (−sin θ, 0, cos θ), gravity side
    let d = [-th.cos(), 0.0, -th.sin()];
    mass.iter()
        .enumerate()
        .map(|(i, mi)| mi * (0..3).map(|k| d[k] * x[3 * i + k]).sum::<f64>() / tot)
        .sum()
}

/// μ_s = 0.7 > tan 30° at rest: the block does not move (bound 1e-8 m after the first five
/// frames, which settle the elastic shear); the control with μ_s = μ_k = 0.4 < tan 30°
/// slides more than a centimetre over the same frames.
#[test]
fn block_at_rest_on_incline_sticks_with_static_friction() {
    let (m, xs) = run(&[]);
    let s: Vec<f64> = xs.iter().map(|x| along_slope(&m, x)).collect();
    let moved = (s[s.len() - 1] - s[5]).abs();
    let (mc, xc) = run(&["obstacle.0.static_friction=0.4"]);
    let sc: Vec<f64> = xc.iter().map(|x| along_slope(&mc, x)).collect();
    let moved_dynamic = sc[sc.len() - 1] - sc[5];
    eprintln!("at rest: moved {moved:.3e} m with mu_s = 0.7; {moved_dynamic:.4e} m with mu_s = mu_k = 0.4");
    assert!(moved < 1e-8, "sticking block moved {moved} m");
    assert!(
        moved_dynamic > 1e-2,
        "control (mu = 0.4) moved only {moved_dynamic} m"
    );
}

/// Pushed down the slope at 0.5 m/s, the block slides (‖v_t‖ ≫ v_s, so μ = μ_k) and its
/// centroid's down-slope velocity (central differences of positions) grows linearly with
/// slope a = g (sin θ − μ_k cos θ) = 1.507 m/s², fitted over frames 5–39, within 2 %.
#[test]
fn pushed_block_slides_with_dynamic_friction_acceleration() {
    let th = THETA_DEG.to_radians();
    let v0 = 0.5;
    let push = format!(
        "body.0.initial.velocity=[{}, 0.0, {}]",
        -v0 * th.cos(),
        -v0 * th.sin()
    );
    let (m, xs) = run(&[&push]);
    let h = m.h;
    let s: Vec<f64> = xs.iter().map(|x| along_slope(&m, x)).collect();
    // velocity at frame k by central differences, least-squares line v = v̄ + a (t − t̄)
    let pts: Vec<(f64, f64)> = (5..s.len() - 1)
        .map(|k| (k as f64 * h, (s[k + 1] - s[k - 1]) / (2.0 * h)))
        .collect();
    let n = pts.len() as f64;
    let tm = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let vm = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let a = pts.iter().map(|p| (p.0 - tm) * (p.1 - vm)).sum::<f64>()
        / pts.iter().map(|p| (p.0 - tm).powi(2)).sum::<f64>();
    let g = 9.81;
    let expected = g * (th.sin() - 0.4 * th.cos());
    eprintln!(
        "pushed: a = {a:.5} m/s^2, expected g (sin - mu_k cos) = {expected:.5} (mu_s would give {:.4}); v from {:.3} to {:.3} m/s",
        g * (th.sin() - 0.7 * th.cos()),
        pts[0].1,
        pts[pts.len() - 1].1
    );
    assert!(
        (a / expected - 1.0).abs() < 0.02,
        "acceleration {a} vs {expected}"
    );
}

/// Must-show 6: bad values of the new keys exit 2 with one line naming the key.
#[test]
fn bad_static_friction_keys_are_one_line_errors() {
    let text = std::fs::read_to_string(common::repo().join(FIXTURE)).expect("fixture");
    for (sets, key) in [
        (
            vec!["obstacle.0.static_friction=0.3"],
            "obstacle[0].static_friction",
        ),
        (
            vec!["obstacle.0.static_friction=-1.0"],
            "obstacle[0].static_friction",
        ),
        (
            vec!["obstacle.0.static_friction=nan"],
            "obstacle[0].static_friction",
        ),
        (
            vec!["contact.stick_slip_speed=0.0"],
            "contact.stick_slip_speed",
        ),
        (
            vec![
                "contact.body_friction=0.5",
                "contact.body_static_friction=0.2",
            ],
            "contact.body_static_friction",
        ),
        (
            vec!["contact.model=\"penalty\""],
            "obstacle[0].static_friction",
        ),
    ] {
        let mut args = vec![];
        for s in &sets {
            args.push("--set");
            args.push(s);
        }
        let r = common::run_cli("simulate", &text, &[], &args);
        assert_eq!(r.code, 2, "{sets:?}: exit {}: {}", r.code, r.stderr);
        assert!(
            r.stderr.contains(key),
            "{sets:?}: {:?} lacks {key}",
            r.stderr
        );
        assert_eq!(
            r.stderr.trim().lines().count(),
            1,
            "{sets:?}: {:?}",
            r.stderr
        );
    }
    // a static_friction parameter with the penalty model
    let r = common::run_cli(
        "grad",
        &text,
        &[],
        &[
            "--set",
            "obstacle.0.static_friction=0.4",
            "--set",
            "contact.model=\"penalty\"",
            "--set",
            "parameter=[{kind=\"static_friction\", obstacle=0}]",
            "--set",
            "loss.term=[{type=\"random_linear\", seed=1}]",
        ],
    );
    assert_eq!(r.code, 2, "exit {}: {}", r.code, r.stderr);
    assert!(r.stderr.contains("parameter[0].kind"), "{:?}", r.stderr);
    assert_eq!(r.stderr.trim().lines().count(), 1, "{:?}", r.stderr);
}
