//! Scene → model (`resolve`): reads the meshes and per-element data files a scene names,
//! applies body transforms, regions, selectors, initial state, Dirichlet groups,
//! attachments, loads and muscles, and returns the solver's [`Model`]. The only place that
//! turns the file format into model arrays.

use super::{Body, ForcePer, Generator, LoadedScene, NodeSelector, ObstacleKind, ObstacleSpec};
use crate::mesh::{ElementKind, Mesh};
use crate::model::attachment::AttachmentGroup;
use crate::model::muscle::MuscleGroup;
use crate::model::obstacle::{Obstacle, Shape};
use crate::model::{BodyMaterial, DirichletGroup, ForceGroup, Model, Motion, RigidOffset};
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
        let radius = m.radius.unwrap_or(1.0);
        use crate::mesh::{crab, generate, solids};
        let generated = match m.generator {
            Some(Generator::Sphere) => Ok(generate::voxel_sphere(radius, dx, m.origin, kind)),
            Some(Generator::Cylinder) => {
                solids::cylinder(radius, m.height.unwrap_or(1.0), dx, m.origin, kind)
            }
            Some(Generator::RoundedBox) => {
                solids::rounded_box(m.size.unwrap_or([1.0; 3]), radius, dx, m.origin, kind)
            }
            Some(Generator::Crab) => crab::crab(m.resolution.unwrap_or(0), kind).map(|mut c| {
                for p in &mut c.nodes {
                    for (x, o) in p.iter_mut().zip(m.origin) {
                        *x += o;
                    }
                }
                c
            }),
            Some(Generator::Box) | None => generate::try_box(cells, dx, m.origin, kind),
        };
        generated.map_err(|err| ModelError::Mesh {
            key: key.clone(),
            err,
        })?
    };
    let mut fixes = Vec::new();
    // the extents a voxel generator was asked for: the rounded box's size, the cylinder's height
    let asked = match m.generator {
        Some(Generator::RoundedBox) => {
            Some(("size", "rounded_box", m.size.unwrap_or([1.0; 3]).map(Some)))
        }
        Some(Generator::Cylinder) => Some((
            "height",
            "cylinder",
            [None, None, Some(m.height.unwrap_or(1.0))],
        )),
        _ => None,
    };
    if let (None, Some((k, name, asked))) = (&m.file, asked) {
        let dx = m.dx.unwrap_or(1.0);
        fixes.extend(voxel_span_note(
            &format!("{key}.{k}"),
            name,
            &mesh,
            asked,
            dx,
        ));
    }
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

