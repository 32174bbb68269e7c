//! Rigid-body dynamics with known answers: torque-free tumbling (energy and angular momentum),
//! a box on an incline (stick for μ > tan θ, slide with a = g(sin θ − μ cos θ) for μ < tan θ),
//! a sphere at rest on the ground (static penetration mg/k), drives, refused pairs.

use diffphd_mpm::contact::{LaggedParams, Wrench};
use diffphd_mpm::rigid::{Drive, HalfSpace, Profile, RigidBody, RigidError, RigidWorld, Shape};
use nalgebra::{Isometry3, Translation3, UnitQuaternion, Vector3};

fn free_box(omega: Vector3<f64>) -> RigidWorld {
    let shape = Shape::Box {
        half_extents: Vector3::new(0.05, 0.1, 0.2),
    };
    let mut body = RigidBody::new(shape, 1000.0, Isometry3::identity()).unwrap();
    body.angular_velocity = omega;
    RigidWorld {
        bodies: vec![body],
        gravity: Vector3::zeros(),
        ..RigidWorld::default()
    }
}

/// Max relative energy error and max |ΔL|/|L| over `steps` steps of size h.
fn spin_errors(h: f64, steps: usize) -> (f64, f64) {
    // Spin mostly about the intermediate axis: the Dzhanibekov flip makes ω swing wildly.
    let mut world = free_box(Vector3::new(0.05, 4.0, 0.05));
    let (e0, l0) = (
        world.bodies[0].kinetic_energy(),
        world.bodies[0].angular_momentum(),
    );
    let (mut de, mut dl) = (0.0f64, 0.0f64);
    for _ in 0..steps {
        world.step(h, &[]).unwrap();
        let b = &world.bodies[0];
        de = de.max((b.kinetic_energy() - e0).abs() / e0);
        dl = dl.max((b.angular_momentum() - l0).norm() / l0.norm());
    }
    (de, dl)
}

#[test]
fn torque_free_tumbling_conserves_angular_momentum_and_energy() {
    // 10 s at h = 1 ms: several intermediate-axis flips.
    let (de, dl) = spin_errors(1e-3, 10_000);
    // L is conserved to round-off (each sub-flow is an exact rotation); 1e4 steps accumulate ~1e-12.
    assert!(dl < 1e-11, "angular momentum drift {dl:.2e}");
    assert!(de < 2e-6, "energy error {de:.2e}");
    // Second order and bounded: halving h divides the energy error by ~4.
    let (de2, _) = spin_errors(5e-4, 20_000);
    let ratio = de / de2;
    eprintln!(
        "tumbling: max |ΔE|/E = {de:.2e} (h = 1 ms), {de2:.2e} (0.5 ms); max |ΔL|/|L| = {dl:.2e}"
    );
    assert!(
        (3.0..5.0).contains(&ratio),
        "energy error ratio {ratio:.2} for h/2"
    );
    // The motion is a genuine tumble: the body-frame ω_y reverses (intermediate-axis flip).
    let mut world = free_box(Vector3::new(0.05, 4.0, 0.05));
    let mut min_wy = f64::INFINITY;
    for _ in 0..5000 {
        world.step(1e-3, &[]).unwrap();
        let b = &world.bodies[0];
        min_wy = min_wy.min((b.pose.rotation.inverse() * b.angular_velocity).y);
    }
    assert!(min_wy < -3.0, "no flip observed (min body ω_y {min_wy})");
}

