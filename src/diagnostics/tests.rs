//! Known answers of the diagnostics and the behaviour of implicit Euler they show: a uniform
//! stretch's energy and strains, energy that does not grow without damping, a single mode's
//! decay factor $1/(1+\omega^2h^2)$ per step, and conserved linear momentum.

use super::*;
use crate::material::eigen::sym_eigen3;
use crate::mesh::generate::box_hex;
use crate::mesh::{ElementKind, Mesh};
use crate::model::{ModelBuilder, SolverSettings};
use crate::solver::rollout::{self, Flow};
use crate::solver::Simulator;

/// Roll `model` out over its frames from its initial state; the diagnostics of frame 0 and
/// of every step.
fn rollout_diagnostics(model: &Model) -> Vec<Diagnostics> {
    let mut sim = Simulator::new(model, &SolverSettings::default()).expect("simulator");
    let mut out = vec![diagnostics(model, &sim.derived.mass, &model.x0, &model.v0)];
    rollout::run::<std::convert::Infallible>(
        &mut sim,
        0,
        model.frames,
        (model.x0.clone(), model.v0.clone()),
        |e| {
            assert!(e.stats.converged, "frame {} did not converge", e.frame);
            out.push(Diagnostics::of_event(&e));
            Ok(Flow::Continue)
        },
    )
    .map_err(|e| match e {
        rollout::RolloutError::Step { frame, error } => format!("frame {frame}: {error}"),
        rollout::RolloutError::Sink(never) => match never {},
    })
    .expect("rollout");
    out
}

/// A 3×2×2-hex box of 0.1 m cells, `u = ε (X - X_c)` along x (a uniform stretch).
fn stretched_box(eps: f64, nu: f64) -> ModelBuilder {
    let mesh = box_hex([3, 2, 2], 0.1, [0.0; 3]);
    let u = mesh
        .nodes
        .iter()
        .map(|p| [eps * (p[0] - 0.15), 0.0, 0.0])
        .collect();
    ModelBuilder::new(mesh).poisson_ratio(nu).displaced(u)
}

#[test]
fn a_uniform_stretch_has_the_analytic_energy_strain_and_centre_of_mass() {
    // ν = 0 (λ = 0): corotated ψ = μ‖F − R‖² = μ ε² for F = diag(1 + ε, 1, 1).
    let (eps, e_mod, rho) = (0.04, 2e5, 800.0);
    let g = [0.0, 0.0, -9.81];
    let v = [0.3, -0.2, 0.5];
    let model = stretched_box(eps, 0.0)
        .youngs_modulus(e_mod)
        .density(rho)
        .gravity(g)
        .velocity(v)
        .build()
        .expect("model");
    let mass = model.derive(&model.params).mass;
    let d = diagnostics(&model, &mass, &model.x0, &model.v0);
    let (mu, _) = crate::material::lame(e_mod, 0.0);
    let volume = 0.3 * 0.2 * 0.2;
    let m = rho * volume;
    let rel = |a: f64, b: f64| (a - b).abs() / b.abs();
    assert!(
        rel(d.elastic_energy, mu * eps * eps * volume) < 1e-10,
        "{}",
        d.elastic_energy
    );
    let v2 = v.iter().map(|a| a * a).sum::<f64>();
    assert!(rel(d.kinetic_energy, 0.5 * m * v2) < 1e-12);
    // Centre of mass (0.15, 0.1, 0.1): the stretch is about x = 0.15.
    let com = [0.15, 0.1, 0.1];
    for k in 0..3 {
        assert!((d.center_of_mass[k] - com[k]).abs() < 1e-14, "{:?}", d);
        assert!(rel(d.linear_momentum[k], m * v[k]) < 1e-12);
    }
    assert!(rel(d.gravitational_energy, -m * g[2] * com[2]) < 1e-12);
    // L = M x_c × v for a uniform velocity and a centred stretch.
    let l = Vector3::from(com).cross(&Vector3::from(v)) * m;
    for k in 0..3 {
        assert!((d.angular_momentum[k] - l[k]).abs() < 1e-12 * m, "{:?}", d);
    }
    assert!(rel(d.max_principal_strain, eps) < 1e-12);
    assert!(d.min_principal_strain.abs() < 1e-15);
    assert_eq!(d.inverted_elements, 0);
    let total = d.elastic_energy + d.kinetic_energy + d.gravitational_energy;
    assert_eq!(d.total_energy, total);
    // per element: each of the 12 cubes holds μ ε² (0.1 m)³, and they sum to the total
    let per = element_energies(&model, &model.x0);
    assert_eq!(per.len(), 12);
    for u in &per {
        assert!(rel(*u, mu * eps * eps * 1e-3) < 1e-10, "{u}");
    }
    assert!(rel(per.iter().sum(), d.elastic_energy) < 1e-13);

    // Compression shows as the smallest principal strain; an inverted element is counted,
    // and a Neo-Hookean one has infinite energy (serialized as "inf").
    let squeezed = stretched_box(-0.1, 0.0).build().expect("model");
    let d = diagnostics(&squeezed, &mass, &squeezed.x0, &squeezed.v0);
    assert!(rel(d.min_principal_strain, -0.1) < 1e-12 && d.max_principal_strain.abs() < 1e-15);
    let inverted = stretched_box(-2.0, 0.3)
        .material(crate::material::MaterialModel::Neohookean)
        .build()
        .expect("model");
    let d = diagnostics(&inverted, &mass, &inverted.x0, &inverted.v0);
    assert_eq!(d.inverted_elements, inverted.num_elements());
    assert_eq!(d.elastic_energy, f64::INFINITY);
    let json = serde_json::to_value(&d).expect("serializes");
    assert_eq!(json["elastic_energy"], "inf");
}

