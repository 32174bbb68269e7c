//! `optimized.toml`: the effective scene with optimized parameter values written back into
//! the scene keys they come from, checked by rebuilding the model.
//!
//! Each parameter class writes its own keys ([`super::classes::ParamClass::write_back`];
//! the class's module doc says where: `body[b].material.*`, `body[b].damping.*`,
//! `body[b].initial.*`, `simulation.gravity`, force groups, muscle activations, friction,
//! attachments, obstacle positions); what has no scene key (`initial_state_direction`) is
//! reported in the notes. A `youngs_modulus_field` body's moduli (a `poisson_ratio_field`
//! body's ratios) go into a per-element file
//! beside `optimized.toml` ([`WriteBack::files`]; the class's module doc), written after the
//! absolute-path pass so the scene names it relative to its own folder; the check rebuilds
//! the model from the text and the files in a private temporary folder.
//!
//! The `initial` keys of `[[parameter]]` are removed, so optimizing the written scene again
//! starts from the optimum. The result is verified: the model built from the new text must
//! have the optimized per-element moduli, material scalars, initial state, gravity,
//! loads, muscle activations, attachments, friction and obstacle trajectories (relative 1e-9). Where an in-place E rewrite is not exact (a later region with an
//! absolute modulus overlapping region r, or `youngs_modulus_file`), the factor is instead
//! appended as a new `[[body.region]]` (`scale`) with region r's selector (or `all = true`).
//!
//! Input files named relative to the scene's folder (`mesh.file`,
//! `material.youngs_modulus_file`, `material.poisson_ratio_file`, `elements_file`/`nodes_file` selectors,
//! `loss.term.reference_dir`, `loss.term.capture_dir`, `loss.term.captures[k].file`) are written as absolute paths: `optimized.toml` lands in the
//! output directory, where the scene's relative paths would not resolve, and it must load as
//! a scene from there (to continue an optimization from it).

pub use super::classes::api::{SceneText, Walk, WritebackError};

use super::classes::api::{body_mut, missing, table, ElementFile, Param};
use super::classes::material::{damping_beta, youngs_modulus};
use super::classes::material::{poisson_ratio_field, youngs_modulus_field};
use super::problem::Problem;
use crate::scene;
use crate::solver::Model;
use toml::{Table, Value};

/// The rewritten scene.
pub struct WriteBack {
    /// TOML text (without the comment header).
    pub toml: String,
    /// `--set`-style assignments relative to the effective scene, where expressible.
    pub sets: Vec<String>,
    /// Everything that could not be written, or was written by appending regions.
    pub notes: Vec<String>,
    /// Whether the rebuilt model reproduces the optimized model.
    pub exact: bool,
    /// Per-element files the TOML names relative to its own folder (`youngs_modulus_field`):
    /// write them beside `optimized.toml`.
    pub files: Vec<ElementFile>,
}

/// The `[loss.reference] set` list of the scene (created empty where absent).
fn reference_set(root: &mut Table) -> Walk<&mut Vec<Value>> {
    let loss = root
        .get_mut("loss")
        .and_then(|v| v.as_table_mut())
        .ok_or_else(|| missing("loss".into(), "a table"))?;
    table(loss, "loss", "reference")?
        .entry("set".to_string())
        .or_insert_with(|| Value::Array(vec![]))
        .as_array_mut()
        .ok_or_else(|| missing("loss.reference.set".into(), "an array"))
}

/// Keep the last `--set` line of every key path, in the order of those last lines (several
/// parameters on one vector each emit the whole vector).
fn dedup_sets(sets: Vec<String>) -> Vec<String> {
    let key = |s: &String| {
        s.split_once('=')
            .map(|(k, _)| k.to_string())
            .unwrap_or_default()
    };
    let mut out: Vec<String> = Vec::new();
    for s in sets.into_iter().rev() {
        if !out.iter().any(|o| key(o) == key(&s)) {
            out.push(s);
        }
    }
    out.reverse();
    out
}