/// A 10 cm cube (1 kg) resting flush on an incline of angle θ (normal (sin θ, 0, cos θ)),
/// Drake's default contact parameters with friction μ on both surfaces. Returns the
/// down-slope displacement and velocity at each step.
fn incline(theta: f64, mu: f64, h: f64, steps: usize) -> Vec<(f64, f64)> {
    let params = LaggedParams {
        friction: mu,
        ..LaggedParams::default()
    };
    let n = Vector3::new(theta.sin(), 0.0, theta.cos());
    let down = Vector3::new(theta.cos(), 0.0, -theta.sin());
    let half = 0.05;
    let rot = UnitQuaternion::from_axis_angle(&Vector3::y_axis(), theta);
    let pose = Isometry3::from_parts(Translation3::from(n * half), rot);
    let mut body = RigidBody::new(
        Shape::Box {
            half_extents: Vector3::repeat(half),
        },
        1000.0,
        pose,
    )
    .unwrap();
    body.contact = params;
    let plane = HalfSpace::new(n, Vector3::zeros(), params).unwrap();
    let mut world = RigidWorld {
        bodies: vec![body],
        planes: vec![plane],
        ..RigidWorld::default()
    };
    let x0 = world.bodies[0].com();
    (0..steps)
        .map(|_| {
            world.step(h, &[]).unwrap();
            let b = &world.bodies[0];
            ((b.com() - x0).dot(&down), b.velocity.dot(&down))
        })
        .collect()
}

#[test]
fn box_slides_down_incline_with_coulomb_acceleration() {
    let (theta, mu, g, h) = (30f64.to_radians(), 0.3, 9.81, 1e-3);
    let traj = incline(theta, mu, h, 600);
    // Acceleration from the velocity between t = 0.2 s and 0.6 s (speed ≫ v_s = 1e-4 m/s there,
    // so the regularisation's f(s) = s/√(1+s²) is 1 to within 1e-6).
    let a = (traj[599].1 - traj[199].1) / 0.4;
    let expected = g * (theta.sin() - mu * theta.cos());
    eprintln!(
        "incline slide: a = {a:.5} m/s², expected {expected:.5} ({:+.3} %)",
        100.0 * (a / expected - 1.0)
    );
    assert!(
        (a - expected).abs() < 0.02 * expected,
        "a = {a:.4}, expected {expected:.4}"
    );
}

#[test]
fn box_sticks_on_incline_when_friction_exceeds_the_slope() {
    let (theta, mu) = (30f64.to_radians(), 0.8);
    let traj = incline(theta, mu, 1e-3, 1000);
    // Regularised stiction creeps at v = ε·r/√(1 − r²), r = tan θ/μ, ε = v_s = 1e-4 m/s
    // (σ-regularisation μσwn₀ ≈ 4e-6 m/s is below v_s): 1.04e-4 m/s. Over 1 s with the first
    // step's friction-free slip (n₀ = 0 at φ₀ = 0: g sin θ h² ≈ 5e-6 m) the bound is
    let r = theta.tan() / mu;
    let creep = 1e-4 * r / (1.0 - r * r).sqrt();
    let bound = 1.5 * creep * 1.0 + 1e-5;
    let disp = traj.last().unwrap().0;
    eprintln!(
        "incline stick: displacement after 1 s {disp:.3e} m (bound {bound:.3e}), v = {:.3e}",
        traj.last().unwrap().1
    );
    assert!(
        disp.abs() < bound,
        "displacement {disp:.3e} m exceeds {bound:.3e} m"
    );
    // And the late velocity is the creep speed, not an acceleration.
    let v = traj.last().unwrap().1;
    assert!(
        v.abs() < 1.5 * creep,
        "late velocity {v:.3e} m/s, creep {creep:.3e}"
    );
    // Control: the same box slides for μ just below tan θ.
    let slide = incline(theta, 0.9 * theta.tan(), 1e-3, 1000);
    assert!(slide.last().unwrap().0 > 100.0 * bound);
}

#[test]
fn sphere_rests_on_ground_at_the_static_penetration() {
    let params = LaggedParams::default();
    let r = 0.05;
    let mut body = RigidBody::new(
        Shape::Sphere { radius: r },
        1000.0,
        Isometry3::translation(0.0, 0.0, r + 0.01),
    )
    .unwrap();
    body.contact = params;
    let ground = HalfSpace::new(Vector3::z(), Vector3::zeros(), params).unwrap();
    let mut world = RigidWorld {
        bodies: vec![body],
        planes: vec![ground],
        ..RigidWorld::default()
    };
    let h = 1e-3;
    let mut last = Default::default();
    for _ in 0..1500 {
        last = world.step(h, &[]).unwrap();
    }
    let b = &world.bodies[0];
    let m = b.mass();
    // Series stiffness of two default surfaces: k/2.
    let expected = m * 9.81 / (0.5 * params.stiffness);
    let penetration = r - b.com().z;
    assert!(
        (penetration - expected).abs() < 1e-3 * expected,
        "{penetration:e} vs {expected:e}"
    );
    assert!(b.velocity.norm() < 1e-9);
    // The ground carries the weight: impulse per step = m g h.
    let total: Vector3<f64> = last.contacts.iter().map(|c| c.impulse).sum();
    assert!((total.z - m * 9.81 * h).abs() < 1e-6 * m * 9.81 * h);
}

