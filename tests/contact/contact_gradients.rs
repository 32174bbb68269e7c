//! Gradients through frictional contact against central finite differences (issue 4
//! item 4), with the `gradcheck` machinery: dL/d(initial velocity), dL/dμ and dL/d(obstacle
//! offset) for a sliding and a bouncing body with the smoothed Fischer–Burmeister model
//! (2ε² > 0, the same residuals in the forward and the backward), and hard contact (2ε² = 0)
//! where the finite-difference steps cross no switch (the same 1e-4 bound).

use crate::common;

use common::scenes::BlockOnPlane;

/// Sliding for 10 steps of 10 ms with friction throughout ([`BlockOnPlane::sliding`]).
fn sliding(smoothing: f64) -> String {
    BlockOnPlane::sliding(smoothing).text()
}

/// Falls 3 cm, hits the ground at frame 4, sticks, slips and separates again (frame 10):
/// impact, stick/slip and separation transitions inside the 15-step horizon
/// ([`BlockOnPlane::bouncing`]).
fn bouncing(smoothing: f64) -> String {
    BlockOnPlane::bouncing(smoothing).text()
}

/// Sliding: the block slides on the ground with friction throughout (dL/dμ ≠ 0).
#[test]
fn sliding_block_smoothed() {
    let (rep, _) = common::gradcheck_text(&sliding(1e-10), 1e-4, 4);
    common::assert_all_pass("sliding, smoothed", &rep);
    let mu = rep.rows.iter().find(|r| r.name == "friction[0]").unwrap();
    assert!(mu.adjoint.abs() > 1e-6, "dL/dmu vanishes: {}", mu.adjoint);
}

/// Bouncing: the block falls, hits the ground with friction and rebounds.
#[test]
fn bouncing_block_smoothed() {
    let (rep, _) = common::gradcheck_text(&bouncing(1e-10), 1e-4, 4);
    common::assert_all_pass("bouncing, smoothed", &rep);
}

/// The bouncing block on a 4×4×3 mesh (300 DoF, cost ratio ρ ≈ 46) under
/// `solver.method = "auto"` switches methods mid-rollout (issue 37, per frame): Newton solves
/// frame 1, the probe of PD on frame 2 converges within a quarter of Newton's cost and PD
/// solves the rest, contact included. Each frame is differentiated by the method that solved
/// it, and the gradient matches central differences (1e-4, four decades).
#[test]
fn bouncing_block_switching_methods_mid_rollout() {
    let text = BlockOnPlane::bouncing(1e-10)
        .text_with(&["body.0.mesh.cells=[4, 4, 3]", "solver.method=\"auto\""]);
    let (rep, problem) = common::gradcheck_text(&text, 1e-4, 4);
    common::assert_all_pass("bouncing 4x4x3, auto switching", &rep);
    let ev = problem
        .evaluate(&problem.theta0(), true)
        .expect("evaluates");
    let methods: Vec<_> = ev.frames.iter().map(|f| f.method).collect();
    use diffphd::model::SolverMethod::{Diffphd, Newton};
    assert_eq!(methods[0], Some(Newton), "{methods:?}");
    assert!(ev.frames[1].probe_budget.is_some(), "frame 2 probes PD");
    assert!(
        methods[1..].iter().all(|m| *m == Some(Diffphd)),
        "PD from the probe on: {methods:?}"
    );
}

/// Hard contact (2ε² = 0): the step map is only piecewise smooth, but in these two scenes the
/// finite-difference steps cross no impact, separation or stick/slip switch, so the adjoint
/// is exact and every row must agree within 1e-4 (docs/contact.md §6: worst 2.1e-5 sliding,
/// 2.3e-8 bouncing).
#[test]
fn hard_contact_report() {
    for (name, text) in [
        ("sliding, hard", sliding(0.0)),
        ("bouncing, hard", bouncing(0.0)),
    ] {
        let (rep, _) = common::gradcheck_text(&text, 1e-4, 4);
        for r in &rep.rows {
            eprintln!("{name}: {} rel.err {:.2e}", r.name, r.rel_error);
        }
        common::assert_all_pass(name, &rep);
    }
}

