//! The asynchronous time-splitting driver (seed Eq. 3–4) on a minimal grid: every particle is
//! its own node (stencil weight 1), so the exact answers are those of point masses.
//! Checks: linear and angular momentum exchanged with a free rigid body are conserved; a
//! particle on the ground rests at the static penetration mg/k; the ground carries rigid body
//! plus particles resting on it (impulses accumulated over substeps reach the rigid step).

use diffphd_mpm::contact::{coupled_step, GridContactProblem, LaggedParams, SolverOptions};
use diffphd_mpm::mpm::MpmError;
use diffphd_mpm::rigid::{HalfSpace, RigidBody, RigidWorld, Shape};
use nalgebra::{Isometry3, Vector3};

/// Point masses on a trivial "grid": node i = particle i.
struct PointGrid {
    x: Vec<Vector3<f64>>,
    v: Vec<Vector3<f64>>,
    m: Vec<f64>,
    v_star: Vec<Vector3<f64>>,
    gravity: Vector3<f64>,
}

impl PointGrid {
    fn new(x: Vec<Vector3<f64>>, v: Vec<Vector3<f64>>, m: f64, gravity: Vector3<f64>) -> Self {
        let n = x.len();
        Self {
            x,
            v,
            m: vec![m; n],
            v_star: vec![Vector3::zeros(); n],
            gravity,
        }
    }
    fn momentum(&self) -> Vector3<f64> {
        self.v.iter().zip(&self.m).map(|(v, m)| v * *m).sum()
    }
    fn angular_momentum(&self) -> Vector3<f64> {
        self.x
            .iter()
            .zip(&self.v)
            .zip(&self.m)
            .map(|((x, v), m)| x.cross(&(v * *m)))
            .sum()
    }
}

impl GridContactProblem for PointGrid {
    fn free_motion(&mut self, h: f64) -> Result<(), MpmError> {
        self.v_star = self.v.iter().map(|v| v + self.gravity * h).collect();
        Ok(())
    }
    fn node_masses(&self) -> &[f64] {
        &self.m
    }
    fn free_velocities(&self) -> &[Vector3<f64>] {
        &self.v_star
    }
    fn num_particles(&self) -> usize {
        self.x.len()
    }
    fn particle_position(&self, p: usize) -> Vector3<f64> {
        self.x[p]
    }
    fn particle_velocity(&self, p: usize) -> Vector3<f64> {
        self.v[p]
    }
    fn particle_stencil(&self, p: usize, out: &mut Vec<(usize, f64)>) {
        out.push((p, 1.0));
    }
    fn finish_substep(&mut self, v: &[Vector3<f64>], h: f64) -> Result<(), MpmError> {
        self.v = v.to_vec();
        for (x, v) in self.x.iter_mut().zip(&self.v) {
            *x += v * h;
        }
        Ok(())
    }
}

fn rigid_momenta(world: &RigidWorld) -> (Vector3<f64>, Vector3<f64>) {
    let b = &world.bodies[0];
    let p = b.velocity * b.mass();
    (p, b.com().cross(&p) + b.angular_momentum())
}

