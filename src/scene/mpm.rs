//! Scene schema of MPM bodies (`[[mpm_body]]`), rigid bodies (`[[rigid_body]]`) and their
//! grid, substeps and contact solve (`[mpm]`): the convex MPM–rigid seed
//! (`shared/seeds/convex-mpm-rigid-paper.txt`, docs/mpm.md). Every key is documented in
//! `docs/scene-format.md` ("MPM and rigid bodies"). Units: SI (m, s, kg, Pa, N).
//!
//! The math is the `diffphd-mpm` crate's; [`crate::mpm`] turns these tables into its types.
//! Checks here are range checks of single keys; what needs the seeded particles (particles
//! outside the domain, the CFL bound, memory) is checked by [`crate::mpm::build()`], with the
//! same `(key path, message)` errors.

use crate::model::settings::Profile;
use serde::{Deserialize, Serialize};

use super::checks::{finite3, nonneg, positive, Check};

/// `[mpm]`: the background grid, the substeps and the MPM–rigid contact solve.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MpmSettings {
    /// Lower corner of the grid domain (m); the grid nodes are `domain_min + spacing·i`.
    pub domain_min: [f64; 3],
    /// Upper corner of the grid domain (m), rounded up to a whole number of cells.
    pub domain_max: [f64; 3],
    /// Grid spacing h (m), > 0.
    pub spacing: f64,
    /// Wall behaviour of the domain's faces (`[mpm.walls]`).
    #[serde(default)]
    pub walls: WallsSpec,
    /// Node layers per face that are wall nodes (≥ 1).
    #[serde(default = "d_wall_cells")]
    pub wall_cells: usize,
    /// MPM substeps N per frame (seed Eq. 3–4: one rigid step of Δt = `simulation.dt` around
    /// N MPM substeps of Δt/N), ≥ 1.
    #[serde(default = "d_substeps")]
    pub substeps: usize,
    /// CFL number c of the explicit bound Δt/N ≤ c·h/(c_p + |v|_max), c_p = √((λ+2μ)/ρ)
    /// (docs/mpm.md); in (0, 1].
    #[serde(default = "d_cfl")]
    pub cfl: f64,
    /// Relative tolerance ε_r of the quasi-Newton contact solve's stopping test (seed
    /// Algorithm 1; SAP's D-scaled test).
    #[serde(default = "d_rel_tol")]
    pub rel_tol: f64,
    /// Iteration cap of the quasi-Newton contact solve per substep.
    #[serde(default = "d_max_iterations")]
    pub max_iterations: usize,
    /// Grid velocity damping rate c (1/s): v* ← e^{−c·Δt/N} v* after each free motion, while
    /// the time is below `grid_damping_until` (a settling aid; 0 = off).
    #[serde(default)]
    pub grid_damping: f64,
    /// End time (s) of `grid_damping` (default: the whole run).
    #[serde(default)]
    pub grid_damping_until: Option<f64>,
    /// Whether rigid bodies collide with each other (rigid–obstacle contact is always on).
    #[serde(default = "yes")]
    pub rigid_rigid_contact: bool,
    /// How MPM and rigid bodies are coupled: `weak` (the seed's asynchronous time-splitting,
    /// N explicit substeps with the quasi-Newton contact solve) or `strong` (the seed's
    /// baseline \[10\]: one fully implicit convex problem per frame over grid velocities,
    /// rigid DoFs and contact, Newton with a sparse Cholesky; `rel_tol` and `max_iterations`
    /// then apply to Newton; needs `substeps = 1`; no CFL bound). docs/mpm.md.
    #[serde(default)]
    pub coupling: CouplingKind,
    /// Contact parameters of rigid bodies against `[[obstacle]]` planes and colliders
    /// (default: Drake's point-contact defaults; μ is the obstacle's `friction`).
    #[serde(default)]
    pub obstacle_contact: LaggedSpec,
    /// Contact parameters of MPM particles against `[[obstacle]]`s (default: the seed
    /// authors' per-particle values, `LaggedParams::mpm_default`; μ is the obstacle's
    /// `friction`).
    #[serde(default)]
    pub obstacle_mpm_contact: LaggedSpec,
}
fn d_wall_cells() -> usize {
    3
}
fn d_substeps() -> usize {
    1
}
fn d_cfl() -> f64 {
    0.3
}
fn d_rel_tol() -> f64 {
    5e-2
}
fn d_max_iterations() -> usize {
    1000
}
fn yes() -> bool {
    true
}

