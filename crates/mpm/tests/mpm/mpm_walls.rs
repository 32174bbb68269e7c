//! Wall conditions through the full substep: a slip floor keeps the tangential momentum, a
//! sticky floor removes it, a separating floor lets a body leave while a slip (bilateral)
//! floor holds it back.

use diffphd_mpm::mpm::{
    BodySpec, ElasticModel, GridSpec, Lattice, Material, SimParams, Simulation, WallKind,
};
use nalgebra::Vector3;

/// A block whose lowest particles sit in the floor's wall layer, moving with `v0`.
fn block_on_floor(floor: WallKind, v0: Vector3<f64>, gravity: f64) -> Simulation {
    let h = 1.0 / 32.0;
    let mut spec = GridSpec::new([0.0; 3], [32, 32, 32], h, WallKind::Sticky);
    spec.walls[2] = floor;
    // Floor nodes are j ≤ 2; particles from y = 2.5h have node 2 in their stencil.
    let particles = Lattice::new([0.0; 3], h, 8)
        .seed_box([0.3, 2.5 * h, 0.4], [0.5, 2.5 * h + 0.1, 0.6])
        .unwrap();
    let body = BodySpec {
        particles,
        material: Material::elastic(1000.0, 1e4, 0.3, ElasticModel::FixedCorotated),
        velocity: v0,
        angular_velocity: Vector3::zeros(),
    };
    let params = SimParams {
        gravity: Vector3::new(0.0, -gravity, 0.0),
    };
    Simulation::new(spec, params, vec![body], 1 << 30).unwrap()
}

fn run(sim: &mut Simulation, steps: usize) -> Vector3<f64> {
    for _ in 0..steps {
        sim.step(2e-4).unwrap();
    }
    sim.diagnostics().linear_momentum
}

#[test]
fn slip_floor_keeps_tangential_momentum_sticky_removes_it() {
    let v0 = Vector3::new(0.5, 0.0, -0.2);
    let mut slip = block_on_floor(WallKind::Slip, v0, 9.81);
    let p0 = slip.diagnostics().linear_momentum;
    let p = run(&mut slip, 100);
    for a in [0, 2] {
        assert!(
            (p[a] - p0[a]).abs() < 1e-12 * p0.norm(),
            "axis {a}: {} vs {}",
            p[a],
            p0[a]
        );
    }
    // The floor pushed back: the vertical momentum is well short of free fall (the soft block's
    // top is still falling after 20 ms, so it is not zero either).
    let free_fall = slip.diagnostics().mass * 9.81 * 100.0 * 2e-4;
    assert!(
        p[1].abs() < 0.85 * free_fall,
        "p_y {} vs free fall {free_fall}",
        p[1]
    );
    let mut sticky = block_on_floor(WallKind::Sticky, v0, 9.81);
    let p = run(&mut sticky, 100);
    assert!(
        p[0] < 0.9 * p0[0] && p[2] > 0.9 * p0[2],
        "sticky floor kept {p} of {p0}"
    );
}

#[test]
fn separating_floor_releases_slip_floor_holds() {
    let up = Vector3::new(0.0, 0.3, 0.0);
    let mut sep = block_on_floor(WallKind::Separating, up, 0.0);
    let p0 = sep.diagnostics().linear_momentum;
    let p = run(&mut sep, 50);
    assert!(
        (p - p0).norm() < 1e-12 * p0.norm(),
        "separating floor changed {p0} to {p}"
    );
    let mut slip = block_on_floor(WallKind::Slip, up, 0.0);
    let p = run(&mut slip, 50);
    assert!(
        p[1] < 0.95 * p0[1],
        "a slip floor is bilateral: {p} vs {p0}"
    );
}