#[test]
fn momentum_exchanged_with_a_free_body_is_conserved() {
    // A spray of 40 particles (10 g each) hits a free 10×8×6 cm box off-centre, no gravity,
    // with friction: linear and angular momentum (about the origin) of particles + box.
    let h = Vector3::new(0.05, 0.04, 0.03);
    let mut body =
        RigidBody::new(Shape::Box { half_extents: h }, 500.0, Isometry3::identity()).unwrap();
    body.contact = LaggedParams {
        friction: 0.6,
        ..LaggedParams::default()
    };
    body.mpm_contact = body.contact;
    let mut world = RigidWorld {
        bodies: vec![body],
        gravity: Vector3::zeros(),
        ..RigidWorld::default()
    };
    let (x, v): (Vec<_>, Vec<_>) = (0..40)
        .map(|i| {
            let a = i as f64 * 0.7;
            let x = Vector3::new(-0.08 - 0.002 * i as f64, 0.02 * a.sin(), 0.015 * a.cos());
            (x, Vector3::new(2.0, 0.1 * a.cos(), -0.2))
        })
        .unzip();
    let mut grid = PointGrid::new(x, v, 0.01, Vector3::zeros());
    let (p_r, l_r) = rigid_momenta(&world);
    let (p0, l0) = (grid.momentum() + p_r, grid.angular_momentum() + l_r);
    let opts = SolverOptions {
        rel_tol: 1e-12,
        max_iterations: 200,
        ..SolverOptions::default()
    };
    let mut touched = 0;
    for _ in 0..80 {
        let rep = coupled_step(&mut world, &mut grid, 1e-3, 4, &opts).unwrap();
        touched += rep.contacts_per_substep.iter().sum::<usize>();
    }
    assert!(
        touched > 100,
        "the spray must hit the body ({touched} contacts)"
    );
    let (p_r, l_r) = rigid_momenta(&world);
    let (p1, l1) = (grid.momentum() + p_r, grid.angular_momentum() + l_r);
    assert!(
        world.bodies[0].velocity.norm() > 0.05,
        "the body must be pushed"
    );
    assert!(
        world.bodies[0].angular_velocity.norm() > 0.05,
        "off-centre hits must spin the body"
    );
    eprintln!(
        "coupling: |Δp|/|p| = {:.2e}, |ΔL| = {:.2e} (|L0| = {:.2e})",
        (p1 - p0).norm() / p0.norm(),
        (l1 - l0).norm(),
        l0.norm()
    );
    assert!(
        (p1 - p0).norm() < 1e-10 * p0.norm(),
        "linear momentum {p0:?} -> {p1:?}"
    );
    assert!(
        (l1 - l0).norm() < 1e-9 * (l0.norm() + p0.norm() * 0.1),
        "angular momentum {l0:?} -> {l1:?}"
    );
}

#[test]
fn particle_rests_on_ground_at_static_penetration() {
    let params = LaggedParams {
        stiffness: 1e3,
        dissipation: 20.0,
        ..LaggedParams::default()
    };
    let ground = HalfSpace::new(Vector3::z(), Vector3::zeros(), params)
        .unwrap()
        .with_mpm_contact(params);
    let mut world = RigidWorld {
        planes: vec![ground],
        ..RigidWorld::default()
    };
    let m = 1e-3;
    let mut grid = PointGrid::new(
        vec![Vector3::new(0.0, 0.0, 0.001)],
        vec![Vector3::zeros()],
        m,
        world.gravity,
    );
    for _ in 0..1000 {
        coupled_step(&mut world, &mut grid, 1e-3, 5, &SolverOptions::default()).unwrap();
    }
    let expected = m * 9.81 / params.stiffness;
    let penetration = -grid.x[0].z;
    assert!(
        (penetration - expected).abs() < 0.02 * expected,
        "{penetration:e} vs {expected:e}"
    );
}

#[test]
fn ground_carries_the_rigid_body_and_the_particles_on_it() {
    let params = LaggedParams::default();
    let half = 0.05;
    let mut body = RigidBody::new(
        Shape::Box {
            half_extents: Vector3::repeat(half),
        },
        1000.0,
        Isometry3::translation(0.0, 0.0, half),
    )
    .unwrap();
    body.contact = params;
    body.mpm_contact = body.contact;
    let ground = HalfSpace::new(Vector3::z(), Vector3::zeros(), params)
        .unwrap()
        .with_mpm_contact(params);
    let mut world = RigidWorld {
        bodies: vec![body],
        planes: vec![ground],
        ..RigidWorld::default()
    };
    let xs = vec![
        Vector3::new(0.02, 0.02, 2.0 * half),
        Vector3::new(-0.02, 0.02, 2.0 * half),
        Vector3::new(0.02, -0.02, 2.0 * half),
        Vector3::new(-0.02, -0.02, 2.0 * half),
    ];
    let mp = 0.05;
    let mut grid = PointGrid::new(xs, vec![Vector3::zeros(); 4], mp, world.gravity);
    let dt = 1e-3;
    let mut rep = Default::default();
    for _ in 0..600 {
        rep = coupled_step(&mut world, &mut grid, dt, 10, &SolverOptions::default()).unwrap();
    }
    let total_mass = world.bodies[0].mass() + 4.0 * mp;
    let ground_impulse: f64 = rep.rigid.contacts.iter().map(|c| c.impulse.z).sum();
    let expected = total_mass * 9.81 * dt;
    assert!(
        (ground_impulse - expected).abs() < 1e-3 * expected,
        "{ground_impulse} vs {expected}"
    );
    // The particles' weight reached the body through the accumulated impulses.
    let push = -rep.body_impulses[0].force.z;
    assert!(
        (push - 4.0 * mp * 9.81 * dt).abs() < 1e-3 * 4.0 * mp * 9.81 * dt,
        "{push}"
    );
    // Everything at rest.
    assert!(grid.v.iter().all(|v| v.norm() < 1e-4));
    assert!(world.bodies[0].velocity.norm() < 1e-4);
}

