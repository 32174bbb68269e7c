//! Typed scene schema (version 1). Documented key by key in `docs/scene-format.md`.
//! Units: SI throughout (m, s, kg, Pa, N, rad/s); angles in degrees where the key says `_deg`.

use super::contact::ObstacleSpec;
use super::select::{ElementSelector, NodeSelector};
use crate::material::MaterialModel;
use crate::mesh::ElementKind;
use crate::model::settings::*;
use serde::{Deserialize, Serialize};

/// Root of a scene file.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scene {
    /// Must be 1.
    pub schema_version: u32,
    #[serde(default)]
    pub simulation: Simulation,
    /// One or more bodies (`[[body]]`).
    #[serde(rename = "body", default)]
    pub bodies: Vec<Body>,
    #[serde(default)]
    pub solver: SolverSettings,
    #[serde(default)]
    pub output: Output,
    /// Adjoint settings (`[backward]`).
    #[serde(default)]
    pub backward: BackwardSettings,
    /// Loss of inverse problems and gradient checks (`[loss]`).
    #[serde(default)]
    pub loss: Option<LossSpec>,
    /// Differentiable parameters (`[[parameter]]`), used by `gradcheck` and `optimize`.
    #[serde(rename = "parameter", default)]
    pub parameters: Vec<ParamSpec>,
    /// Optimizer settings of `diffphd optimize` (`[optimize]`).
    #[serde(default)]
    pub optimize: OptimizeSettings,
    /// Rigid obstacles (`[[obstacle]]`), see `docs/contact.md`.
    #[serde(rename = "obstacle", default)]
    pub obstacles: Vec<ObstacleSpec>,
    /// Contact model settings (`[contact]`), see `docs/contact.md`.
    #[serde(default)]
    pub contact: ContactSettings,
    /// Grid, substeps and contact solve of MPM and rigid bodies (`[mpm]`, docs/mpm.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpm: Option<super::mpm::MpmSettings>,
    /// Material-point bodies (`[[mpm_body]]`, docs/mpm.md).
    #[serde(rename = "mpm_body", default, skip_serializing_if = "Vec::is_empty")]
    pub mpm_bodies: Vec<super::mpm::MpmBodySpec>,
    /// Rigid bodies (`[[rigid_body]]`, docs/mpm.md).
    #[serde(rename = "rigid_body", default, skip_serializing_if = "Vec::is_empty")]
    pub rigid_bodies: Vec<super::mpm::RigidBodySpec>,
}

impl Scene {
    /// Whether the scene is an MPM/rigid scene (`[[mpm_body]]` or `[[rigid_body]]`), run by
    /// `crate::mpm` instead of the PD simulator.
    pub fn is_mpm(&self) -> bool {
        !self.mpm_bodies.is_empty() || !self.rigid_bodies.is_empty()
    }
}

