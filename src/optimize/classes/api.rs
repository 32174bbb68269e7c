//! The parameter-class interface, below both the registry ([`super`]) and its generic
//! drivers ([`crate::optimize::params`], [`crate::optimize::writeback`]): the [`ParamClass`]
//! trait and what its methods take — a resolved scalar [`Param`], the scene TOML being
//! rewritten ([`SceneText`]) and the key-path walkers the write-backs share. Every class
//! file imports this module only, so the registry and the drivers that iterate it import
//! the classes without a circle.

use crate::model::Model;
use crate::scene::{ParamSpec, Scene};
use crate::solver::gradient::Gradients;
use toml::{Table, Value};

/// How one `[[parameter]]` declaration expands into scalar parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// One scalar.
    Scalar,
    /// A 3-vector: one scalar per `component` (all three without one), named `.x/.y/.z`.
    Vector3,
    /// One scalar per activation knot of a muscle group (`knot`, or every knot), named
    /// `.knotK` when the group has several.
    Knots,
    /// One scalar per element of the region (or of the whole body), named `.eK` with K the
    /// element's index in its body.
    Elements,
}

/// The owners a class refers to besides its body: the `[[parameter]]` keys it takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Refs {
    /// `region` (a `[[body.region]]` of the body; omitted: every element).
    pub region: bool,
    /// `force` (the body's force group, default 0).
    pub force: bool,
    /// `muscle` (the body's muscle group, default 0) and `knot`.
    pub muscle: bool,
    /// `obstacle` (an `[[obstacle]]` index, required).
    pub obstacle: bool,
    /// `attachment` (the body's compliant attachment, default 0).
    pub attachment: bool,
}

/// Whose parameter it is, for the default name `kind[owner]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// The body (`body`, default 0).
    Body,
    /// The obstacle (`obstacle`).
    Obstacle,
    /// The whole scene, with this label.
    Scene(&'static str),
}

/// The physical range of a value: $v>\text{lower}$ (or $\ge$ when `lower_closed`) and
/// $v<\text{upper}$; values outside stop the optimizer (`optimize`'s domain error).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Domain {
    pub lower: f64,
    pub lower_closed: bool,
    pub upper: f64,
}

impl Domain {
    /// Every real number.
    pub const REAL: Domain = Domain {
        lower: f64::NEG_INFINITY,
        lower_closed: false,
        upper: f64::INFINITY,
    };
    /// $v>0$.
    pub const POSITIVE: Domain = Domain {
        lower: 0.0,
        lower_closed: false,
        upper: f64::INFINITY,
    };
    /// $v\ge0$.
    pub const NON_NEGATIVE: Domain = Domain {
        lower: 0.0,
        lower_closed: true,
        upper: f64::INFINITY,
    };

    /// Whether `v` is in the range (a finite check is separate).
    pub fn contains(&self, v: f64) -> bool {
        let above = if self.lower_closed {
            v >= self.lower
        } else {
            v > self.lower
        };
        above && v < self.upper
    }
}

/// One parameter class (module doc). `p` is a resolved scalar parameter of this class;
/// values are in user units.
pub trait ParamClass: Sync {
    /// The scene key (`kind = "…"`).
    fn key(&self) -> &'static str;
    /// How a declaration expands.
    fn shape(&self) -> Shape {
        Shape::Scalar
    }
    /// The owner keys it takes.
    fn refs(&self) -> Refs {
        Refs::default()
    }
    /// Whose parameter it is (default name).
    fn owner(&self) -> Owner {
        Owner::Body
    }
    /// Whether values are positive, so that `log = true` is allowed.
    fn positive(&self) -> bool {
        false
    }
    /// Physical range.
    fn domain(&self) -> Domain {
        Domain::REAL
    }
    /// The value in `m`.
    fn value(&self, p: &Param, m: &Model) -> f64;
    /// Write `v` into `m` (refreshing what depends on it).
    fn set(&self, p: &Param, m: &mut Model, v: f64);
    /// Apply `v` while building the model at a parameter vector
    /// ([`crate::optimize::params::apply_all`]): [`ParamClass::set`], unless the class composes with
    /// others (Young's moduli multiply `youngs_factor`, applied after every parameter).
    fn apply(&self, p: &Param, m: &mut Model, v: f64, youngs_factor: &mut [f64]) {
        let _ = youngs_factor;
        self.set(p, m, v);
    }
    /// $d\mathcal L/d\,\text{value}$ from the adjoint's sums `g`, at the model `m` built with
    /// this parameter at `v`.
    fn gradient(&self, p: &Param, m: &Model, g: &Gradients, v: f64) -> f64;
    /// Default central-difference step in the value (not log, no `fd_step`), given
    /// $|v|$: 1e-3 relative, 1e-3 absolute at 0.
    fn fd_step(&self, p: &Param, m: &Model, abs_value: f64) -> f64 {
        let _ = (p, m);
        1e-3 * if abs_value > 0.0 { abs_value } else { 1.0 }
    }
    /// Write `v` back into the scene's TOML (or say in a note why not).
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()>;
}