/// Pin `damping.e_ref` of every damped body with stiffness-amplified damping whose scene
/// leaves it at its default (docs/NOTES.md, "E_ref"). The default is the body's smallest
/// E_e *as the scene is written*, fixed when the model is built; the optimizer keeps that
/// value while it changes E, so a scene written with new moduli must carry the number or a
/// re-simulation would recompute it from the optimized moduli. A reference trajectory
/// simulated from the scene (`[loss.reference] set`) gets its own E_ref appended to its
/// overrides for the same reason.
fn pin_e_ref(
    root: &mut Table,
    problem: &Problem,
    target: &Model,
    sets: &mut Vec<String>,
) -> Walk<()> {
    let scene = &problem.ls.scene;
    let ref_sets = scene
        .loss
        .as_ref()
        .and_then(|l| l.reference.as_ref())
        .map(|r| r.set.clone());
    let mut ref_model: Option<Option<Model>> = None;
    for (b, info) in problem.base.bodies.iter().enumerate() {
        let damped = problem.base.params.beta0[b] != 0.0
            || target.params.beta0[b] != 0.0
            || problem
                .params
                .iter()
                .any(|p| p.body == b && p.key() == damping_beta::KEY);
        if info.stiffness_scaling != scene::StiffnessScaling::Amplified
            || scene.bodies[b].damping.e_ref.is_some()
            || !damped
        {
            continue;
        }
        table(body_mut(root, b)?, &format!("body.{b}"), "damping")?
            .insert("e_ref".into(), Value::Float(info.e_ref));
        sets.push(format!("body.{b}.damping.e_ref={:e}", info.e_ref));
        let Some(rs) = &ref_sets else { continue };
        let rm = ref_model.get_or_insert_with(|| {
            scene::load_str(&problem.ls.effective_toml, &problem.ls.path, rs)
                .ok()
                .and_then(|l| Model::from_scene(&l).ok())
        });
        let Some(rm) = rm else { continue };
        let e = rm.bodies[b].e_ref;
        if e != info.e_ref {
            reference_set(root)?.push(Value::String(format!("body.{b}.damping.e_ref={e:e}")));
        }
    }
    Ok(())
}

/// Rewrite `root` in place; `append_e`: express E factors as appended regions. Each
/// parameter's class writes its keys; `--set` equivalents go to `sets`, what cannot be
/// written to `notes`.
fn rewrite(
    root: &mut Table,
    problem: &Problem,
    target: &Model,
    values: &[f64],
    append_e: bool,
    sets: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> Walk<()> {
    let mut w = SceneText {
        root: &mut *root,
        scene: &problem.ls.scene,
        append_e,
        sets: &mut *sets,
        notes: &mut *notes,
    };
    for (p, &v) in problem.params.iter().zip(values) {
        p.class.write_back(&mut w, p, v)?;
    }
    pin_e_ref(root, problem, target, sets)?;
    if let Some(ps) = root.get_mut("parameter").and_then(|p| p.as_array_mut()) {
        for p in ps {
            if let Some(t) = p.as_table_mut() {
                t.remove("initial");
            }
        }
    }
    Ok(())
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()) + 1e-12
}

fn close_all(a: &[f64], b: &[f64]) -> bool {
    let scale = a.iter().chain(b).fold(0.0f64, |m, x| m.max(x.abs()));
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= 1e-9 * scale + 1e-12)
}

/// The model of the written scene `text` with its per-element `files`: loaded from
/// `problem`'s path when there are none, else from a private temporary folder holding the
/// scene and the files as `optimize` writes them (removed afterwards).
fn rebuild(problem: &Problem, text: &str, files: &[ElementFile]) -> Result<Model, RebuildError> {
    let build = |path: &std::path::Path| -> Result<Model, RebuildError> {
        let ls = scene::load_str(text, path, &[]).map_err(RebuildError::Load)?;
        Model::from_scene(&ls).map_err(RebuildError::Build)
    };
    if files.is_empty() {
        return build(&problem.ls.path);
    }
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("diffphd-writeback-{}-{n}", std::process::id()));
    let written = std::fs::create_dir_all(&dir).and_then(|_| {
        files
            .iter()
            .try_for_each(|f| crate::io::write_atomic(&dir.join(&f.name), f.text.as_bytes()))
    });
    let m = match written {
        Ok(()) => build(&dir.join("optimized.toml")),
        Err(e) => Err(RebuildError::Files(e)),
    };
    let _ = std::fs::remove_dir_all(&dir);
    m
}