/// `mpm.coupling`: the weak (seed) or strong (the seed's baseline \[10\]) MPM–rigid coupling.
#[derive(
    Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CouplingKind {
    /// Asynchronous time-splitting (seed Eq. 3–4), explicit MPM substeps.
    #[default]
    Weak,
    /// One fully implicit convex problem per frame (`diffphd_mpm::strong`).
    Strong,
}

/// Boundary condition of a face of the grid domain.
#[derive(
    Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum WallKindSpec {
    /// v = 0 on the wall nodes.
    #[default]
    Sticky,
    /// vₙ = 0 (frictionless, bilateral).
    Slip,
    /// vₙ = 0 only when moving into the wall (frictionless, unilateral).
    Separating,
}

/// `[mpm.walls]`: `all` for every face, then per-face overrides.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WallsSpec {
    #[serde(default)]
    pub all: WallKindSpec,
    #[serde(default)]
    pub x_min: Option<WallKindSpec>,
    #[serde(default)]
    pub x_max: Option<WallKindSpec>,
    #[serde(default)]
    pub y_min: Option<WallKindSpec>,
    #[serde(default)]
    pub y_max: Option<WallKindSpec>,
    #[serde(default)]
    pub z_min: Option<WallKindSpec>,
    #[serde(default)]
    pub z_max: Option<WallKindSpec>,
}

impl WallsSpec {
    /// The six faces x−, x+, y−, y+, z−, z+.
    pub fn faces(&self) -> [WallKindSpec; 6] {
        [
            self.x_min, self.x_max, self.y_min, self.y_max, self.z_min, self.z_max,
        ]
        .map(|f| f.unwrap_or(self.all))
    }
}

/// Contact parameters of the lagged Hunt–Crossley model (docs/mpm.md, Drake's
/// `SapHuntCrossleyConstraint`); an absent key takes the default of its table.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LaggedSpec {
    /// Point stiffness k (N/m), > 0.
    #[serde(default)]
    pub stiffness: Option<f64>,
    /// Hunt–Crossley dissipation d (s/m), ≥ 0.
    #[serde(default)]
    pub dissipation: Option<f64>,
    /// Coulomb friction μ, ≥ 0.
    #[serde(default)]
    pub friction: Option<f64>,
    /// Stiction tolerance v_s (m/s), > 0.
    #[serde(default)]
    pub stiction_tolerance: Option<f64>,
    /// SAP friction regularisation σ, ≥ 0.
    #[serde(default)]
    pub sigma: Option<f64>,
}

impl LaggedSpec {
    fn validate(&self, k: &str) -> Check {
        let pos = [
            ("stiffness", self.stiffness),
            ("stiction_tolerance", self.stiction_tolerance),
        ];
        for (name, v) in pos {
            if let Some(v) = v {
                positive(&format!("{k}.{name}"), v)?;
            }
        }
        let nn = [
            ("dissipation", self.dissipation),
            ("friction", self.friction),
            ("sigma", self.sigma),
        ];
        for (name, v) in nn {
            if let Some(v) = v {
                nonneg(&format!("{k}.{name}"), v)?;
            }
        }
        Ok(())
    }
}

