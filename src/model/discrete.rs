//! The discrete model: all bodies of a scene concatenated into one node/element set, with
//! per-element and per-quadrature-sample arrays (spec §1, §4), the material parameters
//! (`MaterialParams`, what gradients and the optimizer act on), prescribed motions, loads
//! and the initial state. Built by `crate::scene::resolve` (or `ModelBuilder` in tests);
//! read by the solver, contact and the optimizer.

use super::attachment::AttachmentGroup;
use super::muscle::MuscleGroup;
use super::obstacle::Obstacle;
use super::settings::{ContactSettings, MassConvention, Motion, Profile, StiffnessScaling};
use crate::material::MaterialModel;
use crate::mesh::ElementKind;
use nalgebra::{Matrix3, Vector3};

/// Quadrature samples. Each sample of element `e` is a PD sub-element with rest gradients
/// $\nabla N_a$ (spec §4: 1 per tet, 2×2×2 Gauss points per hex).
#[derive(Clone, Debug, Default)]
pub struct Samples {
    /// Owning element.
    pub elem: Vec<usize>,
    /// Sample (rest) volume $V_s$.
    pub vol: Vec<f64>,
    /// Offset of the sample's `nv` gradients in `grads`.
    pub grad_ptr: Vec<usize>,
    /// Rest shape-function gradients $\nabla_X N_a$ at the sample.
    pub grads: Vec<[f64; 3]>,
}

/// Per-body constants.
#[derive(Clone, Debug)]
pub struct BodyInfo {
    pub name: String,
    pub model: MaterialModel,
    pub kind: ElementKind,
    pub nodes: std::ops::Range<usize>,
    pub elements: std::ops::Range<usize>,
    pub fit_range: f64,
    /// Nodal mass convention ([`crate::model::Derived::mass`]).
    pub mass: MassConvention,
    pub stiffness_scaling: StiffnessScaling,
    /// Fixed damping reference modulus (spec Eq. 30); frozen at build time so it does not
    /// move during optimization.
    pub e_ref: f64,
    /// Surface triangles (global node indices) for output.
    pub surface: Vec<[usize; 3]>,
    /// Elements (global indices) selected by each `[[body.region]]`, in scene order.
    pub regions: Vec<Vec<usize>>,
    /// Centre of the body's rest bounding box (rotation centre of rigid parameters).
    pub center: [f64; 3],
}

/// Material parameters: the differentiable inputs of the material model.
#[derive(Clone, Debug)]
pub struct MaterialParams {
    /// Young's modulus per element (Pa).
    pub youngs: Vec<f64>,
    /// Poisson ratio per body.
    pub nu: Vec<f64>,
    /// Density per body (kg/m³).
    pub density: Vec<f64>,
    /// Rayleigh mass coefficient α per body (1/s).
    pub alpha: Vec<f64>,
    /// Rayleigh stiffness base β₀ per body (s).
    pub beta0: Vec<f64>,
}

/// A group of Dirichlet nodes sharing a motion.
#[derive(Clone, Debug)]
pub struct DirichletGroup {
    pub nodes: Vec<usize>,
    pub axes: [bool; 3],
    pub motion: Motion,
    /// Resolved rotation centre (for `Rotate`).
    pub center: [f64; 3],
}

/// External nodal loads with a time profile.
#[derive(Clone, Debug)]
pub struct ForceGroup {
    pub body: usize,
    /// Scale multiplying `forces` (a differentiable parameter; 1 from the scene).
    pub scale: f64,
    pub nodes: Vec<usize>,
    pub forces: Vec<[f64; 3]>,
    pub profile: Profile,
}

