//! The discrete model: all bodies of a scene concatenated into one node/element set, with
//! per-element and per-quadrature-sample arrays (spec §1, §4), the material parameters
//! (`MaterialParams`, what gradients and the optimizer act on) and the quantities derived
//! from them (`Derived`: PD weights, Rayleigh coefficients, lumped masses, prox parameters).

use crate::material::neohookean::NhParams;
use crate::material::weights::fit_coefficients;
use crate::material::{lame, MaterialModel};
use crate::mesh::{ElementKind, Mesh};
use crate::scene::{self, LoadedScene, Motion, StiffnessScaling};
use nalgebra::{Matrix3, Vector3};

/// Errors while building a model from a scene.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{key}: {err}")]
    Mesh {
        key: String,
        err: crate::mesh::MeshError,
    },
    #[error("{key}: {msg}")]
    Scene { key: String, msg: String },
}

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
    pub profile: scene::Profile,
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
    pub muscles: Vec<super::muscle::MuscleGroup>,
    /// Compliant bilateral attachments (`[[body.attachment]]` with compliance > 0; hard ones
    /// are Dirichlet groups).
    pub attachments: Vec<crate::contact::attachment::AttachmentGroup>,
    /// Rigid obstacles (`[[obstacle]]`, spec §2.9).
    pub obstacles: Vec<crate::contact::obstacle::Obstacle>,
    /// Contact settings (`[contact]`).
    pub contact: crate::scene::ContactSettings,
    /// Boundary nodes of all bodies (sorted): the contact candidates.
    pub boundary_nodes: Vec<usize>,
    /// FB scale $\kappa_i=h^2/m_i$ per node from the scene's densities, fixed at build time
    /// so that the smoothed contact law does not move with material parameters.
    pub contact_kappa: Vec<f64>,
    /// Candidate margin (m): `contact.margin` or half the median element edge.
    pub contact_margin: f64,
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

/// Quantities derived from [`MaterialParams`] (recomputed when parameters change).
#[derive(Clone, Debug)]
pub struct Derived {
    /// Lumped nodal mass $m_i=\sum_{e\ni i}\rho V_e/n_v$.
    pub mass: Vec<f64>,
    /// Per-node mass-damping coefficient α of its body.
    pub node_alpha: Vec<f64>,
    /// Per-sample corotated weight ($2\mu_eV_s$; 0 for NH bodies).
    pub w_cor: Vec<f64>,
    /// Per-sample volume weight ($\lambda_eV_s$; 0 for NH bodies).
    pub w_vol: Vec<f64>,
    /// Per-sample NH weight ($k_eV_s$, Eq. 12; 0 for corotated bodies).
    pub w_nh: Vec<f64>,
    /// Per-element stiffness-damping coefficient β_e (Eq. 30).
    pub beta: Vec<f64>,
    /// Per-body NH prox parameters $(\bar\mu,\bar\lambda,\bar k)$ (Lemma 1).
    pub nh: Vec<NhParams>,
    /// max E / min E > 1.01 (spec §6.1).
    pub heterogeneous: bool,
    /// Time (s) at which muscle activations are evaluated by the local step and the
    /// backward linearization: $t_n=nh$ of the step producing frame n (set per step by the
    /// forward and by the reverse sweep; spec §3.5, activations per time knot).
    pub muscle_time: f64,
}

impl Derived {
    /// Total PD weight of sample `s`.
    #[inline]
    pub fn w_total(&self, s: usize) -> f64 {
        self.w_cor[s] + self.w_vol[s] + self.w_nh[s]
    }
}

/// Seeded direction `(dx, dv)` of the initial state, entries in [-1e-3, 1e-3] m and m/s.
pub fn state_direction(seed: u64, n3: usize) -> (Vec<f64>, Vec<f64>) {
    let u = crate::solver::loss::seeded_uniform(seed.wrapping_mul(2).wrapping_add(1), 2 * n3);
    (
        u[..n3].iter().map(|v| 1e-3 * v).collect(),
        u[n3..].iter().map(|v| 1e-3 * v).collect(),
    )
}