/// Why the written scene could not be rebuilt for the reproduction check.
#[derive(Debug, thiserror::Error)]
enum RebuildError {
    #[error("the written scene does not load: {0}")]
    Load(scene::SceneError),
    #[error("the written scene does not build: {0}")]
    Build(scene::ModelError),
    #[error("cannot write the per-element files to check them: {0}")]
    Files(std::io::Error),
}

/// Differences between the optimized model and the one built from `text` and `files`.
fn verify(problem: &Problem, target: &Model, text: &str, files: &[ElementFile]) -> Vec<String> {
    let m = match rebuild(problem, text, files) {
        Ok(m) => m,
        Err(e) => return vec![e.to_string()],
    };
    let mut bad = Vec::new();
    let p = &m.params;
    let q = &target.params;
    if !close_all(&p.youngs, &q.youngs) {
        bad.push("per-element Young's moduli".into());
    }
    let nu_elements = |m: &Model| -> Vec<f64> {
        (0..m.num_elements())
            .map(|e| m.params.nu_of(e, m.elem_body[e]))
            .collect()
    };
    if !close_all(&nu_elements(&m), &nu_elements(target)) {
        bad.push("per-element Poisson ratios".into());
    }
    for (name, a, b) in [
        ("poisson ratio", &p.nu, &q.nu),
        ("density", &p.density, &q.density),
        ("damping alpha", &p.alpha, &q.alpha),
        ("damping beta", &p.beta0, &q.beta0),
    ] {
        if !close_all(a, b) {
            bad.push(name.into());
        }
    }
    // E_ref matters only to bodies with stiffness-amplified damping.
    let e_ref = |m: &Model| -> Vec<f64> {
        m.bodies
            .iter()
            .zip(&target.params.beta0)
            .filter(|(b, &beta)| {
                beta != 0.0 && b.stiffness_scaling == scene::StiffnessScaling::Amplified
            })
            .map(|(b, _)| b.e_ref)
            .collect()
    };
    if !close_all(&e_ref(&m), &e_ref(target)) {
        bad.push("damping reference moduli (E_ref)".into());
    }
    if !close_all(&m.x0, &target.x0) {
        bad.push("initial positions".into());
    }
    if !close_all(&m.v0, &target.v0) {
        bad.push("initial velocities".into());
    }
    if !(0..3).all(|d| close(m.gravity[d], target.gravity[d])) {
        bad.push("gravity".into());
    }
    let loads = |m: &Model| -> Vec<f64> {
        m.forces
            .iter()
            .flat_map(|f| f.forces.iter().flat_map(move |v| v.map(|x| x * f.scale)))
            .collect()
    };
    if !close_all(&loads(&m), &loads(target)) {
        bad.push("external loads".into());
    }
    let act = |m: &Model| -> Vec<f64> {
        m.muscles
            .iter()
            .flat_map(|g| g.knots.iter().copied().chain([g.knot_interval]))
            .collect()
    };
    if !close_all(&act(&m), &act(target)) {
        bad.push("muscle activations".into());
    }
    // compliant attachments: stiffnesses, and every target at t = 0 (offsets included)
    let stiff = |m: &Model| -> Vec<f64> { m.attachments.iter().map(|g| g.stiffness).collect() };
    let targets = |m: &Model| -> Vec<f64> {
        m.attachments
            .iter()
            .flat_map(|g| {
                (0..g.nodes.len())
                    .flat_map(move |k| g.target(k, 0.0).into_iter().copied().collect::<Vec<_>>())
            })
            .collect()
    };
    if !close_all(&stiff(&m), &stiff(target)) || !close_all(&targets(&m), &targets(target)) {
        bad.push("attachments".into());
    }
    let friction = |m: &Model| -> Vec<f64> {
        m.obstacles
            .iter()
            .flat_map(|o| [o.friction, o.static_friction.unwrap_or(o.friction)])
            .collect()
    };
    if !close_all(&friction(&m), &friction(target)) {
        bad.push("obstacle friction".into());
    }
    if !close_all(
        &obstacle_distances(&m, target),
        &obstacle_distances(target, target),
    ) {
        bad.push("obstacle poses".into());
    }
    let body_static = |m: &Model| {
        m.contact
            .body_static_friction
            .unwrap_or(m.contact.body_friction)
    };
    if !close(m.contact.body_friction, target.contact.body_friction)
        || !close(body_static(&m), body_static(target))
    {
        bad.push("body friction".into());
    }
    bad
}