impl std::fmt::Debug for dyn ParamClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key())
    }
}

/// What a class declares, for listings (the Python package, `diffphd` reports): key,
/// shape, owner keys, whether `log` is allowed, physical range.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ClassInfo {
    pub key: &'static str,
    pub shape: Shape,
    pub refs: Refs,
    pub positive: bool,
    pub domain: Domain,
}

impl dyn ParamClass {
    /// Its declared properties.
    pub fn info(&self) -> ClassInfo {
        ClassInfo {
            key: self.key(),
            shape: self.shape(),
            refs: self.refs(),
            positive: self.positive(),
            domain: self.domain(),
        }
    }
}

/// A resolved scalar parameter.
#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    /// Its class (scene key, shape, value, set, gradient, write-back).
    pub class: &'static dyn ParamClass,
    pub body: usize,
    /// Elements (youngs_modulus; youngs_modulus_field: its one element) or empty.
    pub elements: Vec<usize>,
    pub component: usize,
    /// Global force-group index (force_scale).
    pub force: usize,
    /// Global muscle-group index (muscle_activation).
    pub muscle: usize,
    /// Activation knot of the muscle group (muscle_activation).
    pub knot: usize,
    pub seed: u64,
    /// Obstacle index (friction, obstacle_offset).
    pub obstacle: usize,
    /// Global compliant attachment group (attachment_stiffness, attachment_offset).
    pub attachment: usize,
    pub log: bool,
    pub fd_step: Option<f64>,
    /// Value in the base model (for Young's modulus: the mean over `elements`).
    pub base_value: f64,
    /// `optimize` bounds in user units (`lower`/`upper`), if declared.
    pub lower: Option<f64>,
    pub upper: Option<f64>,
    /// `optimize` starting value in user units (`initial`), if declared.
    pub initial: Option<f64>,
    /// `optimize` variable scale (`scale`, default 1).
    pub scale: f64,
    /// Index of the declaring `[[parameter]]` entry.
    pub index: usize,
}

/// Why the effective scene could not be rewritten. The writers walk the scene's TOML by key
/// path; the validated scene always has the keys a parameter names, so an error here means a
/// hand-built problem whose scene text does not match its parameters. Names the key path
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

/// A write-back step's result.
pub type Walk<T> = Result<T, WritebackError>;

/// A per-element file a field's write-back produces (`youngs_modulus_field`,
/// `poisson_ratio_field`): its name (relative to `optimized.toml`'s folder) and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElementFile {
    pub name: String,
    pub text: String,
}

/// The scene TOML being rewritten, handed to each parameter class's
/// [`ParamClass::write_back`]: the root table, the validated scene (its declared
/// `[[parameter]]`s, gravity), whether Young's-modulus factors go into appended regions,
/// and the `--set` lines and notes collected so far.
pub struct SceneText<'a> {
    pub root: &'a mut Table,
    pub scene: &'a Scene,
    /// Express E factors as appended `[[body.region]]`s (the second pass).
    pub append_e: bool,
    pub sets: &'a mut Vec<String>,
    pub notes: &'a mut Vec<String>,
}

