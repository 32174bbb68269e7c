//! `optimized.toml`: the effective scene with optimized parameter values written back into
//! the scene keys they come from, checked by rebuilding the model.
//!
//! | parameter | written to |
//! |---|---|
//! | `poisson_ratio`, `density` | `body[b].material.*` |
//! | `damping_alpha`, `damping_beta` | `body[b].damping.alpha` / `.beta` |
//! | `initial_translation` | `body[b].initial.translation[c]` |
//! | `initial_rotation` (rad) | `body[b].initial.rotation_deg[c]` (degrees) |
//! | `initial_velocity` (added velocity) | added to `body[b].initial.velocity[c]` |
//! | `gravity` | `simulation.gravity[c]` |
//! | `force_scale` | the force group's `force` vector (or `twist.magnitude`) times the scale |
//! | `youngs_modulus`, whole body | `material.youngs_modulus` and every absolute `region.youngs_modulus` times the factor value/scene value |
//! | `youngs_modulus`, region r | `region[r].youngs_modulus` or `region[r].scale` times the factor |
//! | `muscle_activation` | `body[b].muscle[j].activation` (entry k of an array of knots) |
//! | `friction`, `body_friction` | `obstacle[o].friction`, `contact.body_friction` |
//! | `attachment_stiffness` | `body[b].attachment[j].compliance` = 1/value |
//! | `attachment_offset` | added to `body[b].attachment[j].target[c]` (a target point that does not rotate; else reported) |
//! | `obstacle_offset` | not written (reported) |
//! | `initial_state_direction` | not representable (reported, file not exact) |
//!
//! The `initial` keys of `[[parameter]]` are removed, so optimizing the written scene again
//! starts from the optimum. The result is verified: the model built from the new text must
//! have the optimized per-element moduli, material scalars, initial state, gravity,
//! loads and muscle activations (relative 1e-9). Where an in-place E rewrite is not exact (a later region with an
//! absolute modulus overlapping region r, or `youngs_modulus_file`), the factor is instead
//! appended as a new `[[body.region]]` (`scale`) with region r's selector (or `all = true`).
//!
//! Input files named relative to the scene's folder (`mesh.file`,
//! `material.youngs_modulus_file`, `elements_file`/`nodes_file` selectors,
//! `loss.term.reference_dir`, `loss.term.capture_dir`, `loss.term.captures[k].file`) are written as absolute paths: `optimized.toml` lands in the
//! output directory, where the scene's relative paths would not resolve, and it must load as
//! a scene from there (to continue an optimization from it).

use super::params::Param;
use super::problem::Problem;
use crate::scene::{self, ParamKind};
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
}

/// Why the effective scene could not be rewritten. The writers walk the scene's TOML by key
/// path; the validated scene always has the keys a parameter names, so an error here means a
/// hand-built [`Problem`] whose scene text does not match its parameters. Names the key path
/// (`body.0.force.2`).
#[derive(Debug, thiserror::Error)]
pub enum WritebackError {
    #[error("optimized.toml: scene key `{path}` is missing or not {expected}")]
    Key {
        path: String,
        expected: &'static str,
    },
    #[error("optimized.toml: the effective scene does not parse: {0}")]
    Parse(toml::de::Error),
    #[error("optimized.toml: the rewritten scene does not serialize: {0}")]
    Serialize(toml::ser::Error),
}

type Walk<T> = Result<T, WritebackError>;

/// `path.key` (`key` at the root).
fn sub(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn missing(path: String, expected: &'static str) -> WritebackError {
    WritebackError::Key { path, expected }
}

/// The table `key` of `t` at `path`, created empty where absent.
fn table<'t>(t: &'t mut Table, path: &str, key: &str) -> Walk<&'t mut Table> {
    t.entry(key.to_string())
        .or_insert_with(|| Value::Table(Table::new()))
        .as_table_mut()
        .ok_or_else(|| missing(sub(path, key), "a table"))
}

