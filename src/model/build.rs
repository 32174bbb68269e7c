//! The steps that fill a [`Model`], shared by `crate::scene::resolve` (from a scene file)
//! and [`super::ModelBuilder`] (in code): an empty model, a body's elements and quadrature
//! samples, its material parameters and nodes, and the final initial state and contact
//! set-up.

use super::discrete::{BodyInfo, MaterialParams, Model, RigidOffset, Samples};
use super::geometry::element_samples;
use super::obstacle::Obstacle;
use super::settings::{ContactSettings, MassConvention, StiffnessScaling};
use crate::material::MaterialModel;
use crate::mesh::Mesh;
use nalgebra::Vector3;

/// The per-body material and damping constants of [`Model::push_body_info`].
#[derive(Clone, Debug)]
pub struct BodyMaterial {
    pub model: MaterialModel,
    pub poisson_ratio: f64,
    pub density: f64,
    /// Nodal mass convention (`[body.material] mass`).
    pub mass: MassConvention,
    /// Rayleigh mass coefficient α (1/s) and stiffness base β₀ (s).
    pub alpha: f64,
    pub beta: f64,
    pub fit_range: f64,
    pub stiffness_scaling: StiffnessScaling,
    /// Damping reference modulus; `None`: the smallest Young's modulus of the body.
    pub e_ref: Option<f64>,
}

impl Model {
    /// A model with no bodies: step `h`, `frames`, `gravity`, contact settings and
    /// obstacles.
    pub fn empty(
        h: f64,
        frames: usize,
        gravity: [f64; 3],
        contact: ContactSettings,
        obstacles: Vec<Obstacle>,
    ) -> Model {
        Model {
            h,
            frames,
            gravity,
            rest: vec![],
            conn: vec![],
            conn_ptr: vec![0],
            elem_body: vec![],
            elem_volume: vec![],
            node_body: vec![],
            samples: Samples::default(),
            bodies: vec![],
            params: MaterialParams {
                youngs: vec![],
                nu: vec![],
                density: vec![],
                alpha: vec![],
                beta0: vec![],
            },
            dirichlet: vec![],
            forces: vec![],
            x0: vec![],
            v0: vec![],
            base_x0: vec![],
            base_v0: vec![],
            offsets: vec![],
            state_directions: vec![],
            warnings: vec![],
            muscles: vec![],
            attachments: vec![],
            obstacles,
            contact,
            boundary_nodes: vec![],
            contact_kappa: vec![],
            contact_margin: 0.0,
            node_samples: Default::default(),
        }
    }

    /// Append the elements of `mesh` as body `b` (its nodes will follow the current ones):
    /// connectivity, quadrature samples and rest volumes. Returns the element centroids;
    /// `Err((element, message))` for a degenerate element.
    pub fn push_elements(
        &mut self,
        b: usize,
        mesh: &Mesh,
    ) -> Result<Vec<[f64; 3]>, (usize, super::geometry::ElementError)> {
        let node_off = self.rest.len();
        let elem_off = self.elem_body.len();
        let ne = mesh.num_elements();
        let mut centroids = Vec::with_capacity(ne);
        for e in 0..ne {
            let el = mesh.element(e);
            let xs: Vec<[f64; 3]> = el.iter().map(|&i| mesh.nodes[i]).collect();
            let samples = element_samples(mesh.kind, &xs).map_err(|msg| (e, msg))?;
            let ge = elem_off + e;
            let mut ve = 0.0;
            for (vol, grads) in samples {
                self.samples.elem.push(ge);
                self.samples.vol.push(vol);
                self.samples.grad_ptr.push(self.samples.grads.len());
                self.samples.grads.extend(grads);
                ve += vol;
            }
            self.elem_volume.push(ve);
            self.conn.extend(el.iter().map(|&i| i + node_off));
            self.conn_ptr.push(self.conn.len());
            self.elem_body.push(b);
            centroids.push(mesh.centroid(e));
        }
        Ok(centroids)
    }

    /// Append a body's parameters: Young's modulus per element and the per-body constants.
    pub fn push_material(&mut self, youngs: Vec<f64>, m: &BodyMaterial) {
        self.params.youngs.extend(youngs);
        self.params.nu.push(m.poisson_ratio);
        self.params.density.push(m.density);
        self.params.alpha.push(m.alpha);
        self.params.beta0.push(m.beta);
    }

    /// Append the nodes of body `b` (elements `elements` with `centroids`, already pushed):
    /// rest positions `rest`, initial positions `x0` and the initial velocity
    /// $v+\omega\times(x_0-c)$ about the rest centre of mass $c$.
    pub fn push_nodes(
        &mut self,
        b: usize,
        rest: &[[f64; 3]],
        x0: &[[f64; 3]],
        elements: std::ops::Range<usize>,
        centroids: &[[f64; 3]],
        (velocity, angular_velocity): ([f64; 3], [f64; 3]),
    ) {
        let mut com = Vector3::zeros();
        let mut mtot = 0.0;
        for (e, c) in elements.zip(centroids) {
            let w = self.elem_volume[e];
            com += Vector3::from(*c) * w;
            mtot += w;
        }
        com /= mtot;
        let omega = Vector3::from(angular_velocity);
        for p in x0 {
            let v = Vector3::from(velocity) + omega.cross(&(Vector3::from(*p) - com));
            self.x0.extend_from_slice(p);
            self.v0.extend_from_slice(&[v[0], v[1], v[2]]);
        }
        self.rest.extend(rest.iter().cloned());
        self.node_body.extend(std::iter::repeat_n(b, rest.len()));
    }

    /// Append the body record of the last pushed body (`mesh` is its rest mesh, global
    /// node offset `node_off`, first element `elem_off`).
    pub fn push_body_info(
        &mut self,
        name: String,
        mesh: &Mesh,
        (node_off, elem_off): (usize, usize),
        m: &BodyMaterial,
        regions: Vec<Vec<usize>>,
    ) {
        let (lo, hi) = mesh.bounding_box();
        let ne = mesh.num_elements();
        let e_min = self.params.youngs[elem_off..elem_off + ne]
            .iter()
            .cloned()
            .fold(f64::INFINITY, f64::min);
        let surface: Vec<[usize; 3]> = crate::mesh::surface::boundary_faces(mesh)
            .into_iter()
            .map(|t| [t[0] + node_off, t[1] + node_off, t[2] + node_off])
            .collect();
        self.bodies.push(BodyInfo {
            name,
            model: m.model,
            kind: mesh.kind,
            nodes: node_off..node_off + mesh.num_nodes(),
            elements: elem_off..elem_off + ne,
            fit_range: m.fit_range,
            mass: m.mass,
            stiffness_scaling: m.stiffness_scaling,
            e_ref: m.e_ref.unwrap_or(e_min),
            surface,
            regions,
            center: [
                (lo[0] + hi[0]) / 2.0,
                (lo[1] + hi[1]) / 2.0,
                (lo[2] + hi[2]) / 2.0,
            ],
        });
    }

    /// After the last body: prescribed initial velocities, the base initial state, the
    /// per-body rigid `offsets`, the offset initial state and the contact set-up.
    pub fn finish(&mut self, offsets: Vec<RigidOffset>) {
        self.prescribe_initial_velocity();
        self.base_x0 = self.x0.clone();
        self.base_v0 = self.v0.clone();
        self.offsets = offsets;
        self.refresh_initial();
        self.setup_contact();
    }
}