/// Signed distances from `at`'s initial nodes to every obstacle of `m` at $t=0$ and $t=1$ s:
/// the same numbers when the obstacles have the same world trajectories (an
/// `obstacle_offset` written back as moved positional keys, [`crate::optimize::classes`]).
fn obstacle_distances(m: &Model, at: &Model) -> Vec<f64> {
    let nodes = at
        .x0
        .chunks_exact(3)
        .map(nalgebra::Vector3::from_column_slice);
    m.obstacles
        .iter()
        .flat_map(|o| {
            nodes
                .clone()
                .flat_map(move |p| [0.0, 1.0].map(|t| o.query(&p, t).dist))
        })
        .collect()
}

/// Scene keys whose string value names an input file or folder (docs/scene-format.md:
/// "Relative paths are resolved against the directory of the scene file").
const PATH_KEYS: [&str; 7] = [
    "file",
    "youngs_modulus_file",
    "poisson_ratio_file",
    "elements_file",
    "nodes_file",
    "reference_dir",
    "capture_dir",
];

/// Rewrite every relative input path below `t` (keys [`PATH_KEYS`], at any depth: mesh,
/// material, selectors of every group, loss terms) as an absolute path resolved against the
/// scene's folder (see the module doc).
fn absolutize_inputs(t: &mut Table, ls: &scene::LoadedScene) {
    for (k, v) in t.iter_mut() {
        match v {
            Value::String(p)
                if PATH_KEYS.contains(&k.as_str())
                    && std::path::Path::new(p.as_str()).is_relative() =>
            {
                if let Ok(abs) = std::path::absolute(ls.resolve(p)) {
                    *p = abs.display().to_string();
                }
            }
            Value::Table(sub) => absolutize_inputs(sub, ls),
            Value::Array(items) => {
                for it in items.iter_mut() {
                    if let Value::Table(sub) = it {
                        absolutize_inputs(sub, ls);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A reference trajectory simulated from the scene (`[loss.reference] set`) is "the scene
/// with these overrides": written back as it is, it would be simulated with the *optimized*
/// values and no longer be the trajectory optimize fitted. Its override list is therefore
/// prefixed with the scene's original values of every key the write-back changed (and
/// factor 1 for appended E regions), so `optimized.toml` defines the same loss; the
/// suggested `--set` lines carry the same list.
fn keep_reference(
    root: &mut Table,
    base: &Table,
    problem: &Problem,
    sets: &mut Vec<String>,
) -> Walk<()> {
    let has_reference = problem
        .ls
        .scene
        .loss
        .as_ref()
        .is_some_and(|l| l.reference.is_some());
    if !has_reference {
        return Ok(());
    }
    let base_values: Vec<f64> = problem.params.iter().map(|p| p.base_value).collect();
    let base_target = super::params::apply_all(&problem.params, &problem.base, &base_values);
    let mut scratch = base.clone();
    let (mut rs, mut rn) = (Vec::new(), Vec::new());
    rewrite(
        &mut scratch,
        problem,
        &base_target,
        &base_values,
        false,
        &mut rs,
        &mut rn,
    )?;
    let mut restore = dedup_sets(rs);
    let regions = |t: &Table, b: usize| -> usize {
        t.get("body")
            .and_then(|v| v.as_array())
            .and_then(|a| a.get(b))
            .and_then(|v| v.get("region"))
            .and_then(|v| v.as_array())
            .map_or(0, |a| a.len())
    };
    for b in 0..problem.base.bodies.len() {
        for r in regions(base, b)..regions(root, b) {
            restore.push(format!("body.{b}.region.{r}.scale=1"));
        }
    }
    let list = reference_set(root)?;
    let mut all: Vec<Value> = restore.into_iter().map(Value::String).collect();
    all.append(list);
    *list = all;
    sets.push(format!("loss.reference.set={}", Value::Array(list.clone())));
    Ok(())
}

/// `solver.method = "auto"`: write the method it resolved to (issue 37: the optimized scene
/// re-runs with the method its gradients were computed with, whatever the rule would say
/// at the optimized parameters).
fn pin_method(root: &mut Table, problem: &Problem, sets: &mut Vec<String>) {
    if problem.ls.scene.solver.method != crate::model::SolverMethod::Auto {
        return;
    }
    let method = problem.resolved_method();
    if method == crate::model::SolverMethod::Auto {
        return; // not evaluated yet: nothing to pin
    }
    let solver = root
        .entry("solver")
        .or_insert_with(|| Value::Table(Table::new()));
    if let Value::Table(t) = solver {
        t.insert("method".into(), Value::String(method.as_str().into()));
        sets.push(format!("solver.method=\"{}\"", method.as_str()));
    }
}

/// Write the optimized `values` (user units) back into the effective scene: in place first,
/// and where that is not exact for Young's moduli, again with the factors as appended regions.
pub fn write_back(problem: &Problem, values: &[f64]) -> Result<WriteBack, WritebackError> {
    let target = super::params::apply_all(&problem.params, &problem.base, values);
    let base: Table = toml::from_str(&problem.ls.effective_toml).map_err(WritebackError::Parse)?;
    let (wb, needs_append) = one_pass(problem, (&target, values), &base, false)?;
    if wb.exact || !needs_append {
        return Ok(wb);
    }
    Ok(one_pass(problem, (&target, values), &base, true)?.0)
}

/// One rewrite of `base` (`append_e`: E factors as appended regions), checked against
/// `target`; with whether an appended-regions pass could fix a Young's modulus mismatch.
fn one_pass(
    problem: &Problem,
    (target, values): (&Model, &[f64]),
    base: &Table,
    append_e: bool,
) -> Walk<(WriteBack, bool)> {
    let (mut sets, mut notes) = (Vec::new(), Vec::new());
    let mut root = base.clone();
    rewrite(
        &mut root, problem, target, values, append_e, &mut sets, &mut notes,
    )?;
    pin_method(&mut root, problem, &mut sets);
    let mut sets = dedup_sets(sets);
    keep_reference(&mut root, base, problem, &mut sets)?;
    absolutize_inputs(&mut root, &problem.ls);
    // after the absolute paths: the field files lie beside optimized.toml
    let mut files =
        youngs_modulus_field::write_fields(&mut root, &problem.params, target, &mut notes)?;
    files.extend(poisson_ratio_field::write_fields(
        &mut root,
        &problem.params,
        target,
        &mut notes,
    )?);
    let has_reference = problem
        .ls
        .scene
        .loss
        .as_ref()
        .is_some_and(|l| l.reference.is_some());
    if !files.is_empty() && has_reference {
        notes.push(
            "[loss.reference] is simulated from this scene: its overrides of Young's moduli \
             act on top of the per-element file, not as in the source scene (a field fit's \
             reference is best given as `reference_dir`)"
                .into(),
        );
    }
    let text = toml::to_string(&root).map_err(WritebackError::Serialize)?;
    let bad = verify(problem, target, &text, &files);
    let exact = bad.is_empty();
    if !exact {
        notes.push(format!(
            "the written scene differs from the optimized model in: {}",
            bad.join(", ")
        ));
    }
    let needs_append = !exact
        && bad.iter().any(|b| b.contains("Young"))
        && problem
            .params
            .iter()
            .any(|p: &Param| p.key() == youngs_modulus::KEY);
    let wb = WriteBack {
        toml: text,
        sets,
        notes,
        exact,
        files,
    };
    Ok((wb, needs_append))
}