fn rot_xyz(deg: [f64; 3]) -> Matrix3<f64> {
    let r = |v: f64| v.to_radians();
    let rx = nalgebra::Rotation3::from_axis_angle(&Vector3::x_axis(), r(deg[0]));
    let ry = nalgebra::Rotation3::from_axis_angle(&Vector3::y_axis(), r(deg[1]));
    let rz = nalgebra::Rotation3::from_axis_angle(&Vector3::z_axis(), r(deg[2]));
    (rz * ry * rx).into_inner()
}

fn unit(v: [f64; 3]) -> Vector3<f64> {
    Vector3::from(v).normalize()
}

/// Volume and rest shape-function gradients of one quadrature sample.
pub type SampleGeometry = (f64, Vec<[f64; 3]>);

/// Rest gradients and volumes of the samples of one element.
/// Tet: $[\nabla N_1,\nabla N_2,\nabla N_3]^T=D_m^{-1}$, $\nabla N_0=-\sum_a\nabla N_a$,
/// $V=\det D_m/6$. Hex (lexicographic nodes, reference cube $[0,1]^3$): Gauss points at
/// $\tfrac12\pm\tfrac1{2\sqrt3}$, $\nabla_XN_a=J^{-T}\nabla_\xi N_a$, $V_s=\det J/8$.
pub fn element_samples(kind: ElementKind, x: &[[f64; 3]]) -> Result<Vec<SampleGeometry>, String> {
    match kind {
        ElementKind::Tet4 => {
            let c = |a: usize| Vector3::from(x[a]) - Vector3::from(x[0]);
            let dm = Matrix3::from_columns(&[c(1), c(2), c(3)]);
            let det = dm.determinant();
            if det.is_nan() || det <= 0.0 {
                return Err(format!("non-positive tetrahedron volume {:.3e}", det / 6.0));
            }
            let b = dm.try_inverse().ok_or("singular tetrahedron")?;
            let mut g = vec![[0.0; 3]; 4];
            for a in 1..4 {
                g[a] = [b[(a - 1, 0)], b[(a - 1, 1)], b[(a - 1, 2)]];
                for d in 0..3 {
                    g[0][d] -= g[a][d];
                }
            }
            Ok(vec![(det / 6.0, g)])
        }
        ElementKind::Hex8 => {
            let q = [0.5 - 0.5 / 3f64.sqrt(), 0.5 + 0.5 / 3f64.sqrt()];
            let mut out = Vec::with_capacity(8);
            for qp in 0..8 {
                let xi = [q[qp & 1], q[(qp >> 1) & 1], q[(qp >> 2) & 1]];
                // dN_a/dxi
                let mut dn = [[0.0; 3]; 8];
                for (a, dna) in dn.iter_mut().enumerate() {
                    let f = |d: usize| {
                        if (a >> d) & 1 == 1 {
                            xi[d]
                        } else {
                            1.0 - xi[d]
                        }
                    };
                    let s = |d: usize| if (a >> d) & 1 == 1 { 1.0 } else { -1.0 };
                    *dna = [s(0) * f(1) * f(2), f(0) * s(1) * f(2), f(0) * f(1) * s(2)];
                }
                let mut j = Matrix3::<f64>::zeros();
                for a in 0..8 {
                    for i in 0..3 {
                        for d in 0..3 {
                            j[(i, d)] += x[a][i] * dn[a][d];
                        }
                    }
                }
                let det = j.determinant();
                if det.is_nan() || det <= 0.0 {
                    return Err(format!(
                        "non-positive hexahedron Jacobian {det:.3e} at Gauss point {qp}"
                    ));
                }
                let jit = j
                    .try_inverse()
                    .ok_or("singular hexahedron Jacobian")?
                    .transpose();
                let g: Vec<[f64; 3]> = dn
                    .iter()
                    .map(|d| {
                        let v = jit * Vector3::from(*d);
                        [v[0], v[1], v[2]]
                    })
                    .collect();
                out.push((det / 8.0, g));
            }
            Ok(out)
        }
    }
}

