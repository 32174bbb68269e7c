//! Multi-body stack at CI size (issue 16 item 4; the full scene is `scenes/stack.toml`):
//! five bodies of contrasting stiffness — rigid-like claws (E = 2e7 Pa, 1000× the
//! softest), cookies (1e5) and a cream layer (2e4) — squeezed between two grippers that move
//! towards each other (all their nodes prescribed). Body–body contact with friction.

use crate::common;

use diffphd::optimize::gradcheck::{self, Options};
use diffphd::optimize::problem::Problem;
use diffphd::solver::Model;

/// One layer: hex box of `cells` × `dx` centred on the z axis (shifted by `shift` in x/y),
/// bottom at `z0`, Young's modulus `e`, as a `[[body]]` inline table.
fn layer(name: &str, cells: [usize; 3], dx: f64, z0: f64, shift: f64, e: f64) -> String {
    let ox = -(cells[0] as f64) * dx / 2.0 + shift;
    let oy = -(cells[1] as f64) * dx / 2.0 - shift;
    format!(
        "name = \"{name}\", \
         mesh = {{ generator = \"box\", element = \"hex8\", cells = [{}, {}, {}], dx = {dx}, origin = [{ox}, {oy}, {z0}] }}, \
         material = {{ model = \"corotated\", youngs_modulus = {e:e}, poisson_ratio = 0.3, density = 1000.0 }}",
        cells[0], cells[1], cells[2]
    )
}

/// A gripper plate moving along z at `vz` (every node prescribed).
fn gripper(name: &str, z0: f64, vz: f64) -> String {
    format!(
        "{}, dirichlet = [{{ select = {{ all = true }}, motion = {{ type = \"translate\", velocity = [0.0, 0.0, {vz}] }} }}]",
        layer(name, [2, 2, 1], 0.015, z0, 0.0, 1e7)
    )
}

/// Forward stopping rule of the squeeze test: the paper's dual gate at 1e-13, relative to
/// the step's displacement (the default reference; its round-off floor 2.2e-12‖x‖ is what
/// binds).
const GATE_SQUEEZE: &[&str] = &["solver.rel_tol=1e-13"];

/// Forward stopping rule of the gradient check: the position gate (no round-off floor) at
/// 1e-14‖x‖ with an Anderson window of 10. Why (measured, docs/contact.md §6): under
/// [`GATE_SQUEEZE`] a step stops 1e-13–1e-12 m from its fixed point (PD contracts at
/// ≈ 0.9–0.99 per iteration near it), the loss's final velocity $(x_T-x_{T-1})/h$
/// multiplies that by 1/h = 500, and the loss carries 1.7e-10 of noise — 8.5e-8 in a
/// central difference at step 1e-3, 1e-3 of dL/d log E of the claw. This gate: 7.7e-12 of
/// noise for 1.2× the PD iterations. (The window must be set: `"auto"` picks 1 with the
/// position gate on a heterogeneous scene, which needs 10× the iterations here.)
const GATE_GRADCHECK: &[&str] = &[
    "solver.gate_reference=\"position\"",
    "solver.rel_tol=1e-14",
    "solver.anderson_window=10",
];

/// CI stack (`scenes/contact_stack/stack.toml`): grippers closing at 2 × `v` for `frames`
/// steps of 2 ms, claws `e_claw`, PD stopping rule `gate` (`[solver]` sets), `params` the
/// `parameter` array (a TOML inline array) or empty.
fn stack(
    frames: usize,
    smoothing: f64,
    e_claw: f64,
    v: f64,
    mu: f64,
    gate: &[&str],
    params: &str,
) -> String {
    let bodies = [
        gripper("gripper bottom", -0.035, v),
        layer("claw bottom", [2, 2, 1], 0.008, -0.0195, 0.0003, e_claw),
        layer("cookie bottom", [3, 3, 1], 0.006, -0.011, -0.0004, 1e5),
        layer("cream", [3, 3, 1], 0.005, -0.0045, 0.0002, 2e4),
        layer("cookie top", [3, 3, 1], 0.006, 0.001, 0.0005, 1e5),
        layer("claw top", [2, 2, 1], 0.008, 0.0075, -0.0002, e_claw),
        gripper("gripper top", 0.016, -v),
    ];
    let mut sets = vec![
        format!("simulation.frames={frames}"),
        format!("body=[{{ {} }}]", bodies.join(" }, { ")),
        format!("contact.body_friction={mu}"),
        format!("contact.smoothing={smoothing:e}"),
    ];
    if !params.is_empty() {
        sets.push(format!("parameter={params}"));
    }
    common::fixture_sets("scenes/contact_stack/stack", &sets, gate)
}

