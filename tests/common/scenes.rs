//! Scene builders shared by the integration tests (instead of scene text copied between
//! test files). Each returns the scene text that the tests load or pass to the binary.

/// Two-body scene: a 1×1×1 hex cube (`e_cube`, E = 1e5 Pa) thrown (v = (0.3, 0.1, -0.6)
/// m/s, ω = (0, 1, 0)) onto a 2×2×1 hex slab (E = 2e4 Pa) clamped at its bottom, body–body
/// contact with Coulomb coefficient `body_friction` and FB smoothing `smoothing`, over
/// `frames` steps of 4 ms; tight forward and adjoint tolerances; loss: a random linear term
/// and the cube's centre of mass; `params` appended (`[[parameter]]` entries).
pub fn two_bodies(smoothing: f64, body_friction: f64, frames: usize, params: &str) -> String {
    format!(
        r#"schema_version = 1
[simulation]
dt = 0.004
frames = {frames}
[[body]]
name = "slab"
[body.mesh]
generator = "box"
element = "hex8"
cells = [2, 2, 1]
dx = 0.05
[body.material]
model = "corotated"
youngs_modulus = 2e4
poisson_ratio = 0.3
density = 1000.0
[[body.dirichlet]]
select = {{ face = "z_min" }}
[[body]]
name = "cube"
[body.mesh]
generator = "box"
element = "hex8"
cells = [1, 1, 1]
dx = 0.04
origin = [0.032, 0.028, 0.055]
[body.material]
model = "corotated"
youngs_modulus = 1e5
poisson_ratio = 0.3
density = 1000.0
[body.initial]
velocity = [0.3, 0.1, -0.6]
angular_velocity = [0.0, 1.0, 0.0]
[contact]
bodies = true
body_friction = {body_friction}
smoothing = {smoothing:e}
tolerance = 1e-15
[solver]
rel_tol = 1e-13
abs_tol = 1e-16
max_iterations = 20000
[backward]
rel_tol = 1e-12
abs_tol = 1e-20
max_iterations = 2000
[loss]
[[loss.term]]
type = "random_linear"
seed = 3
[[loss.term]]
type = "center_of_mass"
body = 1
target = [0.1, 0.05, 0.1]
{params}"#
    )
}

/// The parameters of the block-on-plane gradient checks: initial velocity, the plane's
/// friction and normal offset, and log Young's modulus.
pub const PLANE_PARAMS: &str = r#"
[[parameter]]
kind = "initial_velocity"
[[parameter]]
kind = "friction"
obstacle = 0
[[parameter]]
kind = "obstacle_offset"
obstacle = 0
component = 2
[[parameter]]
kind = "youngs_modulus"
log = true
"#;

/// A 2×2×1 block (hex or tet, corotated or Neo-Hookean) launched from height `z0` with
/// `velocity` (spinning about y at 2 rad/s) onto a frictional plane (μ = 0.3), `frames` steps
/// of `dt`, Young's modulus `e`, FB smoothing `smoothing`; tight tolerances everywhere;
/// loss: a random linear term and the centre of mass.
#[derive(Clone, Copy, Debug)]
pub struct BlockOnPlane {
    pub element: &'static str,
    pub model: &'static str,
    pub velocity: [f64; 3],
    pub z0: f64,
    pub frames: usize,
    pub smoothing: f64,
    pub dt: f64,
    pub e: f64,
    /// Add `[solver] newton_tol = 1e-12` (the Newton baseline's tolerance).
    pub newton_tol: bool,
}

impl BlockOnPlane {
    /// Sliding with friction for 10 steps of 10 ms (hex corotated, E = 1e5 Pa).
    pub fn sliding(smoothing: f64) -> Self {
        BlockOnPlane {
            element: "hex8",
            model: "corotated",
            velocity: [0.8, 0.3, 0.0],
            z0: 0.0,
            frames: 10,
            smoothing,
            dt: 0.01,
            e: 1e5,
            newton_tol: false,
        }
    }