/// `[optimize]`: L-BFGS settings and stopping rules of `diffphd optimize` (docs/optimize.md).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OptimizeSettings {
    /// L-BFGS iteration cap.
    #[serde(default = "d_opt_iterations")]
    pub max_iterations: usize,
    /// Cap on loss+gradient evaluations (forward + adjoint rollouts), line searches included.
    #[serde(default = "d_opt_evaluations")]
    pub max_evaluations: usize,
    /// Stop when $\|\nabla_u\mathcal L\|_2\le$ `grad_tol`$\cdot\|\nabla_u\mathcal L(u_0)\|_2$
    /// (relative to the first gradient, in the optimizer variables u).
    #[serde(default = "d_grad_tol")]
    pub grad_tol: f64,
    /// Stop when $\|\nabla_u\mathcal L\|_2\le$ `abs_grad_tol` (absolute; 0 = off).
    #[serde(default)]
    pub abs_grad_tol: f64,
    /// Stop when an iteration changes the loss by at most `rel_loss_tol` of its previous value.
    #[serde(default = "d_rel_loss_tol")]
    pub rel_loss_tol: f64,
    /// Stop when the loss is at most this value.
    #[serde(default)]
    pub target_loss: Option<f64>,
    /// Number of L-BFGS correction pairs kept.
    #[serde(default = "d_lbfgs_memory")]
    pub lbfgs_memory: usize,
    /// `"more_thuente"` (default) or `"hager_zhang"`.
    #[serde(default)]
    pub line_search: LineSearchKind,
    /// Length (max-norm, optimizer variables) of the first trial step of the first line search.
    #[serde(default = "d_initial_step")]
    pub initial_step: f64,
}
fn d_opt_iterations() -> usize {
    50
}
fn d_opt_evaluations() -> usize {
    200
}
fn d_grad_tol() -> f64 {
    1e-6
}
fn d_rel_loss_tol() -> f64 {
    1e-12
}
fn d_lbfgs_memory() -> usize {
    7
}
fn d_initial_step() -> f64 {
    0.5
}
impl Default for OptimizeSettings {
    fn default() -> Self {
        OptimizeSettings {
            max_iterations: d_opt_iterations(),
            max_evaluations: d_opt_evaluations(),
            grad_tol: d_grad_tol(),
            abs_grad_tol: 0.0,
            rel_loss_tol: d_rel_loss_tol(),
            target_loss: None,
            lbfgs_memory: d_lbfgs_memory(),
            line_search: LineSearchKind::MoreThuente,
            initial_step: d_initial_step(),
        }
    }
}

/// Line search of the L-BFGS optimizer.
#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum LineSearchKind {
    #[default]
    MoreThuente,
    HagerZhang,
}

/// A scalar, or one value per component for vector parameter kinds.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(untagged)]
pub enum PerComponent {
    One(f64),
    Three([f64; 3]),
}

impl PerComponent {
    /// The value for component `c` (a scalar applies to every component).
    pub fn get(&self, c: usize) -> f64 {
        match self {
            PerComponent::One(v) => *v,
            PerComponent::Three(v) => v[c.min(2)],
        }
    }
}

/// `[loss]`: weighted terms.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LossSpec {
    #[serde(rename = "term", default)]
    pub terms: Vec<LossTermSpec>,
    /// Reference trajectory for `tracking` terms without `reference_dir`: the same scene
    /// simulated with these `--set` overrides (`[loss.reference] set = ["..."]`).
    #[serde(default)]
    pub reference: Option<ReferenceSpec>,
}

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReferenceSpec {
    #[serde(default)]
    pub set: Vec<String>,
}

