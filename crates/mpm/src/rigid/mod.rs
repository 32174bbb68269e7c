//! Rigid bodies: shapes with signed distances, mass and inertia from density, poses, per-DoF
//! drives, a time integrator with a stable treatment of the gyroscopic term, and a world that
//! steps bodies with rigid–ground and rigid–rigid contact through the same convex lagged
//! compliant model as the MPM coupling (a small dense Newton over the rigid DoFs).
//!
//! - [`shape`]: box, sphere, capsule, cylinder and closed triangle mesh: `sdf`, mass properties.
//! - [`mesh`]: the closed triangle mesh (closedness check, divergence-theorem integrals,
//!   winding-number signed distance).
//! - [`body`]: [`RigidBody`], [`Drive`], [`Profile`].
//! - [`world`]: [`RigidWorld`], [`HalfSpace`] and the contact step.

pub mod body;
pub mod mesh;
pub mod shape;
pub mod world;

pub use body::{Drive, Profile, RigidBody};
pub use mesh::TriMesh;
pub use shape::{MassProperties, Shape};
pub use world::{FreeMotionTarget, HalfSpace, RigidContact, RigidStepReport, RigidWorld};

use thiserror::Error;

use crate::contact::ContactError;

/// Errors of rigid-body construction and stepping. Each names what and where.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum RigidError {
    /// A shape dimension or density is not positive and finite.
    #[error("invalid {what}: {value} (must be positive and finite)")]
    InvalidValue {
        /// Which quantity (e.g. `"box half extent"`, `"density"`).
        what: &'static str,
        /// The value.
        value: f64,
    },
    /// A mesh triangle references a vertex that does not exist.
    #[error("mesh triangle {triangle} references vertex {vertex}, but the mesh has {num_vertices} vertices")]
    VertexOutOfRange {
        /// Triangle index.
        triangle: usize,
        /// Vertex index.
        vertex: usize,
        /// Number of vertices.
        num_vertices: usize,
    },
    /// A mesh triangle has zero area or repeats a vertex.
    #[error("mesh triangle {triangle} is degenerate (repeated vertex or zero area)")]
    DegenerateTriangle {
        /// Triangle index.
        triangle: usize,
    },
    /// The mesh is not closed: the directed edge a→b of `triangle` has no opposite b→a.
    #[error("mesh is not closed: edge ({a}, {b}) of triangle {triangle} has no opposite edge ({b}, {a})")]
    OpenEdge {
        /// First vertex of the edge.
        a: usize,
        /// Second vertex of the edge.
        b: usize,
        /// The triangle it belongs to.
        triangle: usize,
    },
    /// The directed edge a→b is used by more than one triangle (non-manifold or inconsistent
    /// orientation).
    #[error("mesh edge ({a}, {b}) is used twice in the same direction (triangle {triangle}): non-manifold or inconsistently oriented")]
    NonManifoldEdge {
        /// First vertex.
        a: usize,
        /// Second vertex.
        b: usize,
        /// The second triangle using it.
        triangle: usize,
    },
    /// The enclosed volume is not positive (triangles wound inward).
    #[error("mesh encloses volume {volume} ≤ 0: triangles must be wound counter-clockwise seen from outside")]
    NonPositiveVolume {
        /// The signed volume.
        volume: f64,
    },
    /// A keyframe profile is empty or its times are not strictly increasing.
    #[error(
        "body {body} DoF {dof}: keyframe profile is empty or its times are not strictly increasing"
    )]
    InvalidProfile {
        /// Body index.
        body: usize,
        /// DoF index (0–2 linear, 3–5 angular).
        dof: usize,
    },
    /// A feature is not supported; stated rather than silently ignored.
    #[error("unsupported: {what}")]
    Unsupported {
        /// What is unsupported.
        what: String,
    },
    /// An external wrench list has the wrong length.
    #[error("{got} external wrenches given for {expected} bodies")]
    WrenchCount {
        /// Given.
        got: usize,
        /// Number of bodies.
        expected: usize,
    },
    /// The contact model or solve failed.
    #[error("rigid contact solve: {0}")]
    Contact(#[from] ContactError),
}