#[test]
fn undamped_implicit_euler_never_gains_energy() {
    // A free box (no Dirichlet nodes, no damping) released from a 5 % stretch while moving,
    // under gravity (its potential is in the total). Implicit Euler's step minimises the
    // incremental potential, so the total energy does not grow: ΔE ≤ the solver's tolerance.
    let model = stretched_box(0.05, 0.3)
        .velocity([0.1, 0.0, 0.2])
        .steps(0.005, 40)
        .build()
        .expect("model");
    let d = rollout_diagnostics(&model);
    let e0 = d[0].elastic_energy + d[0].kinetic_energy;
    let mut worst = f64::NEG_INFINITY;
    for t in 1..d.len() {
        let gain = d[t].total_energy - d[t - 1].total_energy;
        worst = worst.max(gain / e0);
        assert!(
            gain <= 1e-8 * e0,
            "frame {t}: the total energy grew by {gain:e} J ({:e} of the initial energy {e0:e} J)",
            gain / e0
        );
    }
    // It dissipates. Implicit Euler's free fall loses exactly ½ M h² |g|² per step
    // (v' = v + hg, x' = x + hv': ΔE_kin + ΔE_grav = −½ M h²|g|²); the elastic oscillation's
    // energy is mostly gone after 40 steps (ωh ≈ 0.5 for its lowest mode).
    let m_total: f64 = model.derive(&model.params).mass.iter().sum();
    let fall = 40.0 * 0.5 * m_total * (0.005f64 * 9.81).powi(2);
    let lost = d[0].total_energy - d[40].total_energy - fall;
    eprintln!("largest energy gain per step {worst:e} of E0; lost {lost:e} J of {:e} J elastic besides the fall", d[0].elastic_energy);
    let elastic0 = d[0].elastic_energy;
    assert!(
        lost > 0.5 * elastic0 && lost < elastic0,
        "lost {lost:e} J of {elastic0:e} J elastic energy besides the fall's {fall:e} J; largest relative gain {worst:e}"
    );
}

/// One tetrahedron of edge `l` with three nodes fixed: its free node is a 3-DoF oscillator.
fn one_tet(l: f64) -> Mesh {
    Mesh {
        kind: ElementKind::Tet4,
        nodes: vec![[0.0; 3], [l, 0.0, 0.0], [0.0, l, 0.0], [0.0, 0.0, l]],
        elements: vec![0, 1, 2, 3],
        tags: vec![0],
    }
}

/// The stiffness $K=\partial^2E_\mathrm{el}/\partial x_3^2$ of the free node at rest, by
/// central differences of the diagnostics' elastic energy.
fn free_node_stiffness(model: &Model, mass: &[f64], delta: f64) -> Matrix3<f64> {
    let v = vec![0.0; model.x0.len()];
    let energy = |a: usize, da: f64, b: usize, db: f64| {
        let mut x: Vec<f64> = model.rest.iter().flatten().copied().collect();
        x[9 + a] += da;
        x[9 + b] += db;
        diagnostics(model, mass, &x, &v).elastic_energy
    };
    Matrix3::from_fn(|a, b| {
        (energy(a, delta, b, delta) - energy(a, delta, b, -delta) - energy(a, -delta, b, delta)
            + energy(a, -delta, b, -delta))
            / (4.0 * delta * delta)
    })
}

