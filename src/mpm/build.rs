//! Scene → the `diffphd-mpm` crate's types: grid, seeded particles, materials, rigid bodies
//! with their drives, obstacles as half-spaces and kinematic colliders; the checks that need
//! the seeded particles (outside the domain, CFL, memory).

use super::system::{MpmState, MpmSystem};
use super::MpmSceneError;
use crate::model::Motion;
use crate::scene::mpm::{
    CouplingKind, DriveKind, DriveSpec, LaggedSpec, MpmBodySpec, MpmModel, MpmSettings, MpmShape,
    RigidBodySpec, RigidShapeSpec, WallKindSpec,
};
use crate::scene::{LoadedScene, ObstacleKind, ObstacleSpec};
use diffphd_mpm::contact::LaggedParams;
use diffphd_mpm::mpm::{
    cfl_time_step, memory_estimate, BodySpec, ElasticModel, GridSpec, Lattice, Material,
    Plasticity, SeededParticles, SimParams, Simulation, WallKind,
};
use diffphd_mpm::rigid::{Drive, HalfSpace, Profile, RigidBody, RigidWorld, Shape, TriMesh};
use nalgebra::{Isometry3, Translation3, UnitQuaternion, Vector3};
use std::sync::Arc;

type Invalid = (String, String);

/// A region's bounding box and, for a mesh region, its closed surface.
type Region = ([f64; 3], [f64; 3], Option<TriMesh>);

/// The memory an MPM scene will hold, estimated before anything is allocated:
/// `diffphd_mpm::mpm::memory_estimate` (41 bytes per node, 528 per particle) of the grid and
/// of an upper bound of the particle count (every lattice point of each body's bounding box).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MpmEstimate {
    pub bytes: u64,
    pub nodes: u64,
    pub particles: u64,
}

/// The grid of `[mpm]`: origin `domain_min`, ⌈(max − min)/h⌉ cells per axis.
pub fn grid_spec(m: &MpmSettings) -> GridSpec {
    let kind = |w: WallKindSpec| match w {
        WallKindSpec::Sticky => WallKind::Sticky,
        WallKindSpec::Slip => WallKind::Slip,
        WallKindSpec::Separating => WallKind::Separating,
    };
    let cells = [0, 1, 2].map(|a| {
        let c = ((m.domain_max[a] - m.domain_min[a]) / m.spacing - 1e-9).ceil();
        c.clamp(1.0, u32::MAX as f64) as usize
    });
    GridSpec {
        origin: m.domain_min,
        cells,
        h: m.spacing,
        walls: m.walls.faces().map(kind),
        wall_cells: m.wall_cells,
    }
}

fn lattice(m: &MpmSettings, b: &MpmBodySpec) -> Lattice {
    Lattice {
        origin: m.domain_min,
        h: m.spacing,
        ppc: b.particles_per_cell,
        jitter: b.jitter,
        seed: b.seed,
    }
}

/// The closed surface of a mesh file, scaled by `scale` and moved by `shift`; the key names it.
fn read_mesh(
    ls: &LoadedScene,
    key: &str,
    path: &str,
    scale: f64,
    shift: [f64; 3],
) -> Result<TriMesh, Invalid> {
    let surf = crate::mesh::trisurf::read_surface(&ls.resolve(path))
        .map_err(|e| (key.to_string(), e.to_string()))?;
    let vertices = surf
        .vertices
        .iter()
        .map(|v| Vector3::from(*v) * scale + Vector3::from(shift))
        .collect();
    TriMesh::new(vertices, surf.triangles).map_err(|e| (key.to_string(), format!("{path}: {e}")))
}