/// The discrete model of a scene.
#[derive(Clone, Debug)]
pub struct Model {
    pub h: f64,
    pub frames: usize,
    pub gravity: [f64; 3],
    /// Rest positions $X$ (after body transforms).
    pub rest: Vec<[f64; 3]>,
    pub conn: Vec<usize>,
    pub conn_ptr: Vec<usize>,
    pub elem_body: Vec<usize>,
    /// Rest volume per element $V_e$.
    pub elem_volume: Vec<f64>,
    pub node_body: Vec<usize>,
    pub samples: Samples,
    pub bodies: Vec<BodyInfo>,
    pub params: MaterialParams,
    pub dirichlet: Vec<DirichletGroup>,
    pub forces: Vec<ForceGroup>,
    /// Notes about input the model repaired (e.g. re-oriented elements), for the user.
    pub warnings: Vec<String>,
    pub x0: Vec<f64>,
    pub v0: Vec<f64>,
    /// Initial state as built from the scene, before the rigid offsets below.
    pub base_x0: Vec<f64>,
    pub base_v0: Vec<f64>,
    /// Per-body rigid offsets of the initial state (differentiable parameters).
    pub offsets: Vec<RigidOffset>,
    /// Seeded perturbation directions of the whole initial state: `(seed, amount)`.
    pub state_directions: Vec<(u64, f64)>,
    /// Muscle groups (spec §3.5), in body order.
    pub muscles: Vec<MuscleGroup>,
    /// Compliant bilateral attachments (`[[body.attachment]]` with compliance > 0; hard ones
    /// are Dirichlet groups).
    pub attachments: Vec<AttachmentGroup>,
    /// Rigid obstacles (`[[obstacle]]`, spec §2.9).
    pub obstacles: Vec<Obstacle>,
    /// Contact settings (`[contact]`).
    pub contact: ContactSettings,
    /// Boundary nodes of all bodies (sorted): the contact candidates.
    pub boundary_nodes: Vec<usize>,
    /// FB scale $\kappa_i=h^2/m_i$ per node from the scene's densities, fixed at build time
    /// so that the smoothed contact law does not move with material parameters.
    pub contact_kappa: Vec<f64>,
    /// Candidate margin (m): `contact.margin` or half the median element edge.
    pub contact_margin: f64,
    /// Node → (sample, corner) adjacency of the gathers ([`Model::gather_gt`]), built at
    /// first use.
    pub node_samples: std::sync::OnceLock<NodeSamples>,
}

/// Node → (sample, corner) adjacency: `pairs[ptr[i]..ptr[i + 1]]` are the samples touching
/// node `i` (with the node's position in the sample's element), in increasing sample order. Defined here, next to the [`Model`] that caches it; built
/// and used by `model::gather` (so that module depends on this one, not both ways).
#[derive(Clone, Debug, Default)]
pub struct NodeSamples {
    pub(super) ptr: Vec<usize>,
    pub(super) pairs: Vec<(u32, u32)>,
    pub(super) num_samples: usize,
}

/// Rigid change of a body's initial state: $x_0=c+R(\varphi)(\hat x_0-c)+t$, $v_0=\hat v_0+u$,
/// with $R=R_zR_yR_x$ of the Euler angles $\varphi$ and $c$ the bounding-box centre.
#[derive(Clone, Debug, Default)]
pub struct RigidOffset {
    pub translation: [f64; 3],
    pub euler: [f64; 3],
    pub velocity: [f64; 3],
}

/// $R_zR_yR_x$ and its three partial derivatives with respect to the angles.
pub fn euler_rotation(phi: [f64; 3]) -> (Matrix3<f64>, [Matrix3<f64>; 3]) {
    let (sx, cx) = phi[0].sin_cos();
    let (sy, cy) = phi[1].sin_cos();
    let (sz, cz) = phi[2].sin_cos();
    let rx = Matrix3::new(1.0, 0.0, 0.0, 0.0, cx, -sx, 0.0, sx, cx);
    let ry = Matrix3::new(cy, 0.0, sy, 0.0, 1.0, 0.0, -sy, 0.0, cy);
    let rz = Matrix3::new(cz, -sz, 0.0, sz, cz, 0.0, 0.0, 0.0, 1.0);
    let drx = Matrix3::new(0.0, 0.0, 0.0, 0.0, -sx, -cx, 0.0, cx, -sx);
    let dry = Matrix3::new(-sy, 0.0, cy, 0.0, 0.0, 0.0, -cy, 0.0, -sy);
    let drz = Matrix3::new(-sz, -cz, 0.0, cz, -sz, 0.0, 0.0, 0.0, 0.0);
    (rz * ry * rx, [rz * ry * drx, rz * dry * rx, drz * ry * rx])
}

/// Seeded direction `(dx, dv)` of the initial state, entries in [-1e-3, 1e-3] m and m/s.
pub fn state_direction(seed: u64, n3: usize) -> (Vec<f64>, Vec<f64>) {
    let u = super::seeded_uniform(seed.wrapping_mul(2).wrapping_add(1), 2 * n3);
    (
        u[..n3].iter().map(|v| 1e-3 * v).collect(),
        u[n3..].iter().map(|v| 1e-3 * v).collect(),
    )
}

