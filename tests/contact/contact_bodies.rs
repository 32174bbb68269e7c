//! Contact between the bodies of one scene (issue 4): node against the other body's boundary
//! triangles (`[contact] bodies = true`). A stiff body striking a soft one must not
//! penetrate it beyond the stated tolerance, and gradients through body–body contact agree
//! with central finite differences within 1e-4 (smoothed FB, and hard contact where the
//! finite-difference steps cross no switch).

use crate::common;

use common::scenes::two_bodies;
use diffphd::solver::Model;

/// The cube's initial velocity and density, both bodies' log Young's moduli.
const PARAMS: &str = r#"[
  { kind = "initial_velocity", body = 1 },
  { kind = "youngs_modulus", body = 0, log = true },
  { kind = "youngs_modulus", body = 1, log = true },
  { kind = "density", body = 1 },
]"#;

/// Smoothed body–body contact with friction: impact, compression, sliding; every
/// parameter within 1e-4 of central differences.
#[test]
fn two_bodies_smoothed_gradients() {
    let text = two_bodies(1e-10, 0.3, 12, PARAMS);
    // the horizon must contain active body–body contacts
    let model = Model::from_scene(&common::load(&text, &[])).unwrap();
    let settings = common::load(&text, &[]).scene.solver.clone();
    let ro = forward_rollout(&model, &settings);
    let active: usize = ro.iter().map(|(a, _)| *a).max().unwrap();
    assert!(active >= 4, "no body contact in the horizon: {active}");
    let (rep, _) = common::gradcheck_text(&text, 1e-4, 4);
    common::assert_all_pass("two bodies, smoothed", &rep);
}

/// Hard body–body contact (2ε² = 0): the step map is only piecewise smooth, but here the
/// finite-difference steps cross no switch, so every row must agree within 1e-4
/// (docs/contact.md §6 measured ≤ 2.3e-6).
#[test]
fn two_bodies_hard_report() {
    let text = two_bodies(0.0, 0.3, 12, PARAMS);
    let (rep, _) = common::gradcheck_text(&text, 1e-4, 4);
    for r in &rep.rows {
        eprintln!("two bodies, hard: {} rel.err {:.2e}", r.name, r.rel_error);
    }
    common::assert_all_pass("two bodies, hard", &rep);
}

/// Per frame (active contacts, max penetration) of a forward rollout.
fn forward_rollout(model: &Model, settings: &diffphd::scene::SolverSettings) -> Vec<(usize, f64)> {
    common::converged_steps(model, settings)
        .into_iter()
        .map(|st| {
            let c = st.contact.unwrap();
            (c.active, c.max_penetration)
        })
        .collect()
}

/// The stiff cube of `scenes/stiff_strikes_soft.toml` striking the soft slab (first 30
/// frames: approach, impact, maximum compression at ~1 N·s impulse): both directions of
/// node–triangle contact are active and no node of either body enters the other beyond
/// 5e-5 m (0.25 % of the 2 cm element; the residual penetration comes from the frozen
/// linearised frame: triangle rotation within a step and edge regions, see docs/contact.md).
#[test]
fn stiff_body_strikes_soft_body() {
    let path = common::repo().join("scenes/stiff_strikes_soft.toml");
    let ls = diffphd::scene::load(&path, &["simulation.frames=30".to_string()]).unwrap();
    let model = Model::from_scene(&ls).unwrap();
    let settings = ls.scene.solver.clone();
    let frames = forward_rollout(&model, &settings);
    let active = frames.iter().map(|f| f.0).max().unwrap();
    let pen = frames.iter().map(|f| f.1).fold(0.0, f64::max);
    eprintln!("stiff strikes soft: max active {active}, max penetration {pen:.3e} m");
    assert!(
        active >= 9,
        "the cube's bottom face must be in contact: {active}"
    );
    assert!(pen < 5e-5, "penetration {pen:e} m");
    // without body contact the cube passes through the slab
    let ls0 = diffphd::scene::load(
        &path,
        &[
            "simulation.frames=30".to_string(),
            "contact.bodies=false".to_string(),
        ],
    )
    .unwrap();
    let m0 = Model::from_scene(&ls0).unwrap();
    let pen0 = diffphd::contact::bodies::max_penetration(&m0, &{
        let mut sim = diffphd::solver::Simulator::new(&m0, &settings).unwrap();
        let (mut x, mut v) = (m0.x0.clone(), m0.v0.clone());
        for f in 1..=m0.frames {
            let (xn, _) = sim.step(f, &x, &v).unwrap();
            v = xn.iter().zip(&x).map(|(a, b)| (a - b) / m0.h).collect();
            x = xn;
        }
        x
    });
    assert!(pen0 > 1e-3, "control run should penetrate: {pen0:e}");
}