/// Bounding box of an MPM body's region (meshes read here).
fn region_bounds(ls: &LoadedScene, k: &str, b: &MpmBodySpec) -> Result<Region, Invalid> {
    Ok(match &b.shape {
        MpmShape::Box { min, max } => (*min, *max, None),
        MpmShape::Sphere { center, radius } => {
            (center.map(|c| c - radius), center.map(|c| c + radius), None)
        }
        MpmShape::Mesh {
            path,
            scale,
            translation,
        } => {
            let mesh = read_mesh(ls, &format!("{k}.shape.path"), path, *scale, *translation)?;
            let mut lo = [f64::INFINITY; 3];
            let mut hi = [f64::NEG_INFINITY; 3];
            for v in mesh.vertices() {
                for a in 0..3 {
                    lo[a] = lo[a].min(v[a]);
                    hi[a] = hi[a].max(v[a]);
                }
            }
            (lo, hi, Some(mesh))
        }
    })
}

/// Upper bound of a body's particle count: ppc times the lattice cells its box touches.
fn particle_bound(m: &MpmSettings, b: &MpmBodySpec, lo: [f64; 3], hi: [f64; 3]) -> u64 {
    (0..3).fold(b.particles_per_cell as u64, |acc, a| {
        let cells = ((hi[a] - lo[a]) / m.spacing).ceil().max(0.0) + 1.0;
        acc.saturating_mul(cells.min(u32::MAX as f64) as u64)
    })
}

/// The memory estimate of `ls`'s MPM state (`None` without `[mpm]`), before allocation.
pub fn estimate(ls: &LoadedScene) -> Result<Option<MpmEstimate>, MpmSceneError> {
    let invalid = |(key, msg): Invalid| MpmSceneError::Invalid {
        path: ls.path.display().to_string(),
        key,
        msg,
    };
    let Some(m) = &ls.scene.mpm else {
        return Ok(None);
    };
    let spec = grid_spec(m);
    let mut particles = 0u64;
    for (i, b) in ls.scene.mpm_bodies.iter().enumerate() {
        let (lo, hi, _) = region_bounds(ls, &format!("mpm_body[{i}]"), b).map_err(invalid)?;
        particles = particles.saturating_add(particle_bound(m, b, lo, hi));
    }
    Ok(Some(MpmEstimate {
        bytes: memory_estimate(&spec, particles),
        nodes: spec.node_count(),
        particles,
    }))
}

fn material(spec: &crate::scene::mpm::MpmMaterialSpec) -> Material {
    let (elastic, plasticity) = match spec.model {
        MpmModel::FixedCorotated => (ElasticModel::FixedCorotated, Plasticity::None),
        MpmModel::NeoHookean => (ElasticModel::NeoHookean, Plasticity::None),
        MpmModel::VonMises => (
            ElasticModel::StvkHencky,
            Plasticity::VonMises {
                yield_stress: spec.yield_stress.unwrap_or(0.0),
            },
        ),
        MpmModel::DruckerPrager => (
            ElasticModel::StvkHencky,
            match spec.repose_angle_deg {
                Some(a) => Plasticity::drucker_prager_repose(a, spec.volume_correction),
                None => Plasticity::DruckerPrager {
                    friction_angle_deg: spec.friction_angle_deg.unwrap_or(0.0),
                    volume_correction: spec.volume_correction,
                },
            },
        ),
    };
    Material {
        density: spec.density,
        youngs_modulus: spec.youngs_modulus,
        poisson_ratio: spec.poisson_ratio,
        elastic,
        plasticity,
    }
}