/// `[[loss.term]]`
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum LossTermSpec {
    /// Per-frame positions against a reference trajectory: a directory of PLY frames written
    /// by `simulate` (`reference_dir`), else `[loss.reference]`.
    Tracking {
        #[serde(default = "one")]
        weight: f64,
        #[serde(default)]
        reference_dir: Option<String>,
    },
    /// Final volume-weighted centroid of `body` to `target`.
    CenterOfMass {
        #[serde(default = "one")]
        weight: f64,
        #[serde(default)]
        body: usize,
        target: [f64; 3],
    },
    /// Final volume-weighted centroid of `body` projected on `direction`:
    /// $w\,\hat d\cdot c(x_T)$ (`weight = -1`, `direction = [1, 0, 0]`: maximize the forward
    /// position, DiffPD's locomotion loss $-\mathrm{CoM}_x$).
    CenterOfMassDirection {
        #[serde(default = "one")]
        weight: f64,
        #[serde(default)]
        body: usize,
        direction: [f64; 3],
    },
    /// Final mean position of the selected nodes of `body` to `target`.
    NodeTarget {
        #[serde(default = "one")]
        weight: f64,
        #[serde(default)]
        body: usize,
        select: NodeSelector,
        target: [f64; 3],
    },
    /// Seeded random linear functional of the final positions and velocities.
    RandomLinear {
        #[serde(default = "one")]
        weight: f64,
        #[serde(default)]
        seed: u64,
    },
    /// Bidirectional chamfer distance between the simulated boundary-surface nodes and
    /// captured point sets (Real2Sim): point clouds or meshes (PLY/OBJ; OFF, STL) per
    /// frame, summed over the captures (docs/optimize.md "Captured geometry").
    Chamfer {
        #[serde(default = "one")]
        weight: f64,
        /// Body whose boundary nodes are compared (omit: the boundary nodes of every body).
        #[serde(default)]
        body: Option<usize>,
        /// The frame map: capture files and the simulated frame each one shows.
        #[serde(default)]
        captures: Vec<CaptureSpec>,
        /// A folder of captures named `frame_NNNNN.ply` or `frame_NNNNN.obj` (the names
        /// `simulate` writes), each compared with simulated frame NNNNN.
        #[serde(default)]
        capture_dir: Option<String>,
        /// `mean` (default: each direction divided by its number of points) or `sum`.
        #[serde(default)]
        reduction: ChamferReduction,
    },
    /// Measured total contact force (N) that obstacle `obstacle` exerts on the bodies, per
    /// frame (a load cell on a scripted probe, Real2Sim):
    /// $w\,\tfrac12\sum_t\|F_t-\hat F_t\|^2$ over the frames of `file`, with $F_t$ the sum of
    /// the NCP contact forces $J^T\lambda$ of the step into frame $t$ (docs/scene-format.md
    /// "Contact-force term").
    ContactForce {
        /// Weight $w$ (1/N² in the loss's units).
        #[serde(default = "one")]
        weight: f64,
        /// Index of the obstacle (`[[obstacle]]` order) whose force is measured.
        #[serde(default)]
        obstacle: usize,
        /// A one-axis load cell: compare only the component along this direction
        /// (normalised), $w\,\tfrac12\sum_t(\hat d\cdot(F_t-\hat F_t))^2$; omit: all three.
        #[serde(default)]
        direction: Option<[f64; 3]>,
        /// Text file of the measurements (relative to the scene's folder): one line
        /// `frame, fx, fy, fz` per measured frame (comma or space separated; `#` comments
        /// and a `frame,fx,fy,fz` header line are skipped).
        file: String,
    },
}

/// One entry of a chamfer term's frame map.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaptureSpec {
    /// Simulated frame (1..=`simulation.frames`) the capture shows.
    pub frame: usize,
    /// Point cloud or mesh file (relative to the scene's folder).
    pub file: String,
}

/// Normalisation of a chamfer distance.
#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ChamferReduction {
    /// Mean squared nearest distance in each direction.
    #[default]
    Mean,
    /// Sum of squared nearest distances in each direction.
    Sum,
}

/// `[[parameter]]`: one differentiable scalar (or a 3-vector expanded into components).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParamSpec {
    /// Display name; default derived from kind/body/region/component.
    #[serde(default)]
    pub name: Option<String>,
    pub kind: ParamKind,
    #[serde(default)]
    pub body: usize,
    /// `youngs_modulus`, `youngs_modulus_field`: region index of the body (omit: every element
    /// of the body).
    #[serde(default)]
    pub region: Option<usize>,
    /// Vector kinds: component 0, 1 or 2 (omit: all three).
    #[serde(default)]
    pub component: Option<usize>,
    /// `force_scale`: force-group index of the body.
    #[serde(default)]
    pub force: Option<usize>,
    /// `initial_state_direction`: seed of the random direction.
    #[serde(default)]
    pub seed: Option<u64>,
    /// `muscle_activation`: muscle-group index of the body (default 0).
    #[serde(default)]
    pub muscle: Option<usize>,
    /// `muscle_activation`: activation knot of the group (omit: every knot, one parameter
    /// each).
    #[serde(default)]
    pub knot: Option<usize>,
    /// `friction`, `static_friction`, `obstacle_offset`: obstacle index (`[[obstacle]]` order).
    #[serde(default)]
    pub obstacle: Option<usize>,
    /// `attachment_stiffness`, `attachment_offset`: index of the body's
    /// `[[body.attachment]]` (default 0; a compliant one, compliance > 0).
    #[serde(default)]
    pub attachment: Option<usize>,
    /// Work with the logarithm of the (positive) parameter.
    #[serde(default)]
    pub log: bool,
    /// Central-difference step for `gradcheck` (in the working variable); default per kind.
    #[serde(default)]
    pub fd_step: Option<f64>,
    /// `optimize`: lower bound (user units); a number, or three for a vector kind.
    #[serde(default)]
    pub lower: Option<PerComponent>,
    /// `optimize`: upper bound (user units).
    #[serde(default)]
    pub upper: Option<PerComponent>,
    /// `optimize`: starting value (user units); default: the scene's value.
    #[serde(default)]
    pub initial: Option<PerComponent>,
    /// `optimize`: typical size of a change of the (log/bounded) working variable; the
    /// optimizer works on that variable divided by `scale` (default 1).
    #[serde(default)]
    pub scale: Option<f64>,
    /// `youngs_modulus_field`: smoothness penalty over face-adjacent elements, added to the
    /// loss (omit: none).
    #[serde(default)]
    pub regularize: Option<Regularize>,
}