/// DiffPD's penalty model (explicit, so the adjoint only needs the chain rule through the
/// contact force): the bouncing block with a cubic penalty and capped viscous friction.
/// The penalty force is only C¹ at the onset of penetration and very stiff, so the central
/// differences need small steps: the sweep covers 5 decades (measured: at the default 3 the
/// plateau is not reached for dL/dv_z and dL/d(offset), 7e-4 and 7e-3 apart; at 1e-7 they
/// agree with the adjoint to 1e-7).
#[test]
fn bouncing_block_penalty() {
    let text = BlockOnPlane::bouncing(0.0).text_with(&[
        "contact.model=\"penalty\"",
        "contact.penalty={ stiffness = 3e6, power = 3.0, friction_viscosity = 20.0 }",
    ]);
    let (rep, _) = common::gradcheck_text(&text, 1e-4, 5);
    common::assert_all_pass("bouncing, penalty", &rep);
    let mu = rep.rows.iter().find(|r| r.name == "friction[0]").unwrap();
    assert!(mu.adjoint.abs() > 1e-6, "dL/dmu vanishes: {}", mu.adjoint);
}

/// A curved obstacle: the block lands on a sphere and slides off its top. The frozen contact
/// frame depends on $x_t$ and on the obstacle pose through the normal; the adjoint
/// differentiates it exactly (measured: ignoring it, as spec §7.5 does, gives 10–75 % errors
/// here), including the rotation of the contact force directions.
#[test]
fn block_on_sphere_smoothed() {
    let text = common::scenes::block_on_sphere(1e-10, &[]);
    let (rep, _) = common::gradcheck_text(&text, 1e-4, 4);
    common::assert_all_pass("block on a sphere, smoothed", &rep);
}

/// A moving obstacle: a box translating at 0.3 m/s pushes the block's upper edge along the
/// ground (the box stays clear of the ground so that no node touches both obstacles).
#[test]
fn pushed_by_moving_box_smoothed() {
    let text = BlockOnPlane::sliding(1e-10).text_with(&[
        r#"obstacle+={ type = "box", min = [-0.2, -0.1, 0.03], max = [-0.0001, 0.2, 0.2], friction = 0.2, motion = { type = "translate", velocity = [0.3, 0.0, 0.0] } }"#,
        "body.0.initial.velocity=[0.0, 0.0, 0.0]",
        r#"parameter+={ kind = "obstacle_offset", obstacle = 1, component = 0 }"#,
        r#"parameter+={ kind = "friction", obstacle = 1 }"#,
    ]);
    assert!(text.contains("translate") && text.contains("velocity = [0.0, 0.0, 0.0]"));
    let (rep, _) = common::gradcheck_text(&text, 1e-4, 4);
    common::assert_all_pass("pushed by a moving box, smoothed", &rep);
}

/// Contact with Dirichlet DoFs (the Delassus columns of the reduced factor): a Neo-Hookean
/// beam clamped at one end, whose clamp moves down, hits the ground with friction (material,
/// density, μ, obstacle offset and initial translation).
#[test]
fn clamped_beam_hits_ground_smoothed() {
    let text = &common::fixture("scenes/contact_gradients/clamped_beam", &[]);
    let (rep, _) = common::gradcheck_text(text, 1e-4, 4);
    common::assert_all_pass("clamped beam on the ground, smoothed", &rep);
}

/// Sum of the adjoint iterations of the frames whose adjoint ran `method`, and whether every
/// frame's adjoint converged.
fn adjoint_iterations(ev: &diffphd::optimize::problem::Evaluation, method: &str) -> (usize, bool) {
    let a: Vec<_> = ev
        .frames
        .iter()
        .filter_map(|f| f.adjoint.as_ref())
        .collect();
    let its = a
        .iter()
        .filter(|s| s.method == method)
        .map(|s| s.iterations)
        .sum();
    (its, a.iter().all(|s| s.converged))
}