    /// Falls 3 cm, hits the ground at frame 4, sticks, slips and separates again (frame 10)
    /// within 15 steps of 4 ms (hex corotated, E = 5e4 Pa).
    pub fn bouncing(smoothing: f64) -> Self {
        BlockOnPlane {
            velocity: [0.5, 0.2, -2.0],
            z0: 0.03,
            frames: 15,
            dt: 0.004,
            e: 5e4,
            ..Self::sliding(smoothing)
        }
    }

    /// The same motion with another element type and material model.
    pub fn with_material(self, element: &'static str, model: &'static str) -> Self {
        BlockOnPlane {
            element,
            model,
            ..self
        }
    }

    /// The scene text with [`PLANE_PARAMS`].
    pub fn text(&self) -> String {
        let BlockOnPlane {
            element,
            model,
            velocity,
            z0,
            frames,
            smoothing,
            dt,
            e,
            newton_tol,
        } = *self;
        let newton_tol = if newton_tol {
            "newton_tol = 1e-12\n"
        } else {
            ""
        };
        let params = PLANE_PARAMS;
        format!(
            r#"schema_version = 1
[simulation]
dt = {dt}
frames = {frames}
[[body]]
[body.mesh]
generator = "box"
element = "{element}"
cells = [2, 2, 1]
dx = 0.05
origin = [0.0, 0.0, {z0}]
[body.material]
model = "{model}"
youngs_modulus = {e:e}
poisson_ratio = 0.3
density = 1000.0
[body.initial]
velocity = [{}, {}, {}]
angular_velocity = [0.0, 2.0, 0.0]
[[obstacle]]
type = "plane"
point = [0, 0, 0]
normal = [0, 0, 1]
friction = 0.3
[contact]
smoothing = {smoothing:e}
tolerance = 1e-15
[solver]
rel_tol = 1e-13
abs_tol = 1e-16
max_iterations = 20000
{newton_tol}[backward]
rel_tol = 1e-12
abs_tol = 1e-20
max_iterations = 2000
[loss]
[[loss.term]]
type = "random_linear"
seed = 11
[[loss.term]]
type = "center_of_mass"
target = [0.2, 0.0, 0.1]
{params}"#,
            velocity[0], velocity[1], velocity[2]
        )
    }
}

/// [`BlockOnPlane::sliding`] with the plane replaced by a sphere of radius 0.3 m at the
/// origin: the block lands on its top (from (-0.05, -0.03, 0.3001), v = (0.5, 0.2, -0.3) m/s)
/// and slides off; the obstacle offset is a 3-vector parameter.
pub fn block_on_sphere(smoothing: f64) -> String {
    let text = BlockOnPlane::sliding(smoothing)
        .text()
        .replace(
            "type = \"plane\"\npoint = [0, 0, 0]\nnormal = [0, 0, 1]",
            "type = \"sphere\"\ncenter = [0, 0, 0]\nradius = 0.3",
        )
        .replace("origin = [0.0, 0.0, 0]", "origin = [-0.05, -0.03, 0.3001]")
        .replace("velocity = [0.8, 0.3, 0]", "velocity = [0.5, 0.2, -0.3]")
        .replace("component = 2\n", "");
    assert!(text.contains("sphere") && text.contains("0.3001") && text.contains("-0.3]"));
    text
}

/// A 2×2×1 hex block (corotated, E = 1e5 Pa, mass damping α = 20) resting on a plane with
/// friction 0.5, every bottom node in sticking contact from the first frame; `frames` steps
/// of 10 ms; `tail` appended after the obstacle (settings, loss, parameters).
pub fn resting_block(frames: usize, tail: &str) -> String {
    format!(
        r#"schema_version = 1
[simulation]
dt = 0.01
frames = {frames}
[[body]]
[body.mesh]
generator = "box"
element = "hex8"
cells = [2, 2, 1]
dx = 0.05
[body.material]
model = "corotated"
youngs_modulus = 1e5
poisson_ratio = 0.3
density = 1000.0
[body.damping]
alpha = 20.0
[[obstacle]]
type = "plane"
point = [0, 0, 0]
normal = [0, 0, 1]
friction = 0.5
{tail}"#
    )
}