/// `[[mpm_body]]`: a material-point body seeded on the grid's sub-cell lattice.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MpmBodySpec {
    #[serde(default)]
    pub name: Option<String>,
    /// Region seeded with particles.
    pub shape: MpmShape,
    /// Particles per cell n³ (1, 8, 27, 64, …).
    #[serde(default = "d_ppc")]
    pub particles_per_cell: usize,
    /// Jitter of the lattice, a fraction of the sub-cell size in [0, 1].
    #[serde(default)]
    pub jitter: f64,
    /// Seed of the jitter.
    #[serde(default)]
    pub seed: u64,
    pub material: MpmMaterialSpec,
    /// Initial velocity v₀ (m/s).
    #[serde(default)]
    pub velocity: [f64; 3],
    /// Initial angular velocity ω (rad/s) about the particles' centroid.
    #[serde(default)]
    pub angular_velocity: [f64; 3],
}
fn d_ppc() -> usize {
    8
}

/// The region of an `[[mpm_body]]`.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum MpmShape {
    /// Axis-aligned box [`min`, `max`].
    Box { min: [f64; 3], max: [f64; 3] },
    /// Closed ball.
    Sphere { center: [f64; 3], radius: f64 },
    /// The inside of a closed triangle surface (`.obj`, `.off`, `.ply`, `.stl`, relative to
    /// the scene), scaled by `scale` then moved by `translation`.
    Mesh {
        path: String,
        #[serde(default = "one")]
        scale: f64,
        #[serde(default)]
        translation: [f64; 3],
    },
}
fn one() -> f64 {
    1.0
}

/// Constitutive model of an MPM body (docs/mpm.md).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MpmModel {
    /// ψ = μ‖F − R‖² + (λ/2)(J − 1)² (Stomakhin et al. 2012).
    FixedCorotated,
    /// ψ = (μ/2)(tr FᵀF − 3) − μ ln J + (λ/2)(ln J)².
    NeoHookean,
    /// StVK on the Hencky strain with the von Mises return mapping (dough); needs
    /// `yield_stress`.
    VonMises,
    /// StVK on the Hencky strain with the Drucker–Prager return mapping (sand, Klár et al.
    /// 2016); needs `friction_angle_deg`.
    DruckerPrager,
}

/// `[mpm_body.material]`
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MpmMaterialSpec {
    pub model: MpmModel,
    /// Density ρ (kg/m³).
    pub density: f64,
    /// Young's modulus E (Pa).
    pub youngs_modulus: f64,
    /// Poisson's ratio ν in (−1, 0.5).
    pub poisson_ratio: f64,
    /// `von_mises`: uniaxial yield stress σ_y (Pa).
    #[serde(default)]
    pub yield_stress: Option<f64>,
    /// `drucker_prager`: friction angle φ (degrees) of Klár et al. 2016's cone, fitted to
    /// Mohr–Coulomb in triaxial compression; a pile of it stands steeper than φ (29.6° for
    /// 25°, 39.3° for 35°: docs/mpm.md). Give this or `repose_angle_deg`.
    #[serde(default)]
    pub friction_angle_deg: Option<f64>,
    /// `drucker_prager`: the angle of repose (degrees) — the cone whose steady-shear friction
    /// τ̄/p is tan(angle) (`Plasticity::drucker_prager_repose`), so that a slowly poured pile
    /// stands at this slope. Give this or `friction_angle_deg`.
    #[serde(default)]
    pub repose_angle_deg: Option<f64>,
    /// `drucker_prager`: Tampubolon et al.'s volume correction.
    #[serde(default = "yes")]
    pub volume_correction: bool,
}

