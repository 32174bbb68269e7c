//! Scene files (TOML, `schema_version = 1`): schema, `--set` overrides and validation.
//!
//! Every table uses `deny_unknown_fields`, so a typo is an error naming the key. Defaults
//! are serde defaults, documented key by key in `docs/scene-format.md`. Validation
//! ([`Scene::validate`]) checks ranges and names the full key path of the offending value.

mod checks;
pub mod contact;
pub mod mpm;
pub mod overrides;
pub mod resolve;
pub mod schema;
pub mod select;
pub mod validate;

pub use crate::model::settings::*;
pub use contact::{ObstacleKind, ObstacleSpec};
pub use resolve::{resolve, ModelError};
pub use schema::*;
pub use select::{ElementSelector, NodeSelector};

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Errors of loading and validating a scene. Every variant names the file and/or key.
#[derive(Debug, thiserror::Error)]
pub enum SceneError {
    #[error("{path}: cannot read scene file: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("{path}: {msg}")]
    Toml { path: String, msg: String },
    #[error("{path}: key `{key}`: {msg}")]
    Invalid {
        path: String,
        key: String,
        msg: String,
    },
    #[error("--set {expr}: {msg}")]
    Override { expr: String, msg: String },
}

/// A parsed, overridden and validated scene plus where it came from.
#[derive(Clone, Debug)]
pub struct LoadedScene {
    pub scene: Scene,
    /// Path of the scene file.
    pub path: PathBuf,
    /// Directory relative paths inside the scene are resolved against.
    pub base_dir: PathBuf,
    /// SHA-256 of the effective scene (after overrides), hex.
    pub hash: String,
    /// The effective scene as TOML text (after overrides).
    pub effective_toml: String,
}

impl LoadedScene {
    /// SHA-256 (hex) of the effective scene without its `[optimize]` and `[output]` tables:
    /// what defines the loss and gradient an optimization evaluates. Two runs with the same
    /// problem hash evaluate the same function; `optimize --resume` requires it to match
    /// (the optimizer's caps and the output settings may change between the two runs).
    pub fn problem_hash(&self) -> String {
        let mut table: toml::Table =
            toml::from_str(&self.effective_toml).expect("the effective scene is valid TOML");
        table.remove("optimize");
        table.remove("output");
        let text = toml::to_string(&table).expect("a TOML table serializes");
        format!("{:x}", Sha256::digest(text.as_bytes()))
    }

    /// SHA-256 (hex) of the effective scene without `solver.threads`: two runs with the same
    /// hash differ at most in their thread count (their frames differ at round-off, ~1e-12 m),
    /// so a rerun at another thread count may replace the folder's output
    /// ([`crate::io::outdir::claim`]); `None` if the effective text does not parse again.
    pub fn hash_without_threads(&self) -> Option<String> {
        let mut table: toml::Table = toml::from_str(&self.effective_toml).ok()?;
        if let Some(toml::Value::Table(solver)) = table.get_mut("solver") {
            solver.remove("threads");
        }
        let text = toml::to_string(&table).ok()?;
        Some(format!("{:x}", Sha256::digest(text.as_bytes())))
    }

    /// Resolve a path written in the scene file.
    pub fn resolve(&self, p: &str) -> PathBuf {
        let pb = PathBuf::from(p);
        if pb.is_absolute() {
            pb
        } else {
            self.base_dir.join(pb)
        }
    }
}

/// JSON Schema (draft 2020-12) of the scene format, generated from the serde types; the
/// published copy is `docs/scene.schema.json` (a test keeps it equal to this).
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Scene);
    let mut text = serde_json::to_string_pretty(&schema).expect("schema serializes");
    text.push('\n');
    text
}

/// Read, override (`key.path=value` expressions) and validate a scene file.
pub fn load(path: &Path, sets: &[String]) -> Result<LoadedScene, SceneError> {
    let ps = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|err| SceneError::Io {
        path: ps.clone(),
        err,
    })?;
    load_str(&text, path, sets)
}

/// As [`load`], from text (`path` is used for messages and relative paths).
pub fn load_str(text: &str, path: &Path, sets: &[String]) -> Result<LoadedScene, SceneError> {
    let ps = path.display().to_string();
    let mut value: toml::Table = toml::from_str(text).map_err(|e| SceneError::Toml {
        path: ps.clone(),
        msg: e.to_string(),
    })?;
    for s in sets {
        overrides::apply(&mut value, s)?;
    }
    let effective_toml = toml::to_string(&value).map_err(|e| SceneError::Toml {
        path: ps.clone(),
        msg: e.to_string(),
    })?;
    let scene: Scene = toml::from_str(&effective_toml).map_err(|e| SceneError::Toml {
        path: ps.clone(),
        msg: plain_type_names(typed_error(&e, text, &effective_toml, sets)),
    })?;
    scene.validate().map_err(|(key, msg)| SceneError::Invalid {
        path: ps.clone(),
        key,
        msg,
    })?;
    check_magnitudes(&toml::Value::Table(value), "").map_err(|(key, msg)| SceneError::Invalid {
        path: ps.clone(),
        key,
        msg,
    })?;
    let hash = format!("{:x}", Sha256::digest(effective_toml.as_bytes()));
    let base_dir = path
        .parent()
        .map(|p| p.to_path_buf())
        .unwrap_or_else(|| PathBuf::from("."));
    Ok(LoadedScene {
        scene,
        path: path.to_path_buf(),
        base_dir,
        hash,
        effective_toml,
    })
}