/// (active contacts, max penetration) per frame; panics on a non-converged step.
fn rollout(text: &str) -> Vec<(usize, f64)> {
    let ls = common::load(text, &[]);
    let model = Model::from_scene(&ls).unwrap();
    common::converged_steps(&model, &ls.scene.solver)
        .into_iter()
        .map(|st| {
            let c = st.contact.unwrap_or_default();
            (c.active, c.max_penetration)
        })
        .collect()
}

/// The squeeze completes at the stiffest setting (claws 1000× the cream), every
/// interface in contact, no node of one body inside another beyond 2e-5 m.
#[test]
fn five_body_stack_squeeze_completes() {
    let frames = rollout(&stack(25, 0.0, 2e7, 0.04, 0.5, GATE_SQUEEZE, ""));
    for (f, (a, p)) in frames.iter().enumerate() {
        eprintln!("frame {:2}: active {a:3} penetration {p:.2e}", f + 1);
    }
    let (active, _) = frames.last().unwrap();
    // six interfaces (gripper–claw, claw–cookie, cookie–cream twice, cookie–claw, claw–gripper)
    assert!(
        *active >= 24,
        "stack not squeezed: {active} active contacts"
    );
    let pen = frames.iter().map(|f| f.1).fold(0.0, f64::max);
    assert!(pen <= 2e-5, "penetration {pen:e} m");
}

/// `gradcheck` of the rows `only`, base step `eps` (`None`: each kind's default) and the
/// sweep over `decades` decades below ten times it: every row within 1e-4 of central
/// differences, of a size that a zero gradient cannot pass, every step converged.
fn check_rows(problem: &Problem, only: &[&str], eps: Option<f64>, decades: usize) {
    let opts = Options {
        only: only.iter().map(|s| s.to_string()).collect(),
        eps,
        rtol: 1e-4,
        atol: 0.0,
        decades,
        expect_zero: vec![],
    };
    let rep = gradcheck::check(problem, &opts).expect("check runs");
    eprint!("{}", gradcheck::table(&rep));
    assert_eq!(rep.rows.len(), only.len());
    common::assert_all_pass("stack, smoothed", &rep);
    assert!(rep.rows.iter().all(|r| r.adjoint.abs() > 1e-5));
}

/// Gradients through the squeezed stack (smoothed, frictionless contact) against central
/// differences, every row within 1e-4; claws 100× the cream (at 1000× the fixed-point
/// adjoint of the contact-free first frames does not converge within 5000 iterations; GMRES
/// fails in the contact frames). 10 frames: the squeeze is on (86 active contacts at the end).
///
/// What makes this check demanding is the finite-difference side, not the adjoint
/// (docs/contact.md §6, measured): dL/d log E of the claw is ~1e-3 of the gradient, so 1e-4
/// asks the central difference for ~1e-8 absolute. That needs the forward's
/// [`GATE_GRADCHECK`] (loss noise ~1e-11) and steps where neither the noise nor the
/// truncation reaches 1e-4 of the row:
/// - log E: steps 1e-1 and 1e-2 (truncation 1.5e-5 of the claw's row at 1e-2; at 1e-3 the
///   noise alone is 1e-5–1e-4 of it, and the sweep's pick of the best-agreeing pair then
///   lands on a noisy one by chance: measured 1.2e-4 with m = 12);
/// - v0: 1e-2 … 1e-5 (the smoothed contacts' curvature leaves 1e-3 of truncation error in
///   dL/dv_z at the 1e-4 step).
///
/// Once the squeeze locks the stack along z, dL/dv_z of the cookie decays (5.1e-2 at 10
/// frames, 2.7e-3 at 12, 2.5e-4 = 1.3e-3 of the gradient at 14, 1.5e-4 at 16); at 14 frames
/// the loss's noise floor (1.5e-12–5e-12 for rel_tol 5e-15–1e-15: round-off × 1/h) is above
/// what 1e-4 of that row needs (5e-13), and it agreed to 3.8e-5 only once, with a forward
/// converged to round-off (20× the PD iterations) — hence the 10-frame horizon.
#[test]
fn stack_smoothed_gradients() {
    let params = r#"[
        { kind = "youngs_modulus", body = 3, log = true },
        { kind = "youngs_modulus", body = 1, log = true },
        { kind = "initial_velocity", body = 2 },
    ]"#;
    let text = stack(10, 1e-10, 2e6, 0.08, 0.0, GATE_GRADCHECK, params);
    let frames = rollout(&text);
    assert!(frames.last().unwrap().0 >= 12, "no squeeze in the horizon");
    let problem = Problem::new(common::load(&text, &[])).expect("problem builds");
    let moduli = ["log youngs_modulus[3]", "log youngs_modulus[1]"];
    check_rows(&problem, &moduli, Some(1e-2), 1);
    let velocity = [
        "initial_velocity[2].x",
        "initial_velocity[2].y",
        "initial_velocity[2].z",
    ];
    check_rows(&problem, &velocity, None, 4);
}