/// A note for the user when a voxel body does not span the extent `asked` of it on an axis
/// (`None`: not asked, e.g. a cylinder's diameter, which a voxel circle only approximates):
/// the `rounded_box` and `cylinder` generators keep the cells of a grid of edge `dx` whose
/// centres lie in the shape, so an extent that is not a whole number of cells comes out
/// rounded up to one (the Dice's 3 cm cube at dx = 3.4 mm spans 9 cells, 30.6 mm; an Oreo
/// layer 5 mm high at dx = 3.5 mm spans 7 mm). `None` when every asked axis spans its extent
/// within a relative 1e-9.
fn voxel_span_note(
    key: &str,
    name: &str,
    mesh: &Mesh,
    asked: [Option<f64>; 3],
    dx: f64,
) -> Option<String> {
    if mesh.nodes.is_empty() {
        return None;
    }
    let (lo, hi) = mesh.bounding_box();
    let axes: Vec<(char, f64, f64)> = (0..3)
        .filter_map(|d| asked[d].map(|a| (['x', 'y', 'z'][d], hi[d] - lo[d], a)))
        .collect();
    let off = axes.iter().any(|&(_, span, a)| (span - a).abs() > 1e-9 * a);
    off.then(|| {
        let list = |f: &dyn Fn(f64, f64) -> String| {
            axes.iter()
                .map(|&(c, span, a)| format!("{c} {}", f(span, a)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "{key}: the voxel {name} spans {} m, not the asked {} m (it keeps the cells of \
             edge dx = {dx:e} whose centres lie in the shape; an extent that is a whole number \
             of cells is kept exactly)",
            list(&|span, _| format!("{span:.6e}")),
            list(&|_, a| format!("{a:e}")),
        )
    })
}

/// The model of a loaded scene (see [`Model::from_scene`]).
pub fn resolve(ls: &LoadedScene) -> Result<Model, ModelError> {
    Model::from_scene(ls)
}

impl Model {
    /// Build the model of a loaded scene: meshes, regions, Dirichlet sets, loads, initial state.
    pub fn from_scene(ls: &LoadedScene) -> Result<Model, ModelError> {
        let sc = &ls.scene;
        if sc.is_mpm() || sc.bodies.is_empty() {
            return Err(ModelError::Scene {
                key: if sc.mpm_bodies.is_empty() {
                    "rigid_body"
                } else {
                    "mpm_body"
                }
                .into(),
                msg: "an MPM/rigid scene has no PD model: `diffphd simulate` runs it \
                      (grad, gradcheck, optimize and the Python session do not)"
                    .into(),
            });
        }
        let obstacles = sc
            .obstacles
            .iter()
            .enumerate()
            .map(|(i, o)| obstacle(o, i))
            .collect();
        let sim = &sc.simulation;
        let mut model = Model::empty(
            sim.dt,
            sim.frames,
            sim.gravity,
            sc.contact.clone(),
            obstacles,
        );
        for (b, body) in sc.bodies.iter().enumerate() {
            let (mesh, fixes) = load_mesh(ls, b, body)?;
            model.warnings.extend(fixes);
            add_body(&mut model, &BodyCtx::new(ls, b, body, &mesh))?;
        }
        let offsets = sc
            .bodies
            .iter()
            .map(|b| RigidOffset {
                translation: b.initial.translation,
                euler: b.initial.rotation_deg.map(f64::to_radians),
                velocity: [0.0; 3],
            })
            .collect();
        model.finish(offsets);
        Ok(model)
    }
}

/// What the per-body steps of [`add_body`] share: the scene entry, its key, its mesh and
/// where its nodes and elements start in the model.
struct BodyCtx<'a> {
    ls: &'a LoadedScene,
    b: usize,
    body: &'a Body,
    /// `body[b]`.
    key: String,
    mesh: &'a Mesh,
    node_off: usize,
    elem_off: usize,
    /// Rest bounding box.
    lo: [f64; 3],
    hi: [f64; 3],
    /// Geometric tolerance of the selectors (1e-9 of the body size).
    tol: f64,
}

impl<'a> BodyCtx<'a> {
    fn new(ls: &'a LoadedScene, b: usize, body: &'a Body, mesh: &'a Mesh) -> Self {
        let (lo, hi) = mesh.bounding_box();
        let size = (0..3)
            .map(|d| hi[d] - lo[d])
            .fold(0.0, f64::max)
            .max(1e-300);
        BodyCtx {
            ls,
            b,
            body,
            key: format!("body[{b}]"),
            mesh,
            node_off: 0,
            elem_off: 0,
            lo,
            hi,
            tol: 1e-9 * size,
        }
    }

    /// Centre of the rest bounding box.
    fn center(&self) -> [f64; 3] {
        let (lo, hi) = (self.lo, self.hi);
        [
            (lo[0] + hi[0]) / 2.0,
            (lo[1] + hi[1]) / 2.0,
            (lo[2] + hi[2]) / 2.0,
        ]
    }

    /// Nodes picked by a body-local node selector (`what` names the scene key).
    fn select(&self, sel: &NodeSelector, what: String) -> Result<Vec<usize>, ModelError> {
        let key = format!("{}.{what}.select", self.key);
        select_nodes(sel, key, &self.mesh.nodes, self.tol, &self.ls.base_dir)
    }

    /// Global indices of body-local nodes.
    fn global(&self, nodes: &[usize]) -> Vec<usize> {
        nodes.iter().map(|n| n + self.node_off).collect()
    }
}

/// Append body `c.b` of the scene to the model.
fn add_body(model: &mut Model, c: &BodyCtx) -> Result<(), ModelError> {
    let c = &BodyCtx {
        node_off: model.rest.len(),
        elem_off: model.elem_body.len(),
        key: c.key.clone(),
        ..*c
    };
    let body = c.body;
    let ne = c.mesh.num_elements();
    let centroids = model
        .push_elements(c.b, c.mesh)
        .map_err(|(e, msg)| ModelError::Scene {
            key: format!("{}.mesh", c.key),
            msg: format!("element {e}: {msg}"),
        })?;
    // Young's modulus per element: base or file, then regions in order.
    let mut youngs = element_youngs(c, ne)?;
    let regions = apply_regions(c, &centroids, &mut youngs)?;
    let mat = &body.material;
    let material = BodyMaterial {
        model: mat.model,
        poisson_ratio: mat.poisson_ratio,
        density: mat.density,
        mass: mat.mass,
        alpha: body.damping.alpha,
        beta: body.damping.beta,
        fit_range: mat.fit_range,
        stiffness_scaling: body.damping.stiffness_scaling,
        e_ref: body.damping.e_ref,
    };
    let nu = element_nu(c, ne)?;
    model.push_material_field(youngs, nu, &material);
    let x0 = initial_positions(c);
    let init = (body.initial.velocity, body.initial.angular_velocity);
    model.push_nodes(
        c.b,
        &c.mesh.nodes,
        &x0,
        c.elem_off..c.elem_off + ne,
        &centroids,
        init,
    );
    add_dirichlet(model, c, &x0)?;
    add_attachments(model, c, &x0)?;
    add_forces(model, c)?;
    add_muscles(model, c, &centroids)?;
    let name = body.name.clone().unwrap_or_else(|| format!("body{}", c.b));
    model.push_body_info(name, c.mesh, (c.node_off, c.elem_off), &material, regions);
    Ok(())
}

/// Young's modulus per element: `youngs_modulus`, or the values of `youngs_modulus_file`
/// (one per element, whitespace separated).
fn element_youngs(c: &BodyCtx, ne: usize) -> Result<Vec<f64>, ModelError> {
    let mat = &c.body.material;
    match &mat.youngs_modulus_file {
        None => Ok(vec![mat.youngs_modulus; ne]),
        Some(f) => element_file(c, ne, ("youngs_modulus_file", f), |v| {
            (v.is_finite() && v > 0.0)
                .then_some(())
                .ok_or("Young's modulus must be > 0")
        }),
    }
}

/// Poisson's ratio per element from `poisson_ratio_file` (one per element, whitespace
/// separated, −1 < ν < 0.5); `None` without one (the body's `poisson_ratio` everywhere).
fn element_nu(c: &BodyCtx, ne: usize) -> Result<Option<Vec<f64>>, ModelError> {
    let Some(f) = &c.body.material.poisson_ratio_file else {
        return Ok(None);
    };
    element_file(c, ne, ("poisson_ratio_file", f), |v| {
        (v.is_finite() && v > -1.0 && v < 0.5)
            .then_some(())
            .ok_or("Poisson's ratio must be in (-1, 0.5)")
    })
    .map(Some)
}

/// The `ne` values of the per-element file `f` of material key `key` (one per element,
/// whitespace separated), each accepted by `check`. Errors name the key, the
/// file and the element.
fn element_file(
    c: &BodyCtx,
    ne: usize,
    (key, f): (&str, &str),
    check: impl Fn(f64) -> Result<(), &'static str>,
) -> Result<Vec<f64>, ModelError> {
    let k = format!("{}.material.{key}", c.key);
    let path = c.ls.resolve(f);
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
    let mut out = Vec::with_capacity(ne);
    for (e, t) in vals.iter().enumerate() {
        let v: f64 = t.parse().map_err(|_| ModelError::Scene {
            key: k.clone(),
            msg: format!("{}: value {e} is not a number: {t:?}", path.display()),
        })?;
        if let Err(why) = check(v) {
            return Err(ModelError::Scene {
                key: k.clone(),
                msg: format!("{}: element {e}: {why}, got {v}", path.display()),
            });
        }
        out.push(v);
    }
    Ok(out)
}

/// Apply the `[[body.region]]`s in order to `youngs`; returns each region's elements
/// (global indices).
fn apply_regions(
    c: &BodyCtx,
    centroids: &[[f64; 3]],
    youngs: &mut [f64],
) -> Result<Vec<Vec<usize>>, ModelError> {
    let mut region_elements = Vec::new();
    for (i, r) in c.body.regions.iter().enumerate() {
        let k = format!("{}.region[{i}].select", c.key);
        let mask = r
            .select
            .mask(&k, centroids, &c.mesh.tags, c.tol, &c.ls.base_dir)
            .map_err(|(key, msg)| ModelError::Scene { key, msg })?;
        if !mask.iter().any(|&m| m) {
            return Err(ModelError::Scene {
                key: k,
                msg: "selects no element".into(),
            });
        }
        region_elements.push(
            (0..mask.len())
                .filter(|&e| mask[e])
                .map(|e| e + c.elem_off)
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
    Ok(region_elements)
}

/// Initial positions of the body's nodes: the rest shape scaled about its box centre by
/// `initial.scale`, then twisted by `initial.twist`.
fn initial_positions(c: &BodyCtx) -> Vec<[f64; 3]> {
    let initial = &c.body.initial;
    let mut x0: Vec<[f64; 3]> = c.mesh.nodes.clone();
    let sc = initial.scale;
    if sc != 1.0 {
        let ctr = c.center();
        for p in &mut x0 {
            for d in 0..3 {
                p[d] = ctr[d] + sc * (p[d] - ctr[d]);
            }
        }
    }
    if let Some(t) = &initial.twist {
        let a = unit(t.axis);
        let ctr = Vector3::from(t.center.unwrap_or(c.center()));
        let s: Vec<f64> = c
            .mesh
            .nodes
            .iter()
            .map(|p| a.dot(&Vector3::from(*p)))
            .collect();
        let smin = s.iter().cloned().fold(f64::INFINITY, f64::min);
        let smax = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let span = (smax - smin).max(1e-300);
        for (i, p) in x0.iter_mut().enumerate() {
            let th = t.angle_deg.to_radians() * (s[i] - smin) / span;
            let rot = nalgebra::Rotation3::from_axis_angle(&nalgebra::Unit::new_normalize(a), th);
            let v = rot * (Vector3::from(*p) - ctr) + ctr;
            *p = [v[0], v[1], v[2]];
        }
    }
    x0
}

/// Rotation centre of a motion on `nodes`: its own `center`, else `fallback`.
fn motion_center(motion: &Motion, fallback: [f64; 3]) -> [f64; 3] {
    match motion {
        Motion::Rotate {
            center: Some(ctr), ..
        } => *ctr,
        _ => fallback,
    }
}

/// `[[body.dirichlet]]` groups.
fn add_dirichlet(model: &mut Model, c: &BodyCtx, x0: &[[f64; 3]]) -> Result<(), ModelError> {
    for (i, d) in c.body.dirichlet.iter().enumerate() {
        let nodes = c.select(&d.select, format!("dirichlet[{i}]"))?;
        let center = motion_center(&d.motion, centroid(x0, &nodes));
        let axes = [
            d.axes.contains('x'),
            d.axes.contains('y'),
            d.axes.contains('z'),
        ];
        model.dirichlet.push(DirichletGroup {
            nodes: c.global(&nodes),
            axes,
            motion: d.motion.clone(),
            center,
        });
    }
    Ok(())
}

/// `[[body.attachment]]`s: compliant ones as attachment groups, hard ones (compliance 0)
/// as Dirichlet groups.
fn add_attachments(model: &mut Model, c: &BodyCtx, x0: &[[f64; 3]]) -> Result<(), ModelError> {
    for (i, a) in c.body.attachments.iter().enumerate() {
        let nodes = c.select(&a.select, format!("attachment[{i}]"))?;
        let center = motion_center(&a.motion, a.target.unwrap_or(centroid(x0, &nodes)));
        if a.compliance == 0.0 {
            model.dirichlet.push(DirichletGroup {
                nodes: c.global(&nodes),
                axes: [true; 3],
                motion: a.motion.clone(),
                center,
            });
        } else {
            model.attachments.push(AttachmentGroup {
                body: c.b,
                index: i,
                targets: nodes.iter().map(|&n| a.target.unwrap_or(x0[n])).collect(),
                nodes: c.global(&nodes),
                stiffness: 1.0 / a.compliance,
                motion: a.motion.clone(),
                center,
                offset: [0.0; 3],
            });
        }
    }
    Ok(())
}

/// `[[body.force]]` loads: a force per node (or shared by the selection), or a torque-like
/// twist load about an axis.
fn add_forces(model: &mut Model, c: &BodyCtx) -> Result<(), ModelError> {
    let mesh = c.mesh;
    for (i, f) in c.body.forces.iter().enumerate() {
        let nodes = c.select(&f.select, format!("force[{i}]"))?;
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
            let ctr = t.center.map(Vector3::from).unwrap_or_else(|| {
                nodes
                    .iter()
                    .map(|&n| Vector3::from(mesh.nodes[n]))
                    .sum::<Vector3<f64>>()
                    / nodes.len() as f64
            });
            nodes
                .iter()
                .map(|&n| {
                    let r = Vector3::from(mesh.nodes[n]) - ctr;
                    let dir = a.cross(&r);
                    let len = dir.norm();
                    if len < c.tol {
                        [0.0; 3]
                    } else {
                        let v = dir / len * t.magnitude * share;
                        [v[0], v[1], v[2]]
                    }
                })
                .collect()
        };
        model.forces.push(ForceGroup {
            body: c.b,
            scale: 1.0,
            nodes: c.global(&nodes),
            forces,
            profile: f.profile.clone(),
        });
    }
    Ok(())
}

/// `[[body.muscle]]` groups: the selected elements' samples with their rest fibres.
fn add_muscles(model: &mut Model, c: &BodyCtx, centroids: &[[f64; 3]]) -> Result<(), ModelError> {
    let ne = c.mesh.num_elements();
    let elem_off = c.elem_off;
    let center = c.center();
    for (j, ms) in c.body.muscles.iter().enumerate() {
        let k = format!("{}.muscle[{j}]", c.key);
        let mask = ms
            .select
            .mask(
                &format!("{k}.select"),
                centroids,
                &c.mesh.tags,
                c.tol,
                &c.ls.base_dir,
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
        for (s, &ge) in model.samples.elem.iter().enumerate() {
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
        let knots = ms.activation.values();
        let knot_interval = match ms.knot_interval {
            Some(tau) => tau,
            None if knots.len() > 1 => model.frames as f64 * model.h / (knots.len() - 1) as f64,
            None => 0.0,
        };
        model.muscles.push(MuscleGroup {
            body: c.b,
            name: ms.name.clone().unwrap_or_else(|| format!("muscle{j}")),
            stiffness: ms.stiffness,
            knots,
            knot_interval,
            samples,
            fibers,
        });
    }
    Ok(())
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
    let mut o = Obstacle::new(
        s.name.clone().unwrap_or_else(|| format!("obstacle{index}")),
        shape,
        s.friction,
        s.restitution,
        s.motion.clone(),
    );
    o.static_friction = s.static_friction;
    o
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

    /// A voxel rounded box or cylinder whose asked extent is not a whole number of cells says
    /// what it spans (the Dice: 3 cm at dx = 3.4 mm is 9 cells, 30.6 mm; an Oreo layer 5 mm
    /// high at dx = 3.5 mm is 2 cells, 7 mm); a whole number says nothing.
    #[test]
    fn a_voxel_body_off_the_cell_grid_says_what_it_spans() {
        use crate::mesh::solids;
        let size = [0.03; 3];
        let cube = |dx: f64| {
            let mesh = solids::rounded_box(size, 0.004, dx, [0.0; 3], ElementKind::Tet4).unwrap();
            voxel_span_note(
                "body[0].mesh.size",
                "rounded_box",
                &mesh,
                size.map(Some),
                dx,
            )
        };
        let w = cube(0.0034).expect("3 cm is 8.8 cells of 3.4 mm");
        assert!(
            w.starts_with("body[0].mesh.size: the voxel rounded_box spans "),
            "{w}"
        );
        assert!(
            w.contains("spans x 3.060000e-2, y 3.060000e-2, z 3.060000e-2 m, not the asked x 3e-2, y 3e-2, z 3e-2 m"),
            "{w}"
        );
        assert_eq!(cube(0.006), None, "3 cm is 5 cells of 6 mm");
        assert_eq!(cube(0.0025), None, "3 cm is 12 cells of 2.5 mm");
        let layer = |dx: f64| {
            let mesh = solids::cylinder(0.015, 0.005, dx, [0.0; 3], ElementKind::Hex8).unwrap();
            voxel_span_note(
                "body[1].mesh.height",
                "cylinder",
                &mesh,
                [None, None, Some(0.005)],
                dx,
            )
        };
        let w = layer(0.0035).expect("5 mm is 1.4 cells of 3.5 mm");
        assert!(
            w.starts_with("body[1].mesh.height: the voxel cylinder spans z 7.000000e-3 m, not the asked z 5e-3 m"),
            "{w}"
        );
        assert_eq!(layer(0.0025), None, "5 mm is 2 cells of 2.5 mm");
    }

    /// `ModelBuilder` and `resolve` fill a model by the same steps: a one-body scene and its
    /// builder twin give the same arrays.
    #[test]
    fn builder_and_resolve_agree_on_a_clamped_box() {
        use crate::model::ModelBuilder;
        let text = &crate::scene::overrides::fixture("scenes/unit/clamped_box", &[]);
        let ls = crate::scene::load_str(text, std::path::Path::new("t.toml"), &[]).unwrap();
        let a = resolve(&ls).unwrap();
        let b = ModelBuilder::new(crate::mesh::generate::box_tet([2, 1, 1], 0.1, [0.0; 3]))
            .material(crate::material::MaterialModel::Neohookean)
            .youngs_modulus(2e5)
            .poisson_ratio(0.35)
            .density(900.0)
            .damping(1.0, 0.01)
            .steps(0.02, 3)
            .fix_where(|p| p[0] == 0.0)
            .build()
            .unwrap();
        assert_eq!((a.h, a.frames, a.gravity), (b.h, b.frames, b.gravity));
        assert_eq!(
            (&a.rest, &a.conn, &a.conn_ptr),
            (&b.rest, &b.conn, &b.conn_ptr)
        );
        assert_eq!(
            (&a.samples.vol, &a.samples.grads),
            (&b.samples.vol, &b.samples.grads)
        );
        assert_eq!(
            (&a.params.youngs, &a.params.nu),
            (&b.params.youngs, &b.params.nu)
        );
        assert_eq!(
            (&a.params.alpha, &a.params.beta0),
            (&b.params.alpha, &b.params.beta0)
        );
        assert_eq!((&a.x0, &a.v0), (&b.x0, &b.v0));
        assert_eq!(a.dirichlet[0].nodes, b.dirichlet[0].nodes);
        assert_eq!(a.bodies[0].e_ref, b.bodies[0].e_ref);
        assert_eq!(a.bodies[0].surface, b.bodies[0].surface);
        assert_eq!(a.contact_kappa, b.contact_kappa);
    }
}