/// Largest magnitude of any number in a scene: frame files store 32-bit floats, so a value
/// beyond `f32::MAX` (E = 1e300, a velocity of 1e39) would come out as `inf` with exit 0.
pub const MAX_MAGNITUDE: f64 = f32::MAX as f64;

/// Refuse any number of the effective scene that is not finite (TOML has `nan` and `inf`)
/// or whose magnitude exceeds [`MAX_MAGNITUDE`]
/// (key path in the `body[0].material.youngs_modulus` form).
fn check_magnitudes(v: &toml::Value, path: &str) -> Result<(), (String, String)> {
    match v {
        toml::Value::Float(x) if !x.is_finite() => Err((
            path.to_string(),
            format!("{x} is not a finite number"),
        )),
        toml::Value::Float(x) if x.abs() > MAX_MAGNITUDE => Err((
            path.to_string(),
            format!(
                "{x:e} is beyond the range of the 32-bit floats the frame files store (|value| <= {MAX_MAGNITUDE:.2e}); no physical scene needs it"
            ),
        )),
        toml::Value::Table(t) => t.iter().try_for_each(|(k, x)| {
            let p = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            check_magnitudes(x, &p)
        }),
        toml::Value::Array(a) => a
            .iter()
            .enumerate()
            .try_for_each(|(i, x)| check_magnitudes(x, &format!("{path}[{i}]"))),
        _ => Ok(()),
    }
}

/// The typed pass runs on the re-serialized table, so its line numbers do not refer to the
/// user's file. When the file itself has the error (the typed pass of the original text
/// fails with the same message), report it with the file's line and column, whatever the
/// command line said: `--frames`/`--threads` are applied as overrides but did not cause it.
/// Otherwise an override did: name the overrides and the table and line of the effective
/// scene.
fn typed_error(e: &toml::de::Error, original: &str, effective: &str, sets: &[String]) -> String {
    if let Err(e2) = toml::from_str::<Scene>(original) {
        if sets.is_empty() || e2.message() == e.message() {
            return e2.to_string();
        }
    }
    effective_error(e, effective, sets)
}

/// serde's Rust type names in a message as the words a scene's author reads: `expected f64`
/// becomes `expected a number`, `expected usize` `expected a non-negative integer`.
fn plain_type_names(msg: String) -> String {
    const NAMES: [(&str, &str); 8] = [
        ("expected f64", "expected a number"),
        ("expected f32", "expected a number"),
        ("expected usize", "expected a non-negative integer"),
        ("expected u64", "expected a non-negative integer"),
        ("expected u32", "expected a non-negative integer"),
        ("expected u8", "expected a non-negative integer"),
        ("expected i64", "expected an integer"),
        ("expected i32", "expected an integer"),
    ];
    NAMES
        .iter()
        .fold(msg, |m, (rust, plain)| m.replace(rust, plain))
}

/// The key path of a table header line of the effective TOML (`[[body]]`, `[body.material]`)
/// at the line starting at byte `at`, with the index of every array-of-tables segment:
/// `body[1].material`, `loss.term[0]`.
fn header_path(effective: &str, at: usize) -> Option<String> {
    let mut counts: std::collections::HashMap<String, usize> = Default::default();
    let mut current: Option<String> = None;
    let mut pos = 0;
    for line in effective.split_inclusive('\n') {
        if pos > at {
            break;
        }
        pos += line.len();
        let l = line.trim();
        if let Some(name) = l.strip_prefix("[[").and_then(|r| r.strip_suffix("]]")) {
            *counts.entry(name.to_string()).or_insert(0) += 1;
            counts.retain(|k, _| !k.starts_with(&format!("{name}.")));
            current = Some(name.to_string());
        } else if let Some(name) = l.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            current = Some(name.to_string());
        }
    }
    let name = current?;
    let mut out = String::new();
    let mut prefix = String::new();
    for seg in name.split('.') {
        if !prefix.is_empty() {
            prefix.push('.');
            out.push('.');
        }
        prefix.push_str(seg);
        out.push_str(seg);
        if let Some(n) = counts.get(&prefix) {
            out.push_str(&format!("[{}]", n.saturating_sub(1)));
        }
    }
    Some(out)
}

/// Describe a typed-pass error on the effective (overridden) scene: the overrides applied,
/// the table (with array indices) and the offending line of the effective TOML, since line
/// numbers no longer match the file.
fn effective_error(e: &toml::de::Error, effective: &str, sets: &[String]) -> String {
    let applied = format!("after the overrides {sets:?}");
    match e.span() {
        Some(span) => {
            let start = effective[..span.start.min(effective.len())]
                .rfind('\n')
                .map(|i| i + 1)
                .unwrap_or(0);
            let end = effective[start..]
                .find('\n')
                .map(|i| start + i)
                .unwrap_or(effective.len());
            let line = effective[start..end].trim();
            let table = header_path(effective, start).unwrap_or_else(|| "top level".into());
            if line.starts_with('[') {
                format!("{} ({applied}: in table `{table}`)", e.message())
            } else {
                format!("{} ({applied}: in `{table}`, at `{line}`)", e.message())
            }
        }
        None => format!("{} ({applied})", e.message()),
    }
}
