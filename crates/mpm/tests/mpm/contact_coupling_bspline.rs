//! The coupling driver with a real quadratic B-spline grid: a minimal PIC substepper (no
//! elasticity) written here for the test, so contacts carry overlapping 27-node stencils and
//! the quasi-Newton solve works on a genuinely coupled J (seed Algorithm 1 in the loop).
//! Known answers: linear momentum of particles + a free body is conserved (P2G and G2P both
//! conserve it); a particle lump resting on a box on the ground passes its weight to the box
//! through the accumulated impulses, and the ground carries both.

use diffphd_mpm::contact::{coupled_step, GridContactProblem, LaggedParams, SolverOptions};
use diffphd_mpm::mpm::MpmError;
use diffphd_mpm::rigid::{HalfSpace, RigidBody, RigidWorld, Shape};
use nalgebra::{Isometry3, Vector3};

/// PIC on a regular grid: P2G of mass and momentum, v* = p/m + g h, G2P, advection.
struct PicGrid {
    origin: Vector3<f64>,
    dx: f64,
    dims: [usize; 3],
    x: Vec<Vector3<f64>>,
    v: Vec<Vector3<f64>>,
    mp: f64,
    gravity: Vector3<f64>,
    m: Vec<f64>,
    v_star: Vec<Vector3<f64>>,
}

impl PicGrid {
    fn stencil(&self, x: &Vector3<f64>, out: &mut Vec<(usize, f64)>) {
        let mut w = [[0.0; 3]; 3];
        let mut base = [0usize; 3];
        for a in 0..3 {
            let s = (x[a] - self.origin[a]) / self.dx;
            let b = (s - 0.5).floor();
            assert!(
                b >= 0.0 && (b as usize) + 2 < self.dims[a],
                "particle left the grid"
            );
            base[a] = b as usize;
            let f = s - b;
            w[a] = [
                0.5 * (1.5 - f).powi(2),
                0.75 - (f - 1.0).powi(2),
                0.5 * (f - 0.5).powi(2),
            ];
        }
        for i in 0..3 {
            for j in 0..3 {
                for k in 0..3 {
                    let n =
                        base[0] + i + self.dims[0] * (base[1] + j + self.dims[1] * (base[2] + k));
                    out.push((n, w[0][i] * w[1][j] * w[2][k]));
                }
            }
        }
    }
    fn momentum(&self) -> Vector3<f64> {
        self.v.iter().map(|v| v * self.mp).sum()
    }
}

impl GridContactProblem for PicGrid {
    fn free_motion(&mut self, h: f64) -> Result<(), MpmError> {
        let n = self.dims.iter().product();
        self.m = vec![0.0; n];
        let mut p = vec![Vector3::zeros(); n];
        let mut st = Vec::with_capacity(27);
        for (x, v) in self.x.iter().zip(&self.v) {
            st.clear();
            self.stencil(x, &mut st);
            for &(k, w) in &st {
                self.m[k] += w * self.mp;
                p[k] += v * (w * self.mp);
            }
        }
        self.v_star = (0..n)
            .map(|k| {
                if self.m[k] > 0.0 {
                    p[k] / self.m[k] + self.gravity * h
                } else {
                    Vector3::zeros()
                }
            })
            .collect();
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
        self.stencil(&self.x[p], out);
    }
    fn finish_substep(&mut self, v: &[Vector3<f64>], h: f64) -> Result<(), MpmError> {
        let mut st = Vec::with_capacity(27);
        for p in 0..self.x.len() {
            st.clear();
            self.stencil(&self.x[p], &mut st);
            self.v[p] = st.iter().map(|&(k, w)| v[k] * w).sum();
            self.x[p] += self.v[p] * h;
        }
        Ok(())
    }
}

/// A 4×4×4 lump of particles (spacing dx/2) centred at `c` with velocity `v0`, on a
/// 24³ grid of spacing 1 cm around the origin.
fn lump(c: Vector3<f64>, v0: Vector3<f64>, gravity: Vector3<f64>) -> PicGrid {
    let dx = 0.01;
    let mut x = Vec::new();
    for i in 0..4 {
        for j in 0..4 {
            for k in 0..4 {
                x.push(
                    c + Vector3::new(i as f64 - 1.5, j as f64 - 1.5, k as f64 - 1.5) * (0.5 * dx),
                );
            }
        }
    }
    let n = x.len();
    PicGrid {
        origin: Vector3::repeat(-0.12),
        dx,
        dims: [24, 24, 24],
        x,
        v: vec![v0; n],
        mp: 1e-3 / 8.0,
        gravity,
        m: Vec::new(),
        v_star: Vec::new(),
    }
}

