//! Physics against known answers (issue 2, items 2–3): free fall and Euler–Bernoulli.

mod common;
use diffphd::solver::{Model, Simulator};

/// An unconstrained body under gravity must follow the discrete implicit-Euler free fall
/// $v_{t+1}=v_t+hg$, $x_{t+1}=x_t+hv_{t+1}$ exactly (a rigid translation leaves every
/// $F=I$, so the PD projections reproduce the rest shape): agreement to round-off.
#[test]
fn free_fall_matches_implicit_euler_to_round_off() {
    for (model_name, element) in [("corotated", "hex8"), ("neohookean", "tet4")] {
        let scene = format!(
            r#"schema_version = 1
[simulation]
dt = 0.005
frames = 20
gravity = [0.3, -1.0, -9.81]
[[body]]
[body.mesh]
generator = "box"
element = "{element}"
cells = [3, 2, 2]
dx = 0.05
[body.material]
model = "{model_name}"
youngs_modulus = 1e6
poisson_ratio = 0.3
density = 1000.0
[body.initial]
velocity = [0.5, 0.0, 1.0]
[solver]
rel_tol = 1e-12
abs_tol = 1e-14
"#
        );
        let ls = common::load(&scene, &[]);
        let model = Model::from_scene(&ls).unwrap();
        let mut sim = Simulator::new(&model, &ls.scene.solver).unwrap();
        let h = model.h;
        let g = model.gravity;
        let (mut x, mut v) = (model.x0.clone(), model.v0.clone());
        let (mut xe, mut ve) = (model.x0.clone(), model.v0.clone());
        for frame in 1..=model.frames {
            let (xn, stats) = sim.step(frame, &x, &v).unwrap();
            assert!(stats.converged);
            v = xn.iter().zip(&x).map(|(a, b)| (a - b) / h).collect();
            x = xn;
            for k in 0..xe.len() {
                ve[k] += h * g[k % 3];
                xe[k] += h * ve[k];
            }
        }
        let err = x
            .iter()
            .zip(&xe)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        let scale = xe.iter().map(|a| a.abs()).fold(0.0, f64::max);
        assert!(
            err <= 1e-12 * scale.max(1.0),
            "{model_name}/{element}: free-fall error {err:e}"
        );
    }
}

/// Tip deflection of a clamped cantilever under its own weight, settled quasi-statically.
/// Corotated+volume PD with ν = 0 (so λ = 0 and the corotated term alone is linear
/// elasticity with E = 2μ; the volume surrogate is switched off). Returns (δ, δ_EB).
fn cantilever_deflection(cells: [usize; 3], dx: f64) -> (f64, f64) {
    let (e, rho, gz): (f64, f64, f64) = (1e9, 1000.0, -9.81);
    let scene = format!(
        r#"schema_version = 1
[simulation]
dt = 0.2
frames = 12
gravity = [0.0, 0.0, {gz}]
[[body]]
[body.mesh]
generator = "box"
element = "hex8"
cells = [{}, {}, {}]
dx = {dx}
[body.material]
model = "corotated"
youngs_modulus = {e}
poisson_ratio = 0.0
density = {rho}
[body.damping]
alpha = 20.0
[[body.dirichlet]]
select = {{ face = "x_min" }}
[solver]
rel_tol = 1e-10
abs_tol = 1e-14
"#,
        cells[0], cells[1], cells[2]
    );
    let ls = common::load(&scene, &[]);
    let model = Model::from_scene(&ls).unwrap();
    let mut sim = Simulator::new(&model, &ls.scene.solver).unwrap();
    let (mut x, mut v) = (model.x0.clone(), model.v0.clone());
    for frame in 1..=model.frames {
        let (xn, st) = sim.step(frame, &x, &v).unwrap();
        assert!(st.converged, "frame {frame} did not converge");
        v = xn.iter().zip(&x).map(|(a, b)| (a - b) / model.h).collect();
        x = xn;
    }
    let vmax = v.iter().map(|a| a.abs()).fold(0.0, f64::max);
    let l = cells[0] as f64 * dx;
    let (b, hh) = (cells[1] as f64 * dx, cells[2] as f64 * dx);
    let tip: Vec<usize> = (0..model.num_nodes())
        .filter(|&i| (model.rest[i][0] - l).abs() < 1e-9)
        .collect();
    let delta = -tip
        .iter()
        .map(|&i| x[3 * i + 2] - model.rest[i][2])
        .sum::<f64>()
        / tip.len() as f64;
    let q = rho * gz.abs() * b * hh;
    let inertia = b * hh.powi(3) / 12.0;
    let eb = q * l.powi(4) / (8.0 * e * inertia);
    assert!(vmax < 1e-3 * eb, "not settled: max |v| = {vmax:e}");
    (delta, eb)
}

#[test]
fn cantilever_matches_euler_bernoulli_and_converges_under_refinement() {
    // L/h = 10; refine through the thickness.
    let (d1, eb) = cantilever_deflection([20, 2, 2], 0.025);
    let (d2, _) = cantilever_deflection([40, 4, 4], 0.0125);
    let e1 = (d1 - eb).abs() / eb;
    let e2 = (d2 - eb).abs() / eb;
    eprintln!(
        "Euler-Bernoulli {eb:.6e}: coarse {d1:.6e} ({:.2}%), fine {d2:.6e} ({:.2}%)",
        100.0 * e1,
        100.0 * e2
    );
    assert!(e2 < e1, "error must shrink under refinement: {e1} -> {e2}");
    assert!(e2 < 0.05, "fine-mesh error {:.2}% exceeds 5%", 100.0 * e2);
}
