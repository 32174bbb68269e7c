//! Scene files (TOML, `schema_version = 1`): schema, `--set` overrides and validation.
//!
//! Every table uses `deny_unknown_fields`, so a typo is an error naming the key. Defaults
//! are serde defaults, documented key by key in `docs/scene-format.md`. Validation
//! ([`Scene::validate`]) checks ranges and names the full key path of the offending value.

pub mod contact;
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
        msg: if sets.is_empty() {
            strip_toml_position(&e, false, text)
        } else {
            effective_error(&e, &effective_toml)
        },
    })?;
    scene.validate().map_err(|(key, msg)| SceneError::Invalid {
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

/// The typed pass runs on the re-serialized table, so its line numbers do not refer to the
/// user's file. Re-run on the original text when there were no overrides to get real
/// positions; otherwise drop the position and keep the message (which names the key).
fn strip_toml_position(e: &toml::de::Error, had_overrides: bool, original: &str) -> String {
    if !had_overrides {
        if let Err(e2) = toml::from_str::<Scene>(original) {
            return e2.to_string();
        }
    }
    e.message().to_string()
}

/// Describe a typed-pass error on the effective (overridden) scene, quoting the offending
/// line of the effective TOML so the key is named even though line numbers no longer
/// match the file.
fn effective_error(e: &toml::de::Error, effective: &str) -> String {
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
            let mut header = "";
            for l in effective[..start].lines().rev() {
                if l.trim_start().starts_with('[') {
                    header = l.trim();
                    break;
                }
            }
            format!(
                "{} (in the scene after --set overrides: under `{}`, `{}`)",
                e.message(),
                header,
                effective[start..end].trim()
            )
        }
        None => e.message().to_string(),
    }
}
