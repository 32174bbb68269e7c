//! Scene builders shared by the integration tests (instead of scene text copied between
//! test files): a fixture of `tests/fixtures/scenes/` plus `--set` overrides
//! ([`super::fixture`]). Each returns the scene text that the tests load or pass to the
//! binary.

use super::fixture;

/// Two-body scene (`scenes/two_bodies.toml`): a 1×1×1 hex cube (`e_cube`, E = 1e5 Pa)
/// thrown (v = (0.3, 0.1, -0.6) m/s, ω = (0, 1, 0)) onto a 2×2×1 hex slab (E = 2e4 Pa)
/// clamped at its bottom, body–body contact with Coulomb coefficient `body_friction` and FB
/// smoothing `smoothing`, over `frames` steps of 4 ms; tight forward and adjoint tolerances;
/// loss: a random linear term and the cube's centre of mass; `params`: the `parameter`
/// array as a TOML inline array (`[{ kind = "body_friction" }]`).
pub fn two_bodies(smoothing: f64, body_friction: f64, frames: usize, params: &str) -> String {
    let sets = [
        format!("simulation.frames={frames}"),
        format!("contact.body_friction={body_friction}"),
        format!("contact.smoothing={smoothing:e}"),
        format!("parameter={params}"),
    ];
    let n = if params.is_empty() { 3 } else { 4 };
    let sets: Vec<&str> = sets[..n].iter().map(String::as_str).collect();
    fixture("scenes/two_bodies", &sets)
}

/// A 2×2×1 block (hex or tet, corotated or Neo-Hookean) launched from height `z0` with
/// `velocity` (spinning about y at 2 rad/s) onto a frictional plane (μ = 0.3), `frames` steps
/// of `dt`, Young's modulus `e`, FB smoothing `smoothing`; tight tolerances everywhere;
/// loss: a random linear term and the centre of mass; parameters: initial velocity, the
/// plane's friction and normal offset, log Young's modulus (`scenes/block_on_plane.toml`).
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

    /// The scene text with `extra` `--set` expressions applied last.
    pub fn text_with(&self, extra: &[&str]) -> String {
        let BlockOnPlane {
            element,
            model,
            velocity: [vx, vy, vz],
            z0,
            frames,
            smoothing,
            dt,
            e,
            newton_tol,
        } = *self;
        let mut sets = vec![
            format!("simulation.dt={dt}"),
            format!("simulation.frames={frames}"),
            format!("body.0.mesh.element={element}"),
            format!("body.0.mesh.origin=[0.0, 0.0, {z0}]"),
            format!("body.0.material.model={model}"),
            format!("body.0.material.youngs_modulus={e:e}"),
            format!("body.0.initial.velocity=[{vx}, {vy}, {vz}]"),
            format!("contact.smoothing={smoothing:e}"),
        ];
        if newton_tol {
            sets.push("solver.newton_tol=1e-12".into());
        }
        sets.extend(extra.iter().map(|s| s.to_string()));
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        fixture("scenes/block_on_plane", &sets)
    }

    /// The scene text.
    pub fn text(&self) -> String {
        self.text_with(&[])
    }
}

/// [`BlockOnPlane::sliding`] with the plane replaced by a sphere of radius 0.3 m at the
/// origin: the block lands on its top (from (-0.05, -0.03, 0.3001), v = (0.5, 0.2, -0.3) m/s)
/// and slides off; the obstacle offset is a 3-vector parameter; `extra` sets last.
pub fn block_on_sphere(smoothing: f64, extra: &[&str]) -> String {
    let mut sets = vec![
        "obstacle.0={ type = \"sphere\", center = [0, 0, 0], radius = 0.3, friction = 0.3 }",
        "body.0.mesh.origin=[-0.05, -0.03, 0.3001]",
        "body.0.initial.velocity=[0.5, 0.2, -0.3]",
        "parameter.2={ kind = \"obstacle_offset\", obstacle = 0 }",
    ];
    sets.extend_from_slice(extra);
    BlockOnPlane::sliding(smoothing).text_with(&sets)
}

/// A 2×2×1 hex block (corotated, E = 1e5 Pa, mass damping α = 20) resting on a plane with
/// friction 0.5, every bottom node in sticking contact from the first frame; `frames` steps
/// of 10 ms; `sets` add settings, loss and parameters (`scenes/resting_block.toml`).
pub fn resting_block(frames: usize, sets: &[&str]) -> String {
    let frames = [format!("simulation.frames={frames}")];
    super::fixture_sets("scenes/resting_block", &frames, sets)
}