/// Entry `i` of the array of tables `key` of `t` at `path` (`[[body]]`, `[[body.force]]`).
fn item<'t>(t: &'t mut Table, path: &str, key: &str, i: usize) -> Walk<&'t mut Table> {
    t.get_mut(key)
        .and_then(|a| a.as_array_mut())
        .and_then(|a| a.get_mut(i))
        .and_then(|v| v.as_table_mut())
        .ok_or_else(|| missing(format!("{}.{i}", sub(path, key)), "a table"))
}

/// `[[body]]` entry `b`.
fn body_mut(root: &mut Table, b: usize) -> Walk<&mut Table> {
    item(root, "", "body", b)
}

fn num(v: &Value) -> Option<f64> {
    v.as_float().or_else(|| v.as_integer().map(|i| i as f64))
}

/// Component `c` of the 3-vector `key` of `t` at `path` (created as zeros where absent) set
/// to `f(old)`; returns the new value.
fn set3(t: &mut Table, path: &str, key: &str, c: usize, f: impl Fn(f64) -> f64) -> Walk<f64> {
    let arr = t
        .entry(key.to_string())
        .or_insert_with(|| Value::Array(vec![Value::Float(0.0); 3]));
    let x = arr
        .as_array_mut()
        .and_then(|a| a.get_mut(c))
        .ok_or_else(|| missing(sub(path, key), "a 3-vector"))?;
    let new = f(num(x).unwrap_or(0.0));
    *x = Value::Float(new);
    Ok(new)
}