/// The seed's panel test (Fig. 2) on a point mass: two panels, each force-driven with 10 N
/// along x towards a 100 g particle held against gravity by friction (μ = 1, so 2·μ·10 N
/// ≫ m g). Panels: all other DoFs prescribed at rest. Analytic steady state: normal force
/// 10 N per panel, vertical friction m g/2 per panel, lateral (y) friction 0.
#[test]
fn panels_pressing_with_ten_newtons_hold_a_particle_by_friction() {
    use diffphd_mpm::rigid::{Drive, Profile};
    let params = LaggedParams {
        friction: 1.0,
        ..LaggedParams::default()
    };
    let half = Vector3::new(0.01, 0.05, 0.05);
    let panel = |x: f64, push: f64| {
        let mut b = RigidBody::new(
            Shape::Box { half_extents: half },
            1000.0,
            Isometry3::translation(x, 0.0, 0.0),
        )
        .unwrap();
        b.contact = params;
        b.mpm_contact = b.contact;
        b.drives = [
            Drive::Force(Profile::Constant(push)),
            Drive::Velocity(Profile::Constant(0.0)),
            Drive::Velocity(Profile::Constant(0.0)),
            Drive::Velocity(Profile::Constant(0.0)),
            Drive::Velocity(Profile::Constant(0.0)),
            Drive::Velocity(Profile::Constant(0.0)),
        ];
        b
    };
    // Panel faces at x = ∓1e-5: the particle at the origin starts slightly inside both.
    let mut world = RigidWorld {
        bodies: vec![panel(-0.01 + 1e-5, 10.0), panel(0.01 - 1e-5, -10.0)],
        rigid_rigid_contact: false,
        ..RigidWorld::default()
    };
    let m = 0.1;
    let mut grid = PointGrid::new(
        vec![Vector3::zeros()],
        vec![Vector3::zeros()],
        m,
        world.gravity,
    );
    let dt = 1e-4;
    let mut rep = Default::default();
    for _ in 0..3000 {
        rep = coupled_step(&mut world, &mut grid, dt, 1, &SolverOptions::default()).unwrap();
    }
    for (b, sign) in [(0, -1.0), (1, 1.0)] {
        let f = rep.body_impulses[b].force / dt;
        eprintln!("panel {b}: force on panel {f:?} N");
        assert!(
            (f.x - sign * 10.0).abs() < 1e-3 * 10.0,
            "panel {b} normal force {f:?}"
        );
        assert!(
            (f.z + m * 9.81 / 2.0).abs() < 1e-3 * m * 9.81,
            "panel {b} vertical friction {f:?}"
        );
        assert!(f.y.abs() < 1e-9, "panel {b} lateral friction {f:?}");
    }
    eprintln!("particle x {:?} v {:?}", grid.x[0], grid.v[0]);
    // Held: the particle only creeps at the regularised-stiction speed
    // v = v_s·r/√(1 − r²), r = (m g/2)/(μ·10 N), v_s = 1e-4 m/s (σ-term below v_s).
    let r = m * 9.81 / 2.0 / (params.friction * 10.0);
    let creep = 1e-4 * r / (1.0 - r * r).sqrt();
    assert!(
        (grid.v[0].z + creep).abs() < 0.01 * creep,
        "particle velocity {:?}, creep {creep:e}",
        grid.v[0]
    );
    assert!(
        grid.x[0].z.abs() < 1e-4,
        "particle drifted to {:?}",
        grid.x[0]
    );
}