/// Seed one body and check its particles lie in the grid's interior.
fn seed(
    ls: &LoadedScene,
    m: &MpmSettings,
    spec: &GridSpec,
    i: usize,
    b: &MpmBodySpec,
) -> Result<SeededParticles, Invalid> {
    let k = format!("mpm_body[{i}]");
    let (lo, hi, mesh) = region_bounds(ls, &k, b)?;
    let lat = lattice(m, b);
    let seeded = match (&b.shape, mesh) {
        (MpmShape::Sphere { center, radius }, _) => lat.seed_sphere(*center, *radius),
        (_, Some(mesh)) => lat.seed_inside(lo, hi, |x| mesh.sdf(&Vector3::from(x)).0 < 0.0),
        _ => lat.seed_box(lo, hi),
    }
    .map_err(|e| (format!("{k}.shape"), e.to_string()))?;
    if seeded.positions.is_empty() {
        return Err((
            format!("{k}.shape"),
            format!(
                "no lattice point lies inside the shape (spacing {} m, {} particles per cell)",
                m.spacing, b.particles_per_cell
            ),
        ));
    }
    let h = spec.h;
    for (p, x) in seeded.positions.iter().enumerate() {
        for a in 0..3 {
            let (min, max) = (
                spec.origin[a] + h,
                spec.origin[a] + (spec.cells[a] as f64 - 1.0) * h,
            );
            if !(x[a] >= min && x[a] <= max) {
                return Err((
                    format!("{k}.shape"),
                    format!(
                        "particle {p} at ({:.6}, {:.6}, {:.6}) lies outside the grid domain's \
                         interior (axis {a}: [{min}, {max}], one cell inside mpm.domain_min/max)",
                        x[0], x[1], x[2]
                    ),
                ));
            }
        }
    }
    Ok(seeded)
}

fn lagged(base: LaggedParams, s: &LaggedSpec, friction: Option<f64>) -> LaggedParams {
    LaggedParams {
        stiffness: s.stiffness.unwrap_or(base.stiffness),
        dissipation: s.dissipation.unwrap_or(base.dissipation),
        friction: friction.or(s.friction).unwrap_or(base.friction),
        stiction_tolerance: s.stiction_tolerance.unwrap_or(base.stiction_tolerance),
        sigma: s.sigma.unwrap_or(base.sigma),
    }
}

fn drive(d: &DriveSpec) -> Drive {
    let constant = d.sine.is_none() && matches!(d.profile, crate::model::Profile::Constant);
    let profile = if constant {
        Profile::Constant(d.value)
    } else {
        let d = d.clone();
        Profile::Custom(Arc::new(move |t| d.eval(t)))
    };
    match d.kind {
        DriveKind::Free => Drive::Free,
        DriveKind::Velocity => Drive::Velocity(profile),
        DriveKind::Position => Drive::Position(profile),
        DriveKind::Force => Drive::Force(profile),
    }
}

fn rigid_shape(ls: &LoadedScene, k: &str, s: &RigidShapeSpec) -> Result<Shape, Invalid> {
    Ok(match s {
        RigidShapeSpec::Box { half_extents } => Shape::Box {
            half_extents: Vector3::from(*half_extents),
        },
        RigidShapeSpec::Sphere { radius } => Shape::Sphere { radius: *radius },
        RigidShapeSpec::Capsule {
            radius,
            half_length,
        } => Shape::Capsule {
            radius: *radius,
            half_length: *half_length,
        },
        RigidShapeSpec::Cylinder {
            radius,
            half_length,
        } => Shape::Cylinder {
            radius: *radius,
            half_length: *half_length,
        },
        RigidShapeSpec::Mesh { path, scale } => Shape::Mesh(read_mesh(
            ls,
            &format!("{k}.shape.path"),
            path,
            *scale,
            [0.0; 3],
        )?),
    })
}

fn pose(position: [f64; 3], rotation_deg: [f64; 3]) -> Isometry3<f64> {
    let r = rotation_deg.map(f64::to_radians);
    Isometry3::from_parts(
        Translation3::from(Vector3::from(position)),
        UnitQuaternion::from_euler_angles(r[0], r[1], r[2]),
    )
}