/// `PATH=[a, b, c]`: a whole 3-vector, so the line also works on a scene that does not
/// write the vector (a `--set` cannot create array entries one by one).
fn vector_set(path: &str, t: &Table, key: &str) -> Walk<String> {
    let a = t
        .get(key)
        .and_then(|v| v.as_array())
        .ok_or_else(|| missing(path.to_string(), "a 3-vector"))?;
    let s: Vec<String> = a
        .iter()
        .map(|x| format!("{:e}", num(x).unwrap_or(0.0)))
        .collect();
    Ok(format!("{path}=[{}]", s.join(", ")))
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
                .any(|p| p.body == b && p.kind == ParamKind::DampingBeta);
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

fn scale_num(t: &mut Table, key: &str, f: f64) -> Option<f64> {
    let v = t.get_mut(key)?;
    let new = num(v)? * f;
    *v = Value::Float(new);
    Some(new)
}

/// Rewrite `root` in place; `append_e`: express E factors as appended regions. One writer per
/// parameter class (see the module table); `--set` equivalents go to `sets`, what cannot be
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
    let specs = &problem.ls.scene.parameters;
    // the `[[parameter]]` entry a parameter was declared by
    let spec = |p: &Param| {
        specs
            .get(p.index)
            .ok_or_else(|| missing(format!("parameter.{}", p.index), "a declared parameter"))
    };
    for (p, &v) in problem.params.iter().zip(values) {
        let b = p.body;
        let c = p.component;
        match p.kind {
            ParamKind::PoissonRatio | ParamKind::Density => {
                let key = if p.kind == ParamKind::Density {
                    "density"
                } else {
                    "poisson_ratio"
                };
                table(body_mut(root, b)?, &format!("body.{b}"), "material")?
                    .insert(key.into(), Value::Float(v));
                sets.push(format!("body.{b}.material.{key}={v:e}"));
            }
            ParamKind::DampingAlpha | ParamKind::DampingBeta => {
                let key = if p.kind == ParamKind::DampingAlpha {
                    "alpha"
                } else {
                    "beta"
                };
                table(body_mut(root, b)?, &format!("body.{b}"), "damping")?
                    .insert(key.into(), Value::Float(v));
                sets.push(format!("body.{b}.damping.{key}={v:e}"));
            }
            ParamKind::InitialTranslation
            | ParamKind::InitialRotation
            | ParamKind::InitialVelocity => write_initial(root, p, v, sets)?,
            ParamKind::Gravity => write_gravity(root, problem, c, v, sets)?,
            ParamKind::ForceScale => {
                let j = spec(p)?.force.unwrap_or(0);
                write_force_scale(body_mut(root, b)?, (b, j), v, sets)?;
            }
            ParamKind::Friction => {
                let o = p.obstacle;
                if let Some(t) = root
                    .get_mut("obstacle")
                    .and_then(|a| a.as_array_mut())
                    .and_then(|a| a.get_mut(o))
                    .and_then(|t| t.as_table_mut())
                {
                    t.insert("friction".into(), Value::Float(v));
                }
                sets.push(format!("obstacle.{o}.friction={v:e}"));
            }
            ParamKind::BodyFriction => {
                let ct = table(root, "", "contact")?;
                ct.insert("body_friction".into(), Value::Float(v));
                sets.push(format!("contact.body_friction={v:e}"));
            }
            ParamKind::AttachmentStiffness | ParamKind::AttachmentOffset => {
                let j = spec(p)?.attachment.unwrap_or(0);
                write_attachment(body_mut(root, b)?, (p, j), v, sets, notes)?;
            }
            ParamKind::ObstacleOffset => {
                notes.push(format!(
                    "{}: obstacle offset {v:e} m (component {c}) is not written back; translate obstacle {} by it",
                    p.name, p.obstacle
                ));
            }
            ParamKind::MuscleActivation => {
                let j = spec(p)?.muscle.unwrap_or(0);
                write_activation(body_mut(root, b)?, (p, j), v, sets)?;
            }
            ParamKind::InitialStateDirection => notes.push(format!(
                "{}: a seeded state direction has no scene key; not written",
                p.name
            )),
            ParamKind::YoungsModulus => {
                let f = v / p.base_value;
                let region = spec(p)?.region;
                let bt = body_mut(root, b)?;
                if append_e {
                    append_e_region(bt, p, region, f, notes)?;
                } else {
                    scale_e(bt, b, region, f, sets)?;
                }
            }
        }
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

/// `initial_translation`, `initial_rotation` (radians, written in degrees) and
/// `initial_velocity` (added to the scene's velocity): component `p.component` of the body's
/// `[body.initial]` vector.
fn write_initial(root: &mut Table, p: &Param, v: f64, sets: &mut Vec<String>) -> Walk<()> {
    let (b, c) = (p.body, p.component);
    let path = format!("body.{b}.initial");
    let t = table(body_mut(root, b)?, &format!("body.{b}"), "initial")?;
    let key = match p.kind {
        ParamKind::InitialTranslation => {
            set3(t, &path, "translation", c, |_| v)?;
            "translation"
        }
        ParamKind::InitialRotation => {
            let d = v.to_degrees();
            set3(t, &path, "rotation_deg", c, |_| d)?;
            "rotation_deg"
        }
        _ => {
            set3(t, &path, "velocity", c, |o| o + v)?;
            "velocity"
        }
    };
    sets.push(vector_set(&format!("{path}.{key}"), t, key)?);
    Ok(())
}

/// `gravity`: component `c` of `simulation.gravity` (the scene's value is written out first
/// when the file leaves it at the default).
fn write_gravity(
    root: &mut Table,
    problem: &Problem,
    c: usize,
    v: f64,
    sets: &mut Vec<String>,
) -> Walk<()> {
    let sim = table(root, "", "simulation")?;
    if !sim.contains_key("gravity") {
        let g = problem.ls.scene.simulation.gravity;
        sim.insert(
            "gravity".into(),
            Value::Array(g.iter().map(|&x| Value::Float(x)).collect()),
        );
    }
    set3(sim, "simulation", "gravity", c, |_| v)?;
    sets.push(vector_set("simulation.gravity", sim, "gravity")?);
    Ok(())
}

/// `force_scale` of force group `j` of body `b`: its `force` vector (or `twist.magnitude`)
/// times the scale `v`.
fn write_force_scale(
    body: &mut Table,
    (b, j): (usize, usize),
    v: f64,
    sets: &mut Vec<String>,
) -> Walk<()> {
    let ft = item(body, &format!("body.{b}"), "force", j)?;
    if let Some(arr) = ft.get_mut("force").and_then(|a| a.as_array_mut()) {
        for x in arr.iter_mut() {
            *x = Value::Float(num(x).unwrap_or(0.0) * v);
        }
        let s: Vec<String> = arr
            .iter()
            .map(|x| format!("{:e}", num(x).unwrap_or(0.0)))
            .collect();
        sets.push(format!("body.{b}.force.{j}.force=[{}]", s.join(", ")));
    } else if let Some(tw) = ft.get_mut("twist").and_then(|t| t.as_table_mut()) {
        if let Some(m) = scale_num(tw, "magnitude", v) {
            sets.push(format!("body.{b}.force.{j}.twist.magnitude={m:e}"));
        }
    }
    Ok(())
}

/// `attachment_stiffness` (compliance = 1/value) and `attachment_offset` (added to the
/// target point of a non-rotating attachment; otherwise reported) of attachment `j`.
fn write_attachment(
    body: &mut Table,
    (p, j): (&Param, usize),
    v: f64,
    sets: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> Walk<()> {
    let (b, c) = (p.body, p.component);
    let path = format!("body.{b}.attachment.{j}");
    let at = item(body, &format!("body.{b}"), "attachment", j)?;
    if p.kind == ParamKind::AttachmentStiffness {
        at.insert("compliance".into(), Value::Float(1.0 / v));
        sets.push(format!("{path}.compliance={:e}", 1.0 / v));
        return Ok(());
    }
    let rotates = at
        .get("motion")
        .and_then(|m| m.get("type"))
        .and_then(|t| t.as_str())
        == Some("rotate");
    if at.contains_key("target") && !rotates {
        set3(at, &path, "target", c, |o| o + v)?;
        sets.push(vector_set(&format!("{path}.target"), at, "target")?);
    } else {
        notes.push(format!(
            "{}: attachment offset {v:e} m (component {c}) is not written back (the attachment has no target point, or it rotates)",
            p.name
        ));
    }
    Ok(())
}

/// `muscle_activation` of muscle group `j`: entry `p.knot` of its knot array, or the
/// constant activation.
fn write_activation(
    body: &mut Table,
    (p, j): (&Param, usize),
    v: f64,
    sets: &mut Vec<String>,
) -> Walk<()> {
    let b = p.body;
    let mt = item(body, &format!("body.{b}"), "muscle", j)?;
    let k = p.knot;
    match mt.get_mut("activation").and_then(|a| a.as_array_mut()) {
        Some(arr) => {
            let knot = arr.get_mut(k).ok_or_else(|| {
                missing(
                    format!("body.{b}.muscle.{j}.activation.{k}"),
                    "an activation knot",
                )
            })?;
            *knot = Value::Float(v);
            sets.push(format!("body.{b}.muscle.{j}.activation.{k}={v:e}"));
        }
        None => {
            mt.insert("activation".into(), Value::Float(v));
            sets.push(format!("body.{b}.muscle.{j}.activation={v:e}"));
        }
    }
    Ok(())
}

/// `youngs_modulus` factor `f` as an appended `[[body.region]]` with `scale = f`, selecting
/// what region `region` selects (or the whole body).
fn append_e_region(
    bt: &mut Table,
    p: &Param,
    region: Option<usize>,
    f: f64,
    notes: &mut Vec<String>,
) -> Walk<()> {
    let select = match region {
        Some(r) => item(bt, &format!("body.{}", p.body), "region", r)?
            .get("select")
            .cloned()
            .ok_or_else(|| missing(format!("body.{}.region.{r}.select", p.body), "a selector"))?,
        None => {
            let mut t = Table::new();
            t.insert("all".into(), Value::Boolean(true));
            Value::Table(t)
        }
    };
    let mut reg = Table::new();
    reg.insert(
        "name".into(),
        Value::String(format!("optimized factor of {}", p.name)),
    );
    reg.insert("select".into(), select);
    reg.insert("scale".into(), Value::Float(f));
    bt.entry("region".to_string())
        .or_insert_with(|| Value::Array(vec![]))
        .as_array_mut()
        .ok_or_else(|| missing(format!("body.{}.region", p.body), "an array of tables"))?
        .push(Value::Table(reg));
    notes.push(format!(
        "{}: written as an appended [[body.region]] with scale = {f:e}",
        p.name
    ));
    Ok(())
}

/// `youngs_modulus` factor `f` in place: the whole body's `material.youngs_modulus` and
/// every absolute region modulus, or region `r`'s `youngs_modulus` / `scale`, times `f`.
fn scale_e(
    bt: &mut Table,
    b: usize,
    region: Option<usize>,
    f: f64,
    sets: &mut Vec<String>,
) -> Walk<()> {
    match region {
        None => {
            let mat = bt
                .get_mut("material")
                .and_then(|m| m.as_table_mut())
                .ok_or_else(|| missing(format!("body.{b}.material"), "a table"))?;
            if let Some(e) = scale_num(mat, "youngs_modulus", f) {
                sets.push(format!("body.{b}.material.youngs_modulus={e:e}"));
            }
            if let Some(regs) = bt.get_mut("region").and_then(|r| r.as_array_mut()) {
                for (r, reg) in regs.iter_mut().enumerate() {
                    let rt = reg
                        .as_table_mut()
                        .ok_or_else(|| missing(format!("body.{b}.region.{r}"), "a table"))?;
                    if let Some(e) = scale_num(rt, "youngs_modulus", f) {
                        sets.push(format!("body.{b}.region.{r}.youngs_modulus={e:e}"));
                    }
                }
            }
        }
        Some(r) => {
            let rt = item(bt, &format!("body.{b}"), "region", r)?;
            for key in ["youngs_modulus", "scale"] {
                if let Some(e) = scale_num(rt, key, f) {
                    sets.push(format!("body.{b}.region.{r}.{key}={e:e}"));
                }
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

/// Differences between the optimized model and the one built from `text`.
fn verify(problem: &Problem, target: &Model, text: &str) -> Vec<String> {
    let ls = match scene::load_str(text, &problem.ls.path, &[]) {
        Ok(l) => l,
        Err(e) => return vec![format!("the written scene does not load: {e}")],
    };
    let m = match Model::from_scene(&ls) {
        Ok(m) => m,
        Err(e) => return vec![format!("the written scene does not build: {e}")],
    };
    let mut bad = Vec::new();
    let p = &m.params;
    let q = &target.params;
    if !close_all(&p.youngs, &q.youngs) {
        bad.push("per-element Young's moduli".into());
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
    if !close(m.contact.body_friction, target.contact.body_friction) {
        bad.push("body friction".into());
    }
    bad
}

/// Scene keys whose string value names an input file or folder (docs/scene-format.md:
/// "Relative paths are resolved against the directory of the scene file").
const PATH_KEYS: [&str; 6] = [
    "file",
    "youngs_modulus_file",
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
    let mut sets = dedup_sets(sets);
    keep_reference(&mut root, base, problem, &mut sets)?;
    absolutize_inputs(&mut root, &problem.ls);
    let text = toml::to_string(&root).map_err(WritebackError::Serialize)?;
    let bad = verify(problem, target, &text);
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
            .any(|p: &Param| p.kind == ParamKind::YoungsModulus);
    let wb = WriteBack {
        toml: text,
        sets,
        notes,
        exact,
    };
    Ok((wb, needs_append))
}