/// `[[rigid_body]]`: a rigid body with per-DoF drives.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RigidBodySpec {
    #[serde(default)]
    pub name: Option<String>,
    pub shape: RigidShapeSpec,
    /// Density (kg/m³): mass and inertia follow from it and the shape.
    pub density: f64,
    /// Position of the shape's frame (its centre for primitives; the mesh's origin) (m).
    #[serde(default)]
    pub position: [f64; 3],
    /// Rotation of the shape's frame: XYZ Euler angles in degrees (as `[body.transform]`).
    #[serde(default)]
    pub rotation_deg: [f64; 3],
    /// Initial centre-of-mass velocity (m/s).
    #[serde(default)]
    pub velocity: [f64; 3],
    /// Initial angular velocity (rad/s).
    #[serde(default)]
    pub angular_velocity: [f64; 3],
    /// Drives of the six DoFs (`[rigid_body.drive]`; default: all free).
    #[serde(default)]
    pub drive: DrivesSpec,
    /// Velocity damping rate c (1/s) of the force-driven and free linear DoFs:
    /// v ← e^{−c·Δt} v after every rigid step (a damped actuator; 0 = off).
    #[serde(default)]
    pub velocity_damping: f64,
    /// Contact parameters against other rigid bodies and obstacles (default: Drake's).
    #[serde(default)]
    pub contact: LaggedSpec,
    /// Contact parameters against MPM particles (default: `LaggedParams::mpm_default`).
    #[serde(default)]
    pub mpm_contact: LaggedSpec,
}

/// Shape of a rigid body, in its own frame.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum RigidShapeSpec {
    Box {
        half_extents: [f64; 3],
    },
    Sphere {
        radius: f64,
    },
    /// Points within `radius` of the segment z ∈ [−half_length, half_length].
    Capsule {
        radius: f64,
        half_length: f64,
    },
    /// Cylinder along z.
    Cylinder {
        radius: f64,
        half_length: f64,
    },
    /// Closed, consistently oriented triangle surface (`.obj`, `.off`, `.ply`, `.stl`).
    Mesh {
        path: String,
        #[serde(default = "one")]
        scale: f64,
    },
}

/// `[rigid_body.drive]`: one drive per DoF (world axes; `rx`… are the angular DoFs).
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DrivesSpec {
    #[serde(default)]
    pub x: DriveSpec,
    #[serde(default)]
    pub y: DriveSpec,
    #[serde(default)]
    pub z: DriveSpec,
    #[serde(default)]
    pub rx: DriveSpec,
    #[serde(default)]
    pub ry: DriveSpec,
    #[serde(default)]
    pub rz: DriveSpec,
}

impl DrivesSpec {
    /// The drives of (x, y, z, rx, ry, rz) with their key names.
    pub fn dofs(&self) -> [(&'static str, &DriveSpec); 6] {
        [
            ("x", &self.x),
            ("y", &self.y),
            ("z", &self.z),
            ("rx", &self.rx),
            ("ry", &self.ry),
            ("rz", &self.rz),
        ]
    }
}

/// How a DoF moves.
#[derive(
    Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum DriveKind {
    /// Gravity, contact and impulses.
    #[default]
    Free,
    /// Prescribed velocity (m/s, rad/s): kinematic.
    Velocity,
    /// Prescribed centre-of-mass position along the axis (m; linear DoFs only).
    Position,
    /// Free plus a force (N) or torque (N·m).
    Force,
}

/// One DoF's drive: the value u(t) = s(t)·(`value` + A·sin(2πf t + φ)), with s(t) the tool's
/// motion profile (`profile`, as for `[[body.force]]`) and the optional `sine` (A, f, φ).
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DriveSpec {
    #[serde(rename = "type", default)]
    pub kind: DriveKind,
    #[serde(default)]
    pub value: f64,
    #[serde(default)]
    pub sine: Option<SineSpec>,
    #[serde(default)]
    pub profile: Profile,
}

/// A·sin(2πf t + φ).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SineSpec {
    pub amplitude: f64,
    /// Frequency f (Hz).
    pub frequency: f64,
    /// Phase φ (rad).
    #[serde(default)]
    pub phase: f64,
}