/// `[[parameter]] regularize = { kind, weight, epsilon }`: a smoothness penalty on a
/// per-element field over the pairs $(e,f)$ of its elements that share a face, on
/// $d_{ef}=\ln E_e-\ln E_f$: `laplacian` $R=w\sum d_{ef}^2$ (the graph Laplacian's
/// quadratic form), `tv` $R=w\sum(\sqrt{d_{ef}^2+\varepsilon^2}-\varepsilon)$ (smoothed
/// total variation).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Regularize {
    pub kind: RegularizeKind,
    /// Weight w ≥ 0 (loss units).
    pub weight: f64,
    /// `tv`: smoothing ε > 0 of |d| (default 0.01).
    #[serde(default = "d_tv_epsilon")]
    pub epsilon: f64,
}
fn d_tv_epsilon() -> f64 {
    0.01
}

/// Penalty of [`Regularize`].
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RegularizeKind {
    /// $w\sum_{(e,f)}(\ln E_e-\ln E_f)^2$.
    Laplacian,
    /// $w\sum_{(e,f)}(\sqrt{(\ln E_e-\ln E_f)^2+\varepsilon^2}-\varepsilon)$.
    Tv,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ParamKind {
    YoungsModulus,
    PoissonRatio,
    Density,
    DampingAlpha,
    DampingBeta,
    /// Rigid translation of the body's initial positions (m).
    InitialTranslation,
    /// XYZ Euler angles (rad) of a rigid rotation of the initial positions about the body's
    /// bounding-box centre.
    InitialRotation,
    /// Uniform velocity added to the initial velocities (m/s).
    InitialVelocity,
    /// Scalar along a seeded random direction of all initial positions and velocities.
    InitialStateDirection,
    /// Scale of a force group (nominal 1).
    ForceScale,
    Gravity,
    /// Activation of a muscle group (`muscle`).
    MuscleActivation,
    /// Coulomb friction coefficient of an obstacle (with `static_friction` set: the dynamic
    /// coefficient alone).
    Friction,
    /// Static friction coefficient of an obstacle (`static_friction`; NCP contact only).
    StaticFriction,
    /// Rigid translation (m) of an obstacle (its whole trajectory).
    ObstacleOffset,
    /// Coulomb friction coefficient of body–body contact (`contact.body_friction`; with
    /// `contact.body_static_friction` set: the dynamic coefficient alone).
    BodyFriction,
    /// Static friction coefficient of body–body contact (`contact.body_static_friction`).
    BodyStaticFriction,
    /// Stiffness $k=1/c$ (N/m per node) of a compliant attachment (`attachment`).
    AttachmentStiffness,
    /// Rigid translation (m) of a compliant attachment's target (its whole trajectory).
    AttachmentOffset,
    /// Young's modulus of each element of the body (or region): one parameter per element.
    YoungsModulusField,
}

/// `[simulation]`
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Simulation {
    /// Time step h in seconds.
    #[serde(default = "d_dt")]
    pub dt: f64,
    /// Number of time steps.
    #[serde(default = "d_frames")]
    pub frames: usize,
    /// Gravitational acceleration (m/s²).
    #[serde(default = "d_gravity")]
    pub gravity: [f64; 3],
}
fn d_dt() -> f64 {
    0.01
}
fn d_frames() -> usize {
    100
}
fn d_gravity() -> [f64; 3] {
    [0.0, 0.0, -9.81]
}
impl Default for Simulation {
    fn default() -> Self {
        Simulation {
            dt: d_dt(),
            frames: d_frames(),
            gravity: d_gravity(),
        }
    }
}

/// `[[body]]`
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Body {
    #[serde(default)]
    pub name: Option<String>,
    pub mesh: MeshSpec,
    #[serde(default)]
    pub transform: Transform,
    pub material: MaterialSpec,
    /// Young's-modulus overrides, applied in order (`[[body.region]]`).
    #[serde(rename = "region", default)]
    pub regions: Vec<Region>,
    #[serde(default)]
    pub damping: Damping,
    #[serde(default)]
    pub dirichlet: Vec<Dirichlet>,
    #[serde(default)]
    pub initial: Initial,
    /// External nodal forces (`[[body.force]]`).
    #[serde(rename = "force", default)]
    pub forces: Vec<Force>,
    /// Muscle groups (`[[body.muscle]]`, spec §3.5).
    #[serde(rename = "muscle", default)]
    pub muscles: Vec<Muscle>,
    /// Bilateral attachments (`[[body.attachment]]`, see `docs/contact.md`).
    #[serde(rename = "attachment", default)]
    pub attachments: Vec<Attachment>,
}

/// `[[body.attachment]]`: the selected nodes tied to `target` (a point; default: each node's
/// own initial position) moving with `motion`, with compliance $c$ (m/N per node;
/// 0 = hard, i.e. a Dirichlet group, which needs the default target).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Attachment {
    pub select: NodeSelector,
    #[serde(default)]
    pub target: Option<[f64; 3]>,
    #[serde(default)]
    pub compliance: f64,
    #[serde(default)]
    pub motion: Motion,
}