fn rigid_body(ls: &LoadedScene, i: usize, s: &RigidBodySpec) -> Result<RigidBody, Invalid> {
    let k = format!("rigid_body[{i}]");
    let shape = rigid_shape(ls, &k, &s.shape)?;
    let mut b = RigidBody::new(shape, s.density, pose(s.position, s.rotation_deg))
        .map_err(|e| (format!("{k}.shape"), e.to_string()))?;
    if !(b.mass() > 0.0 && b.mass().is_finite()) {
        return Err((
            format!("{k}.density"),
            format!("the body's mass is {} (zero or not finite)", b.mass()),
        ));
    }
    b.velocity = Vector3::from(s.velocity);
    b.angular_velocity = Vector3::from(s.angular_velocity);
    let dofs = s.drive.dofs();
    for (slot, (_, d)) in b.drives.iter_mut().zip(dofs) {
        *slot = drive(d);
    }
    b.validate_drives(i)
        .map_err(|e| (format!("{k}.drive"), e.to_string()))?;
    b.contact = lagged(LaggedParams::default(), &s.contact, None);
    b.mpm_contact = lagged(LaggedParams::mpm_default(), &s.mpm_contact, None);
    for (name, p) in [("contact", b.contact), ("mpm_contact", b.mpm_contact)] {
        p.validate()
            .map_err(|e| (format!("{k}.{name}"), e.to_string()))?;
    }
    Ok(b)
}

/// An `[[obstacle]]` as a collider: a fixed plane → a half-space; a sphere, box, capsule or
/// cylinder → a kinematic rigid body (every DoF velocity-driven by its `motion`).
fn obstacle(
    m: Option<&MpmSettings>,
    i: usize,
    o: &ObstacleSpec,
) -> Result<Result<HalfSpace, RigidBody>, Invalid> {
    let k = format!("obstacle[{i}]");
    let default = LaggedSpec::default();
    let (oc, omc) = m.map_or((&default, &default), |m| {
        (&m.obstacle_contact, &m.obstacle_mpm_contact)
    });
    let contact = lagged(LaggedParams::default(), oc, Some(o.friction));
    let mpm_contact = lagged(LaggedParams::mpm_default(), omc, Some(o.friction));
    if o.restitution != 0.0 {
        return Err((
            format!("{k}.restitution"),
            "MPM/rigid scenes use the lagged Hunt-Crossley model (dissipation in \
             mpm.obstacle_contact); restitution must be 0"
                .into(),
        ));
    }
    let v3 = |v: Option<[f64; 3]>| Vector3::from(v.unwrap_or([0.0; 3]));
    if o.kind == ObstacleKind::Plane {
        if !matches!(o.motion, Motion::Fixed) {
            return Err((
                format!("{k}.motion"),
                "a moving plane is not supported in MPM/rigid scenes (use a box)".into(),
            ));
        }
        let hs = HalfSpace::new(v3(o.normal), v3(o.point), contact)
            .map_err(|e| (k.clone(), e.to_string()))?;
        return Ok(Ok(hs.with_mpm_contact(mpm_contact)));
    }
    let (shape, centre, rotation) = match o.kind {
        ObstacleKind::Sphere => (
            Shape::Sphere {
                radius: o.radius.unwrap_or(0.0),
            },
            v3(o.center),
            UnitQuaternion::identity(),
        ),
        ObstacleKind::Box => {
            let (lo, hi) = (v3(o.min), v3(o.max));
            (
                Shape::Box {
                    half_extents: (hi - lo) * 0.5,
                },
                (hi + lo) * 0.5,
                UnitQuaternion::identity(),
            )
        }
        ObstacleKind::Capsule | ObstacleKind::Cylinder => {
            let (a, b) = (v3(o.a), v3(o.b));
            let axis = b - a;
            let (radius, half_length) = (o.radius.unwrap_or(0.0), 0.5 * axis.norm());
            let shape = if o.kind == ObstacleKind::Capsule {
                Shape::Capsule {
                    radius,
                    half_length,
                }
            } else {
                Shape::Cylinder {
                    radius,
                    half_length,
                }
            };
            let rot = UnitQuaternion::rotation_between(&Vector3::z(), &axis).unwrap_or_else(|| {
                UnitQuaternion::from_axis_angle(&Vector3::x_axis(), std::f64::consts::PI)
            });
            (shape, (a + b) * 0.5, rot)
        }
        ObstacleKind::Plane => {
            return Err((k, "a plane is a half-space, handled above".into()));
        }
    };
    let mut body = RigidBody::new(
        shape,
        1000.0,
        Isometry3::from_parts(Translation3::from(centre), rotation),
    )
    .map_err(|e| (k.clone(), e.to_string()))?;
    let (v, w) = match &o.motion {
        Motion::Fixed => (Vector3::zeros(), Vector3::zeros()),
        Motion::Translate { velocity } => (Vector3::from(*velocity), Vector3::zeros()),
        Motion::Rotate { axis, center, rate } => {
            if center.is_some_and(|c| (Vector3::from(c) - body.com()).norm() > 1e-12) {
                return Err((
                    format!("{k}.motion.center"),
                    "in MPM/rigid scenes an obstacle rotates about its own centre".into(),
                ));
            }
            let a = Vector3::from(*axis);
            (
                Vector3::zeros(),
                a / a.norm().max(f64::MIN_POSITIVE) * *rate,
            )
        }
    };
    body.velocity = v;
    body.angular_velocity = w;
    for d in 0..6 {
        let value = if d < 3 { v[d] } else { w[d - 3] };
        body.drives[d] = Drive::Velocity(Profile::Constant(value));
    }
    body.contact = contact;
    body.mpm_contact = mpm_contact;
    Ok(Err(body))
}

