//! A von Mises bar pulled slowly at both ends through the full MPM pipeline: the axial Cauchy
//! stress in its middle follows E on the elastic branch and plateaus at σ_y.

use diffphd_mpm::mpm::{
    BodySpec, ElasticModel, GridSpec, Lattice, Material, Plasticity, SimParams, Simulation,
    WallKind,
};
use nalgebra::Vector3;
use std::f64::consts::PI;

#[test]
fn von_mises_bar_plateaus_at_yield_stress() {
    let h = 1.0 / 32.0;
    let (e_mod, sigma_y) = (1e4, 20.0);
    let (len, side) = (0.5, 2.0 * h);
    let (x0, y0) = (0.25, 8.0 * h);
    let particles = Lattice::new([0.0; 3], h, 8)
        .seed_box([x0, y0, y0], [x0 + len, y0 + side, y0 + side])
        .unwrap();
    let material = Material {
        plasticity: Plasticity::VonMises {
            yield_stress: sigma_y,
        },
        ..Material::elastic(1.0, e_mod, 0.3, ElasticModel::StvkHencky)
    };
    let body = BodySpec {
        particles,
        material,
        velocity: Vector3::zeros(),
        angular_velocity: Vector3::zeros(),
    };
    let spec = GridSpec::new([0.0; 3], [32, 18, 18], h, WallKind::Slip);
    let params = SimParams {
        gravity: Vector3::zeros(),
    };
    let mut sim = Simulation::new(spec, params, vec![body], 1 << 30).unwrap();
    let n = sim.particles().len();
    let middle: Vec<usize> = (0..n)
        .filter(|&p| (sim.particles().x[p][0] - (x0 + 0.5 * len)).abs() < len / 6.0)
        .collect();
    // Grips: nodes within one cell of the bar's ends move with ±V(t) along x (all components
    // prescribed), V ramped smoothly so no stress wave overshoots the yield stress.
    let (total_strain, duration, ramp) = (0.02, 0.12, 0.03);
    let v_max = 0.5 * total_strain * len / (duration - 0.5 * ramp);
    let speed = |t: f64| {
        if t < ramp {
            v_max * 0.5 * (1.0 - (PI * t / ramp).cos())
        } else {
            v_max
        }
    };
    let (grip_l, grip_r) = (x0 + h, x0 + len - h);
    let dt = sim.cfl_time_step(0.3);
    let mut t = 0.0;
    let mut stretch = 0.0;
    let mut curve = Vec::new();
    while t < duration {
        let v = speed(t);
        sim.step_with(dt, |grid, _| {
            for idx in 0..grid.mass().len() {
                let x = grid.node_position(idx)[0];
                if x <= grip_l {
                    grid.velocity_mut()[idx] = Vector3::new(-v, 0.0, 0.0);
                } else if x >= grip_r {
                    grid.velocity_mut()[idx] = Vector3::new(v, 0.0, 0.0);
                }
            }
        })
        .unwrap();
        t += dt;
        stretch += 2.0 * v * dt;
        let s: f64 = middle
            .iter()
            .map(|&p| sim.cauchy_stress(p)[(0, 0)])
            .sum::<f64>()
            / middle.len() as f64;
        curve.push((stretch / (grip_r - grip_l), s));
    }
    let eps_y = sigma_y / e_mod;
    // Elastic branch: secant modulus at half the yield strain within 5 % of E.
    let (e_half, s_half) = *curve.iter().find(|c| c.0 >= 0.5 * eps_y).unwrap();
    eprintln!(
        "elastic: σ = {s_half} at ε = {e_half} (secant {})",
        s_half / e_half
    );
    assert!((s_half / e_half - e_mod).abs() < 0.05 * e_mod);
    // Plateau: the mean over ε ∈ [3 ε_y, end] within 2 % of σ_y, and no sample above 1.05 σ_y.
    let plateau: Vec<f64> = curve
        .iter()
        .filter(|c| c.0 >= 3.0 * eps_y)
        .map(|c| c.1)
        .collect();
    let mean = plateau.iter().sum::<f64>() / plateau.len() as f64;
    let max = plateau.iter().cloned().fold(f64::MIN, f64::max);
    eprintln!(
        "plateau: mean {mean}, max {max}, {} samples, final strain {}",
        plateau.len(),
        curve.last().unwrap().0
    );
    assert!(
        (mean - sigma_y).abs() < 0.02 * sigma_y,
        "plateau mean {mean}"
    );
    assert!(max < 1.05 * sigma_y, "plateau max {max}");
    let plastic: f64 =
        middle.iter().map(|&p| sim.plastic_strain(p)).sum::<f64>() / middle.len() as f64;
    assert!(plastic > 5.0 * eps_y, "middle plastic strain {plastic}");
}