impl Model {
    pub fn num_nodes(&self) -> usize {
        self.rest.len()
    }

    /// Initial velocity of prescribed DoFs = the motion's velocity at t = 0 (0 when fixed,
    /// the translation velocity, or ω×(x−c) for a rotation), whatever `initial.velocity` says.
    pub fn prescribe_initial_velocity(&mut self) {
        for g in &self.dirichlet {
            for &i in &g.nodes {
                let p = Vector3::new(self.x0[3 * i], self.x0[3 * i + 1], self.x0[3 * i + 2]);
                let v = match &g.motion {
                    Motion::Fixed => Vector3::zeros(),
                    Motion::Translate { velocity } => Vector3::from(*velocity),
                    Motion::Rotate { axis, rate, .. } => (Vector3::from(*axis).normalize() * *rate)
                        .cross(&(p - Vector3::from(g.center))),
                };
                for d in 0..3 {
                    if g.axes[d] {
                        self.v0[3 * i + d] = v[d];
                    }
                }
            }
        }
    }

    /// Contact candidates, FB scales and margin (see the fields).
    pub fn setup_contact(&mut self) {
        let mut nodes: Vec<usize> = self
            .bodies
            .iter()
            .flat_map(|b| b.surface.iter().flatten().copied())
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        self.boundary_nodes = nodes;
        let mass = self.derive(&self.params).mass;
        let h2 = self.h * self.h;
        let floor = self.contact.scale_floor;
        self.contact_kappa = mass
            .iter()
            .map(|&m| if m > 0.0 { (h2 / m).max(floor) } else { floor })
            .collect();
        self.contact_margin = self.contact.margin.unwrap_or_else(|| {
            let mut edges: Vec<f64> = (0..self.num_elements())
                .map(|e| {
                    let el = self.element(e);
                    let (a, b) = (self.rest[el[0]], self.rest[el[1]]);
                    (0..3).map(|d| (a[d] - b[d]).powi(2)).sum::<f64>().sqrt()
                })
                .collect();
            if edges.is_empty() {
                return 0.0;
            }
            let mid = edges.len() / 2;
            edges.select_nth_unstable_by(mid, |a, b| a.total_cmp(b));
            0.5 * edges[mid]
        });
    }

    /// Recompute `x0`, `v0` from the base state, the rigid offsets and the seeded directions.
    pub fn refresh_initial(&mut self) {
        self.x0 = self.base_x0.clone();
        self.v0 = self.base_v0.clone();
        for (b, body) in self.bodies.iter().enumerate() {
            let o = &self.offsets[b];
            let (r, _) = euler_rotation(o.euler);
            let c = Vector3::from(body.center);
            for i in body.nodes.clone() {
                let p = Vector3::new(
                    self.base_x0[3 * i],
                    self.base_x0[3 * i + 1],
                    self.base_x0[3 * i + 2],
                );
                let q = c + r * (p - c) + Vector3::from(o.translation);
                for d in 0..3 {
                    self.x0[3 * i + d] = q[d];
                    self.v0[3 * i + d] += o.velocity[d];
                }
            }
        }
        self.prescribe_initial_velocity();
        let n3 = self.x0.len();
        for &(seed, amount) in &self.state_directions {
            let (dx, dv) = state_direction(seed, n3);
            for j in 0..n3 {
                self.x0[j] += amount * dx[j];
                self.v0[j] += amount * dv[j];
            }
        }
    }
    pub fn num_elements(&self) -> usize {
        self.elem_body.len()
    }
    pub fn num_samples(&self) -> usize {
        self.samples.elem.len()
    }
    /// Nodes of element `e`.
    #[inline]
    pub fn element(&self, e: usize) -> &[usize] {
        &self.conn[self.conn_ptr[e]..self.conn_ptr[e + 1]]
    }
    /// Rest gradients of sample `s`.
    #[inline]
    pub fn sample_grads(&self, s: usize) -> &[[f64; 3]] {
        let e = self.samples.elem[s];
        let nv = self.conn_ptr[e + 1] - self.conn_ptr[e];
        &self.samples.grads[self.samples.grad_ptr[s]..self.samples.grad_ptr[s] + nv]
    }