#[test]
fn bspline_coupling_conserves_linear_momentum_with_a_free_body() {
    // Soft contact (k = 1e4 N/m, no dissipation, v_s = 1e-2 m/s) so that the linear-rate QN
    // reaches ε_r = 1e-10 in a few hundred iterations on 0.1 g particles (docs/mpm.md).
    let params = LaggedParams {
        stiffness: 1e4,
        dissipation: 0.0,
        stiction_tolerance: 1e-2,
        friction: 0.5,
        ..LaggedParams::default()
    };
    let mut body = RigidBody::new(
        Shape::Box {
            half_extents: Vector3::new(0.03, 0.03, 0.03),
        },
        50.0,
        Isometry3::translation(0.045, 0.0, 0.0),
    )
    .unwrap();
    body.contact = params;
    body.mpm_contact = body.contact;
    let mut world = RigidWorld {
        bodies: vec![body],
        gravity: Vector3::zeros(),
        ..RigidWorld::default()
    };
    let mut grid = lump(
        Vector3::new(-0.01, 0.008, 0.004),
        Vector3::new(1.0, 0.0, 0.0),
        Vector3::zeros(),
    );
    let p0 = grid.momentum() + world.bodies[0].velocity * world.bodies[0].mass();
    let opts = SolverOptions {
        rel_tol: 1e-10,
        max_iterations: 20_000,
        ..SolverOptions::default()
    };
    let (mut contacts, mut max_its) = (0, 0);
    for _ in 0..30 {
        let rep = coupled_step(&mut world, &mut grid, 1e-3, 2, &opts).unwrap();
        contacts += rep.contacts_per_substep.iter().sum::<usize>();
        max_its = max_its.max(*rep.iterations_per_substep.iter().max().unwrap());
    }
    let p1 = grid.momentum() + world.bodies[0].velocity * world.bodies[0].mass();
    eprintln!(
        "B-spline coupling: {contacts} contacts, max QN iterations {max_its}, |Δp|/|p| = {:.2e}",
        (p1 - p0).norm() / p0.norm()
    );
    assert!(
        contacts > 20,
        "the lump must hit the box ({contacts} contacts)"
    );
    assert!(
        world.bodies[0].velocity.x > 0.05,
        "box not pushed: {:?}",
        world.bodies[0].velocity
    );
    assert!(
        (p1 - p0).norm() < 1e-9 * p0.norm(),
        "momentum {p0:?} -> {p1:?}"
    );
}

#[test]
fn bspline_lump_on_a_box_passes_its_weight_to_the_box() {
    // Without elasticity the PIC lump keeps compacting slowly, so the check is the momentum
    // balance over a window rather than a static force: with F the mean push on the box,
    // F·T = m g T + ΔP_z(lump), and the ground carries M g T + F·T + ΔP_z(box).
    let params = LaggedParams {
        stiffness: 1e4,
        dissipation: 20.0,
        stiction_tolerance: 1e-2,
        ..LaggedParams::default()
    };
    let half = 0.03;
    let mut body = RigidBody::new(
        Shape::Box {
            half_extents: Vector3::repeat(half),
        },
        500.0,
        Isometry3::translation(0.0, 0.0, -0.1 + half),
    )
    .unwrap();
    body.contact = params;
    body.mpm_contact = body.contact;
    let ground = HalfSpace::new(Vector3::z(), Vector3::new(0.0, 0.0, -0.1), params)
        .unwrap()
        .with_mpm_contact(params);
    let mut world = RigidWorld {
        bodies: vec![body],
        planes: vec![ground],
        ..RigidWorld::default()
    };
    let top = -0.1 + 2.0 * half;
    let mut grid = lump(
        Vector3::new(0.0, 0.0, top + 0.01),
        Vector3::zeros(),
        world.gravity,
    );
    let (lump_mass, box_mass) = (grid.mp * grid.x.len() as f64, world.bodies[0].mass());
    let opts = SolverOptions {
        rel_tol: 1e-9,
        max_iterations: 20_000,
        ..SolverOptions::default()
    };
    let (dt, steps, window) = (1e-3, 400, 200);
    let (mut push, mut ground, mut max_its) = (0.0, 0.0, 0);
    let (mut p_lump, mut p_box) = (0.0, 0.0);
    for step in 0..steps {
        if step == steps - window {
            p_lump = grid.momentum().z;
            p_box = world.bodies[0].velocity.z * box_mass;
        }
        let rep = coupled_step(&mut world, &mut grid, dt, 4, &opts).unwrap();
        max_its = max_its.max(*rep.iterations_per_substep.iter().max().unwrap());
        if step >= steps - window {
            push -= rep.body_impulses[0].force.z;
            ground += rep.rigid.contacts.iter().map(|c| c.impulse.z).sum::<f64>();
        }
    }
    let t = window as f64 * dt;
    let dp_lump = grid.momentum().z - p_lump;
    let dp_box = world.bodies[0].velocity.z * box_mass - p_box;
    let g = 9.81;
    eprintln!(
        "B-spline lump: push {:.6} N, weight {:.6} N, ΔP_lump/T {:.2e} N, max QN iterations {max_its}",
        push / t,
        lump_mass * g,
        dp_lump / t
    );
    assert!(
        push > 0.5 * lump_mass * g * t,
        "the lump must rest on the box"
    );
    let balance = push - (lump_mass * g * t + dp_lump);
    assert!(
        balance.abs() < 1e-6 * lump_mass * g * t,
        "lump momentum balance off by {balance:e} N·s"
    );
    let ground_balance = ground - (box_mass * g * t + push + dp_box);
    assert!(
        ground_balance.abs() < 1e-6 * box_mass * g * t,
        "ground balance off by {ground_balance:e} N·s"
    );
}