#[test]
fn drives_prescribe_velocity_position_and_force() {
    let shape = Shape::Box {
        half_extents: Vector3::repeat(0.1),
    };
    let mut body = RigidBody::new(shape, 500.0, Isometry3::identity()).unwrap();
    body.drives[0] = Drive::Velocity(Profile::Sine {
        offset: 0.0,
        amplitude: 0.2,
        frequency: 1.0,
        phase: 0.0,
    });
    body.drives[1] = Drive::Position(Profile::Keyframes(vec![(0.0, 0.0), (0.5, 0.3), (1.0, 0.3)]));
    body.drives[2] = Drive::Force(Profile::Constant(10.0));
    body.drives[5] = Drive::Velocity(Profile::Constant(2.0));
    let m = body.mass();
    let mut world = RigidWorld {
        bodies: vec![body],
        ..RigidWorld::default()
    };
    let h = 1e-3;
    for _ in 0..750 {
        world.step(h, &[]).unwrap();
    }
    let b = &world.bodies[0];
    let t = world.time;
    assert!((b.velocity.x - 0.2 * (2.0 * std::f64::consts::PI * t).sin()).abs() < 1e-12);
    assert!(
        (b.com().y - 0.3).abs() < 1e-12,
        "position drive: y = {}",
        b.com().y
    );
    // z: force-driven with gravity: a = F/m − g, exactly (explicit Euler on a constant force).
    let a = 10.0 / m - 9.81;
    assert!((b.velocity.z - a * t).abs() < 1e-9 * (a * t).abs().max(1.0));
    assert!((b.angular_velocity.z - 2.0).abs() < 1e-12);
    let angle = 2.0
        * b.pose
            .rotation
            .quaternion()
            .k
            .atan2(b.pose.rotation.quaternion().w);
    assert!(
        (angle - 2.0 * t).abs() < 1e-9,
        "rotation angle {angle} vs {}",
        2.0 * t
    );
}

#[test]
fn external_impulse_changes_momentum_exactly() {
    let mut world = free_box(Vector3::zeros());
    let p = Wrench {
        force: Vector3::new(0.3, -0.2, 0.1),
        torque: Vector3::new(0.0, 0.01, 0.0),
    };
    let l_expected = p.torque;
    world.step(1e-3, &[p]).unwrap();
    let b = &world.bodies[0];
    assert!((b.velocity * b.mass() - p.force).norm() < 1e-15);
    assert!((b.angular_momentum() - l_expected).norm() < 1e-15);
    assert!(matches!(
        world.step(1e-3, &[p, p]),
        Err(RigidError::WrenchCount {
            got: 2,
            expected: 1
        })
    ));
}