    /// Deformation gradient of sample `s` from the displacement gradient:
    /// $F = I + \sum_a (x_a - X_a)\,\nabla N_a^T$ (precise for small strains of stiff bodies).
    #[inline]
    pub fn deformation_gradient(&self, s: usize, x: &[f64]) -> Matrix3<f64> {
        let e = self.samples.elem[s];
        let mut f = Matrix3::identity();
        for (&i, g) in self.element(e).iter().zip(self.sample_grads(s)) {
            for r in 0..3 {
                let u = x[3 * i + r] - self.rest[i][r];
                for c in 0..3 {
                    f[(r, c)] += u * g[c];
                }
            }
        }
        f
    }

    /// $\sum_a v_a \nabla N_a^T$ for a generic nodal field `v` (a differential $dF = G_s v$).
    #[inline]
    pub fn gradient_of(&self, s: usize, v: &[f64]) -> Matrix3<f64> {
        let e = self.samples.elem[s];
        let mut f = Matrix3::zeros();
        for (&i, g) in self.element(e).iter().zip(self.sample_grads(s)) {
            for r in 0..3 {
                for c in 0..3 {
                    f[(r, c)] += v[3 * i + r] * g[c];
                }
            }
        }
        f
    }

    /// Scatter $G_s^T\mathrm{vec}(Q)$ into a nodal vector: node `a` receives $Q\nabla N_a$.
    #[inline]
    pub fn scatter_gt(&self, s: usize, q: &Matrix3<f64>, out: &mut [f64]) {
        let e = self.samples.elem[s];
        for (&i, g) in self.element(e).iter().zip(self.sample_grads(s)) {
            let v = q * Vector3::from(*g);
            out[3 * i] += v[0];
            out[3 * i + 1] += v[1];
            out[3 * i + 2] += v[2];
        }
    }

    /// Derived quantities for the given parameters (spec §6.1 SETUP).
    /// Prescribed axis node sets (union over groups), for the factorization.
    pub fn dirichlet_sets(&self) -> [crate::linalg::AxisDirichlet; 3] {
        let mut sets: [Vec<usize>; 3] = [vec![], vec![], vec![]];
        for g in &self.dirichlet {
            for d in 0..3 {
                if g.axes[d] {
                    sets[d].extend_from_slice(&g.nodes);
                }
            }
        }
        sets.map(|mut v| {
            v.sort_unstable();
            v.dedup();
            crate::linalg::AxisDirichlet { nodes: v }
        })
    }

    /// Prescribed positions at time `t` (node-major `3n`; entries of free DoFs are 0).
    /// Later groups override earlier ones on shared DoFs.
    pub fn dirichlet_values(&self, t: f64) -> Vec<f64> {
        let mut out = vec![0.0; 3 * self.num_nodes()];
        for g in &self.dirichlet {
            for &i in &g.nodes {
                let p0 = Vector3::new(self.x0[3 * i], self.x0[3 * i + 1], self.x0[3 * i + 2]);
                let p = match &g.motion {
                    Motion::Fixed => p0,
                    Motion::Translate { velocity } => p0 + Vector3::from(*velocity) * t,
                    Motion::Rotate { axis, rate, .. } => {
                        let c = Vector3::from(g.center);
                        let rot = nalgebra::Rotation3::from_axis_angle(
                            &nalgebra::Unit::new_normalize(Vector3::from(*axis)),
                            rate * t,
                        );
                        rot * (p0 - c) + c
                    }
                };
                for d in 0..3 {
                    if g.axes[d] {
                        out[3 * i + d] = p[d];
                    }
                }
            }
        }
        out
    }

    /// External force at time `t`: gravity $m_ig$ plus the profiled nodal loads.
    pub fn external_force(&self, t: f64, mass: &[f64]) -> Vec<f64> {
        let n = self.num_nodes();
        let mut f = vec![0.0; 3 * n];
        for i in 0..n {
            for d in 0..3 {
                f[3 * i + d] = mass[i] * self.gravity[d];
            }
        }
        for g in &self.forces {
            let s = g.profile.eval(t);
            if s == 0.0 {
                continue;
            }
            for (k, &i) in g.nodes.iter().enumerate() {
                for d in 0..3 {
                    f[3 * i + d] += s * g.scale * g.forces[k][d];
                }
            }
        }
        // compliant attachments: k p_i at the end of the step (their k is in A)
        super::attachment::add_rhs(&self.attachments, t + self.h, &mut f);
        f
    }
}