/// `[[body.muscle]]`: a muscle group — elements sharing one activation (spec §3.5).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Muscle {
    #[serde(default)]
    pub name: Option<String>,
    /// Actuated elements (by centroid).
    pub select: ElementSelector,
    /// Fibre: a direction `[x, y, z]`, or `{ radial = { axis, center } }` /
    /// `{ circumferential = { axis, center } }` (centre default: the body's bounding-box centre).
    pub fiber: FiberSpec,
    /// Muscle stiffness $k_m$ (Pa): $\Psi=\tfrac{k_m}2(\|F\mathsf m\|-a)^2$ per unit volume.
    pub stiffness: f64,
    /// Activation a: target fibre stretch (1 relaxed, < 1 contraction); a number (constant
    /// in time) or an array of knot values $a_0..a_{K-1}$ at $t_k=k\tau$, linearly
    /// interpolated in time (spec §3.5).
    #[serde(default)]
    pub activation: Activation,
    /// Knot spacing τ (s) of an activation array; default: the knots spread evenly over
    /// the scene's duration, τ = frames·dt/(K−1).
    #[serde(default)]
    pub knot_interval: Option<f64>,
}

/// `activation` of a muscle group: one value, or knot values in time.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Activation {
    Constant(f64),
    Knots(Vec<f64>),
}

impl Default for Activation {
    fn default() -> Self {
        Activation::Constant(1.0)
    }
}

impl Activation {
    /// The knot values (one for a constant).
    pub fn values(&self) -> Vec<f64> {
        match self {
            Activation::Constant(a) => vec![*a],
            Activation::Knots(v) => v.clone(),
        }
    }
}

