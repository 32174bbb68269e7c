//! Scene → model (`resolve`): reads the meshes and per-element data files a scene names,
//! applies body transforms, regions, selectors, initial state, Dirichlet groups,
//! attachments, loads and muscles, and returns the solver's [`Model`]. The only place that
//! turns the file format into model arrays.

use super::{Body, ForcePer, Generator, LoadedScene, NodeSelector, ObstacleKind, ObstacleSpec};
use crate::mesh::{ElementKind, Mesh};
use crate::model::attachment::AttachmentGroup;
use crate::model::geometry::element_samples;
use crate::model::muscle::MuscleGroup;
use crate::model::obstacle::{Obstacle, Shape};
use crate::model::{
    BodyInfo, DirichletGroup, ForceGroup, MaterialParams, Model, Motion, RigidOffset, Samples,
};
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

/// The body's mesh after its transform and validation, with messages about any repair.
fn load_mesh(ls: &LoadedScene, b: usize, body: &Body) -> Result<(Mesh, Vec<String>), ModelError> {
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
            (Some(Generator::Sphere), k) => {
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

/// The model of a loaded scene (see [`Model::from_scene`]).
pub fn resolve(ls: &LoadedScene) -> Result<Model, ModelError> {
    Model::from_scene(ls)
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
                .map(|(i, o)| obstacle(o, i))
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
        body: &Body,
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
                self.attachments.push(AttachmentGroup {
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
            let share = if f.per == ForcePer::Total {
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
                fiber_of[e] = Some(fiber_at(&ms.fiber, center, centroids[e]).ok_or_else(|| {
                    ModelError::Scene {
                        key: format!("{k}.fiber"),
                        msg: format!("element {e}: its centroid lies on the fibre axis"),
                    }
                })?);
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
            self.muscles.push(MuscleGroup {
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
}

/// Nodes of body-local selector `sel` (scene key `key`); an empty selection is an error
/// naming the key.
fn select_nodes(
    sel: &NodeSelector,
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

/// Unit fibre of a muscle at a rest point `x`: constant, or radial / circumferential about
/// `axis` through `center`. `None` on the axis (radial/circumferential undefined).
fn fiber_at(spec: &super::FiberSpec, center: [f64; 3], x: [f64; 3]) -> Option<Vector3<f64>> {
    use super::{FiberField, FiberSpec};
    let v = match spec {
        FiberSpec::Direction(d) => Vector3::from(*d),
        FiberSpec::Field(f) => {
            let (axis, c, radial) = match f {
                FiberField::Radial { axis, center: c } => (axis, c, true),
                FiberField::Circumferential { axis, center: c } => (axis, c, false),
            };
            let ax = Vector3::from(*axis).normalize();
            let r = Vector3::from(x) - Vector3::from(c.unwrap_or(center));
            let radial_v = r - ax * ax.dot(&r);
            if radial {
                radial_v
            } else {
                ax.cross(&radial_v)
            }
        }
    };
    let n = v.norm();
    (n > 1e-12 * (1.0 + Vector3::from(x).norm())).then(|| v / n)
}

/// The model obstacle of a validated scene entry (`index` names it when unnamed).
pub fn obstacle(s: &ObstacleSpec, index: usize) -> Obstacle {
    let f = |v: Option<[f64; 3]>| Vector3::from(v.unwrap_or([0.0; 3]));
    let shape = match s.kind {
        ObstacleKind::Plane => Shape::Plane {
            point: f(s.point),
            normal: f(s.normal).normalize(),
        },
        ObstacleKind::Sphere => Shape::Sphere {
            center: f(s.center),
            radius: s.radius.unwrap_or(1.0),
        },
        ObstacleKind::Box => Shape::Box {
            min: f(s.min),
            max: f(s.max),
        },
        ObstacleKind::Capsule => Shape::Capsule {
            a: f(s.a),
            b: f(s.b),
            radius: s.radius.unwrap_or(1.0),
        },
        ObstacleKind::Cylinder => Shape::Cylinder {
            a: f(s.a),
            b: f(s.b),
            radius: s.radius.unwrap_or(1.0),
        },
    };
    Obstacle::new(
        s.name.clone().unwrap_or_else(|| format!("obstacle{index}")),
        shape,
        s.friction,
        s.restitution,
        s.motion.clone(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fiber_fields() {
        use crate::scene::{FiberField, FiberSpec};
        use nalgebra::Vector3;
        let c = [0.0; 3];
        let circ = FiberSpec::Field(FiberField::Circumferential {
            axis: [0.0, 0.0, 2.0],
            center: None,
        });
        let m = fiber_at(&circ, c, [1.0, 0.0, 0.5]).unwrap();
        assert!((m - Vector3::new(0.0, 1.0, 0.0)).norm() < 1e-15);
        let rad = FiberSpec::Field(FiberField::Radial {
            axis: [0.0, 0.0, 1.0],
            center: Some([0.0, 1.0, 0.0]),
        });
        let m = fiber_at(&rad, c, [0.0, 3.0, 7.0]).unwrap();
        assert!((m - Vector3::new(0.0, 1.0, 0.0)).norm() < 1e-15);
        assert!(fiber_at(&rad, c, [0.0, 1.0, 7.0]).is_none());
        let m = fiber_at(&FiberSpec::Direction([0.0, 0.0, 3.0]), c, [1.0; 3]).unwrap();
        assert_eq!(m, Vector3::new(0.0, 0.0, 1.0));
    }
}