/// The point grid with an inactive (zero-mass) node before every active one: node 2p + 1
/// carries particle p. Exercises the active-node compaction of the driver.
struct SparseGrid {
    inner: PointGrid,
    m: Vec<f64>,
    v_star: Vec<Vector3<f64>>,
    bad_stencil: bool,
}

impl GridContactProblem for SparseGrid {
    fn free_motion(&mut self, h: f64) -> Result<(), MpmError> {
        self.inner.free_motion(h)?;
        self.v_star = vec![Vector3::zeros(); 2 * self.inner.x.len()];
        for (p, v) in self.inner.v_star.iter().enumerate() {
            self.v_star[2 * p + 1] = *v;
        }
        Ok(())
    }
    fn node_masses(&self) -> &[f64] {
        &self.m
    }
    fn free_velocities(&self) -> &[Vector3<f64>] {
        &self.v_star
    }
    fn num_particles(&self) -> usize {
        self.inner.x.len()
    }
    fn particle_position(&self, p: usize) -> Vector3<f64> {
        self.inner.x[p]
    }
    fn particle_velocity(&self, p: usize) -> Vector3<f64> {
        self.inner.v[p]
    }
    fn particle_stencil(&self, p: usize, out: &mut Vec<(usize, f64)>) {
        out.push((2 * p + 1, 1.0));
        out.push((2 * p, if self.bad_stencil { 0.5 } else { 0.0 }));
    }
    fn finish_substep(&mut self, v: &[Vector3<f64>], h: f64) -> Result<(), MpmError> {
        assert!(
            v.iter().step_by(2).all(|v| *v == Vector3::zeros()),
            "inactive nodes must pass through"
        );
        let dense: Vec<Vector3<f64>> = v.iter().skip(1).step_by(2).copied().collect();
        self.inner.finish_substep(&dense, h)?;
        Ok(())
    }
}

#[test]
fn inactive_nodes_are_passed_through_and_bad_stencils_are_named() {
    let params = LaggedParams {
        stiffness: 1e3,
        dissipation: 20.0,
        ..LaggedParams::default()
    };
    let ground = HalfSpace::new(Vector3::z(), Vector3::zeros(), params)
        .unwrap()
        .with_mpm_contact(params);
    let xs = vec![Vector3::new(0.0, 0.0, -1e-4), Vector3::new(0.1, 0.0, 0.002)];
    let vs = vec![Vector3::new(0.1, 0.0, -0.1), Vector3::zeros()];
    let mut world_a = RigidWorld {
        planes: vec![ground],
        ..RigidWorld::default()
    };
    let mut world_b = world_a.clone();
    let mut dense = PointGrid::new(xs.clone(), vs.clone(), 1e-3, world_a.gravity);
    let mut sparse = SparseGrid {
        inner: PointGrid::new(xs, vs, 1e-3, world_b.gravity),
        m: (0..4)
            .map(|k| if k % 2 == 1 { 1e-3 } else { 0.0 })
            .collect(),
        v_star: Vec::new(),
        bad_stencil: false,
    };
    for _ in 0..50 {
        coupled_step(&mut world_a, &mut dense, 1e-3, 2, &SolverOptions::default()).unwrap();
        coupled_step(
            &mut world_b,
            &mut sparse,
            1e-3,
            2,
            &SolverOptions::default(),
        )
        .unwrap();
    }
    assert_eq!(dense.x, sparse.inner.x);
    assert_eq!(dense.v, sparse.inner.v);
    assert!(dense.x[0].z > -1e-4, "the ground pushed the particle out");
    sparse.bad_stencil = true;
    let err = coupled_step(
        &mut world_b,
        &mut sparse,
        1e-3,
        2,
        &SolverOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            diffphd_mpm::contact::coupling::CouplingError::BadStencil {
                particle: 0,
                node: 0
            }
        ),
        "{err}"
    );
}