/// Fibre direction of a muscle group.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum FiberSpec {
    Direction([f64; 3]),
    Field(FiberField),
}

/// Fibre fields about an axis.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FiberField {
    Radial {
        axis: [f64; 3],
        #[serde(default)]
        center: Option<[f64; 3]>,
    },
    Circumferential {
        axis: [f64; 3],
        #[serde(default)]
        center: Option<[f64; 3]>,
    },
}

/// `[body.mesh]`: either `file` or `generator`.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MeshSpec {
    /// Mesh file (TetGen `.node`/`.ele`, gmsh `.msh`, MEDIT `.mesh`, legacy VTK `.vtk`,
    /// DiffPD `.bin`), relative to the scene.
    #[serde(default)]
    pub file: Option<String>,
    /// Procedural generator: `"box"`, `"sphere"`, `"cylinder"`, `"rounded_box"` or
    /// `"crab"` (docs/scene-format.md, docs/paper-scenes.md).
    #[serde(default)]
    pub generator: Option<Generator>,
    /// Element type of the generator: `"hex8"` or `"tet4"` (aliases `hex`, `tet`).
    #[serde(default)]
    pub element: Option<GenElement>,
    /// Number of cells per axis (generator).
    #[serde(default)]
    pub cells: Option<[usize; 3]>,
    /// Cell size in metres (generator).
    #[serde(default)]
    pub dx: Option<f64>,
    /// Lower corner of the generated box, or centre of the generated sphere (before the
    /// body transform).
    #[serde(default)]
    pub origin: [f64; 3],
    /// Radius of the `"sphere"` generator (voxel ball: the grid cells whose centres are
    /// inside the sphere), of the `"cylinder"`, or the edge rounding of `"rounded_box"`.
    #[serde(default)]
    pub radius: Option<f64>,
    /// Height of the `"cylinder"` generator (along z, centred on `origin`).
    #[serde(default)]
    pub height: Option<f64>,
    /// Edge lengths of the `"rounded_box"` generator (centred on `origin`).
    #[serde(default)]
    pub size: Option<[f64; 3]>,
    /// Cells across the `"crab"` generator's carapace (0.1 m wide): its only size key.
    #[serde(default)]
    pub resolution: Option<usize>,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Generator {
    Box,
    /// Voxelized ball (`radius`, `dx`, `element`; centred on `origin`).
    Sphere,
    /// Voxelized cylinder about z (`radius`, `height`, `dx`, `element`; centred on `origin`).
    Cylinder,
    /// Voxelized box with rounded edges (`size`, `radius`, `dx`, `element`; centred on
    /// `origin`).
    #[serde(rename = "rounded_box")]
    RoundedBox,
    /// The paper's Crab as a shell–joint composite (`resolution`, `element`; tags 0 shell,
    /// 1 body, 2 limb segments, 3 joints; `origin` shifts it).
    Crab,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GenElement {
    #[serde(alias = "hex")]
    Hex8,
    #[serde(alias = "tet")]
    Tet4,
}
impl From<GenElement> for ElementKind {
    fn from(g: GenElement) -> Self {
        match g {
            GenElement::Hex8 => ElementKind::Hex8,
            GenElement::Tet4 => ElementKind::Tet4,
        }
    }
}

/// `[body.transform]`: `x = R (s X) + t`, with `R = Rz Ry Rx` from `rotation_deg`.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Transform {
    #[serde(default)]
    pub translation: [f64; 3],
    #[serde(default)]
    pub rotation_deg: [f64; 3],
    #[serde(default = "one")]
    pub scale: f64,
}
fn one() -> f64 {
    1.0
}
impl Default for Transform {
    fn default() -> Self {
        Transform {
            translation: [0.0; 3],
            rotation_deg: [0.0; 3],
            scale: 1.0,
        }
    }
}

