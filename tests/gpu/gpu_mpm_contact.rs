//! The MPM–rigid coupled step with the substeps and their contact solves on a device
//! (`diffphd::gpu::mpm_contact`, kernels/mpm_contact.cu) against the CPU reference
//! (`diffphd_mpm::contact::coupled_step` on a `Simulation`): an elastic cube on a ground
//! half-space, pushed by a spinning kinematic box, a kinematic capsule, with a free sphere on
//! top and a free cylinder leaning on a side — every geometry kind the device registers.
//! Equal quasi-Newton iteration counts every substep, particle and rigid states ≤ 1e-10 of
//! each field's largest entry, and the launches and copies of every substep from the counts
//! the solve reports (the device path ran, resident).

use crate::gpu_mpm::{field_error, fields};
use crate::on_every_device;

use diffphd::gpu::mpm::DeviceMpm;
use diffphd::gpu::mpm_contact::{coupled_step, DeviceContact};
use diffphd::gpu::{Counted, Device, Emulator};
use diffphd_mpm::contact::{self, LaggedParams, SolverOptions};
use diffphd_mpm::mpm::{
    BodySpec, ElasticModel, GridSpec, Lattice, Material, SimParams, Simulation, WallKind,
};
use diffphd_mpm::rigid::{Drive, HalfSpace, Profile, RigidBody, RigidWorld, Shape};
use nalgebra::{Isometry3, Vector3};

on_every_device! {
    mpm_contact_coupled_steps_match_the_cpu => mpm_contact_coupled_steps_match_the_cpu_on;
}

const H: f64 = 0.01;
const SIDE: f64 = 0.03;
const DT: f64 = 1e-3;
const SUBSTEPS: usize = 4;
const FRAMES: usize = 3;
/// Initial penetration of every geometry into the cube's outer particle layer [m].
const DEPTH: f64 = 2e-6;

/// A 3 cm fixed-corotated cube (ρ = 1000, E = 1e5, 216 particles) centred at the origin,
/// moving and spinning, on a 14³-cell grid with sticky walls.
fn cube() -> Simulation {
    let cells_half = 7usize;
    let origin = [-(cells_half as f64) * H; 3];
    let spec = GridSpec::new(origin, [2 * cells_half; 3], H, WallKind::Sticky);
    let particles = Lattice::new(origin, H, 8)
        .seed_box([-0.5 * SIDE; 3], [0.5 * SIDE; 3])
        .unwrap();
    let body = BodySpec {
        particles,
        material: Material::elastic(1000.0, 1e5, 0.3, ElasticModel::FixedCorotated),
        velocity: Vector3::new(0.005, 0.01, -0.005),
        angular_velocity: Vector3::new(0.1, -0.2, 0.3),
    };
    let gravity = Vector3::new(0.0, 0.0, -9.81);
    Simulation::new(spec, SimParams { gravity }, vec![body], 1 << 30).unwrap()
}

