//! Field system identification (issue 39, "must show" 2): the per-element Young's modulus of
//! the two-material beam of `tests/fixtures/field_beam.toml` (32 hex elements, E = 1e5 Pa
//! near the clamp and 4e5 Pa in the outer half; gravity and a released 30° twist drive it,
//! 10 frames) recovered from the positions of every boundary node at every frame (no
//! noise), starting from the uniform 2e5 Pa, with and without a smoothness penalty.
//!
//! The error measure is the RMS of $\ln E_e-\ln E_e^*$ weighted by each element's
//! time-integrated strain energy in the true motion, $w_e=\sum_t h\,U_e(x_t^*)$
//! ([`diffphd::diagnostics::element_energies`]): an element that stores no energy leaves no
//! trace in the motion and counts for nothing.

use crate::common;
use diffphd::optimize::lbfgs::{optimize, Status};
use diffphd::optimize::problem::Problem;
use diffphd::scene::{load, LoadedScene};
use diffphd::solver::loss::{Loss, Term};
use diffphd::solver::{rollout, Model, Simulator};
use std::path::PathBuf;

fn fixture() -> PathBuf {
    common::repo().join("tests/fixtures/field_beam.toml")
}

/// The ground truth: the fixture simulated as written, every state kept.
struct Truth {
    model: Model,
    states: Vec<Vec<f64>>,
    /// $w_e=\sum_{t\ge1}h\,U_e(x_t)$.
    weights: Vec<f64>,
}

fn truth() -> Truth {
    let ls = load(&fixture(), &[]).expect("fixture loads");
    let model = Model::from_scene(&ls).expect("model");
    let states = {
        let mut sim = Simulator::new(&model, &ls.scene.solver).expect("simulator");
        let ro = rollout::forward(&mut sim, model.frames, 1, &Loss::default()).expect("rollout");
        ro.all_states().expect("every state kept")
    };
    let mut weights = vec![0.0; model.num_elements()];
    for x in &states[1..] {
        for (w, u) in weights
            .iter_mut()
            .zip(diffphd::diagnostics::element_energies(&model, x))
        {
            *w += model.h * u;
        }
    }
    Truth {
        model,
        states,
        weights,
    }
}

/// The fixture's problem (with `sets`), its loss the squared distance of every boundary node
/// to the truth at every frame, in double precision.
fn problem(t: &Truth, sets: &[&str]) -> Problem {
    let mut sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    // the fixture's reference_dir does not exist; the term is replaced below
    sets.push("loss.term=[{type = 'random_linear', seed = 1}]".into());
    let ls: LoadedScene = load(&fixture(), &sets).expect("fixture loads");
    let mut problem = Problem::new(ls).expect("problem");
    let mut nodes: Vec<usize> = t.model.bodies[0]
        .surface
        .iter()
        .flatten()
        .copied()
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    let frames = (1..t.states.len())
        .map(|f| {
            let x = &t.states[f];
            (
                f,
                nodes
                    .iter()
                    .map(|&i| [x[3 * i], x[3 * i + 1], x[3 * i + 2]])
                    .collect(),
            )
        })
        .collect();
    problem.loss = Loss {
        terms: vec![Term::Tracking {
            weight: 1.0,
            nodes,
            frames,
        }],
    };
    problem
}

/// Weighted RMS of $\ln E-\ln E^*$ (module doc).
fn weighted_rms(t: &Truth, e: &[f64]) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for ((w, e), e_true) in t.weights.iter().zip(e).zip(&t.model.params.youngs) {
        num += w * (e.ln() - e_true.ln()).powi(2);
        den += w;
    }
    (num / den).sqrt()
}

/// Run L-BFGS on `problem` (the fixture's `[optimize]`: at most 40 iterations) and return
/// the best field, with a line for the report.
fn fit(t: &Truth, problem: &Problem, label: &str) -> Vec<f64> {
    let t0 = std::time::Instant::now();
    let mut cb = |_: &diffphd::optimize::lbfgs::OptimizeLog| {};
    let log = optimize(
        problem,
        &problem.ls.scene.optimize,
        serde_json::Value::Null,
        None,
        &mut cb,
    )
    .expect("optimize sets up");
    assert_eq!(log.status, Status::Completed, "{:?}", log.error);
    let best = log.best.clone().expect("a best point");
    assert_eq!(best.parameters.len(), 32);
    let start: Vec<f64> = vec![2e5; 32];
    eprintln!(
        "field sysid {label}: weighted RMS log-E error {:.3e} (start {:.3e}), plain RMS {:.3e}; loss {:.3e}; {} iterations, {} evaluations, {:.1}s; {}",
        weighted_rms(t, &best.parameters),
        weighted_rms(t, &start),
        {
            let n = best.parameters.len() as f64;
            (best
                .parameters
                .iter()
                .zip(&t.model.params.youngs)
                .map(|(e, s)| (e.ln() - s.ln()).powi(2))
                .sum::<f64>()
                / n)
                .sqrt()
        },
        best.loss,
        log.iterations.len() - 1,
        log.evaluations.len(),
        t0.elapsed().as_secs_f64(),
        log.termination.as_deref().unwrap_or("")
    );
    best.parameters
}