impl DriveSpec {
    /// u(t) (see the type's doc).
    pub fn eval(&self, t: f64) -> f64 {
        let sine = self.sine.map_or(0.0, |s| {
            s.amplitude * (2.0 * std::f64::consts::PI * s.frequency * t + s.phase).sin()
        });
        self.profile.eval(t) * (self.value + sine)
    }

    fn validate(&self, k: &str, angular: bool) -> Check {
        if self.kind == DriveKind::Free && (self.value != 0.0 || self.sine.is_some()) {
            return Err((
                format!("{k}.value"),
                "a `free` DoF takes no value or sine (use type = \"force\")".into(),
            ));
        }
        if angular && self.kind == DriveKind::Position {
            return Err((
                format!("{k}.type"),
                "a position drive is for linear DoFs only (x, y, z); use \"velocity\"".into(),
            ));
        }
        if let Some(s) = &self.sine {
            if !(s.amplitude.is_finite() && s.phase.is_finite()) {
                return Err((format!("{k}.sine"), "expected finite numbers".into()));
            }
            nonneg(&format!("{k}.sine.frequency"), s.frequency)?;
        }
        validate_profile(&format!("{k}.profile"), &self.profile)
    }
}

fn validate_profile(k: &str, p: &Profile) -> Check {
    match p {
        Profile::Constant => Ok(()),
        Profile::Ramp { duration } => positive(&format!("{k}.duration"), *duration),
        Profile::Window { start, end } => {
            if start.is_finite() && end.is_finite() && start < end {
                Ok(())
            } else {
                Err((format!("{k}.end"), "expected finite start < end".into()))
            }
        }
        Profile::Table { times, values } => {
            let ok = !times.is_empty()
                && times.len() == values.len()
                && times.iter().chain(values).all(|v| v.is_finite())
                && times.windows(2).all(|w| w[1] > w[0]);
            if ok {
                Ok(())
            } else {
                Err((
                    format!("{k}.times"),
                    "expected as many finite values as times, times strictly increasing".into(),
                ))
            }
        }
    }
}

impl MpmSettings {
    /// Range checks of `[mpm]` (key prefix `k`).
    pub fn validate(&self, k: &str) -> Check {
        finite3(&format!("{k}.domain_min"), &self.domain_min)?;
        finite3(&format!("{k}.domain_max"), &self.domain_max)?;
        positive(&format!("{k}.spacing"), self.spacing)?;
        for a in 0..3 {
            if self.domain_max[a] <= self.domain_min[a] {
                return Err((
                    format!("{k}.domain_max"),
                    format!(
                        "component {a}: {} is not above domain_min {}",
                        self.domain_max[a], self.domain_min[a]
                    ),
                ));
            }
        }
        if self.wall_cells == 0 {
            return Err((format!("{k}.wall_cells"), "expected at least 1".into()));
        }
        if self.substeps == 0 {
            return Err((
                format!("{k}.substeps"),
                "expected at least 1 MPM substep per frame".into(),
            ));
        }
        if self.coupling == CouplingKind::Strong && self.substeps != 1 {
            return Err((
                format!("{k}.substeps"),
                format!(
                    "coupling = \"strong\" takes one implicit step per frame: expected \
                     substeps = 1, got {}",
                    self.substeps
                ),
            ));
        }
        if !(self.cfl > 0.0 && self.cfl <= 1.0) {
            return Err((
                format!("{k}.cfl"),
                format!("expected a CFL number in (0, 1], got {}", self.cfl),
            ));
        }
        positive(&format!("{k}.rel_tol"), self.rel_tol)?;
        if self.max_iterations == 0 {
            return Err((format!("{k}.max_iterations"), "expected at least 1".into()));
        }
        nonneg(&format!("{k}.grid_damping"), self.grid_damping)?;
        if let Some(t) = self.grid_damping_until {
            nonneg(&format!("{k}.grid_damping_until"), t)?;
        }
        self.obstacle_contact
            .validate(&format!("{k}.obstacle_contact"))?;
        self.obstacle_mpm_contact
            .validate(&format!("{k}.obstacle_mpm_contact"))?;
        for (name, s) in [
            ("obstacle_contact", &self.obstacle_contact),
            ("obstacle_mpm_contact", &self.obstacle_mpm_contact),
        ] {
            if s.friction.is_some() {
                return Err((
                    format!("{k}.{name}.friction"),
                    "an obstacle's friction is its `[[obstacle]] friction` key".into(),
                ));
            }
        }
        Ok(())
    }
}

