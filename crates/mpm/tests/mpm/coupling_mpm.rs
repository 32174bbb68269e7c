//! The MPM–rigid coupling on the real MLS-MPM grid (`Simulation` as `GridContactProblem`):
//! the seed's known answers (docs/mpm.md, \"MPM–rigid coupling on the MLS-MPM grid\").

use diffphd_mpm::contact::GridContactProblem;
use diffphd_mpm::contact::{coupled_step, LaggedParams, SolverOptions};
use diffphd_mpm::mpm::MpmError;
use diffphd_mpm::mpm::{
    BodySpec, ElasticModel, GridSpec, Lattice, Material, SimParams, Simulation, WallKind,
};
use diffphd_mpm::rigid::{Drive, Profile, RigidBody, RigidWorld, Shape};
use nalgebra::{Isometry3, Vector3};

/// The simulation with an optional velocity damping v* ← e^{−c h} v* on every active node after
/// the free motion (a test-harness "ether" that lets the undamped elastic cube and the panels
/// settle; switched off before any measurement window).
struct Damped {
    sim: Simulation,
    rate: f64,
}

impl GridContactProblem for Damped {
    fn free_motion(&mut self, h: f64) -> Result<(), MpmError> {
        self.sim.free_motion(h)?;
        let f = (-self.rate * h).exp();
        self.sim
            .grid_mut()
            .velocity_mut()
            .iter_mut()
            .for_each(|v| *v *= f);
        Ok(())
    }
    fn node_masses(&self) -> &[f64] {
        self.sim.node_masses()
    }
    fn free_velocities(&self) -> &[Vector3<f64>] {
        GridContactProblem::free_velocities(&self.sim)
    }
    fn num_particles(&self) -> usize {
        GridContactProblem::num_particles(&self.sim)
    }
    fn particle_position(&self, p: usize) -> Vector3<f64> {
        self.sim.particle_position(p)
    }
    fn particle_velocity(&self, p: usize) -> Vector3<f64> {
        self.sim.particle_velocity(p)
    }
    fn particle_stencil(&self, p: usize, out: &mut Vec<(usize, f64)>) {
        GridContactProblem::particle_stencil(&self.sim, p, out)
    }
    fn finish_substep(&mut self, v: &[Vector3<f64>], h: f64) -> Result<(), MpmError> {
        GridContactProblem::finish_substep(&mut self.sim, v, h)
    }
}

const G: f64 = 9.81;

/// An elastic cube of side `side` centred at the origin, `ppc` particles per cell, on a grid of
/// spacing `h` reaching `margin` cells beyond the cube (plus 3 wall layers) on every side.
fn cube(
    side: f64,
    h: f64,
    density: f64,
    young: f64,
    poisson: f64,
    gravity: Vector3<f64>,
) -> Simulation {
    let cells_half = (0.5 * side / h).ceil() as usize + 4;
    let origin = [-(cells_half as f64) * h; 3];
    let spec = GridSpec::new(origin, [2 * cells_half; 3], h, WallKind::Sticky);
    let lo = [-0.5 * side; 3];
    let hi = [0.5 * side; 3];
    let particles = Lattice::new(origin, h, 8).seed_box(lo, hi).unwrap();
    let body = BodySpec {
        particles,
        material: Material::elastic(density, young, poisson, ElasticModel::FixedCorotated),
        velocity: Vector3::zeros(),
        angular_velocity: Vector3::zeros(),
    };
    Simulation::new(spec, SimParams { gravity }, vec![body], 1 << 30).unwrap()
}

fn centroid(p: &diffphd_mpm::mpm::Particles) -> Vector3<f64> {
    p.x.iter().sum::<Vector3<f64>>() / p.len() as f64
}

/// The panel squeeze of seed Fig. 2.
struct Panel {
    /// Cube side (m), grid spacing h (m), density (kg/m³), Young's modulus (Pa); ν = 0.3,
    /// fixed-corotated, 8 particles per cell.
    side: f64,
    h: f64,
    density: f64,
    young: f64,
    /// Contact parameters of both panels (μ = 1 in the tests).
    params: LaggedParams,
    rel_tol: f64,
    /// Steps of Δt = 0.1 ms (N = 1), and the first `settle` of them with the grid damping.
    steps: usize,
    settle: usize,
}

/// What the panel squeeze measured over the last 20 % of the steps (forces on panel 0, the
/// one at −x, pressing with +10 N).
#[derive(Debug)]
struct PanelResult {
    mass: f64,
    normal: f64,
    vertical: f64,
    lateral: f64,
    vertical_std: f64,
    creep: f64,
    iterations_mean: f64,
    iterations_max: usize,
    /// max over all steps of |F0ₓ + F1ₓ|/|F0ₓ|.
    asymmetry: f64,
}