#[test]
fn box_stacks_on_box_and_unsupported_pairs_are_refused() {
    let params = LaggedParams::default();
    // A 6 cm cube centred on a 10 cm cube: its corners rest on the lower cube's top face
    // (vertex-in-box contact; corner-on-corner stacking would need edge–edge contact).
    let (half, top) = (0.05, 0.03);
    let make = |hx: f64, z: f64| {
        let mut b = RigidBody::new(
            Shape::Box {
                half_extents: Vector3::repeat(hx),
            },
            1000.0,
            Isometry3::translation(0.0, 0.0, z),
        )
        .unwrap();
        b.contact = params;
        b
    };
    let ground = HalfSpace::new(Vector3::z(), Vector3::zeros(), params).unwrap();
    let mut world = RigidWorld {
        bodies: vec![make(half, half), make(top, 2.0 * half + top)],
        planes: vec![ground],
        ..RigidWorld::default()
    };
    for _ in 0..500 {
        world.step(1e-3, &[]).unwrap();
    }
    // Both at rest; the top box rests on the bottom one (penetrations ~mg/k ≈ 1e-5 m).
    let (lo, hi) = (world.bodies[0].com(), world.bodies[1].com());
    let gap = hi.z - lo.z - (half + top);
    assert!(gap.abs() < 1e-4, "gap {gap}");
    assert!(world.bodies[1].velocity.norm() < 1e-6);
    // Cylinder against box is refused, not ignored; excluding the pair allows the step.
    let cap = RigidBody::new(
        Shape::Cylinder {
            radius: 0.02,
            half_length: 0.05,
        },
        1000.0,
        Isometry3::translation(1.0, 0.0, 0.5),
    )
    .unwrap();
    world.bodies.push(cap);
    assert!(matches!(
        world.step(1e-3, &[]),
        Err(RigidError::Unsupported { .. })
    ));
    world.excluded_pairs = vec![(0, 2), (1, 2)];
    world.step(1e-3, &[]).unwrap();
}

fn total_momenta(world: &RigidWorld) -> (Vector3<f64>, Vector3<f64>) {
    world
        .bodies
        .iter()
        .fold((Vector3::zeros(), Vector3::zeros()), |(p, l), b| {
            let pb = b.velocity * b.mass();
            (p + pb, l + b.com().cross(&pb) + b.angular_momentum())
        })
}

#[test]
fn rigid_rigid_collisions_conserve_momentum() {
    // Off-centre frictional collisions in zero gravity: sphere–box (sphere against the box's
    // signed distance), box–box (vertex-in-box both ways), capsule–box and capsule–capsule
    // (capsule axis against the other's convex distance). Impulses are equal and opposite
    // at a common point, so linear and angular momentum (about the origin) are conserved.
    let params = LaggedParams {
        friction: 0.7,
        ..LaggedParams::default()
    };
    let target = Shape::Box {
        half_extents: Vector3::new(0.05, 0.04, 0.03),
    };
    let capsule = Shape::Capsule {
        radius: 0.015,
        half_length: 0.03,
    };
    let cases: [(Shape, Vector3<f64>, Shape); 4] = [
        (
            Shape::Sphere { radius: 0.04 },
            Vector3::new(-0.12, 0.03, 0.02),
            target.clone(),
        ),
        (
            Shape::Box {
                half_extents: Vector3::new(0.03, 0.02, 0.025),
            },
            Vector3::new(-0.12, 0.035, 0.01),
            target.clone(),
        ),
        (capsule.clone(), Vector3::new(-0.1, 0.03, 0.015), target),
        (capsule.clone(), Vector3::new(-0.06, 0.01, 0.0), capsule),
    ];
    for (shape, start, target) in cases {
        let name = format!("{}→{}", shape.name(), target.name());
        let rot = UnitQuaternion::from_euler_angles(0.2, 0.3, 0.1);
        let mut a = RigidBody::new(
            shape,
            800.0,
            Isometry3::from_parts(Translation3::from(start), rot),
        )
        .unwrap();
        a.velocity = Vector3::new(1.5, 0.0, 0.0);
        a.angular_velocity = Vector3::new(0.0, 3.0, -2.0);
        a.contact = params;
        let mut b = RigidBody::new(target, 1200.0, Isometry3::identity()).unwrap();
        b.contact = params;
        let mut world = RigidWorld {
            bodies: vec![a, b],
            gravity: Vector3::zeros(),
            ..RigidWorld::default()
        };
        let (p0, l0) = total_momenta(&world);
        let mut contacts = 0;
        for _ in 0..150 {
            contacts += world.step(1e-3, &[]).unwrap().contacts.len();
        }
        let (p1, l1) = total_momenta(&world);
        assert!(contacts > 0, "{name}: no collision happened");
        assert!(
            world.bodies[1].velocity.norm() > 0.1,
            "{name}: target not pushed"
        );
        assert!(
            (p1 - p0).norm() < 1e-10 * p0.norm(),
            "{name}: p {p0:?} -> {p1:?}"
        );
        assert!(
            (l1 - l0).norm() < 1e-10 * (l0.norm() + 0.1 * p0.norm()),
            "{name}: L {l0:?} -> {l1:?}"
        );
    }
}

