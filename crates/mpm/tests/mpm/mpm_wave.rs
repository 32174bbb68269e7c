//! The first longitudinal mode of a free–free MPM bar: period T = 2L/c with c = √(E/ρ)
//! (ν = 0, so the bar and dilatational speeds coincide and no lateral coupling enters).

use diffphd_mpm::mpm::{
    BodySpec, ElasticModel, GridSpec, Lattice, Material, SimParams, Simulation, WallKind,
};
use nalgebra::Vector3;
use std::f64::consts::PI;

/// Runs the bar and returns the measured wave speed 2L/T.
fn bar_wave_speed(model: ElasticModel) -> f64 {
    let h = 1.0 / 32.0;
    let (len, e_mod, rho) = (1.0, 1e4, 1.0);
    let (x0, y0) = (0.25, 0.5 * 12.0 * h - h);
    let lattice = Lattice::new([0.0; 3], h, 8);
    let particles = lattice
        .seed_box([x0, y0, y0], [x0 + len, y0 + 2.0 * h, y0 + 2.0 * h])
        .unwrap();
    let material = Material::elastic(rho, e_mod, 0.0, model);
    let body = BodySpec {
        particles,
        material,
        velocity: Vector3::zeros(),
        angular_velocity: Vector3::zeros(),
    };
    let spec = GridSpec::new([0.0; 3], [48, 12, 12], h, WallKind::Slip);
    let params = SimParams {
        gravity: Vector3::zeros(),
    };
    let mut sim = Simulation::new(spec, params, vec![body], 1 << 30).unwrap();
    // First mode u = A cos(π s/L) sin(ωt): v(s, 0) = V cos(π s/L), ∂v/∂x = −V (π/L) sin(π s/L).
    let amp = 0.5;
    let n = sim.particles().len();
    for p in 0..n {
        let s = sim.particles().x[p][0] - x0;
        let k = PI / len;
        sim.particles_mut().v[p] = Vector3::new(amp * (k * s).cos(), 0.0, 0.0);
        sim.particles_mut().c[p][(0, 0)] = -amp * k * (k * s).sin();
    }
    let left: Vec<usize> = (0..n)
        .filter(|&p| sim.particles().x[p][0] < x0 + h)
        .collect();
    let right: Vec<usize> = (0..n)
        .filter(|&p| sim.particles().x[p][0] > x0 + len - h)
        .collect();
    let length = |sim: &Simulation| {
        let mean = |set: &[usize]| {
            set.iter().map(|&p| sim.particles().x[p][0]).sum::<f64>() / set.len() as f64
        };
        mean(&right) - mean(&left)
    };
    let c = (e_mod / rho).sqrt();
    let dt = sim.cfl_time_step(0.3);
    let period = 2.0 * len / c;
    let l0 = length(&sim);
    let energy = |sim: &Simulation| {
        let d = sim.diagnostics();
        d.kinetic + d.elastic
    };
    let e0 = energy(&sim);
    // Initial kinetic energy of the mode: ½ ρ A L V²/2 (particles sample cos² on a lattice).
    let mass = sim.diagnostics().mass;
    assert!(
        (e0 - 0.25 * mass * amp * amp).abs() < 0.01 * e0,
        "E0 = {e0}"
    );
    let mut e_min = e0;
    let mut e_max = e0;
    let mut prev = 0.0;
    let mut t = 0.0;
    let mut crossings = Vec::new();
    while t < 1.8 * period {
        sim.step(dt).unwrap();
        t += dt;
        let d = length(&sim) - l0;
        if t > 0.2 * period && prev * d < 0.0 {
            crossings.push(t - dt * d / (d - prev));
        }
        prev = d;
        let e = energy(&sim);
        e_min = e_min.min(e);
        e_max = e_max.max(e);
    }
    // Kinetic + elastic energy stays within 3 % of its start (APIC dissipates little).
    eprintln!("energy: start {e0:.4e}, range [{e_min:.4e}, {e_max:.4e}]");
    assert!(
        e_min > 0.97 * e0 && e_max < 1.03 * e0,
        "energy drifted: {e_min}..{e_max} vs {e0}"
    );
    assert!(crossings.len() >= 3, "crossings {crossings:?}");
    let measured_period = crossings[2] - crossings[0];
    2.0 * len / measured_period
}

#[test]
fn bar_first_mode_matches_sqrt_e_over_rho_fixed_corotated() {
    let c = bar_wave_speed(ElasticModel::FixedCorotated);
    eprintln!("fixed-corotated bar: measured c = {c} (exact 100)");
    assert!((c - 100.0).abs() < 3.0, "c = {c}");
}

#[test]
fn bar_first_mode_matches_sqrt_e_over_rho_neo_hookean() {
    let c = bar_wave_speed(ElasticModel::NeoHookean);
    eprintln!("Neo-Hookean bar: measured c = {c} (exact 100)");
    assert!((c - 100.0).abs() < 3.0, "c = {c}");
}