/// Must show 2: within 5 % weighted RMS of log E, without a penalty and with the
/// Laplacian penalty of weight 1e-9 (start 2e5 Pa everywhere, 40 iterations at most;
/// measured: 1.7 % and 1.6 %, from 69 % at the start; the unweighted RMS stays near 19 %:
/// the tip elements store little energy and are not identified).
#[test]
fn field_sysid_recovers_a_two_material_beam() {
    let t = truth();
    assert_eq!(t.model.num_elements(), 32);
    assert!(t.weights.iter().all(|&w| w > 0.0));
    // the two materials are there, and the start is 2x off in each
    assert_eq!(
        t.model.params.youngs.iter().filter(|&&e| e == 4e5).count(),
        16
    );
    for (label, sets) in [
        ("without a penalty", vec![]),
        (
            "with laplacian w = 1e-9",
            vec!["parameter.0.regularize={kind = 'laplacian', weight = 1e-9}"],
        ),
    ] {
        let problem = problem(&t, &sets);
        assert_eq!(problem.regularizers.len(), sets.len());
        let e = fit(&t, &problem, label);
        let err = weighted_rms(&t, &e);
        assert!(err < 0.05, "{label}: weighted RMS of log E {err}");
    }
}

/// `diffphd` on `args`, which must succeed.
fn diffphd(args: &[&str]) {
    let out = std::process::Command::new(common::bin())
        .args(args)
        .arg("--quiet")
        .output()
        .expect("run diffphd");
    assert!(
        out.status.success(),
        "diffphd {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Through the binary: `simulate` of the truth gives the boundary-node reference
/// (`reference_dir`); `optimize` of the field (TV penalty, 4 iterations: the round trip, not
/// the fit) writes `youngs_modulus_body0.txt` beside `optimized.toml`; `simulate` of
/// `optimized.toml` reproduces the optimize run's final frame bitwise.
#[test]
fn field_optimize_writes_a_per_element_file_that_simulates_to_the_optimum() {
    let dir = tempfile::tempdir().unwrap();
    let (truth, opt, again) = (
        dir.path().join("truth"),
        dir.path().join("opt"),
        dir.path().join("again"),
    );
    let fx = fixture();
    let fx = fx.to_str().unwrap();
    diffphd(&["simulate", fx, "--out", truth.to_str().unwrap()]);
    let reference = format!("loss.term.0.reference_dir={}", truth.display());
    diffphd(&[
        "optimize",
        fx,
        "--out",
        opt.to_str().unwrap(),
        "--max-iterations",
        "4",
        "--set",
        &reference,
        "--set",
        "parameter.0.regularize={kind = 'tv', weight = 1e-9, epsilon = 0.05}",
    ]);
    let field = std::fs::read_to_string(opt.join("youngs_modulus_body0.txt")).unwrap();
    let values: Vec<f64> = field
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(values.len(), 32);
    // the fit moved the field off its uniform start
    assert!(
        values.iter().any(|&v| (v / 2e5 - 1.0).abs() > 1e-3),
        "{values:?}"
    );
    let log: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(opt.join("optimize.json")).unwrap()).unwrap();
    let best: Vec<f64> = log["best"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    // the file holds the model's moduli, E_scene·(v / v_scene): the best point to round-off
    for (f, b) in values.iter().zip(&best) {
        assert!((f - b).abs() <= 1e-15 * b, "{f} vs {b}");
    }
    let text = std::fs::read_to_string(opt.join("optimized.toml")).unwrap();
    assert!(
        text.contains("Rebuilt model matches the optimized one: yes"),
        "{text}"
    );
    diffphd(&[
        "simulate",
        opt.join("optimized.toml").to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
    ]);
    let last = diffphd::io::frames::vtu_frame_name(10);
    let a = std::fs::read(opt.join(&last)).unwrap();
    let b = std::fs::read(again.join(&last)).unwrap();
    assert!(a == b, "final frames differ");
}
