//! Rigid obstacles of the model (spec §2.9): analytic shapes in their reference pose and
//! their prescribed rigid motion. Distance queries are `crate::contact::obstacle`.

use super::settings::Motion;
use nalgebra::Vector3;

/// Analytic shape in the reference pose. The obstacle is the solid; free space is outside.
#[derive(Clone, Debug)]
pub enum Shape {
    Plane {
        point: Vector3<f64>,
        normal: Vector3<f64>,
    },
    Sphere {
        center: Vector3<f64>,
        radius: f64,
    },
    Box {
        min: Vector3<f64>,
        max: Vector3<f64>,
    },
    Capsule {
        a: Vector3<f64>,
        b: Vector3<f64>,
        radius: f64,
    },
    Cylinder {
        a: Vector3<f64>,
        b: Vector3<f64>,
        radius: f64,
    },
}

/// A rigid obstacle of the model.
#[derive(Clone, Debug)]
pub struct Obstacle {
    pub name: String,
    pub shape: Shape,
    /// Coulomb coefficient μ; with `static_friction` the dynamic (kinetic) one $\mu_k$
    /// (differentiable: `friction` parameter).
    pub friction: f64,
    /// Static coefficient $\mu_s\ge\mu_k$; `None`: $\mu_s=\mu_k$ = `friction`
    /// (differentiable: `static_friction` parameter).
    pub static_friction: Option<f64>,
    pub restitution: f64,
    pub motion: Motion,
    /// Rotation centre of `rotate` motions.
    pub center: Vector3<f64>,
    /// Rigid translation of the whole trajectory (differentiable: `obstacle_offset`).
    pub offset: Vector3<f64>,
}

impl Obstacle {
    /// An obstacle at rest offset 0; a `rotate` motion turns about its `center` when given,
    /// else about the shape's own centre (plane point, sphere centre, box or segment middle).
    pub fn new(
        name: String,
        shape: Shape,
        friction: f64,
        restitution: f64,
        motion: Motion,
    ) -> Self {
        let own_center = match &shape {
            Shape::Plane { point, .. } => *point,
            Shape::Sphere { center, .. } => *center,
            Shape::Box { min, max } => (min + max) / 2.0,
            Shape::Capsule { a, b, .. } | Shape::Cylinder { a, b, .. } => (a + b) / 2.0,
        };
        let center = match &motion {
            Motion::Rotate {
                center: Some(c), ..
            } => Vector3::from(*c),
            _ => own_center,
        };
        Obstacle {
            name,
            shape,
            friction,
            static_friction: None,
            restitution,
            motion,
            center,
            offset: Vector3::zeros(),
        }
    }
}