impl<'a> SceneText<'a> {
    /// The `[[parameter]]` entry `p` was declared by.
    pub fn spec(&self, p: &Param) -> Walk<&'a ParamSpec> {
        let scene: &'a Scene = self.scene;
        scene
            .parameters
            .get(p.index)
            .ok_or_else(|| missing(format!("parameter.{}", p.index), "a declared parameter"))
    }
}

/// `path.key` (`key` at the root).
pub fn sub(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

pub fn missing(path: String, expected: &'static str) -> WritebackError {
    WritebackError::Key { path, expected }
}

/// The table `key` of `t` at `path`, created empty where absent.
pub fn table<'t>(t: &'t mut Table, path: &str, key: &str) -> Walk<&'t mut Table> {
    t.entry(key.to_string())
        .or_insert_with(|| Value::Table(Table::new()))
        .as_table_mut()
        .ok_or_else(|| missing(sub(path, key), "a table"))
}

/// Entry `i` of the array of tables `key` of `t` at `path` (`[[body]]`, `[[body.force]]`).
pub fn item<'t>(t: &'t mut Table, path: &str, key: &str, i: usize) -> Walk<&'t mut Table> {
    t.get_mut(key)
        .and_then(|a| a.as_array_mut())
        .and_then(|a| a.get_mut(i))
        .and_then(|v| v.as_table_mut())
        .ok_or_else(|| missing(format!("{}.{i}", sub(path, key)), "a table"))
}

/// `[[body]]` entry `b`.
pub fn body_mut(root: &mut Table, b: usize) -> Walk<&mut Table> {
    item(root, "", "body", b)
}

/// The bodies carrying a parameter of class `key`, ascending, each once.
pub fn bodies_with(params: &[Param], key: &str) -> Vec<usize> {
    let mut bodies: Vec<usize> = params
        .iter()
        .filter(|p| p.key() == key)
        .map(|p| p.body)
        .collect();
    bodies.sort_unstable();
    bodies.dedup();
    bodies
}

/// Body `b`'s per-element `values` as the file `name` (one exact shortest round-trip line
/// per element) with the body's `material.<file_key>` pointing at it (the write-back of
/// the field classes); returns the file and the body's table for further edits.
pub fn write_element_file<'t>(
    root: &'t mut Table,
    b: usize,
    name: String,
    file_key: &str,
    values: impl Iterator<Item = f64>,
) -> Walk<(ElementFile, &'t mut Table)> {
    let text: String = values.map(|v| format!("{v:e}\n")).collect();
    let bt = body_mut(root, b)?;
    table(bt, &format!("body.{b}"), "material")?
        .insert(file_key.into(), Value::String(name.clone()));
    Ok((ElementFile { name, text }, bt))
}

pub fn num(v: &Value) -> Option<f64> {
    v.as_float().or_else(|| v.as_integer().map(|i| i as f64))
}

/// Component `c` of the 3-vector `key` of `t` at `path` (created as zeros where absent) set
/// to `f(old)`; returns the new value.
pub fn set3(t: &mut Table, path: &str, key: &str, c: usize, f: impl Fn(f64) -> f64) -> Walk<f64> {
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
pub fn vector_set(path: &str, t: &Table, key: &str) -> Walk<String> {
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

/// Keep the box of an offset parameter `p` whose optimum `v` is written into the scene as a
/// new origin (an obstacle's position, an attachment's target): a one-component parameter's
/// `lower` and `upper` (where given) move by `-v`, so the box stays where the source scene put
/// it; a three-component parameter shares one pair of bounds, which cannot move by each
/// component's own offset, so a note says they now apply around the written position.
pub fn keep_offset_box(w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()> {
    if w.spec(p)?.component.is_none() {
        if v != 0.0 {
            w.notes.push(format!(
                "{}: the bounds of this three-component parameter now apply around the written-back position",
                p.name
            ));
        }
        return Ok(());
    }
    let spec = item(w.root, "", "parameter", p.index)?;
    for key in ["lower", "upper"] {
        if let Some(x) = spec.get(key).and_then(num) {
            spec.insert(key.into(), Value::Float(x - v));
        }
    }
    Ok(())
}

pub fn scale_num(t: &mut Table, key: &str, f: f64) -> Option<f64> {
    let v = t.get_mut(key)?;
    let new = num(v)? * f;
    *v = Value::Float(new);
    Some(new)
}