impl MpmBodySpec {
    /// Range checks of one `[[mpm_body]]` (key prefix `k`).
    pub fn validate(&self, k: &str) -> Check {
        match &self.shape {
            MpmShape::Box { min, max } => {
                finite3(&format!("{k}.shape.min"), min)?;
                finite3(&format!("{k}.shape.max"), max)?;
                if (0..3).any(|a| max[a] <= min[a]) {
                    return Err((
                        format!("{k}.shape.max"),
                        "expected max above min on every axis".into(),
                    ));
                }
            }
            MpmShape::Sphere { center, radius } => {
                finite3(&format!("{k}.shape.center"), center)?;
                positive(&format!("{k}.shape.radius"), *radius)?;
            }
            MpmShape::Mesh {
                scale, translation, ..
            } => {
                positive(&format!("{k}.shape.scale"), *scale)?;
                finite3(&format!("{k}.shape.translation"), translation)?;
            }
        }
        let n = (self.particles_per_cell as f64).cbrt().round() as usize;
        if self.particles_per_cell == 0 || n * n * n != self.particles_per_cell {
            return Err((
                format!("{k}.particles_per_cell"),
                format!(
                    "{} is not a perfect cube (1, 8, 27, 64, ...)",
                    self.particles_per_cell
                ),
            ));
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            return Err((format!("{k}.jitter"), "expected a value in [0, 1]".into()));
        }
        finite3(&format!("{k}.velocity"), &self.velocity)?;
        finite3(&format!("{k}.angular_velocity"), &self.angular_velocity)?;
        let m = &self.material;
        let km = format!("{k}.material");
        positive(&format!("{km}.density"), m.density)?;
        positive(&format!("{km}.youngs_modulus"), m.youngs_modulus)?;
        if !(m.poisson_ratio > -1.0 && m.poisson_ratio < 0.5) {
            return Err((
                format!("{km}.poisson_ratio"),
                format!("expected a value in (-1, 0.5), got {}", m.poisson_ratio),
            ));
        }
        let needs = |key: &str, v: Option<f64>, model: &str| match v {
            Some(v) => positive(&format!("{km}.{key}"), v),
            None => Err((
                format!("{km}.{key}"),
                format!("model \"{model}\" needs `{key}`"),
            )),
        };
        let stray = |key: &str, present: bool| {
            if present {
                Err((
                    format!("{km}.{key}"),
                    format!("`{key}` belongs to another model (model = {:?})", m.model),
                ))
            } else {
                Ok(())
            }
        };
        match m.model {
            MpmModel::VonMises => {
                needs("yield_stress", m.yield_stress, "von_mises")?;
                stray("friction_angle_deg", m.friction_angle_deg.is_some())?;
                stray("repose_angle_deg", m.repose_angle_deg.is_some())?;
            }
            MpmModel::DruckerPrager => {
                let (key, angle) = match (m.friction_angle_deg, m.repose_angle_deg) {
                    (Some(_), Some(_)) => {
                        return Err((
                            format!("{km}.repose_angle_deg"),
                            "give `friction_angle_deg` or `repose_angle_deg`, not both".into(),
                        ))
                    }
                    (None, Some(a)) => ("repose_angle_deg", Some(a)),
                    (a, None) => ("friction_angle_deg", a),
                };
                needs(key, angle, "drucker_prager")?;
                if angle.is_some_and(|a| a >= 90.0) {
                    return Err((
                        format!("{km}.{key}"),
                        "expected an angle in (0, 90) degrees".into(),
                    ));
                }
                stray("yield_stress", m.yield_stress.is_some())?;
            }
            MpmModel::FixedCorotated | MpmModel::NeoHookean => {
                stray("yield_stress", m.yield_stress.is_some())?;
                stray("friction_angle_deg", m.friction_angle_deg.is_some())?;
                stray("repose_angle_deg", m.repose_angle_deg.is_some())?;
            }
        }
        Ok(())
    }
}