/// Build the system and its initial state from a validated MPM/rigid scene; the memory of
/// the MPM state is checked against `budget` (bytes and its name, e.g. `--max-memory`)
/// before it is allocated.
pub fn build(
    ls: &LoadedScene,
    budget: Option<(u64, String)>,
) -> Result<(MpmSystem, MpmState), MpmSceneError> {
    let path = ls.path.display().to_string();
    let invalid = |(key, msg): Invalid| MpmSceneError::Invalid {
        path: path.clone(),
        key,
        msg,
    };
    let scene = &ls.scene;
    let dt = scene.simulation.dt;
    let gravity = Vector3::from(scene.simulation.gravity);
    if let (Some(est), Some((budget_bytes, budget_name))) = (estimate(ls)?, budget.clone()) {
        if est.bytes > budget_bytes {
            return Err(MpmSceneError::Memory {
                path,
                needed_bytes: est.bytes,
                budget_bytes,
                budget_name,
                nodes: est.nodes,
                particles: est.particles,
            });
        }
    }
    let mut world = RigidWorld {
        gravity,
        rigid_rigid_contact: scene.mpm.as_ref().is_none_or(|m| m.rigid_rigid_contact),
        ..RigidWorld::default()
    };
    let mut names = vec![];
    let mut damping = vec![];
    for (i, s) in scene.rigid_bodies.iter().enumerate() {
        world.bodies.push(rigid_body(ls, i, s).map_err(invalid)?);
        names.push(s.name.clone().unwrap_or_else(|| format!("rigid_body[{i}]")));
        damping.push(s.velocity_damping);
    }
    for (i, o) in scene.obstacles.iter().enumerate() {
        match obstacle(scene.mpm.as_ref(), i, o).map_err(invalid)? {
            Ok(plane) => world.planes.push(plane),
            Err(body) => {
                world.bodies.push(body);
                names.push(o.name.clone().unwrap_or_else(|| format!("obstacle[{i}]")));
                damping.push(0.0);
            }
        }
    }
    let (sim, settings) = match &scene.mpm {
        Some(m) if !scene.mpm_bodies.is_empty() => {
            let spec = grid_spec(m);
            spec.validate()
                .map_err(|e| invalid(("mpm".into(), e.to_string())))?;
            let mut bodies = vec![];
            for (i, b) in scene.mpm_bodies.iter().enumerate() {
                let particles = seed(ls, m, &spec, i, b).map_err(invalid)?;
                let mat = material(&b.material);
                mat.validate(i)
                    .map_err(|e| invalid((format!("mpm_body[{i}].material"), e.to_string())))?;
                bodies.push(BodySpec {
                    particles,
                    material: mat,
                    velocity: Vector3::from(b.velocity),
                    angular_velocity: Vector3::from(b.angular_velocity),
                });
            }
            let sim = Simulation::new(spec, SimParams { gravity }, bodies, u64::MAX)
                .map_err(|e| invalid(("mpm".into(), e.to_string())))?;
            // The strong coupling is implicit: no explicit time-step bound.
            if m.coupling == CouplingKind::Weak {
                check_cfl(m, &sim, &world, dt).map_err(invalid)?;
            }
            (Some(sim), Some(m.clone()))
        }
        m => (None, m.clone()),
    };
    let system = MpmSystem::new(dt, settings.as_ref(), names, damping, scene);
    Ok((system, MpmState { sim, world }))
}