/// `[body.material]`
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MaterialSpec {
    /// `"corotated"` (corotated + volume PD) or `"neohookean"` (NH proximal PD).
    #[schemars(schema_with = "material_model_schema")]
    pub model: MaterialModel,
    /// Young's modulus E (Pa), base value for every element.
    pub youngs_modulus: f64,
    /// Poisson ratio ν, shared by the body (−1 < ν < 0.5).
    pub poisson_ratio: f64,
    /// Density ρ (kg/m³).
    pub density: f64,
    /// Nodal masses: `"lumped"` (default; m_i = Σ_{e∋i} ρ·V_e/n_v, total ρ·V) or `"uniform"`
    /// (DiffPD's convention, a comparison aid: every node ρ·V̄ with V̄ the body's mean element
    /// volume; total n_nodes·ρ·V̄, not ρ·V: more on voxel meshes, less on tet meshes).
    #[serde(default)]
    pub mass: MassConvention,
    /// Optional file with one Young's modulus per element (whitespace separated), replacing
    /// `youngs_modulus`; regions still apply on top.
    #[serde(default)]
    pub youngs_modulus_file: Option<String>,
    /// Singular-value range r of the PD weight fit (spec Eq. 12).
    #[serde(default = "d_fit")]
    pub fit_range: f64,
}
fn d_fit() -> f64 {
    0.1
}

/// `[[body.region]]`: override E on the selected elements (by centroid).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Region {
    #[serde(default)]
    pub name: Option<String>,
    pub select: ElementSelector,
    /// Absolute Young's modulus (Pa) …
    #[serde(default)]
    pub youngs_modulus: Option<f64>,
    /// … or a factor applied to the current value.
    #[serde(default)]
    pub scale: Option<f64>,
}

/// `[body.damping]`: Rayleigh damping $\mathcal D=\alpha M+\sum_e\beta_e w_eG_e^TG_e$ (spec Eq. 30).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Damping {
    /// Mass-proportional coefficient α (1/s).
    #[serde(default)]
    pub alpha: f64,
    /// Stiffness-proportional base coefficient β₀ (s).
    #[serde(default)]
    pub beta: f64,
    /// `"amplified"`: β_e = β₀ E_e / E_ref (stiff regions damped more, spec Eq. 30);
    /// `"uniform"`: β_e = β₀.
    #[serde(default)]
    pub stiffness_scaling: StiffnessScaling,
    /// Reference modulus E_ref (Pa); default: the smallest E_e of the body.
    #[serde(default)]
    pub e_ref: Option<f64>,
}
impl Default for Damping {
    fn default() -> Self {
        Damping {
            alpha: 0.0,
            beta: 0.0,
            stiffness_scaling: StiffnessScaling::Amplified,
            e_ref: None,
        }
    }
}

/// `[[body.dirichlet]]`: prescribe the selected nodes' coordinates on `axes`.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Dirichlet {
    pub select: NodeSelector,
    /// Any of `"x"`, `"y"`, `"z"`, e.g. `"xyz"` (default) or `"z"`.
    #[serde(default = "d_axes")]
    pub axes: String,
    #[serde(default)]
    pub motion: Motion,
}
fn d_axes() -> String {
    "xyz".to_string()
}

/// `[body.initial]`: initial state on top of the rest shape.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Initial {
    /// Uniform initial velocity (m/s).
    #[serde(default)]
    pub velocity: [f64; 3],
    /// Initial angular velocity (rad/s) about the body's centre of mass.
    #[serde(default)]
    pub angular_velocity: [f64; 3],
    /// Uniform scaling of the initial positions about the body's bounding-box centre
    /// (1 = rest size; 1.5 = a 3.4× volume expansion to be released).
    #[serde(default = "one")]
    pub scale: f64,
    /// Initial twist: cross-sections rotated about `axis` by an angle growing linearly from
    /// 0 at the body's lowest extent along the axis to `angle_deg` at its highest.
    #[serde(default)]
    pub twist: Option<Twist>,
    /// Rigid translation (m) of the initial positions, applied after `scale`, `twist` and
    /// `rotation_deg` (the `initial_translation` parameter).
    #[serde(default)]
    pub translation: [f64; 3],
    /// Rigid rotation of the initial positions about the body's bounding-box centre, XYZ
    /// Euler angles in degrees ($R=R_zR_yR_x$; the `initial_rotation` parameter, in rad).
    #[serde(default)]
    pub rotation_deg: [f64; 3],
}