/// The body's mesh after its transform and validation, with messages about any repair.
fn load_mesh(
    ls: &LoadedScene,
    b: usize,
    body: &scene::Body,
) -> Result<(Mesh, Vec<String>), ModelError> {
    let key = format!("body[{b}].mesh");
    let m = &body.mesh;
    let mut mesh = if let Some(f) = &m.file {
        crate::mesh::readers::read_mesh(&ls.resolve(f)).map_err(|err| ModelError::Mesh {
            key: format!("{key}.file"),
            err,
        })?
    } else {
        let cells = m.cells.unwrap_or([1, 1, 1]);
        let dx = m.dx.unwrap_or(1.0);
        let kind = m
            .element
            .map(ElementKind::from)
            .unwrap_or(ElementKind::Hex8);
        match (m.generator, kind) {
            (Some(scene::Generator::Sphere), k) => {
                crate::mesh::generate::voxel_sphere(m.radius.unwrap_or(1.0), dx, m.origin, k)
            }
            (_, ElementKind::Tet4) => crate::mesh::generate::box_tet(cells, dx, m.origin),
            (_, ElementKind::Hex8) => crate::mesh::generate::box_hex(cells, dx, m.origin),
        }
    };
    // Body transform x = R (s X) + t.
    let r = rot_xyz(body.transform.rotation_deg);
    for p in &mut mesh.nodes {
        let v = r * (Vector3::from(*p) * body.transform.scale)
            + Vector3::from(body.transform.translation);
        *p = [v[0], v[1], v[2]];
    }
    let report =
        crate::mesh::validate::validate_and_fix(&mut mesh).map_err(|err| ModelError::Mesh {
            key: key.clone(),
            err,
        })?;
    let mut fixes = Vec::new();
    if !report.flipped.is_empty() {
        let shown: Vec<String> = report
            .flipped
            .iter()
            .take(20)
            .map(|e| e.to_string())
            .collect();
        fixes.push(format!(
            "{key}: repaired the node order of {} inverted element(s) (unambiguous orientation fix): {}{}",
            report.flipped.len(),
            shown.join(", "),
            if report.flipped.len() > 20 { ", …" } else { "" }
        ));
    }
    Ok((mesh, fixes))
}

impl Model {
    /// Build the model of a loaded scene: meshes, regions, Dirichlet sets, loads, initial state.
    pub fn from_scene(ls: &LoadedScene) -> Result<Model, ModelError> {
        let sc = &ls.scene;
        let mut model = Model {
            h: sc.simulation.dt,
            frames: sc.simulation.frames,
            gravity: sc.simulation.gravity,
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
            obstacles: sc
                .obstacles
                .iter()
                .enumerate()
                .map(|(i, o)| crate::contact::obstacle::Obstacle::from_spec(o, i))
                .collect(),
            contact: sc.contact.clone(),
            boundary_nodes: vec![],
            contact_kappa: vec![],
            contact_margin: 0.0,
        };
        for (b, body) in sc.bodies.iter().enumerate() {
            let (mesh, fixes) = load_mesh(ls, b, body)?;
            model.warnings.extend(fixes);
            model.add_body(ls, b, body, mesh)?;
        }
        model.prescribe_initial_velocity();
        model.base_x0 = model.x0.clone();
        model.base_v0 = model.v0.clone();
        model.offsets = sc
            .bodies
            .iter()
            .map(|b| RigidOffset {
                translation: b.initial.translation,
                euler: b.initial.rotation_deg.map(f64::to_radians),
                velocity: [0.0; 3],
            })
            .collect();
        model.refresh_initial();
        model.setup_contact();
        Ok(model)
    }

