//! PD convergence (issue 2, items 4–5), asserted from `log.json` of real CLI runs.

use crate::common;
use common::{iterations, run_cli};

fn cantilever_small(het_scale: f64) -> String {
    common::fixture(
        "scenes/convergence/cantilever_small",
        &[&format!("body.0.region.0.scale={het_scale}")],
    )
}

fn bands_tet(contrast: f64) -> String {
    let mid = contrast.sqrt();
    common::fixture(
        "scenes/convergence/bands_tet",
        &[
            &format!("body.0.region.0.scale={mid}"),
            &format!("body.0.region.1.scale={contrast}"),
        ],
    )
}

/// Total PD iterations of a run (a frame that hits the cap counts as the cap) and whether
/// every frame converged.
fn total_iters(scene: &str, window: &str, frames: &str) -> (u64, bool, serde_json::Value) {
    let r = run_cli(
        "simulate",
        scene,
        &[],
        &[
            "--set",
            &format!("solver.anderson_window={window}"),
            "--set",
            "solver.rel_tol=1e-5",
            "--set",
            "solver.max_iterations=3000",
            // the paper's PD (what Anderson accelerates); plain PD may miss the cap
            "--set",
            "solver.method=\"diffphd\"",
            "--set",
            "solver.mode=\"paper\"",
            "--set",
            "solver.on_nonconvergence=\"warn\"",
            "--frames",
            frames,
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let log = r.log();
    let all = log["frames"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["converged"].as_bool().unwrap());
    (iterations(&log).iter().sum(), all, log)
}

#[test]
fn anderson_beats_plain_pd_homogeneous_and_heterogeneous() {
    for (name, scene, frames) in [
        ("homogeneous cantilever", cantilever_small(1.0), "5"),
        (
            "100x heterogeneous cantilever",
            cantilever_small(100.0),
            "5",
        ),
        ("100x heterogeneous NH tet bands", bands_tet(100.0), "8"),
    ] {
        let (plain, plain_ok, _) = total_iters(&scene, "0", frames);
        let (auto, auto_ok, log) = total_iters(&scene, "\"auto\"", frames);
        let window = log["header"]["anderson_window"].as_u64().unwrap();
        eprintln!("{name}: plain PD {plain} iterations (all frames converged: {plain_ok}), Anderson (m = {window}) {auto}");
        assert!(auto_ok, "{name}: Anderson did not converge every frame");
        assert!(auto < plain, "{name}: Anderson {auto} >= plain {plain}");
    }
}

#[test]
fn high_contrast_scenes_converge_every_frame() {
    for contrast in [100.0, 1000.0] {
        // PD's convergence (`auto` picks Newton at this contrast)
        let r = run_cli(
            "simulate",
            &bands_tet(contrast),
            &[],
            &["--solver", "diffphd"],
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        let log = r.log();
        assert_eq!(log["status"], "completed");
        assert_eq!(log["summary"]["nonconverged_frames"].as_u64(), Some(0));
        assert!(log["header"]["heterogeneous"].as_bool().unwrap());
        for f in log["frames"].as_array().unwrap() {
            assert!(f["gate_position"].as_f64().unwrap() <= 1.0);
            assert!(f["gate_projection"].as_f64().unwrap() <= 1.0);
        }
        let its = iterations(&log);
        eprintln!("contrast {contrast}: iterations per frame {its:?}");
        assert!(its.iter().all(|&k| k < 20000));
    }
}

/// The Armadillo scan scene (issue 6): bands, supports and loads resolve as the scene file
/// says, and the first frames converge at the extreme contrast. The full 30-frame sweep over
/// 1x…1000x is `scripts/armadillo_contrast.sh` (docs/BENCHMARKS.md).
#[test]
fn armadillo_scene_resolves_and_converges_at_1000x() {
    use diffphd::solver::{Model, Simulator};
    let path = common::repo().join("scenes/armadillo_twist.toml");
    let sets: Vec<String> = [
        "body.0.region.0.scale=0.0316227766",
        "body.0.region.1.scale=31.6227766",
        "simulation.frames=2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let ls = diffphd::scene::load(&path, &sets).expect("scene loads");
    let model = Model::from_scene(&ls).expect("model builds");
    assert_eq!(model.num_nodes(), 14747);
    assert_eq!(model.num_elements(), 68434);
    // three non-empty bands, contrast 1000 between the softest and the stiffest
    let e = &model.params.youngs;
    let count = |v: f64| e.iter().filter(|&&x| (x / v - 1.0).abs() < 1e-9).count();
    let (soft, mid, stiff) = (
        count(5e5 * 0.0316227766),
        count(5e5),
        count(5e5 * 31.6227766),
    );
    assert_eq!(soft + mid + stiff, e.len());
    assert!(
        soft > 5000 && mid > 5000 && stiff > 5000,
        "{soft} {mid} {stiff}"
    );
    // feet fully clamped, head held in z, a twist load on each hand
    assert_eq!(model.dirichlet.len(), 2);
    assert!(model.dirichlet[0].nodes.len() > 100 && model.dirichlet[0].axes == [true; 3]);
    assert!(
        !model.dirichlet[1].nodes.is_empty() && model.dirichlet[1].axes == [false, false, true]
    );
    assert_eq!(model.forces.len(), 2);
    for g in &model.forces {
        assert!(g.nodes.len() > 100);
        // tangential about z through the origin: no vertical or radial component
        for (&i, f) in g.nodes.iter().zip(&g.forces) {
            let p = model.rest[i];
            assert!(f[2].abs() < 1e-15 && (f[0] * p[0] + f[1] * p[1]).abs() < 1e-12);
        }
    }
    let mut sim = Simulator::new(&model, &ls.scene.solver).expect("factor");
    let (mut x, mut v) = (model.x0.clone(), model.v0.clone());
    for frame in 1..=2 {
        let (xn, st) = sim.step(frame, &x, &v).expect("step");
        assert!(st.converged, "frame {frame}: {st:?}");
        assert!(st.gate.position <= 1.0 && st.gate.projection <= 1.0);
        v = xn.iter().zip(&x).map(|(a, b)| (a - b) / model.h).collect();
        x = xn;
    }
    // the load moved the hands
    assert!(v.iter().any(|c| c.abs() > 1e-4));
}

/// Regression (displacement gate, the default since 2026-11-23): at tight tolerances
/// ε_rel‖x_k − x_t‖ + ε_abs can ask for a PD residual below what round-off allows. Example:
/// a stiff block (E 1e8) bobbing slowly on soft attachments, at ε_rel 1e-12 and ε_abs
/// 1e-16. Without a floor that block ran to the 20000-iteration cap at frame 11. The
/// gate's floor of 2.2e-12‖x_k‖ lets every frame converge in a few iterations.
#[test]
fn stiff_slow_body_converges_under_the_displacement_gate() {
    let scene = &common::fixture("scenes/convergence/stiff_slow_body", &[]);
    let r = run_cli("simulate", scene, &[], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let log = r.log();
    assert_eq!(log["header"]["gate_reference"], "displacement");
    let its = iterations(&log);
    eprintln!("iterations per frame: {its:?}");
    assert_eq!(log["summary"]["nonconverged_frames"].as_u64(), Some(0));
    assert!(its.iter().all(|&k| k < 500), "{its:?}");
}
