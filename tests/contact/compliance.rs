//! Compliant contact (`[contact] compliance` = c, m/N): the complementarity holds for
//! $\tilde\delta=\delta(x)+c\lambda$, a spring of stiffness 1/c in series with every contact
//! row. A known answer (a resting block sinks by c times its weight per contact), the
//! gradients against central differences with obstacles and between bodies, and the check
//! that c enters the gradient at all. The Oreo's device parity, which the compliance makes
//! unique, is in `tests/gpu/gpu_contact.rs`.

use crate::common;
use common::scenes::{resting_block, BlockOnPlane};
use diffphd::solver::loss::Loss;
use diffphd::solver::{rollout, Model, Simulator};

/// The last state of a scene text's forward rollout, with its model.
fn last_state(text: &str) -> (Model, Vec<f64>) {
    let ls = common::load(text, &[]);
    let model = Model::from_scene(&ls).expect("model builds");
    let mut sim = Simulator::new(&model, &ls.scene.solver).expect("factor");
    let ro = rollout::forward(&mut sim, model.frames, 1, &Loss::default()).expect("rollout");
    let x = ro.all_states().expect("every frame kept").pop().unwrap();
    (model.clone(), x)
}

/// Mean height of the block's bottom nodes (those at rest height 0) and how many there are.
fn bottom_height(m: &Model, x: &[f64]) -> (f64, usize) {
    let bottom: Vec<usize> = (0..m.x0.len() / 3)
        .filter(|&i| m.x0[3 * i + 2].abs() < 1e-12)
        .collect();
    let mean = bottom.iter().map(|&i| x[3 * i + 2]).sum::<f64>() / bottom.len() as f64;
    (mean, bottom.len())
}

/// The 2×2×1 block at rest on the plane (mass damping, 60 steps of 10 ms: settled), all 9
/// bottom nodes in contact. Static equilibrium gives $\sum_i\lambda_{n,i}=mg$ and the compliant
/// complementarity $z_i=-c\lambda_{n,i}$ on every active node, so the bottom nodes' mean height
/// is $-c\,mg/N$ whatever the block's elasticity does to the distribution of the $\lambda_i$
/// (c = 1e-5 m/N: 5.45e-6 m for 0.5 kg on 9 nodes); with rigid contact it is 0.
#[test]
fn a_resting_block_sinks_by_c_times_its_weight_per_contact() {
    let c = 1e-5;
    let (m, rigid) = last_state(&resting_block(60, &[]));
    let (_, soft) = last_state(&resting_block(60, &[&format!("contact.compliance={c}")]));
    let mass: f64 = m.derive(&m.params).mass.iter().sum();
    let g = -m.gravity[2];
    let (z_rigid, n) = bottom_height(&m, &rigid);
    let (z_soft, _) = bottom_height(&m, &soft);
    let expect = -c * mass * g / n as f64;
    eprintln!(
        "resting block, {n} bottom nodes, {mass} kg: mean bottom height rigid {z_rigid:.3e} m, compliant {z_soft:.6e} m, expected {expect:.6e} m"
    );
    assert_eq!(n, 9);
    assert!(z_rigid.abs() <= 1e-10, "rigid contact sank {z_rigid:e} m");
    assert!(
        (z_soft - expect).abs() <= 1e-3 * expect.abs(),
        "compliant contact: {z_soft:e} m, expected {expect:e} m"
    );
}