impl Default for Initial {
    fn default() -> Self {
        Initial {
            velocity: [0.0; 3],
            angular_velocity: [0.0; 3],
            scale: 1.0,
            twist: None,
            translation: [0.0; 3],
            rotation_deg: [0.0; 3],
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Twist {
    pub axis: [f64; 3],
    pub angle_deg: f64,
    /// A point on the twist axis; default: the centre of the body's bounding box.
    #[serde(default)]
    pub center: Option<[f64; 3]>,
}

/// `[[body.force]]`: external nodal force on a node selection, scaled by a time profile.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Force {
    pub select: NodeSelector,
    /// Constant force vector (N), `per = "node"` (default) or `"total"` (split equally).
    #[serde(default)]
    pub force: Option<[f64; 3]>,
    /// Twisting (torque-like) load: each selected node gets `magnitude` N along
    /// $\hat a\times(X_i-c)/\|\hat a\times(X_i-c)\|$ (rest-configuration direction: a dead load).
    #[serde(default)]
    pub twist: Option<TwistLoad>,
    #[serde(default)]
    pub per: ForcePer,
    #[serde(default)]
    pub profile: Profile,
}

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TwistLoad {
    pub axis: [f64; 3],
    pub magnitude: f64,
    #[serde(default)]
    pub center: Option<[f64; 3]>,
}

#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, Default, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ForcePer {
    #[default]
    Node,
    Total,
}

/// `[output]`
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Output {
    /// Output directory (relative to the current directory; `--out` overrides).
    #[serde(default = "d_outdir")]
    pub directory: String,
    /// Write every k-th frame (frame 0, the initial state, is always written).
    #[serde(default = "d_every")]
    pub every: usize,
    /// Write frame files (frame 0 and every `every`-th frame).
    #[serde(default = "d_true")]
    pub frames: bool,
    /// Frame file format: `"vtu"` (volume meshes with every field plus a ParaView collection
    /// `frames.pvd`, default: what ParaView, PyVista and meshio show) or `"ply"` (boundary
    /// surfaces, for point-cloud tools; VTK's PLY reader drops their vertex properties).
    #[serde(default)]
    pub format: FrameFormat,
    /// How `.vtu` frames store their arrays: `"zlib"` (appended binary in zlib-compressed
    /// blocks, default), `"binary"` (appended raw binary) or `"ascii"` (decimal text).
    #[serde(default)]
    pub vtu_encoding: crate::io::vtu::VtuEncoding,
}

/// `[output] format`.
#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, Default, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum FrameFormat {
    Ply,
    #[default]
    Vtu,
}
fn d_outdir() -> String {
    "out".to_string()
}
fn d_every() -> usize {
    1
}
impl Default for Output {
    fn default() -> Self {
        Output {
            directory: d_outdir(),
            every: 1,
            frames: true,
            format: FrameFormat::Vtu,
            vtu_encoding: Default::default(),
        }
    }
}

/// JSON Schema of `material.model` (`crate::material::MaterialModel`, with its aliases).
fn material_model_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "PD energy of the body: corotated + volume, or Neo-Hookean proximal.",
        "type": "string",
        "enum": ["corotated", "neohookean", "neo_hookean", "neo-hookean"]
    })
}

/// Values of `backward.filter` (`crate::model::HessianFilterMode`).
pub const HESSIAN_FILTER_VALUES: [&str; 4] = ["none", "clamp", "abs", "trust_region"];
/// Values of `backward.method` (`crate::model::AdjointMethod`).
pub const ADJOINT_METHOD_VALUES: [&str; 4] = ["fixed_point", "gmres", "pcg", "woodbury"];