/// The rigid world around the cube whose particles span [lo, hi] per axis.
fn world(lo: Vector3<f64>, hi: Vector3<f64>) -> RigidWorld {
    let params = LaggedParams {
        friction: 0.6,
        ..LaggedParams::mpm_default()
    };
    let ground = HalfSpace::new(Vector3::z(), Vector3::new(0.0, 0.0, lo.z + DEPTH), params)
        .unwrap()
        .with_mpm_contact(params);
    let kinematic = |mut b: RigidBody, speeds: [f64; 6]| {
        b.drives = speeds.map(|s| Drive::Velocity(Profile::Constant(s)));
        b.velocity = Vector3::new(speeds[0], speeds[1], speeds[2]);
        b.angular_velocity = Vector3::new(speeds[3], speeds[4], speeds[5]);
        b.mpm_contact = params;
        b
    };
    let pusher = kinematic(
        RigidBody::new(
            Shape::Box {
                half_extents: Vector3::new(0.01, 0.02, 0.02),
            },
            1000.0,
            Isometry3::translation(hi.x + 0.01 - DEPTH, 0.0, 0.0),
        )
        .unwrap(),
        [-0.005, 0.002, 0.0, 0.0, 0.0, 0.1],
    );
    // a capsule lying along y against the −x face
    let capsule = kinematic(
        RigidBody::new(
            Shape::Capsule {
                radius: 0.005,
                half_length: 0.01,
            },
            1000.0,
            Isometry3::new(
                Vector3::new(lo.x - 0.005 + DEPTH, 0.0, 0.0025),
                Vector3::new(std::f64::consts::FRAC_PI_2, 0.0, 0.0),
            ),
        )
        .unwrap(),
        [0.01, 0.0, 0.0, 0.0, 0.0, 0.0],
    );
    let mut sphere = RigidBody::new(
        Shape::Sphere { radius: 0.008 },
        500.0,
        Isometry3::translation(0.0025, -0.0025, hi.z + 0.008 - DEPTH),
    )
    .unwrap();
    sphere.mpm_contact = params;
    // a free cylinder, axis along x, leaning on the +y face
    let mut cylinder = RigidBody::new(
        Shape::Cylinder {
            radius: 0.006,
            half_length: 0.008,
        },
        800.0,
        Isometry3::new(
            Vector3::new(0.0, hi.y + 0.006 - DEPTH, 0.0025),
            Vector3::new(0.0, std::f64::consts::FRAC_PI_2, 0.0),
        ),
    )
    .unwrap();
    cylinder.mpm_contact = params;
    cylinder.angular_velocity = Vector3::new(0.0, 0.0, 0.4);
    RigidWorld {
        bodies: vec![pusher, capsule, sphere, cylinder],
        planes: vec![ground],
        rigid_rigid_contact: false,
        ..RigidWorld::default()
    }
}

/// The rigid state as one field per quantity: centres, quaternions, velocities, spins.
fn rigid_fields(w: &RigidWorld) -> [Vec<f64>; 4] {
    let mut out: [Vec<f64>; 4] = Default::default();
    for b in &w.bodies {
        let q = b.pose.rotation;
        out[0].extend(b.com().iter());
        out[1].extend([q.w, q.i, q.j, q.k]);
        out[2].extend(b.velocity.iter());
        out[3].extend(b.angular_velocity.iter());
    }
    out
}