#[test]
fn a_small_single_mode_keeps_one_over_one_plus_omega_squared_h_squared_of_its_energy_per_step() {
    // Implicit Euler on ẍ = −ω²x: v' = v − hω²x', x' = x + hv'. In (ωx, v) the step is
    // (1 + ω²h²)^(−1/2) times a rotation, so E = ½m(v² + ω²x²) scales by exactly
    // 1/(1 + ω²h²) each step. ω² is the free node's stiffness eigenvalue over its mass.
    let l = 0.1;
    let builder = ModelBuilder::new(one_tet(l))
        .gravity([0.0; 3])
        .fix_where(|p| p[2] == 0.0);
    let probe = builder.clone().build().expect("model");
    let mass = probe.derive(&probe.params).mass;
    let k = free_node_stiffness(&probe, &mass, 1e-6 * l);
    let (eig, q) = sym_eigen3(&k);
    for (mode, amplitude) in [(eig.imax(), 1e-5 * l), (eig.imin(), 1e-5 * l)] {
        let omega2 = eig[mode] / mass[3];
        let h = 1.0 / omega2.sqrt();
        let factor = 1.0 / (1.0 + omega2 * h * h);
        let dir = q.column(mode);
        let mut u = vec![[0.0; 3]; 4];
        u[3] = [amplitude * dir[0], amplitude * dir[1], amplitude * dir[2]];
        let model = builder
            .clone()
            .displaced(u)
            .steps(h, 6)
            .build()
            .expect("model");
        let d = rollout_diagnostics(&model);
        let worst = (1..d.len())
            .map(|t| (d[t].total_energy / d[t - 1].total_energy / factor - 1.0).abs())
            .fold(0.0, f64::max);
        eprintln!("mode ω² = {omega2:e}/s², h = {h:e} s: energy ratio per step within {worst:e} of 1/(1 + ω²h²) = {factor}");
        for t in 1..d.len() {
            let ratio = d[t].total_energy / d[t - 1].total_energy;
            assert!(
                (ratio / factor - 1.0).abs() < 0.01,
                "mode ω² = {omega2:e}/s², step {t}: energy ratio {ratio} against 1/(1 + ω²h²) = {factor}"
            );
        }
    }
}

#[test]
fn a_free_body_without_gravity_keeps_its_linear_momentum() {
    // Internal forces sum to zero (Σ_a ∇N_a = 0), and every PD iterate, Anderson mix and
    // Newton–Krylov step keeps Σ m x: p = Σ m v is conserved to round-off. A spinning,
    // stretched, translating box; the angular momentum is reported, not asserted (implicit
    // Euler does not conserve it).
    let mut model = stretched_box(0.05, 0.3)
        .gravity([0.0; 3])
        .steps(0.005, 30)
        .build()
        .expect("model");
    let spin = Vector3::new(0.5, -1.0, 2.0);
    for i in 0..model.num_nodes() {
        let r = Vector3::new(
            model.x0[3 * i] - 0.15,
            model.x0[3 * i + 1] - 0.1,
            model.x0[3 * i + 2],
        );
        let v = spin.cross(&r) + Vector3::new(0.2, 0.1, -0.3) + r * 0.4;
        model.v0[3 * i..3 * i + 3].copy_from_slice(v.as_slice());
    }
    let d = rollout_diagnostics(&model);
    let mass = model.derive(&model.params).mass;
    let scale: f64 = (0..model.num_nodes())
        .map(|i| mass[i] * Vector3::from_column_slice(&model.v0[3 * i..3 * i + 3]).norm())
        .sum();
    let p0 = Vector3::from(d[0].linear_momentum);
    let worst = d
        .iter()
        .map(|dt| (Vector3::from(dt.linear_momentum) - p0).norm())
        .fold(0.0, f64::max);
    eprintln!(
        "linear momentum drift over 30 steps: {:e} of Σm|v|",
        worst / scale
    );
    for (t, dt) in d.iter().enumerate() {
        let drift = (Vector3::from(dt.linear_momentum) - p0).norm();
        assert!(
            drift <= 1e-10 * scale,
            "frame {t}: linear momentum drifted by {drift:e} (scale Σm|v| = {scale:e})"
        );
    }
    let l0 = Vector3::from(d[0].angular_momentum).norm();
    let l_end = Vector3::from(d[d.len() - 1].angular_momentum).norm();
    eprintln!("angular momentum |L|: {l0:e} at frame 0, {l_end:e} at frame 30 (not asserted)");
    // The body did move and deform (the check is not vacuous).
    assert!(
        d[0].elastic_energy > 0.0
            && (d[30].center_of_mass[0] - d[0].center_of_mass[0]).abs() > 1e-3
    );
}

#[test]
fn implausible_units_name_the_body_the_value_and_why() {
    let ok = stretched_box(0.0, 0.3).build().expect("model");
    assert!(implausible_units(&ok).is_empty());
    let soft = stretched_box(0.0, 0.3)
        .youngs_modulus(1.0)
        .density(1.0e-3)
        .build()
        .expect("model");
    let w = implausible_units(&soft);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[0].contains("body 0")
            && w[0].contains("youngs_modulus = 1e0 Pa")
            && w[0].contains("1 MPa is 1e6")
    );
    assert!(w[1].contains("density = 1e-3 kg/m³") && w[1].contains("1 g/cm³ is 1000"));
    let stiff = stretched_box(0.0, 0.3)
        .youngs_modulus(2e14)
        .build()
        .expect("model");
    assert!(implausible_units(&stiff)[0].contains("stiffer than any solid"));
}