/// Δt/N against the explicit bound c·h/(c_p + |v|_max) of `diffphd_mpm::mpm::cfl_time_step`,
/// with |v|_max over the particles' initial speeds and the rigid bodies' initial surface
/// speeds (|v| + |ω|·r).
fn check_cfl(
    m: &MpmSettings,
    sim: &Simulation,
    world: &RigidWorld,
    dt: f64,
) -> Result<(), Invalid> {
    let particle = sim
        .particles()
        .v
        .iter()
        .map(|v| v.norm())
        .fold(0.0, f64::max);
    let rigid = world
        .bodies
        .iter()
        .map(|b| {
            b.velocity.norm()
                + b.angular_velocity.norm() * b.shape.bounding_radius(&Vector3::zeros())
        })
        .fold(0.0, f64::max);
    let vmax = particle.max(rigid);
    let bound = cfl_time_step(sim.materials(), m.spacing, vmax, m.cfl);
    let sub = dt / m.substeps as f64;
    if sub > bound {
        let cp = sim
            .materials()
            .iter()
            .map(Material::p_wave_speed)
            .fold(0.0, f64::max);
        let need = (dt / bound).ceil();
        return Err((
            "mpm.substeps".into(),
            format!(
                "dt/N = {sub:e} s is above the CFL bound c*h/(c_p + |v|max) = {bound:e} s \
                 (c = {}, h = {} m, c_p = {cp:.4} m/s, |v|max = {vmax:.4} m/s): use \
                 mpm.substeps >= {need} or a smaller simulation.dt",
                m.cfl, m.spacing
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::mpm::MpmMaterialSpec;

    fn sand(text: &str) -> MpmMaterialSpec {
        let base = "model = \"drucker_prager\"\ndensity = 1600.0\nyoungs_modulus = 1e6\npoisson_ratio = 0.3\n";
        toml::from_str(&format!("{base}{text}")).unwrap()
    }

    /// `friction_angle_deg` is Klár's φ as given; `repose_angle_deg` is the repose cone
    /// (`Plasticity::drucker_prager_repose`: Klár angle 30.29° for a 35° repose angle).
    #[test]
    fn the_two_sand_angles_build_their_cones() {
        let klar = material(&sand("friction_angle_deg = 35.0"));
        assert_eq!(
            klar.plasticity,
            Plasticity::DruckerPrager {
                friction_angle_deg: 35.0,
                volume_correction: true
            }
        );
        let repose = material(&sand("repose_angle_deg = 35.0\nvolume_correction = false"));
        assert_eq!(
            repose.plasticity,
            Plasticity::drucker_prager_repose(35.0, false)
        );
        let Plasticity::DruckerPrager {
            friction_angle_deg, ..
        } = repose.plasticity
        else {
            panic!("not Drucker–Prager: {:?}", repose.plasticity)
        };
        assert!(
            (friction_angle_deg - 30.29).abs() < 0.01,
            "{friction_angle_deg}"
        );
    }
}