fn mpm_contact_coupled_steps_match_the_cpu_on<D: Device + Clone>(dev: &D) {
    let sim = cube();
    let xs = &sim.particles().x;
    let lo = xs.iter().fold(Vector3::repeat(f64::MAX), |a, x| a.inf(x));
    let hi = xs.iter().fold(Vector3::repeat(f64::MIN), |a, x| a.sup(x));
    let mut cpu_world = world(lo, hi);
    let mut dev_world = cpu_world.clone();
    let mut cpu = sim.clone();
    let counted = Counted::new(dev.clone());
    let mut mpm = DeviceMpm::new(counted.clone(), &sim).unwrap();
    let mut contact = DeviceContact::new(&mpm, &dev_world).unwrap();
    let options = SolverOptions {
        rel_tol: 1e-3,
        ..SolverOptions::default()
    };
    let n = sim.particles().len();
    let passes = (n as f64).log2().ceil() as u64;
    let bodies = cpu_world.bodies.len();
    let (mut iterations, mut touched) = (0, vec![0usize; bodies]);
    for frame in 0..FRAMES {
        let cpu_rep =
            contact::coupled_step(&mut cpu_world, &mut cpu, DT, SUBSTEPS, &options).unwrap();
        let before = counted.traffic().unwrap();
        let rep = coupled_step(
            &mut mpm,
            &mut contact,
            &mut dev_world,
            DT,
            SUBSTEPS,
            1.0,
            &options,
            |_| Ok(()),
        )
        .unwrap();
        let span = counted.traffic().unwrap().since(&before);
        assert_eq!(
            rep.report.iterations_per_substep, cpu_rep.iterations_per_substep,
            "frame {frame}: quasi-Newton iterations per substep"
        );
        assert_eq!(
            rep.report.contacts_per_substep, cpu_rep.contacts_per_substep,
            "frame {frame}: contacts per substep"
        );
        // Launches and copies of the frame from what each substep's solve reports: the free
        // motion (prepare, iota, merge passes, bin starts, P2G, grid update), start, register,
        // the contact count, per gradient evaluation eval + node + column sums, per iteration
        // direction + one line launch per evaluation + axpy, the wrench sums, G2P and the
        // failure sum; copies back: the count, one per gradient evaluation and per line
        // evaluation, the wrench sums, the failure sum. One upload: the geometry table.
        let (mut launches, mut downloads) = (0u64, 0u64);
        for (k, &its) in rep.report.iterations_per_substep.iter().enumerate() {
            let (its, evals) = (its as u64, rep.line_evaluations_per_substep[k] as u64);
            if rep.report.contacts_per_substep[k] == 0 {
                // no contact: the solve ends after the count
                launches += (passes + 5) + 3 + 2;
                downloads += 2;
                continue;
            }
            launches += (passes + 5) + 3 + 3 * (its + 1) + 2 * its + evals + 1 + 2;
            downloads += 1 + (its + 1) + evals + 1 + 1;
            iterations += its;
        }
        assert_eq!(span.launches, launches, "frame {frame}: launches");
        assert_eq!(span.downloads, downloads, "frame {frame}: copies back");
        assert_eq!(span.uploads, 1, "frame {frame}: uploads");
        let line = span
            .kernels
            .iter()
            .find(|(k, _)| k == "dphd_mpm_contact_line")
            .map_or(0, |k| k.1);
        assert_eq!(
            line,
            rep.line_evaluations_per_substep.iter().sum::<usize>() as u64
        );
        // the impulses the rigid step received
        for (b, count) in touched.iter_mut().enumerate().take(bodies) {
            let (a, c) = (rep.report.body_impulses[b], cpu_rep.body_impulses[b]);
            for (x, y) in [(a.force, c.force), (a.torque, c.torque)] {
                let scale = y.amax();
                assert!(
                    (x - y).amax() <= 1e-10 * scale,
                    "frame {frame}, body {b}: impulse {x:?} vs CPU {y:?}"
                );
            }
            *count += usize::from(cpu_rep.body_impulses[b].force.norm() > 0.0);
        }
    }
    assert!(
        iterations >= 3 * (FRAMES * SUBSTEPS) as u64,
        "the solves iterate: {iterations}"
    );
    eprintln!("frames with an impulse per body (box, capsule, sphere, cylinder): {touched:?}");
    assert!(
        touched.iter().all(|&t| t > 0),
        "every body is touched: {touched:?}"
    );
    let mut back = sim.clone();
    mpm.download(&mut back).unwrap();
    let (a, b) = (fields(&back), fields(&cpu));
    let mut worst: f64 = 0.0;
    for (name, e) in [
        ("x", field_error(&a.x, &b.x)),
        ("v", field_error(&a.v, &b.v)),
        ("C", field_error(&a.c, &b.c)),
        ("F", field_error(&a.f, &b.f)),
    ] {
        eprintln!("contact parity {name}: {e:.2e}");
        assert!(e <= 1e-10, "{name}: {e:.3e} of its largest entry");
        worst = worst.max(e);
    }
    let (ra, rb) = (rigid_fields(&dev_world), rigid_fields(&cpu_world));
    for (name, (x, y)) in ["com", "quaternion", "velocity", "angular velocity"]
        .iter()
        .zip(ra.iter().zip(&rb))
    {
        let e = field_error(x, y);
        eprintln!("contact parity rigid {name}: {e:.2e}");
        assert!(e <= 1e-10, "rigid {name}: {e:.3e}");
    }
    eprintln!(
        "{iterations} QN iterations over {} substeps; worst particle field {worst:.2e}",
        FRAMES * SUBSTEPS
    );
}

#[test]
fn mesh_bodies_are_refused_by_the_device_registration() {
    use diffphd::gpu::mpm_contact::{geometry_table, DeviceCouplingError};
    let mesh = diffphd_mpm::rigid::mesh::box_mesh(&Vector3::repeat(0.01)).unwrap();
    let body = RigidBody::new(Shape::Mesh(mesh), 1000.0, Isometry3::identity()).unwrap();
    let world = RigidWorld {
        bodies: vec![body],
        ..RigidWorld::default()
    };
    let err = geometry_table(&world).unwrap_err();
    assert!(
        matches!(err, DeviceCouplingError::UnsupportedShape { body: 0, .. }),
        "{err}"
    );
}