/// The adjoint solver menu with NCP contact (issue 7): `woodbury` (GMRES on the step's KKT
/// system with the Woodbury block preconditioner) gives the contact-projected fixed point's
/// gradient, for smoothed and hard contact, and needs fewer Krylov iterations than the same
/// GMRES with the block-diagonal preconditioner (`gmres`: A⁻¹ on z, diag(G_c)⁻¹ on ζ); also
/// with a contact compliance (`contact.compliance`, docs/contact.md §2e).
#[test]
fn woodbury_adjoint_matches_fixed_point() {
    for (name, text) in [
        ("bouncing, smoothed", bouncing(1e-10)),
        ("bouncing, hard", bouncing(0.0)),
        ("sliding, hard", sliding(0.0)),
        // a contact compliance adds cD to dPhi/dlambda, in the KKT operator as well as in
        // G_c (a first version missed the operator: the adjoints differed by 1e-4 on the Oreo)
        (
            "bouncing, hard, compliant",
            BlockOnPlane::bouncing(0.0).text_with(&["contact.compliance=1e-4"]),
        ),
    ] {
        let eval = |method: &str| {
            let set = format!("backward.method=\"{method}\"");
            // tests PD's adjoint solvers (Newton's adjoint is a direct solve), with the
            // Krylov adjoint on contact-free frames as well
            let pd = ["solver.method=\"diffphd\"", "backward.adjoint=\"gmres\""];
            let p = diffphd::optimize::problem::Problem::new(common::load(
                &text,
                &[&set, pd[0], pd[1]],
            ))
            .expect("problem builds");
            p.evaluate(&p.theta0(), true).expect("evaluates")
        };
        let fp = eval("fixed_point");
        let wb = eval("woodbury");
        let bj = eval("gmres");
        let gnorm = fp.gradient.iter().map(|v| v * v).sum::<f64>().sqrt();
        let diff = |g: &[f64]| {
            g.iter()
                .zip(&fp.gradient)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
                .sqrt()
                / gnorm
        };
        let (itw, cw) = adjoint_iterations(&wb, "woodbury");
        let (itb, cb) = adjoint_iterations(&bj, "gmres_kkt_block_jacobi");
        let (itf, _) = adjoint_iterations(&fp, "fixed_point");
        eprintln!(
            "{name}: |g_woodbury - g_fp|/|g| = {:.2e}, |g_blockjacobi - g_fp|/|g| = {:.2e}; \
             iterations on contact frames: woodbury {itw}, block-Jacobi {itb}, fixed point {itf}",
            diff(&wb.gradient),
            diff(&bj.gradient)
        );
        assert!(cw && cb, "{name}: an adjoint did not converge");
        assert!(itw > 0, "{name}: no frame used the Woodbury solve");
        assert!(
            diff(&wb.gradient) < 1e-8,
            "{name}: woodbury gradient differs"
        );
        assert!(
            diff(&bj.gradient) < 1e-8,
            "{name}: block-Jacobi gradient differs"
        );
        assert!(
            itw < itb,
            "{name}: Woodbury {itw} vs block-Jacobi {itb} iterations"
        );
        // the forward is the same; only rayon's summation order may differ
        assert!(
            (wb.loss - fp.loss).abs() <= 1e-12 * fp.loss.abs().max(1.0),
            "{name}: losses {} vs {}",
            wb.loss,
            fp.loss
        );
    }
}

/// The Woodbury adjoint against central finite differences (smoothed contact, every
/// parameter of the bouncing block: v₀, μ, obstacle offset, log E).
#[test]
fn woodbury_adjoint_gradcheck() {
    let text = BlockOnPlane::bouncing(1e-10).text_with(&["backward.method=\"woodbury\""]);
    assert!(text.contains("method = \"woodbury\""));
    let (rep, _) = common::gradcheck_text(&text, 1e-4, 4);
    common::assert_all_pass("bouncing, smoothed, woodbury", &rep);
}

/// `pcg` assumes a symmetric positive definite adjoint: refused with NCP contact, naming the key.
#[test]
fn pcg_adjoint_is_refused_with_contact() {
    let sets = vec!["backward.method=\"pcg\"".to_string()];
    let err = diffphd::scene::load_str(&sliding(0.0), std::path::Path::new("inline.toml"), &sets)
        .expect_err("pcg with contact must be refused");
    let msg = format!("{err}");
    assert!(
        msg.contains("backward.method") && msg.contains("woodbury"),
        "{msg}"
    );
}
