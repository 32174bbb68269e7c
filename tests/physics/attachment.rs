//! Bilateral attachments (`[[body.attachment]]`, issue 4): a compliant attachment is the PD
//! energy (k/2)‖x_i − p_i(t)‖² (k on the diagonal of A, k p_i(t) on the right-hand side).
//! Checked: the static stretch of a stiff block hanging from its top face against
//! m g / (n k); a hard attachment (compliance 0) holds its nodes; dL/dk and dL/d(target
//! offset) of a moving attachment against central finite differences.

use crate::common;

use diffphd::optimize::problem::Problem;
use diffphd::solver::{rollout, Model, Simulator};

/// A 2×2×2 hex block (0.1 m, ρ 1000, E 1e8) whose top face hangs from attachments with
/// `compliance`, under gravity, h 10 ms, mass damping α = 20 1/s; `extra` sets last.
fn hanging(compliance: f64, frames: usize, extra: &[&str]) -> String {
    let sets = [
        format!("simulation.frames={frames}"),
        format!("body.0.attachment.0.compliance={compliance:e}"),
    ];
    common::fixture_sets("scenes/physics/hanging_block", &sets, extra)
}

fn run(model: &Model, ls: &diffphd::scene::LoadedScene) -> Vec<f64> {
    let mut sim = Simulator::new(model, &ls.scene.solver).unwrap();
    let (mut x, mut v) = (model.x0.clone(), model.v0.clone());
    for f in 1..=model.frames {
        let (xn, st) = sim.step(f, &x, &v).unwrap();
        assert!(st.converged, "frame {f}");
        v = xn.iter().zip(&x).map(|(a, b)| (a - b) / model.h).collect();
        x = xn;
    }
    x
}

/// Static equilibrium: the n = 9 top nodes of a (nearly rigid) 1 kg block each carry
/// m g / n, so they sink by m g / (n k); the measured mean sink agrees to 1e-3 relative.
#[test]
fn hanging_block_stretches_by_mg_over_k() {
    let c = 1e-2; // k = 100 N/m per node
    let ls = common::load(&hanging(c, 300, &[]), &[]);
    let model = Model::from_scene(&ls).unwrap();
    assert_eq!(model.attachments.len(), 1);
    let g = &model.attachments[0];
    assert_eq!(g.nodes.len(), 9);
    let mass: f64 = model.derive(&model.params).mass.iter().sum();
    assert!((mass - 1.0).abs() < 1e-9, "{mass}");
    let expected = mass * 9.81 / (9.0 * (1.0 / c));
    let x = run(&model, &ls);
    let sink: f64 = g
        .nodes
        .iter()
        .map(|&i| model.x0[3 * i + 2] - x[3 * i + 2])
        .sum::<f64>()
        / 9.0;
    let rel = (sink - expected).abs() / expected;
    eprintln!("hanging: sink {sink:.6e} m, m g/(n k) = {expected:.6e} m, rel {rel:.2e}");
    assert!(rel < 1e-3, "sink {sink} vs {expected}");
    // no lateral drift
    for &i in &g.nodes {
        for d in 0..2 {
            assert!((x[3 * i + d] - model.x0[3 * i + d]).abs() < 1e-6);
        }
    }
}

/// Compliance 0 is a hard attachment (a Dirichlet group): the nodes do not move, and a
/// target point with compliance 0 is rejected with the key named.
#[test]
fn hard_attachment_holds_and_bad_input_is_named() {
    let ls = common::load(&hanging(0.0, 20, &[]), &[]);
    let model = Model::from_scene(&ls).unwrap();
    assert!(model.attachments.is_empty());
    assert_eq!(model.dirichlet.len(), 1);
    let x = run(&model, &ls);
    for &i in &model.dirichlet[0].nodes {
        for d in 0..3 {
            assert_eq!(x[3 * i + d], model.x0[3 * i + d]);
        }
    }
    // the block itself sags under gravity
    assert!(x
        .iter()
        .skip(2)
        .step_by(3)
        .zip(model.x0.iter().skip(2).step_by(3))
        .any(|(a, b)| b - a > 1e-7));
    let bad = hanging(0.0, 20, &["body.0.attachment.0.target=[0.0, 0.0, 0.2]"]);
    let err = diffphd::scene::load_str(&bad, std::path::Path::new("x.toml"), &[])
        .map(|_| ())
        .expect_err("rejected")
        .to_string();
    assert!(err.contains("attachment[0].compliance"), "{err}");
    let neg = hanging(-1.0, 20, &[]);
    let err = diffphd::scene::load_str(&neg, std::path::Path::new("x.toml"), &[])
        .map(|_| ())
        .expect_err("rejected")
        .to_string();
    assert!(err.contains("attachment[0].compliance"), "{err}");
}

/// dL/dk and dL/d(target offset) through the adjoint against central differences, for a
/// soft block hanging from a point target that translates (a moving attachment).
#[test]
fn attachment_gradients_match_finite_differences() {
    let text = hanging(
        5e-3,
        15,
        &[
            "body.0.attachment.0.target=[0.05, 0.05, 0.15]",
            r#"body.0.attachment.0.motion={ type = "translate", velocity = [0.2, 0.0, 0.1] }"#,
            "body.0.material.youngs_modulus=3e4",
            "backward={ rel_tol = 1e-12, abs_tol = 1e-20, max_iterations = 2000 }",
            r#"loss.term=[{ type = "random_linear", seed = 7 }, { type = "center_of_mass", target = [0.1, 0.0, 0.0] }]"#,
        ],
    );
    let problem = Problem::new(common::load(&text, &[])).unwrap();
    let base = problem.base.clone();
    let loss_of = |m: &Model| -> f64 {
        let mut sim = Simulator::new(m, &problem.ls.scene.solver).unwrap();
        rollout::forward(&mut sim, m.frames, 1, &problem.loss)
            .unwrap()
            .loss
    };
    let mut sim = Simulator::new(&base, &problem.ls.scene.solver).unwrap();
    let ro = rollout::forward(&mut sim, base.frames, 1, &problem.loss).unwrap();
    let br = rollout::backward(&mut sim, &ro, &problem.loss, &problem.backward).unwrap();
    assert!(br.nonconverged().is_empty());
    let k0 = base.attachments[0].stiffness;
    // dL/dk (central differences in log k)
    let fd = |f: &dyn Fn(&mut Model, f64), h: f64| -> f64 {
        let (mut a, mut b) = (base.clone(), base.clone());
        f(&mut a, h);
        f(&mut b, -h);
        (loss_of(&a) - loss_of(&b)) / (2.0 * h)
    };
    let dlogk = fd(&|m, h| m.attachments[0].stiffness = k0 * h.exp(), 1e-4);
    let adj = br.grads.attachment_stiffness[0] * k0;
    let rel = (adj - dlogk).abs() / dlogk.abs();
    eprintln!("dL/dlog k: adjoint {adj:.8e}, FD {dlogk:.8e}, rel {rel:.2e}");
    assert!(rel < 1e-4 && adj.abs() > 1e-6, "{adj} vs {dlogk}");
    for c in 0..3 {
        let d = fd(&|m, h| m.attachments[0].offset[c] += h, 1e-5);
        let adj = br.grads.attachment_offset[0][c];
        let rel = (adj - d).abs() / d.abs().max(1e-12);
        eprintln!("dL/dtau[{c}]: adjoint {adj:.8e}, FD {d:.8e}, rel {rel:.2e}");
        assert!(rel < 1e-4, "component {c}: {adj} vs {d}");
    }
}