/// Gradients through compliant obstacle contact, against central differences (1e-4, four
/// decades): the bouncing block (impact, stick, slip, separation) and the sliding block with
/// hard Fischer–Burmeister contact and c = 1e-4 m/N (a penetration of about c·λ ≈ 1e-4 m on
/// impact), every parameter of the fixture (initial velocity, μ, obstacle offset, log E);
/// the bouncing block also with the matrix-free contact solve and with the Newton stepper.
/// The compliance must change the gradient: dL/dμ of the sliding block differs from the
/// rigid one by more than 1e-6 relative.
#[test]
fn compliant_obstacle_contact_gradients_match_finite_differences() {
    let comp = ["contact.compliance=1e-4"];
    let bouncing = BlockOnPlane::bouncing(0.0);
    for (name, text) in [
        ("bouncing, compliant", bouncing.text_with(&comp)),
        (
            "sliding, compliant",
            BlockOnPlane::sliding(0.0).text_with(&comp),
        ),
        // the matrix-free contact solve (forward GMRES, adjoint G_c by GMRES) and the Newton
        // stepper
        (
            "bouncing, compliant, matrix-free",
            bouncing.text_with(&[comp[0], "contact.solver=\"iterative\""]),
        ),
        (
            "bouncing, compliant, newton",
            bouncing.text_with(&[comp[0], "solver.method=\"newton\""]),
        ),
    ] {
        let (rep, _) = common::gradcheck_text(&text, 1e-4, 4);
        for r in &rep.rows {
            eprintln!(
                "{name}: {} adjoint {:.6e} rel.err {:.2e}",
                r.name, r.adjoint, r.rel_error
            );
        }
        common::assert_all_pass(name, &rep);
    }
    // dL/dmu of the sliding block, compliant and rigid: the adjoint gradient alone (the
    // compliant one was checked against central differences above)
    let mu = |text: &str| {
        let p = diffphd::optimize::problem::Problem::new(common::load(text, &[]))
            .expect("problem builds");
        let k = p.names().iter().position(|n| *n == "friction[0]");
        let ev = p.evaluate(&p.theta0(), true).expect("evaluates");
        ev.gradient[k.expect("dL/dmu row")]
    };
    let (soft, rigid) = (
        mu(&BlockOnPlane::sliding(0.0).text_with(&comp)),
        mu(&BlockOnPlane::sliding(0.0).text()),
    );
    eprintln!("sliding dL/dmu: compliant {soft:.9e}, rigid {rigid:.9e}");
    assert!(
        (soft - rigid).abs() > 1e-6 * rigid.abs(),
        "the compliance does not reach the gradient"
    );
}

/// Gradients through compliant body–body contact (the cube striking the slab, hard contact,
/// friction 0.3, c = 1e-4 m/N; the fixture of `scenes::two_bodies`): initial velocity, both
/// log E and the density, within 1e-4 of central differences.
#[test]
fn compliant_body_contact_gradients_match_finite_differences() {
    let params = r#"[
  { kind = "initial_velocity", body = 1 },
  { kind = "youngs_modulus", body = 0, log = true },
  { kind = "youngs_modulus", body = 1, log = true },
  { kind = "density", body = 1 },
]"#;
    let text = common::fixture(
        "scenes/two_bodies",
        &[
            "simulation.frames=12",
            "contact.body_friction=0.3",
            "contact.smoothing=0.0",
            &format!("parameter={params}"),
            "contact.compliance=1e-4",
        ],
    );
    let (rep, _) = common::gradcheck_text(&text, 1e-4, 4);
    for r in &rep.rows {
        eprintln!(
            "two bodies, compliant: {} rel.err {:.2e}",
            r.name, r.rel_error
        );
    }
    common::assert_all_pass("two bodies, compliant", &rep);
}

/// Bad values of `contact.compliance` exit 2 with one line naming the key: negative, not a
/// number, with the penalty model (which has its own stiffness), and with the DiffPD baseline
/// (whose glue contact holds active nodes on the obstacle).
#[test]
fn bad_compliance_is_a_one_line_error() {
    let text = resting_block(2, &[]);
    for sets in [
        vec!["contact.compliance=-1e-6"],
        vec!["contact.compliance=nan"],
        vec!["contact.compliance=1e-6", "contact.model=\"penalty\""],
        vec!["contact.compliance=1e-6", "solver.method=\"diffpd\""],
    ] {
        let mut args = vec![];
        for s in &sets {
            args.extend(["--set", s]);
        }
        let r = common::run_cli("simulate", &text, &[], &args);
        assert_eq!(r.code, 2, "{sets:?}: exit {}: {}", r.code, r.stderr);
        assert!(
            r.stderr.contains("contact.compliance"),
            "{sets:?}: {:?} lacks the key",
            r.stderr
        );
        assert_eq!(
            r.stderr.trim().lines().count(),
            1,
            "{sets:?}: {:?}",
            r.stderr
        );
    }
}