#[test]
fn prescribed_angular_dof_leaves_free_momentum_rows_unchanged() {
    // A tilted box (world inertia couples ω_x, ω_z) whose ω_z is prescribed to jump to 2 rad/s
    // while ω_x, ω_y are free: the constrained step changes only the ω_z row of L = I_w ω
    // (the free rows feel no impulse), which fixes ω_x, ω_y through the coupling.
    let rot = UnitQuaternion::from_euler_angles(0.5, -0.3, 0.8);
    let mut body = RigidBody::new(
        Shape::Box {
            half_extents: Vector3::new(0.05, 0.1, 0.2),
        },
        1000.0,
        Isometry3::from_parts(Translation3::identity(), rot),
    )
    .unwrap();
    body.angular_velocity = Vector3::new(0.3, -0.2, 0.0);
    body.drives[5] = Drive::Velocity(Profile::Constant(2.0));
    let iw = body.inertia_world();
    let l_before = iw * body.angular_velocity;
    let mut world = RigidWorld {
        bodies: vec![body],
        gravity: Vector3::zeros(),
        ..RigidWorld::default()
    };
    world.step(1e-3, &[]).unwrap();
    let w = world.bodies[0].angular_velocity;
    assert!((w.z - 2.0).abs() < 1e-15);
    let l_after = iw * w;
    assert!(
        (l_after.x - l_before.x).abs() < 1e-14 && (l_after.y - l_before.y).abs() < 1e-14,
        "{l_before:?} -> {l_after:?}"
    );
    // The coupling is real: ω_x, ω_y changed.
    assert!((w.xy() - Vector3::new(0.3, -0.2, 0.0).xy()).norm() > 1e-2);
}

#[test]
fn sphere_rests_on_a_box_on_the_ground() {
    // Centred: off-centre, the uneven corner loads tilt the box and the ball (correctly) rolls.
    let params = LaggedParams::default();
    let half = 0.05;
    let r = 0.03;
    let mut base = RigidBody::new(
        Shape::Box {
            half_extents: Vector3::repeat(half),
        },
        1000.0,
        Isometry3::translation(0.0, 0.0, half),
    )
    .unwrap();
    base.contact = params;
    let mut ball = RigidBody::new(
        Shape::Sphere { radius: r },
        1000.0,
        Isometry3::translation(0.0, 0.0, 2.0 * half + r + 0.005),
    )
    .unwrap();
    ball.contact = params;
    let ground = HalfSpace::new(Vector3::z(), Vector3::zeros(), params).unwrap();
    let mut world = RigidWorld {
        bodies: vec![base, ball],
        planes: vec![ground],
        ..RigidWorld::default()
    };
    for _ in 0..800 {
        world.step(1e-3, &[]).unwrap();
    }
    let (mb, ms) = (world.bodies[0].mass(), world.bodies[1].mass());
    let k = 0.5 * params.stiffness;
    // The box sinks by (mb + ms)g/(4k) on its four bottom corners; the ball sinks into the box
    // by ms g/k on its single contact.
    let expected_box = half - (mb + ms) * 9.81 / (4.0 * k);
    let expected_ball = expected_box + half + r - ms * 9.81 / k;
    assert!(
        (world.bodies[0].com().z - expected_box).abs() < 1e-7,
        "box z {}",
        world.bodies[0].com().z
    );
    assert!(
        (world.bodies[1].com().z - expected_ball).abs() < 1e-7,
        "ball z {}",
        world.bodies[1].com().z
    );
    let b = &world.bodies[1];
    assert!(
        b.velocity.norm() < 1e-6,
        "ball v {:?} ω {:?}",
        b.velocity,
        b.angular_velocity
    );
}