/// Seed Fig. 2: an elastic MPM cube held against gravity (−z) by two box panels, each
/// force-driven with 10 N along x towards the cube; the panels' other DoFs are prescribed at
/// rest, rigid–rigid contact is off. The panels are 2 cm thick, as tall and deep as twice the
/// cube, 1000 kg/m³; their force drive has a velocity damping e^{−300 s⁻¹·Δt} per step (a
/// damped force actuator; zero at the steady state). The cube gets the grid damping of
/// [`Damped`] (300 s⁻¹) for the `settle` steps only, then runs undamped.
fn panel_squeeze(cfg: &Panel) -> PanelResult {
    let gravity = Vector3::new(0.0, 0.0, -G);
    let mut sim = Damped {
        sim: cube(cfg.side, cfg.h, cfg.density, cfg.young, 0.3, gravity),
        rate: 300.0,
    };
    let xmax = sim
        .sim
        .particles()
        .x
        .iter()
        .map(|x| x.x)
        .fold(f64::MIN, f64::max);
    let half = Vector3::new(0.01, cfg.side, cfg.side);
    let panel = |x: f64, push: f64| {
        let mut b = RigidBody::new(
            Shape::Box { half_extents: half },
            1000.0,
            Isometry3::translation(x, 0.0, 0.0),
        )
        .unwrap();
        b.contact = cfg.params;
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
    // Panel faces 1 µm inside the outermost particle layers.
    let face = xmax - 1e-6;
    let mut world = RigidWorld {
        bodies: vec![panel(-(face + 0.01), 10.0), panel(face + 0.01, -10.0)],
        rigid_rigid_contact: false,
        gravity,
        ..RigidWorld::default()
    };
    let mass: f64 = sim.sim.particles().mass().iter().sum();
    let dt = 1e-4;
    let opts = SolverOptions {
        rel_tol: cfg.rel_tol,
        max_iterations: 100_000,
        ..SolverOptions::default()
    };
    let window = cfg.steps - cfg.steps / 5;
    let (mut forces, mut iterations) = (Vec::new(), Vec::new());
    let mut z_hold = 0.0;
    let mut asymmetry: f64 = 0.0;
    for s in 0..cfg.steps {
        if s == cfg.settle {
            sim.rate = 0.0;
            z_hold = centroid(sim.sim.particles()).z;
        }
        let rep = coupled_step(&mut world, &mut sim, dt, 1, &opts).unwrap();
        for b in &mut world.bodies {
            b.velocity *= (-300.0 * dt).exp();
        }
        iterations.push(rep.iterations_per_substep[0]);
        if s >= window {
            // Force of the cube on panel 0 (the panel at −x).
            forces.push(rep.body_impulses[0].force / dt);
        }
        // Symmetry: panel 1 gets the mirrored normal force.
        let (f0, f1) = (rep.body_impulses[0].force, rep.body_impulses[1].force);
        asymmetry = asymmetry.max((f0.x + f1.x).abs() / f0.x.abs().max(f64::MIN_POSITIVE));
    }
    let n = forces.len() as f64;
    let mean = forces.iter().sum::<Vector3<f64>>() / n;
    let var = forces.iter().map(|f| (f.z - mean.z).powi(2)).sum::<f64>() / n;
    PanelResult {
        mass,
        normal: -mean.x,
        vertical: -mean.z,
        lateral: mean.y,
        vertical_std: var.sqrt(),
        creep: centroid(sim.sim.particles()).z - z_hold,
        iterations_mean: iterations.iter().sum::<usize>() as f64 / iterations.len() as f64,
        iterations_max: iterations.iter().copied().max().unwrap_or(0),
        asymmetry,
    }
}

fn check_panel(r: &PanelResult) {
    let half_weight = r.mass * G / 2.0;
    assert!((r.normal - 10.0).abs() <= 0.01 * 10.0, "{r:?}");
    assert!(
        (r.vertical - half_weight).abs() <= 0.01 * half_weight,
        "{r:?}"
    );
    assert!(r.lateral.abs() <= 0.01 * half_weight, "{r:?}");
    assert!(r.vertical_std <= 0.01 * half_weight, "{r:?}");
    assert!(r.creep.abs() <= 1e-3, "{r:?}");
    assert!(r.asymmetry <= 1e-6, "{r:?}");
}

/// CI size: a 4 cm cube (h = 1 cm, 512 particles), ρ = 5000 kg/m³ (m = 0.32 kg, so that the
/// per-panel friction m g/2 = 1.57 N is 16 % of the 10 N squeeze and ε_r = 1e-3 resolves it
/// to 1 %), E = 1e5 Pa, μ = 1, the MPM contact defaults; 80 ms, the last 16 ms averaged.
#[test]
fn panel_squeeze_holds_the_cube_with_the_analytic_forces() {
    let r = panel_squeeze(&Panel {
        side: 0.04,
        h: 0.01,
        density: 5000.0,
        young: 1e5,
        params: LaggedParams {
            friction: 1.0,
            ..LaggedParams::mpm_default()
        },
        rel_tol: 1e-3,
        steps: 800,
        settle: 500,
    });
    eprintln!("{r:?}, m g/2 = {}", r.mass * G / 2.0);
    check_panel(&r);
    // The MPM contact defaults keep the quasi-Newton solve short (measured 22).
    assert!(r.iterations_max <= 50, "{r:?}");
}

/// The seed's lighter cube (ρ = 1000 kg/m³, m = 64 g, m g/2 = 0.31 N = 3 % of the squeeze) needs
/// ε_r = 1e-4 for 1 % friction; 150 ms. `#[ignore]`d: ~35 s.
#[test]
#[ignore]
fn panel_squeeze_light_cube() {
    let r = panel_squeeze(&Panel {
        side: 0.04,
        h: 0.01,
        density: 1000.0,
        young: 1e5,
        params: LaggedParams {
            friction: 1.0,
            ..LaggedParams::mpm_default()
        },
        rel_tol: 1e-4,
        steps: 1500,
        settle: 1000,
    });
    eprintln!("{r:?}, m g/2 = {}", r.mass * G / 2.0);
    check_panel(&r);
}

/// Iterations with Drake's rigid-body point-contact defaults (k = 1e6 N/m, d = 50 s/m,
/// v_s = 1e-4 m/s) against the MPM defaults, same light cube, ε_r = 5e-2, 30 ms each.
/// Measured, not asserted beyond the ordering (docs/mpm.md). `#[ignore]`d: ~60 s.
#[test]
#[ignore]
fn panel_squeeze_iterations_drake_vs_mpm_defaults() {
    let run = |params: LaggedParams| {
        panel_squeeze(&Panel {
            side: 0.04,
            h: 0.01,
            density: 1000.0,
            young: 1e5,
            params: LaggedParams {
                friction: 1.0,
                ..params
            },
            rel_tol: 5e-2,
            steps: 300,
            settle: 300,
        })
    };
    let drake = run(LaggedParams::default());
    let mpm = run(LaggedParams::mpm_default());
    eprintln!("Drake defaults: {drake:?}\nMPM defaults: {mpm:?}");
    assert!(drake.iterations_mean > 10.0 * mpm.iterations_mean);
}

/// One real MPM substep against kinematic colliders: a ground half-space and a velocity-driven,
/// spinning box pressing on the cube's +x face (penetrations 1 µm and 2 µm: 0.1–0.2 N per
/// particle at k = 1e5 N/m); the 3 cm cube (216 particles, 125 active nodes) moves and spins. The quasi-Newton
/// solve at ε_r = 1e-10 agrees with full Newton (dense Cholesky of M + Σ JᵀGJ) and never
/// increases ℓ_p.
#[test]
fn quasi_newton_matches_full_newton_on_a_real_mpm_substep() {
    use diffphd_mpm::contact::assemble_substep_problem;
    use diffphd_mpm::rigid::HalfSpace;
    let gravity = Vector3::new(0.0, 0.0, -G);
    let mut sim = cube(0.03, 0.01, 1000.0, 1e5, 0.3, gravity);
    {
        let p = sim.particles_mut();
        for (x, v) in p.x.iter().zip(p.v.iter_mut()) {
            *v = Vector3::new(0.02, -0.01, -0.05) + Vector3::new(0.5, -1.0, 2.0).cross(x);
        }
    }
    let xs = &sim.particles().x;
    let zmin = xs.iter().map(|x| x.z).fold(f64::MAX, f64::min);
    let xmax = xs.iter().map(|x| x.x).fold(f64::MIN, f64::max);
    let params = LaggedParams {
        friction: 0.6,
        ..LaggedParams::mpm_default()
    };
    let ground = HalfSpace::new(Vector3::z(), Vector3::new(0.0, 0.0, zmin + 1e-6), params)
        .unwrap()
        .with_mpm_contact(params);
    let mut pusher = RigidBody::new(
        Shape::Box {
            half_extents: Vector3::new(0.01, 0.03, 0.03),
        },
        1000.0,
        Isometry3::translation(xmax + 0.01 - 2e-6, 0.0, 0.0),
    )
    .unwrap();
    pusher.contact = params;
    pusher.mpm_contact = pusher.contact;
    let speeds = [-0.05, 0.02, 0.0, 0.0, 0.0, 1.5];
    pusher.drives = speeds.map(|s| Drive::Velocity(Profile::Constant(s)));
    pusher.velocity = Vector3::new(speeds[0], speeds[1], speeds[2]);
    pusher.angular_velocity = Vector3::new(speeds[3], speeds[4], speeds[5]);
    let world = RigidWorld {
        bodies: vec![pusher],
        planes: vec![ground],
        gravity,
        ..RigidWorld::default()
    };
    let h = 1e-4;
    sim.substep_free_motion(h).unwrap();
    let sp = assemble_substep_problem(&world, &sim, h).unwrap();
    let problem = &sp.problem;
    let (n_plane, n_box) = problem.contacts.iter().fold((0, 0), |(a, b), c| {
        if c.body.is_none() {
            (a + 1, b)
        } else {
            (a, b + 1)
        }
    });
    assert!(
        n_plane >= 16 && n_box >= 16,
        "contacts: {n_plane} ground, {n_box} pusher"
    );
    let tight = SolverOptions {
        rel_tol: 1e-10,
        max_iterations: 20_000,
        ..SolverOptions::default()
    };
    let qn = problem.solve_quasi_newton(None, &tight).unwrap();
    let newton = problem
        .to_dense()
        .unwrap()
        .solve_newton(None, &tight)
        .unwrap();
    let vmax = problem.v_star.iter().map(|v| v.amax()).fold(0.0, f64::max);
    let mut err: f64 = 0.0;
    for (k, v) in qn.v.iter().enumerate() {
        for i in 0..3 {
            err = err.max((v[i] - newton.v[3 * k + i]).abs());
        }
    }
    eprintln!(
        "{} nodes, {n_plane} + {n_box} contacts: QN {} its, Newton {} its, max |Δv| = {err:.3e} (|v*| ≤ {vmax:.3e})",
        problem.num_nodes(),
        qn.stats.iterations,
        newton.stats.iterations
    );
    // Measured: QN 444 iterations, Newton 8, max |Δv| = 4.3e-11.
    assert!(err <= 1e-8, "max |v_qn − v_newton| = {err:.3e}");
    let obj = &qn.stats.objective;
    for w in obj.windows(2) {
        assert!(
            w[1] <= w[0] + 1e-14 * w[0].abs(),
            "objective rose: {} -> {}",
            w[0],
            w[1]
        );
    }
    assert!(obj.last().unwrap() < &obj[0], "the contacts must act");
    // The substep completes with the solution.
    let mut v = sim.grid().velocity().to_vec();
    for (c, &k) in sp.active.iter().enumerate() {
        v[k] = qn.v[c];
    }
    sim.finish_substep_with(&v).unwrap();
}

/// A 4 cm elastic cube (ρ = 1000, E = 1e5, 512 particles) on a rigid incline of angle θ = 30°
/// with friction μ, for `steps` of 0.1 ms. The incline is the half-space z ≤ z₀ and gravity is
/// tilted, g = 9.81·(sin θ, 0, −cos θ), so the block's faces stay on the grid axes. Returns the
/// times and the block's mean velocity along the slope (Σ m vₓ / Σ m) after each step, and
/// the largest quasi-Newton iteration count.
fn incline(mu: f64, steps: usize) -> (Vec<f64>, Vec<f64>, usize) {
    use diffphd_mpm::rigid::HalfSpace;
    let theta = 30f64.to_radians();
    let gravity = Vector3::new(theta.sin(), 0.0, -theta.cos()) * G;
    let h = 0.01;
    // Room to slide along +x: 12 cells behind the cube, 6 ahead.
    let origin = [-0.06, -0.06, -0.06];
    let spec = GridSpec::new(origin, [18, 12, 12], h, WallKind::Sticky);
    let particles = Lattice::new(origin, h, 8)
        .seed_box([-0.02; 3], [0.02; 3])
        .unwrap();
    let zmin = particles
        .positions
        .iter()
        .map(|x| x.z)
        .fold(f64::MAX, f64::min);
    let body = BodySpec {
        particles,
        material: Material::elastic(1000.0, 1e5, 0.3, ElasticModel::FixedCorotated),
        velocity: Vector3::zeros(),
        angular_velocity: Vector3::zeros(),
    };
    let mut sim = Simulation::new(spec, SimParams { gravity }, vec![body], 1 << 30).unwrap();
    let params = LaggedParams {
        friction: mu,
        ..LaggedParams::mpm_default()
    };
    let mut world = RigidWorld {
        planes: vec![
            HalfSpace::new(Vector3::z(), Vector3::new(0.0, 0.0, zmin), params)
                .unwrap()
                .with_mpm_contact(params),
        ],
        gravity,
        ..RigidWorld::default()
    };
    let opts = SolverOptions {
        rel_tol: 1e-3,
        ..SolverOptions::default()
    };
    let dt = 1e-4;
    let (mut t, mut v, mut itmax) = (Vec::new(), Vec::new(), 0);
    for s in 0..steps {
        let rep = coupled_step(&mut world, &mut sim, dt, 1, &opts).unwrap();
        itmax = itmax.max(rep.iterations_per_substep[0]);
        let p = sim.particles();
        let m: f64 = p.mass().iter().sum();
        let px: f64 = p.v.iter().zip(p.mass()).map(|(v, m)| v.x * m).sum();
        t.push((s + 1) as f64 * dt);
        v.push(px / m);
    }
    (t, v, itmax)
}

/// Least-squares slope of y(t).
fn slope(t: &[f64], y: &[f64]) -> f64 {
    let n = t.len() as f64;
    let (tm, ym) = (t.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let num: f64 = t.iter().zip(y).map(|(t, y)| (t - tm) * (y - ym)).sum();
    let den: f64 = t.iter().map(|t| (t - tm) * (t - tm)).sum();
    num / den
}

#[test]
fn block_slides_down_the_incline_with_the_coulomb_acceleration() {
    let mu = 0.3;
    let (t, v, itmax) = incline(mu, 600);
    let theta = 30f64.to_radians();
    let a_exact = G * (theta.sin() - mu * theta.cos());
    // Fit over 20–60 ms (after the landing transient of the first steps).
    let a = slope(&t[200..], &v[200..]);
    eprintln!(
        "a = {a:.5} vs {a_exact:.5} ({:+.3} %), v_end = {:.4e}, QN ≤ {itmax}",
        100.0 * (a / a_exact - 1.0),
        v.last().unwrap()
    );
    assert!((a - a_exact).abs() <= 0.02 * a_exact);
}

/// μ = 0.8 > tan 30°: after the landing transient (the normal load builds up over the first
/// milliseconds, the lagged friction bound lets the block slip ~0.3 mm) the block holds, its
/// mean speed along the slope at the regularised-stiction creep v_s·r/√(1 − r²), r = tan θ/μ,
/// around which its shear mode (period ≈ 37 ms, undamped) oscillates.
#[test]
fn block_sticks_on_the_incline_when_mu_exceeds_tan_theta() {
    let mu = 0.8;
    let (t, v, itmax) = incline(mu, 1000);
    let r = 30f64.to_radians().tan() / mu;
    let creep = 1e-3 * r / (1.0 - r * r).sqrt();
    // 50–100 ms: mean speed and displacement.
    let w = &v[500..];
    let vm = w.iter().sum::<f64>() / w.len() as f64;
    let disp = w.iter().sum::<f64>() * (t[1] - t[0]);
    eprintln!("μ = {mu}: mean v (50–100 ms) {vm:.3e} m/s, creep {creep:.3e}, displacement {disp:.3e} m, QN ≤ {itmax}");
    assert!(vm.abs() <= 3.0 * creep, "mean speed {vm:e}");
    // The sliding block (μ = 0.3) moves 8.8 mm over the same 50 ms.
    assert!(disp.abs() <= 2e-4, "displacement {disp:e}");
}

/// Seed Fig. 3 (close-lift-shake) at CI size: two soft MPM cubes (ρ = 100 kg/m³, E = 5e5 Pa,
/// ν = 0.4) sandwich a free rigid cube of ρ = 15 000 kg/m³ (density ratio 150); two panels,
/// force-driven along x with `squeeze` N and velocity-driven in y and z, hold the stack, lift
/// it and shake it. Δt = 0.1 ms, N = 10, ε_r = 1e-2, μ = 1, `mpm_default`. Returns the largest
/// displacement of the rigid cube relative to the panels (y and z) and the QN maximum.
fn close_lift_shake(
    side_cells: usize,
    ppc: usize,
    hold: usize,
    lift: usize,
    shake: usize,
) -> (f64, usize) {
    use std::sync::Arc;
    let h = 0.01;
    let s = side_cells as f64 * h;
    let gravity = Vector3::new(0.0, 0.0, -G);
    let origin = [-0.12, -0.08, -0.08];
    let spec = GridSpec::new(origin, [24, 16, 20], h, WallKind::Sticky);
    let lattice = Lattice::new(origin, h, ppc);
    let soft = Material::elastic(100.0, 5e5, 0.4, ElasticModel::FixedCorotated);
    let mk = |lo: f64| BodySpec {
        particles: lattice
            .seed_box([lo, -0.5 * s, -0.5 * s], [lo + s, 0.5 * s, 0.5 * s])
            .unwrap(),
        material: soft,
        velocity: Vector3::zeros(),
        angular_velocity: Vector3::zeros(),
    };
    let bodies = vec![mk(-1.5 * s), mk(0.5 * s)];
    let mut sim = Simulation::new(spec, SimParams { gravity }, bodies, 1 << 30).unwrap();
    let xs = &sim.particles().x;
    // Innermost and outermost particle layers.
    let inner = xs
        .iter()
        .filter(|x| x.x < 0.0)
        .map(|x| x.x)
        .fold(f64::MIN, f64::max);
    let outer = xs.iter().map(|x| x.x).fold(f64::MIN, f64::max);
    let params = LaggedParams {
        friction: 1.0,
        ..LaggedParams::mpm_default()
    };
    // The rigid cube fills the gap between the inner particle layers (1 µm overlap).
    let a = -inner + 1e-6;
    let mut red = RigidBody::new(
        Shape::Box {
            half_extents: Vector3::new(a, 0.5 * s, 0.5 * s),
        },
        15_000.0,
        Isometry3::identity(),
    )
    .unwrap();
    red.contact = params;
    red.mpm_contact = red.contact;
    let lift_speed = 0.1;
    let (t_lift, t_shake) = ((hold as f64) * 1e-4, ((hold + lift) as f64) * 1e-4);
    let vz = Profile::Custom(Arc::new(move |t: f64| {
        if t > t_lift && t <= t_shake {
            lift_speed
        } else {
            0.0
        }
    }));
    let vy = Profile::Custom(Arc::new(move |t: f64| {
        if t > t_shake {
            0.05 * (2.0 * std::f64::consts::PI * 50.0 * (t - t_shake)).sin()
        } else {
            0.0
        }
    }));
    let panel = |x: f64, push: f64| {
        let mut b = RigidBody::new(
            Shape::Box {
                half_extents: Vector3::new(0.01, s, s),
            },
            1000.0,
            Isometry3::translation(x, 0.0, 0.0),
        )
        .unwrap();
        b.contact = params;
        b.mpm_contact = b.contact;
        b.drives = [
            Drive::Force(Profile::Constant(push)),
            Drive::Velocity(vy.clone()),
            Drive::Velocity(vz.clone()),
            Drive::Velocity(Profile::Constant(0.0)),
            Drive::Velocity(Profile::Constant(0.0)),
            Drive::Velocity(Profile::Constant(0.0)),
        ];
        b
    };
    let face = outer - 1e-6;
    let squeeze = 15.0;
    let mut world = RigidWorld {
        bodies: vec![
            red,
            panel(-(face + 0.01), squeeze),
            panel(face + 0.01, -squeeze),
        ],
        rigid_rigid_contact: false,
        gravity,
        ..RigidWorld::default()
    };
    let opts = SolverOptions {
        rel_tol: 1e-2,
        ..SolverOptions::default()
    };
    let rel = |w: &RigidWorld| w.bodies[0].com() - w.bodies[1].com();
    let r0 = rel(&world);
    let (mut worst, mut itmax): (f64, usize) = (0.0, 0);
    for step in 0..hold + lift + shake {
        let rep = coupled_step(&mut world, &mut sim, 1e-4, 10, &opts).unwrap();
        for b in &mut world.bodies[1..] {
            b.velocity.x *= (-300.0f64 * 1e-4).exp();
        }
        itmax = itmax.max(
            rep.iterations_per_substep
                .iter()
                .copied()
                .max()
                .unwrap_or(0),
        );
        let d = rel(&world) - r0;
        worst = worst.max(d.y.abs()).max(d.z.abs());
        if (step + 1) % 50 == 0 {
            eprintln!(
                "t {:.4} rel ({:.3e}, {:.3e}, {:.3e}) panel z {:.4} y {:.4} QN ≤ {itmax}",
                (step + 1) as f64 * 1e-4,
                d.x,
                d.y,
                d.z,
                world.bodies[1].com().z,
                world.bodies[1].com().y
            );
        }
    }
    (worst, itmax)
}

/// 3 cm cubes, 8 particles per cell (432 MPM particles), rigid cube 0.64 kg; 10 ms hold, 20 ms
/// lift at 0.1 m/s, 20 ms shake along y (50 Hz, 0.05 m/s amplitude, 1.6 g). "Does not slip
/// out": the rigid cube's displacement relative to the panels stays within 3 mm (10 % of the
/// side; the soft cubes' shear under the 6.3 N load alone is about 1 mm). `#[ignore]`d: ~50 s
/// (docs/mpm.md); with 1 particle per cell it is slower (QN ≤ 883, 173 s), not faster.
#[test]
#[ignore]
fn close_lift_shake_holds_the_heavy_rigid_cube() {
    let t0 = std::time::Instant::now();
    let (worst, itmax) = close_lift_shake(3, 8, 100, 200, 200);
    eprintln!(
        "largest relative displacement {worst:.3e} m, QN ≤ {itmax}, {:?}",
        t0.elapsed()
    );
    assert!(worst <= 3e-3);
}

/// Two-way coupling on the real grid, zero gravity: a 3 cm elastic cube (ρ = 1000, 216
/// particles) moving at 0.5 m/s hits a free 20 g box off-centre with friction (μ = 0.5). Linear
/// and angular momentum of MPM (APIC, `Simulation::diagnostics`) plus the rigid body are
/// conserved: P2G, the contact solve (tight ε_r, so Σ M(v − v*) = Σ R γ) and G2P each conserve
/// them, and the rigid body receives −R γ at the contact point once per step. The box is pushed
/// and spun.
#[test]
fn two_way_coupling_conserves_momentum_with_a_free_body() {
    let mut sim = cube(0.03, 0.01, 1000.0, 1e5, 0.3, Vector3::zeros());
    for v in sim.particles_mut().v.iter_mut() {
        *v = Vector3::new(0.5, 0.0, 0.0);
    }
    let xmax = sim
        .particles()
        .x
        .iter()
        .map(|x| x.x)
        .fold(f64::MIN, f64::max);
    let mut body = RigidBody::new(
        Shape::Box {
            half_extents: Vector3::new(0.005, 0.01, 0.01),
        },
        10_000.0,
        // Off-centre in y and z, its face 0.2 mm in front of the cube.
        Isometry3::translation(xmax + 0.0052, 0.008, -0.005),
    )
    .unwrap();
    body.contact = LaggedParams {
        friction: 0.5,
        ..LaggedParams::mpm_default()
    };
    body.mpm_contact = body.contact;
    let mut world = RigidWorld {
        bodies: vec![body],
        gravity: Vector3::zeros(),
        ..RigidWorld::default()
    };
    let momenta = |sim: &Simulation, w: &RigidWorld| {
        let d = sim.diagnostics();
        let b = &w.bodies[0];
        let p = b.velocity * b.mass();
        (
            d.linear_momentum + p,
            d.angular_momentum + b.com().cross(&p) + b.angular_momentum(),
        )
    };
    let (p0, l0) = momenta(&sim, &world);
    let opts = SolverOptions {
        rel_tol: 1e-9,
        max_iterations: 20_000,
        ..SolverOptions::default()
    };
    let (mut contacts, mut itmax) = (0, 0);
    for _ in 0..150 {
        let rep = coupled_step(&mut world, &mut sim, 1e-4, 1, &opts).unwrap();
        contacts = contacts.max(rep.contacts_per_substep[0]);
        itmax = itmax.max(rep.iterations_per_substep[0]);
    }
    let (p, l) = momenta(&sim, &world);
    let b = &world.bodies[0];
    eprintln!(
        "contacts ≤ {contacts}, QN ≤ {itmax}; |Δp|/|p| = {:.2e}, |ΔL| = {:.2e} (|L| {:.2e}); box v {:?} ω {:?}",
        (p - p0).norm() / p0.norm(),
        (l - l0).norm(),
        l0.norm(),
        b.velocity,
        b.angular_velocity
    );
    assert!(contacts > 0, "the cube must reach the box");
    assert!(b.velocity.x > 0.1, "the box is pushed: {:?}", b.velocity);
    assert!(
        b.angular_velocity.norm() > 0.1,
        "and spun: {:?}",
        b.angular_velocity
    );
    // Measured: 8.0e-10 relative (linear), 1.1e-13 N·m·s (angular, scale ≈ 2e-4).
    assert!((p - p0).norm() <= 1e-8 * p0.norm(), "{p:?} vs {p0:?}");
    let scale = sim.diagnostics().momentum_scale + b.com().norm() * b.mass() * b.velocity.norm();
    assert!((l - l0).norm() <= 1e-8 * scale, "{l:?} vs {l0:?}");
}

/// Seed Fig. 4 (dough rolling) at reduced size: a von Mises dough slab (StVK–Hencky, E = 1e5,
/// ν = 0.3, σ_y = 2 kPa, ρ = 1000; 8 × 4 × 2 cm, 512 particles) on the ground (μ = 1); a solid
/// pin (cylinder along y, r = 1.5 cm, ρ = 500) pressed 2 mm into it and translated at
/// v = 0.1 m/s along x, its rotation about y free and driven only by friction (μ = 1), the
/// other DoFs prescribed. The pin starts touching the dough, is pressed down 2 mm at 0.05 m/s
/// over 40 ms (a pin started 2 mm deep puts 200 N on a particle and the first solve does not
/// converge), then translates. Returns the pin's ω_y per step, v/r and the QN maximum.
fn dough_rolling(steps: usize) -> (Vec<f64>, f64, usize) {
    use diffphd_mpm::mpm::Plasticity;
    use diffphd_mpm::rigid::HalfSpace;
    let h = 0.01;
    let gravity = Vector3::new(0.0, 0.0, -G);
    let origin = [-0.08, -0.06, -0.06];
    let spec = GridSpec::new(origin, [16, 12, 14], h, WallKind::Sticky);
    let particles = Lattice::new(origin, h, 8)
        .seed_box([-0.04, -0.02, -0.02], [0.04, 0.02, 0.0])
        .unwrap();
    let zmin = particles
        .positions
        .iter()
        .map(|x| x.z)
        .fold(f64::MAX, f64::min);
    let ztop = particles
        .positions
        .iter()
        .map(|x| x.z)
        .fold(f64::MIN, f64::max);
    let dough = Material {
        plasticity: Plasticity::VonMises { yield_stress: 2e3 },
        ..Material::elastic(1000.0, 1e5, 0.3, ElasticModel::StvkHencky)
    };
    let body = BodySpec {
        particles,
        material: dough,
        velocity: Vector3::zeros(),
        angular_velocity: Vector3::zeros(),
    };
    let mut sim = Simulation::new(spec, SimParams { gravity }, vec![body], 1 << 30).unwrap();
    let params = LaggedParams {
        friction: 1.0,
        ..LaggedParams::mpm_default()
    };
    let r = 0.015;
    let v = 0.1;
    let axis_y =
        nalgebra::UnitQuaternion::from_axis_angle(&Vector3::x_axis(), std::f64::consts::FRAC_PI_2);
    let mut pin = RigidBody::new(
        Shape::Cylinder {
            radius: r,
            half_length: 0.03,
        },
        500.0,
        Isometry3::from_parts(
            nalgebra::Translation3::new(-0.02, 0.0, ztop + r - 1e-6),
            axis_y,
        ),
    )
    .unwrap();
    pin.contact = params;
    pin.mpm_contact = pin.contact;
    // Pressed down 2 mm at 0.05 m/s over the first 40 ms, then translated at v.
    let press = 0.04;
    pin.drives = [
        Drive::Velocity(Profile::Custom(std::sync::Arc::new(move |t: f64| {
            if t > press {
                v
            } else {
                0.0
            }
        }))),
        Drive::Velocity(Profile::Constant(0.0)),
        Drive::Velocity(Profile::Custom(std::sync::Arc::new(move |t: f64| {
            if t > press {
                0.0
            } else {
                -0.05
            }
        }))),
        Drive::Velocity(Profile::Constant(0.0)),
        Drive::Free,
        Drive::Velocity(Profile::Constant(0.0)),
    ];
    let mut world = RigidWorld {
        bodies: vec![pin],
        planes: vec![
            HalfSpace::new(Vector3::z(), Vector3::new(0.0, 0.0, zmin), params)
                .unwrap()
                .with_mpm_contact(params),
        ],
        rigid_rigid_contact: false,
        gravity,
        ..RigidWorld::default()
    };
    let opts = SolverOptions {
        rel_tol: 1e-3,
        max_iterations: 50_000,
        ..SolverOptions::default()
    };
    let mut w = Vec::new();
    let mut itmax = 0;
    for _ in 0..steps {
        let rep = coupled_step(&mut world, &mut sim, 1e-4, 1, &opts).unwrap();
        itmax = itmax.max(rep.iterations_per_substep[0]);
        w.push(world.bodies[0].angular_velocity.y);
    }
    (w, v / r, itmax)
}

/// Rolling without slipping: ω_y → v/r. The light pin (21 g) stick-slips, ω_y swings between
/// about 4.4 and 9 rad/s after the translation starts; its mean over 70–100 ms is compared.
/// `#[ignore]`d: 20 s on the shared machine.
#[test]
#[ignore]
fn dough_rolling_pin_rolls_without_slipping() {
    let (w, target, itmax) = dough_rolling(1000);
    let mean = w[700..].iter().sum::<f64>() / w[700..].len() as f64;
    eprintln!("mean ω_y over 70–100 ms {mean:.4} vs v/r = {target:.4}, QN ≤ {itmax}");
    // Measured: 6.336 (−5.0 %).
    assert!((mean - target).abs() <= 0.1 * target);
    // Before the translation (press only) the pin does not spin.
    assert!(
        w[..400].iter().all(|w| w.abs() < 0.5),
        "spin while pressing"
    );
}

/// An MPM guard inside a coupled step comes back as `CouplingError::Grid` naming the substep
/// and the particle; the particles keep their state.
#[test]
fn mpm_errors_surface_through_the_coupled_step() {
    use diffphd_mpm::contact::CouplingError;
    let mut sim = cube(0.03, 0.01, 1000.0, 1e5, 0.3, Vector3::zeros());
    // 500 m/s moves every particle 2.5 cm (> h = 1 cm) in the 50 µs substep.
    for v in sim.particles_mut().v.iter_mut() {
        *v = Vector3::new(500.0, 0.0, 0.0);
    }
    let x_before = sim.particles().x.clone();
    let mut world = RigidWorld::default();
    let err = coupled_step(&mut world, &mut sim, 1e-4, 2, &SolverOptions::default()).unwrap_err();
    let msg = err.to_string();
    match err {
        CouplingError::Grid {
            substep: 0,
            source: MpmError::Cfl { particle: 0, .. },
        } => {}
        other => panic!("unexpected error {other:?}"),
    }
    assert!(
        msg.starts_with("substep 0:") && msg.contains("particle 0"),
        "{msg}"
    );
    assert_eq!(sim.particles().x, x_before);
}
