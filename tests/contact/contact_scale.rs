//! The contact solve at scale (issue 16 items 1–2): the napkin ladder at CI size.
//!
//! `scenes/napkin.toml` shrunk to 8×8×1 hexes (same 0.4 m width) by `--set`, dropped on the
//! shipped sphere for 40 frames: it reaches ≈ 24 % active contacts (active / nodes), the
//! second rung of the ladder. Checked: no penetration beyond the contact tolerance, the contact
//! fraction in its band, and the matrix-free Newton–Krylov solve (`contact.solver =
//! "iterative"`) against the dense reference (`"dense"`): states and a gradient through
//! frictional contact, including the heterogeneous (0.1× soft half) napkin.

use crate::common;

use diffphd::model::Model;
use diffphd::optimize::problem::Problem;
use diffphd::solver::{rollout, Simulator};

/// The shipped napkin scene (shrunk by [`sets`]).
fn napkin() -> String {
    std::fs::read_to_string(common::repo().join("scenes/napkin.toml")).unwrap()
}

/// `--set`s of the CI napkin: 8×8×1, `frames`, contact solver `solver`, plus `extra`.
fn sets(frames: usize, solver: &str, extra: &[&str]) -> Vec<String> {
    let mut s = vec![
        "body.0.mesh.cells=[8, 8, 1]".to_string(),
        "body.0.mesh.dx=0.05".to_string(),
        format!("simulation.frames={frames}"),
        format!("contact.solver=\"{solver}\""),
        // tight PD convergence, so that the two contact solvers are compared, not two
        // PD truncations
        "solver.rel_tol=1e-11".to_string(),
        "solver.abs_tol=1e-14".to_string(),
        "solver.max_iterations=5000".to_string(),
    ];
    s.extend(extra.iter().map(|e| e.to_string()));
    s
}

struct Run {
    states: Vec<Vec<f64>>,
    max_active: usize,
    max_penetration: f64,
    complementarity: f64,
    nodes: usize,
}

fn run(frames: usize, solver: &str, extra: &[&str]) -> Run {
    let s = sets(frames, solver, extra);
    let s: Vec<&str> = s.iter().map(|x| x.as_str()).collect();
    let ls = common::load(&napkin(), &s);
    let model = Model::from_scene(&ls).unwrap();
    let mut sim = Simulator::new(&model, &ls.scene.solver).unwrap();
    let loss = diffphd::solver::loss::Loss::default();
    let ro = rollout::forward(&mut sim, frames, 1, &loss).unwrap();
    assert!(
        ro.steps.iter().all(|s| s.converged),
        "{solver}: a step did not converge"
    );
    let c = |f: fn(&diffphd::contact::ContactStats) -> f64| {
        ro.steps
            .iter()
            .filter_map(|s| s.contact.as_ref().map(f))
            .fold(0.0, f64::max)
    };
    Run {
        states: ro.all_states().unwrap(),
        max_active: c(|s| s.active as f64) as usize,
        max_penetration: c(|s| s.max_penetration),
        complementarity: c(|s| s.complementarity),
        nodes: model.num_nodes(),
    }
}

fn max_diff(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    a.iter()
        .zip(b)
        .flat_map(|(x, y)| x.iter().zip(y).map(|(p, q)| (p - q).abs()))
        .fold(0.0, f64::max)
}

/// The CI napkin: penetration within the contact tolerance, ≈ 24 % active contacts, and
/// the iterative solve reproduces the dense one.
#[test]
fn ci_napkin_iterative_matches_dense() {
    let frames = 40;
    let it = run(frames, "iterative", &[]);
    let de = run(frames, "dense", &[]);
    let frac = it.max_active as f64 / it.nodes as f64;
    eprintln!(
        "CI napkin: {} nodes, max active {} ({:.1} %), penetration {:.1e} m, |Phi| {:.1e}",
        it.nodes,
        it.max_active,
        100.0 * frac,
        it.max_penetration,
        it.complementarity
    );
    assert!((0.18..=0.30).contains(&frac), "contact fraction {frac}");
    // contact.tolerance (1e-12 m) on the linearised gaps; the sphere's curvature adds a
    // second-order term over one step's slip
    assert!(it.max_penetration <= 1e-10, "{}", it.max_penetration);
    assert!(it.complementarity <= 1e-12, "{}", it.complementarity);
    assert_eq!(it.max_active, de.max_active);
    let d = max_diff(&it.states, &de.states);
    eprintln!("max |x_iterative - x_dense| = {d:.2e} m");
    assert!(d <= 1e-9, "states differ by {d:e} m");
}

/// dL/dθ through 25 frames of frictional napkin contact (log E, friction, obstacle offset),
/// heterogeneous napkin (x < 0 half 0.1× softer): the iterative adjoint (GMRES on $G_c$ with
/// the matrix-free $W$) equals the dense-LU one.
#[test]
fn ci_napkin_gradient_iterative_matches_dense() {
    let grad = |solver: &str| {
        let s = sets(
            25,
            solver,
            &[
                "body.0.region.0.scale=0.1",
                "backward.rel_tol=1e-12",
                r#"loss.term=[{ type = "random_linear", seed = 5 }]"#,
                r#"parameter=[
                    { kind = "youngs_modulus", log = true },
                    { kind = "friction", obstacle = 0 },
                    { kind = "obstacle_offset", obstacle = 0, component = 0 },
                ]"#,
            ],
        );
        let s: Vec<&str> = s.iter().map(|x| x.as_str()).collect();
        let p = Problem::new(common::load(&napkin(), &s)).unwrap();
        let ev = p.evaluate(&p.theta0(), true).unwrap();
        assert!(ev.nonconverged_backward_frames.is_empty(), "{solver}");
        ev.gradient
    };
    let gi = grad("iterative");
    let gd = grad("dense");
    eprintln!("iterative {gi:?}\ndense     {gd:?}");
    for (a, b) in gi.iter().zip(&gd) {
        assert!(
            (a - b).abs() <= 1e-6 * b.abs().max(1e-12),
            "gradient {a} vs {b}"
        );
    }
    assert!(gd.iter().all(|g| g.abs() > 0.0));
}

/// The matrix-free solve of a small contact problem through the FD gradient check (smoothed
/// contact, friction, a curved obstacle): the sliding block on a sphere of
/// `tests/contact/contact_gradients.rs` with `contact.solver = "iterative"` forced (its 9 contacts
/// would take the dense path under `"auto"`).
#[test]
fn iterative_adjoint_gradcheck_block_on_sphere() {
    // without the centre-of-mass loss term
    let text = common::scenes::block_on_sphere(
        1e-10,
        &[
            r#"loss.term=[{ type = "random_linear", seed = 11 }]"#,
            "contact.solver=\"iterative\"",
        ],
    );
    assert!(!text.contains("center_of_mass") && text.contains("solver = \"iterative\""));
    let (rep, _) = common::gradcheck_text(&text, 1e-4, 4);
    common::assert_all_pass("block on a sphere, iterative contact solve", &rep);
}