#[test]
fn capsule_lies_on_a_box_on_two_end_contacts() {
    let params = LaggedParams::default();
    let (half, r, l) = (0.05, 0.01, 0.03);
    let mut base = RigidBody::new(
        Shape::Box {
            half_extents: Vector3::repeat(half),
        },
        1000.0,
        Isometry3::translation(0.0, 0.0, half),
    )
    .unwrap();
    base.contact = params;
    // Axis along x (capsule z rotated onto x), resting 2 mm above the top face.
    let rot = UnitQuaternion::from_axis_angle(&Vector3::y_axis(), std::f64::consts::FRAC_PI_2);
    let mut cap = RigidBody::new(
        Shape::Capsule {
            radius: r,
            half_length: l,
        },
        1000.0,
        Isometry3::from_parts(Translation3::new(0.0, 0.0, 2.0 * half + r + 0.002), rot),
    )
    .unwrap();
    cap.contact = params;
    let ground = HalfSpace::new(Vector3::z(), Vector3::zeros(), params).unwrap();
    let mut world = RigidWorld {
        bodies: vec![base, cap],
        planes: vec![ground],
        ..RigidWorld::default()
    };
    let mut report = Default::default();
    for _ in 0..800 {
        report = world.step(1e-3, &[]).unwrap();
    }
    let (mb, mc) = (world.bodies[0].mass(), world.bodies[1].mass());
    let k = 0.5 * params.stiffness;
    let capsule_contacts: Vec<_> = report
        .contacts
        .iter()
        .filter(|c| c.body_b == Some(0))
        .collect();
    assert_eq!(
        capsule_contacts.len(),
        2,
        "a lying capsule rests on both ends"
    );
    // Box: (mb + mc)g/(4k) on four corners; capsule: mc g/2 per end contact.
    let z_box = half - (mb + mc) * 9.81 / (4.0 * k);
    let z_cap = z_box + half + r - 0.5 * mc * 9.81 / k;
    assert!((world.bodies[0].com().z - z_box).abs() < 1e-7);
    assert!(
        (world.bodies[1].com().z - z_cap).abs() < 1e-7,
        "capsule z {}",
        world.bodies[1].com().z
    );
    assert!(
        world.bodies[1].velocity.norm() < 1e-6 && world.bodies[1].angular_velocity.norm() < 1e-4
    );
}

#[test]
fn crossed_capsules_touch_at_the_interior_closest_point() {
    // Capsule A along x at height 0.025 over capsule B along y, radii 0.015: the axes' closest
    // points are both interior (the midpoints), the overlap is 0.005 m.
    let cap = |pose: Isometry3<f64>| {
        RigidBody::new(
            Shape::Capsule {
                radius: 0.015,
                half_length: 0.05,
            },
            1000.0,
            pose,
        )
        .unwrap()
    };
    let along_x = UnitQuaternion::from_axis_angle(&Vector3::y_axis(), std::f64::consts::FRAC_PI_2);
    let along_y = UnitQuaternion::from_axis_angle(&Vector3::x_axis(), std::f64::consts::FRAC_PI_2);
    let world = RigidWorld {
        bodies: vec![
            cap(Isometry3::from_parts(
                Translation3::new(0.01, 0.0, 0.025),
                along_x,
            )),
            cap(Isometry3::from_parts(
                Translation3::new(0.0, -0.02, 0.0),
                along_y,
            )),
        ],
        ..RigidWorld::default()
    };
    let contacts = world.detect_contacts().unwrap();
    assert_eq!(contacts.len(), 1, "{contacts:?}");
    let c = &contacts[0];
    assert!((c.phi0 + 0.005).abs() < 1e-9, "φ = {}", c.phi0);
    assert!(
        (c.normal - Vector3::z()).norm() < 1e-6,
        "n = {:?}",
        c.normal
    );
    // Midway between the two surfaces, above the crossing point.
    assert!(
        (c.point - Vector3::new(0.0, 0.0, 0.0125)).norm() < 1e-6,
        "point {:?}",
        c.point
    );
}