impl RigidBodySpec {
    /// Range checks of one `[[rigid_body]]` (key prefix `k`).
    pub fn validate(&self, k: &str) -> Check {
        let ks = format!("{k}.shape");
        match &self.shape {
            RigidShapeSpec::Box { half_extents } => {
                for (a, &e) in half_extents.iter().enumerate() {
                    positive(&format!("{ks}.half_extents[{a}]"), e)?;
                }
            }
            RigidShapeSpec::Sphere { radius } => positive(&format!("{ks}.radius"), *radius)?,
            RigidShapeSpec::Capsule {
                radius,
                half_length,
            }
            | RigidShapeSpec::Cylinder {
                radius,
                half_length,
            } => {
                positive(&format!("{ks}.radius"), *radius)?;
                positive(&format!("{ks}.half_length"), *half_length)?;
            }
            RigidShapeSpec::Mesh { scale, .. } => positive(&format!("{ks}.scale"), *scale)?,
        }
        positive(&format!("{k}.density"), self.density)
            .map_err(|(key, msg)| (key, format!("{msg} (a rigid body needs mass)")))?;
        finite3(&format!("{k}.position"), &self.position)?;
        finite3(&format!("{k}.rotation_deg"), &self.rotation_deg)?;
        finite3(&format!("{k}.velocity"), &self.velocity)?;
        finite3(&format!("{k}.angular_velocity"), &self.angular_velocity)?;
        for (i, (name, d)) in self.drive.dofs().into_iter().enumerate() {
            d.validate(&format!("{k}.drive.{name}"), i >= 3)?;
        }
        nonneg(&format!("{k}.velocity_damping"), self.velocity_damping)?;
        self.contact.validate(&format!("{k}.contact"))?;
        self.mpm_contact.validate(&format!("{k}.mpm_contact"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// u(t) = s(t)·(value + A sin(2πft + φ)): inside a window the sine rides on the value,
    /// outside it the drive is zero.
    #[test]
    fn drive_value_is_profile_times_value_plus_sine() {
        let d = DriveSpec {
            kind: DriveKind::Velocity,
            value: 0.1,
            sine: Some(SineSpec {
                amplitude: 0.05,
                frequency: 50.0,
                phase: 0.3,
            }),
            profile: Profile::Window {
                start: 0.01,
                end: 0.03,
            },
        };
        let t = 0.0123;
        let want = 0.1 + 0.05 * (2.0 * std::f64::consts::PI * 50.0 * t + 0.3).sin();
        assert!((d.eval(t) - want).abs() < 1e-15);
        assert_eq!(d.eval(0.005), 0.0);
        assert_eq!(d.eval(0.03), 0.0);
    }

    /// A position drive on an angular DoF and a value on a free DoF are refused naming the key.
    #[test]
    fn drive_checks_name_the_key() {
        let pos = DriveSpec {
            kind: DriveKind::Position,
            ..DriveSpec::default()
        };
        assert!(pos.validate("k", false).is_ok());
        assert_eq!(pos.validate("k", true).unwrap_err().0, "k.type");
        let free = DriveSpec {
            value: 1.0,
            ..DriveSpec::default()
        };
        assert_eq!(free.validate("k", false).unwrap_err().0, "k.value");
    }
}
