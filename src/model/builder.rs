//! [`ModelBuilder`]: a one-body model in code, without a scene file (tests, benchmarks).
//!
//! ```
//! use diffphd::mesh::generate::box_hex;
//! use diffphd::model::ModelBuilder;
//! let model = ModelBuilder::new(box_hex([3, 1, 1], 0.1, [0.0; 3]))
//!     .youngs_modulus(1e5)
//!     .fix_where(|p| p[0] == 0.0)
//!     .build()
//!     .unwrap();
//! assert_eq!(model.num_elements(), 3);
//! assert_eq!(model.dirichlet[0].nodes.len(), 4);
//! ```

use super::build::BodyMaterial;
use super::discrete::{DirichletGroup, Model, RigidOffset};
use super::geometry::ElementError;
use super::settings::{ContactSettings, MassConvention, Motion, StiffnessScaling};
use crate::material::MaterialModel;
use crate::mesh::Mesh;

/// Builds a [`Model`] of one body on a given mesh. Defaults: corotated, E = 1e5 Pa,
/// ν = 0.3, ρ = 1000 kg/m³, no damping, h = 10 ms, one frame, gravity −9.81 m/s² along z,
/// no Dirichlet nodes, at rest.
#[derive(Clone, Debug)]
pub struct ModelBuilder {
    mesh: Mesh,
    material: BodyMaterial,
    youngs: Option<Vec<f64>>,
    youngs_modulus: f64,
    h: f64,
    frames: usize,
    gravity: [f64; 3],
    fixed: Vec<usize>,
    velocity: [f64; 3],
    /// Per-node displacement of the initial state from the rest shape.
    displacement: Option<Vec<[f64; 3]>>,
}

impl ModelBuilder {
    pub fn new(mesh: Mesh) -> Self {
        ModelBuilder {
            mesh,
            material: BodyMaterial {
                model: MaterialModel::Corotated,
                poisson_ratio: 0.3,
                density: 1000.0,
                mass: MassConvention::Lumped,
                alpha: 0.0,
                beta: 0.0,
                fit_range: 0.1,
                stiffness_scaling: StiffnessScaling::Amplified,
                e_ref: None,
            },
            youngs: None,
            youngs_modulus: 1e5,
            h: 0.01,
            frames: 1,
            gravity: [0.0, 0.0, -9.81],
            fixed: vec![],
            velocity: [0.0; 3],
            displacement: None,
        }
    }
    /// Material model (corotated or Neo-Hookean).
    pub fn material(mut self, model: MaterialModel) -> Self {
        self.material.model = model;
        self
    }
    /// Uniform Young's modulus (Pa).
    pub fn youngs_modulus(mut self, e: f64) -> Self {
        self.youngs_modulus = e;
        self
    }
    /// Young's modulus per element (Pa).
    pub fn youngs_per_element(mut self, e: Vec<f64>) -> Self {
        self.youngs = Some(e);
        self
    }
    pub fn poisson_ratio(mut self, nu: f64) -> Self {
        self.material.poisson_ratio = nu;
        self
    }
    pub fn density(mut self, rho: f64) -> Self {
        self.material.density = rho;
        self
    }
    /// Nodal mass convention (default [`MassConvention::Lumped`]).
    pub fn mass(mut self, mass: MassConvention) -> Self {
        self.material.mass = mass;
        self
    }
    /// Rayleigh damping: mass coefficient α (1/s), stiffness base β₀ (s).
    pub fn damping(mut self, alpha: f64, beta: f64) -> Self {
        self.material.alpha = alpha;
        self.material.beta = beta;
        self
    }
    /// Time step and number of frames.
    pub fn steps(mut self, h: f64, frames: usize) -> Self {
        self.h = h;
        self.frames = frames;
        self
    }
    pub fn gravity(mut self, g: [f64; 3]) -> Self {
        self.gravity = g;
        self
    }
    /// Hold the rest-shape nodes where `pred` holds fixed (all axes).
    pub fn fix_where(mut self, pred: impl Fn([f64; 3]) -> bool) -> Self {
        self.fixed = (0..self.mesh.num_nodes())
            .filter(|&i| pred(self.mesh.nodes[i]))
            .collect();
        self
    }
    /// Uniform initial velocity (m/s).
    pub fn velocity(mut self, v: [f64; 3]) -> Self {
        self.velocity = v;
        self
    }
    /// Initial positions = rest positions + `u` (one displacement per node).
    pub fn displaced(mut self, u: Vec<[f64; 3]>) -> Self {
        self.displacement = Some(u);
        self
    }

    /// The model, or the first degenerate element of the mesh or a per-element modulus table
    /// of the wrong length.
    pub fn build(self) -> Result<Model, BuildError> {
        let mesh = &self.mesh;
        let mut model = Model::empty(
            self.h,
            self.frames,
            self.gravity,
            ContactSettings::default(),
            vec![],
        );
        let centroids = model
            .push_elements(0, mesh)
            .map_err(|(element, error)| BuildError::Element { element, error })?;
        let ne = mesh.num_elements();
        let youngs = self
            .youngs
            .clone()
            .unwrap_or_else(|| vec![self.youngs_modulus; ne]);
        if youngs.len() != ne {
            return Err(BuildError::YoungsLength {
                got: youngs.len(),
                elements: ne,
            });
        }
        model.push_material(youngs, &self.material);
        let x0: Vec<[f64; 3]> = match &self.displacement {
            Some(u) => mesh
                .nodes
                .iter()
                .zip(u)
                .map(|(p, d)| [p[0] + d[0], p[1] + d[1], p[2] + d[2]])
                .collect(),
            None => mesh.nodes.clone(),
        };
        let init = (self.velocity, [0.0; 3]);
        model.push_nodes(0, &mesh.nodes, &x0, 0..ne, &centroids, init);
        if !self.fixed.is_empty() {
            model.dirichlet.push(DirichletGroup {
                nodes: self.fixed.clone(),
                axes: [true; 3],
                motion: Motion::Fixed,
                center: [0.0; 3],
            });
        }
        model.push_body_info("body0".into(), mesh, (0, 0), &self.material, vec![]);
        model.finish(vec![RigidOffset::default()]);
        Ok(model)
    }
}

/// Why [`ModelBuilder::build`] failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BuildError {
    #[error("element {element}: {error}")]
    Element { element: usize, error: ElementError },
    #[error("{got} Young's moduli for {elements} elements (one per element)")]
    YoungsLength { got: usize, elements: usize },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::generate::box_tet;

    /// Regression (issue 34): a degenerate element is an error naming the element (it was
    /// a `panic!`); the first element of a mesh squashed flat has zero volume.
    #[test]
    fn a_degenerate_element_is_an_error_naming_it() {
        let mut mesh = box_tet([1, 1, 1], 0.1, [0.0; 3]);
        mesh.nodes.iter_mut().for_each(|p| p[2] = 0.0);
        let err = ModelBuilder::new(mesh).build().unwrap_err();
        assert!(
            matches!(
                err,
                BuildError::Element {
                    element: 0,
                    error: ElementError::TetVolume { .. }
                }
            ),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("element 0: non-positive tetrahedron volume"),
            "{err}"
        );
    }
}