    fn add_body(
        &mut self,
        ls: &LoadedScene,
        b: usize,
        body: &scene::Body,
        mesh: Mesh,
    ) -> Result<(), ModelError> {
        let key = format!("body[{b}]");
        let node_off = self.rest.len();
        let elem_off = self.elem_body.len();
        let ne = mesh.num_elements();
        let (lo, hi) = mesh.bounding_box();
        let size = (0..3)
            .map(|d| hi[d] - lo[d])
            .fold(0.0, f64::max)
            .max(1e-300);
        let tol = 1e-9 * size;
        // Elements and samples.
        let mut centroids = Vec::with_capacity(ne);
        for e in 0..ne {
            let el = mesh.element(e);
            let xs: Vec<[f64; 3]> = el.iter().map(|&i| mesh.nodes[i]).collect();
            let samples = element_samples(mesh.kind, &xs).map_err(|msg| ModelError::Scene {
                key: format!("{key}.mesh"),
                msg: format!("element {e}: {msg}"),
            })?;
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
        // Young's modulus per element: base or file, then regions in order.
        let mat = &body.material;
        let mut youngs = vec![mat.youngs_modulus; ne];
        if let Some(f) = &mat.youngs_modulus_file {
            let k = format!("{key}.material.youngs_modulus_file");
            let path = ls.resolve(f);
            let text = std::fs::read_to_string(&path).map_err(|e| ModelError::Scene {
                key: k.clone(),
                msg: format!("cannot read {}: {e}", path.display()),
            })?;
            let vals: Vec<&str> = text.split_whitespace().collect();
            if vals.len() != ne {
                return Err(ModelError::Scene {
                    key: k,
                    msg: format!(
                        "{}: expected {ne} values (one per element), found {}",
                        path.display(),
                        vals.len()
                    ),
                });
            }
            for (e, t) in vals.iter().enumerate() {
                let v: f64 = t.parse().map_err(|_| ModelError::Scene {
                    key: k.clone(),
                    msg: format!("{}: value {e} is not a number: {t:?}", path.display()),
                })?;
                if !(v.is_finite() && v > 0.0) {
                    return Err(ModelError::Scene {
                        key: k.clone(),
                        msg: format!(
                            "{}: element {e}: Young's modulus must be > 0, got {v}",
                            path.display()
                        ),
                    });
                }
                youngs[e] = v;
            }
        }
        let mut region_elements = Vec::new();
        for (i, r) in body.regions.iter().enumerate() {
            let k = format!("{key}.region[{i}].select");
            let mask = r
                .select
                .mask(&k, &centroids, &mesh.tags, tol, &ls.base_dir)
                .map_err(|(key, msg)| ModelError::Scene { key, msg })?;
            if !mask.iter().any(|&m| m) {
                return Err(ModelError::Scene {
                    key: k,
                    msg: "selects no element".into(),
                });
            }
            region_elements.push(
                (0..ne)
                    .filter(|&e| mask[e])
                    .map(|e| e + elem_off)
                    .collect::<Vec<_>>(),
            );
            for (e, &m) in mask.iter().enumerate() {
                if m {
                    youngs[e] = r
                        .youngs_modulus
                        .unwrap_or(youngs[e] * r.scale.unwrap_or(1.0));
                }
            }
        }
        let e_min = youngs.iter().cloned().fold(f64::INFINITY, f64::min);
        self.params.youngs.extend(youngs);
        self.params.nu.push(mat.poisson_ratio);
        self.params.density.push(mat.density);
        self.params.alpha.push(body.damping.alpha);
        self.params.beta0.push(body.damping.beta);
        // Nodes, initial state.
        let r_twist = body.initial.twist.clone();
        let mut x0: Vec<[f64; 3]> = mesh.nodes.clone();
        let sc = body.initial.scale;
        if sc != 1.0 {
            let c = [
                (lo[0] + hi[0]) / 2.0,
                (lo[1] + hi[1]) / 2.0,
                (lo[2] + hi[2]) / 2.0,
            ];
            for p in &mut x0 {
                for d in 0..3 {
                    p[d] = c[d] + sc * (p[d] - c[d]);
                }
            }
        }
        if let Some(t) = &r_twist {
            let a = unit(t.axis);
            let c = Vector3::from(t.center.unwrap_or([
                (lo[0] + hi[0]) / 2.0,
                (lo[1] + hi[1]) / 2.0,
                (lo[2] + hi[2]) / 2.0,
            ]));
            let s: Vec<f64> = mesh
                .nodes
                .iter()
                .map(|p| a.dot(&Vector3::from(*p)))
                .collect();
            let smin = s.iter().cloned().fold(f64::INFINITY, f64::min);
            let smax = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let span = (smax - smin).max(1e-300);
            for (i, p) in x0.iter_mut().enumerate() {
                let th = t.angle_deg.to_radians() * (s[i] - smin) / span;
                let rot =
                    nalgebra::Rotation3::from_axis_angle(&nalgebra::Unit::new_normalize(a), th);
                let v = rot * (Vector3::from(*p) - c) + c;
                *p = [v[0], v[1], v[2]];
            }
        }
        // Centre of mass of the rest shape (for the angular velocity).
        let mut com = Vector3::zeros();
        let mut mtot = 0.0;
        for e in 0..ne {
            let w = self.elem_volume[elem_off + e];
            com += Vector3::from(centroids[e]) * w;
            mtot += w;
        }
        com /= mtot;
        let omega = Vector3::from(body.initial.angular_velocity);
        for p in &x0 {
            let v = Vector3::from(body.initial.velocity) + omega.cross(&(Vector3::from(*p) - com));
            self.x0.extend_from_slice(p);
            self.v0.extend_from_slice(&[v[0], v[1], v[2]]);
        }
        self.rest.extend(mesh.nodes.iter().cloned());
        self.node_body
            .extend(std::iter::repeat_n(b, mesh.num_nodes()));
        // Dirichlet groups.
        for (i, d) in body.dirichlet.iter().enumerate() {
            let k = format!("{key}.dirichlet[{i}].select");
            let nodes = select_nodes(&d.select, k, &mesh.nodes, tol, &ls.base_dir)?;
            let mut center = centroid(&x0, &nodes);
            if let Motion::Rotate {
                center: Some(c), ..
            } = &d.motion
            {
                center = *c;
            }
            let axes = [
                d.axes.contains('x'),
                d.axes.contains('y'),
                d.axes.contains('z'),
            ];
            self.dirichlet.push(DirichletGroup {
                nodes: nodes.iter().map(|n| n + node_off).collect(),
                axes,
                motion: d.motion.clone(),
                center,
            });
        }
        // Attachments (compliance 0: Dirichlet groups).
        for (i, a) in body.attachments.iter().enumerate() {
            let k = format!("{key}.attachment[{i}].select");
            let nodes = select_nodes(&a.select, k, &mesh.nodes, tol, &ls.base_dir)?;
            let mut center = centroid(&x0, &nodes);
            if let Some(t) = a.target {
                center = t;
            }
            if let Motion::Rotate {
                center: Some(c), ..
            } = &a.motion
            {
                center = *c;
            }
            if a.compliance == 0.0 {
                self.dirichlet.push(DirichletGroup {
                    nodes: nodes.iter().map(|n| n + node_off).collect(),
                    axes: [true; 3],
                    motion: a.motion.clone(),
                    center,
                });
            } else {
                self.attachments
                    .push(crate::contact::attachment::AttachmentGroup {
                        body: b,
                        targets: nodes.iter().map(|&n| a.target.unwrap_or(x0[n])).collect(),
                        nodes: nodes.iter().map(|n| n + node_off).collect(),
                        stiffness: 1.0 / a.compliance,
                        motion: a.motion.clone(),
                        center,
                        offset: [0.0; 3],
                    });
            }
        }
        // Loads.
        for (i, f) in body.forces.iter().enumerate() {
            let k = format!("{key}.force[{i}].select");
            let nodes = select_nodes(&f.select, k, &mesh.nodes, tol, &ls.base_dir)?;
            let share = if f.per == scene::ForcePer::Total {
                1.0 / nodes.len() as f64
            } else {
                1.0
            };
            let forces: Vec<[f64; 3]> = if let Some(fv) = f.force {
                nodes
                    .iter()
                    .map(|_| [fv[0] * share, fv[1] * share, fv[2] * share])
                    .collect()
            } else {
                let t = f.twist.as_ref().expect("validated: force or twist");
                let a = unit(t.axis);
                let c = t.center.map(Vector3::from).unwrap_or_else(|| {
                    nodes
                        .iter()
                        .map(|&n| Vector3::from(mesh.nodes[n]))
                        .sum::<Vector3<f64>>()
                        / nodes.len() as f64
                });
                nodes
                    .iter()
                    .map(|&n| {
                        let r = Vector3::from(mesh.nodes[n]) - c;
                        let dir = a.cross(&r);
                        let len = dir.norm();
                        if len < tol {
                            [0.0; 3]
                        } else {
                            let v = dir / len * t.magnitude * share;
                            [v[0], v[1], v[2]]
                        }
                    })
                    .collect()
            };
            self.forces.push(ForceGroup {
                body: b,
                scale: 1.0,
                nodes: nodes.iter().map(|n| n + node_off).collect(),
                forces,
                profile: f.profile.clone(),
            });
        }
        let center = [
            (lo[0] + hi[0]) / 2.0,
            (lo[1] + hi[1]) / 2.0,
            (lo[2] + hi[2]) / 2.0,
        ];
        for (j, ms) in body.muscles.iter().enumerate() {
            let k = format!("{key}.muscle[{j}]");
            let mask = ms
                .select
                .mask(
                    &format!("{k}.select"),
                    &centroids,
                    &mesh.tags,
                    tol,
                    &ls.base_dir,
                )
                .map_err(|(key, msg)| ModelError::Scene { key, msg })?;
            let mut fiber_of = vec![None; ne];
            for e in (0..ne).filter(|&e| mask[e]) {
                fiber_of[e] = Some(
                    super::muscle::fiber_at(&ms.fiber, center, centroids[e]).ok_or_else(|| {
                        ModelError::Scene {
                            key: format!("{k}.fiber"),
                            msg: format!("element {e}: its centroid lies on the fibre axis"),
                        }
                    })?,
                );
            }
            let (mut samples, mut fibers) = (Vec::new(), Vec::new());
            for (s, &ge) in self.samples.elem.iter().enumerate() {
                if ge >= elem_off && ge < elem_off + ne {
                    if let Some(m) = fiber_of[ge - elem_off] {
                        samples.push(s);
                        fibers.push(m);
                    }
                }
            }
            if samples.is_empty() {
                return Err(ModelError::Scene {
                    key: format!("{k}.select"),
                    msg: "selects no element".into(),
                });
            }
            self.muscles.push(super::muscle::MuscleGroup {
                body: b,
                name: ms.name.clone().unwrap_or_else(|| format!("muscle{j}")),
                stiffness: ms.stiffness,
                knots: ms.activation.values(),
                knot_interval: match ms.knot_interval {
                    Some(tau) => tau,
                    None => {
                        let k = ms.activation.values().len();
                        if k > 1 {
                            self.frames as f64 * self.h / (k - 1) as f64
                        } else {
                            0.0
                        }
                    }
                },
                samples,
                fibers,
            });
        }
        let surface: Vec<[usize; 3]> = crate::mesh::surface::boundary_faces(&mesh)
            .into_iter()
            .map(|t| [t[0] + node_off, t[1] + node_off, t[2] + node_off])
            .collect();
        self.bodies.push(BodyInfo {
            name: body.name.clone().unwrap_or_else(|| format!("body{b}")),
            model: mat.model,
            kind: mesh.kind,
            nodes: node_off..node_off + mesh.num_nodes(),
            elements: elem_off..elem_off + ne,
            fit_range: mat.fit_range,
            stiffness_scaling: body.damping.stiffness_scaling,
            e_ref: body.damping.e_ref.unwrap_or(e_min),
            surface,
            regions: region_elements,
            center: [
                (lo[0] + hi[0]) / 2.0,
                (lo[1] + hi[1]) / 2.0,
                (lo[2] + hi[2]) / 2.0,
            ],
        });
        Ok(())
    }

    pub fn num_nodes(&self) -> usize {
        self.rest.len()
    }

    /// Initial velocity of prescribed DoFs = the motion's velocity at t = 0 (0 when fixed,
    /// the translation velocity, or ω×(x−c) for a rotation), whatever `initial.velocity` says.
    fn prescribe_initial_velocity(&mut self) {
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
    fn setup_contact(&mut self) {
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
        for (a, &i) in self.element(e).iter().enumerate() {
            let g = self.sample_grads(s)[a];
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
        for (a, &i) in self.element(e).iter().enumerate() {
            let g = self.sample_grads(s)[a];
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
        for (a, &i) in self.element(e).iter().enumerate() {
            let g = Vector3::from(self.sample_grads(s)[a]);
            let v = q * g;
            out[3 * i] += v[0];
            out[3 * i + 1] += v[1];
            out[3 * i + 2] += v[2];
        }
    }

    /// Derived quantities for the given parameters (spec §6.1 SETUP).
    pub fn derive(&self, p: &MaterialParams) -> Derived {
        let n = self.num_nodes();
        let ns = self.num_samples();
        let mut mass = vec![0.0; n];
        for e in 0..self.num_elements() {
            let b = self.elem_body[e];
            let el = self.element(e);
            let share = p.density[b] * self.elem_volume[e] / el.len() as f64;
            for &i in el {
                mass[i] += share;
            }
        }
        let node_alpha = self.node_body.iter().map(|&b| p.alpha[b]).collect();
        let (mut w_cor, mut w_vol, mut w_nh) = (vec![0.0; ns], vec![0.0; ns], vec![0.0; ns]);
        let mut nh = Vec::with_capacity(self.bodies.len());
        for (b, body) in self.bodies.iter().enumerate() {
            let (cm, cl) = fit_coefficients(body.fit_range);
            let nu = p.nu[b];
            let ne = body.elements.len() as f64;
            let (mut mbar, mut lbar) = (0.0, 0.0);
            for e in body.elements.clone() {
                let (mu, la) = lame(p.youngs[e], nu);
                mbar += mu / ne;
                lbar += la / ne;
            }
            nh.push(NhParams {
                mu: mbar,
                lambda: lbar,
                k: cm * mbar + cl * lbar,
            });
        }
        for s in 0..ns {
            let e = self.samples.elem[s];
            let b = self.elem_body[e];
            let (mu, la) = lame(p.youngs[e], p.nu[b]);
            let v = self.samples.vol[s];
            match self.bodies[b].model {
                MaterialModel::Corotated => {
                    w_cor[s] = 2.0 * mu * v;
                    w_vol[s] = la * v;
                }
                MaterialModel::Neohookean => {
                    let (cm, cl) = fit_coefficients(self.bodies[b].fit_range);
                    w_nh[s] = (cm * mu + cl * la) * v;
                }
            }
        }
        let beta = (0..self.num_elements())
            .map(|e| {
                let b = self.elem_body[e];
                match self.bodies[b].stiffness_scaling {
                    StiffnessScaling::Amplified => p.beta0[b] * p.youngs[e] / self.bodies[b].e_ref,
                    StiffnessScaling::Uniform => p.beta0[b],
                }
            })
            .collect();
        let emin = p.youngs.iter().cloned().fold(f64::INFINITY, f64::min);
        let emax = p.youngs.iter().cloned().fold(0.0, f64::max);
        Derived {
            mass,
            node_alpha,
            w_cor,
            w_vol,
            w_nh,
            beta,
            nh,
            heterogeneous: emax / emin > 1.01,
            muscle_time: 0.0,
        }
    }

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
        crate::contact::attachment::add_rhs(&self.attachments, t + self.h, &mut f);
        f
    }
}

/// Nodes of body-local selector `sel` (scene key `key`); an empty selection is an error
/// naming the key.
fn select_nodes(
    sel: &scene::NodeSelector,
    key: String,
    nodes: &[[f64; 3]],
    tol: f64,
    base: &std::path::Path,
) -> Result<Vec<usize>, ModelError> {
    let picked = sel
        .select(&key, nodes, tol, base)
        .map_err(|(key, msg)| ModelError::Scene { key, msg })?;
    if picked.is_empty() {
        return Err(ModelError::Scene {
            key,
            msg: "selects no node".into(),
        });
    }
    Ok(picked)
}

/// Mean of `x[n]` over `nodes`.
fn centroid(x: &[[f64; 3]], nodes: &[usize]) -> [f64; 3] {
    let mut c = [0.0; 3];
    for &n in nodes {
        for d in 0..3 {
            c[d] += x[n][d] / nodes.len() as f64;
        }
    }
    c
}
