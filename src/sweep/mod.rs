//! Parameter sweeps (docs/sweeps.md): a sweep file names a base scene, a command and axes over
//! scene keys; it expands into a numbered run table ([`plan`]) that any executor drives — the
//! local pool, GNU parallel or a Slurm job array, all through `diffphd sweep task --index I` —
//! and whose outputs [`collect`] gathers into one table and the data of its plots ([`plot`];
//! the CLI draws them).
//!
//! This module plans and collects; it never spawns processes, prints or picks exit codes
//! (that is `cli::sweep`). Every error names the sweep file and the key or axis at fault.

pub mod collect;
pub mod plan;
pub mod plot;
pub mod rng;

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Errors of reading, expanding and collecting a sweep.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("{path}: cannot read: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("{path}: {msg}")]
    Toml { path: String, msg: String },
    #[error("{path}: key `{key}`: {msg}")]
    Invalid {
        path: String,
        key: String,
        msg: String,
    },
    #[error("{path}: axis {index} (`{key}`): {msg}")]
    Axis {
        path: String,
        index: usize,
        key: String,
        msg: String,
    },
    #[error("{path}: run {run}: {source}")]
    Scene {
        path: String,
        run: usize,
        source: crate::scene::SceneError,
    },
    #[error("{path}: run index {index} out of range (the sweep has {count} runs: 0..={last})", last = count.saturating_sub(1))]
    Index {
        path: String,
        index: usize,
        count: usize,
    },
}

/// The command every run of a sweep executes.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SweepCommand {
    Simulate,
    Grad,
    Gradcheck,
    Optimize,
}

impl SweepCommand {
    pub fn as_str(self) -> &'static str {
        match self {
            SweepCommand::Simulate => "simulate",
            SweepCommand::Grad => "grad",
            SweepCommand::Gradcheck => "gradcheck",
            SweepCommand::Optimize => "optimize",
        }
    }
    /// The JSON file a completed run of this command always writes.
    pub fn main_output(self) -> &'static str {
        match self {
            SweepCommand::Simulate => "log.json",
            SweepCommand::Grad => "grad.json",
            SweepCommand::Gradcheck => "gradcheck.json",
            SweepCommand::Optimize => "optimize.json",
        }
    }
}

/// A sweep file (`*.sweep.toml`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// Base scene, relative to the sweep file.
    pub scene: String,
    pub command: SweepCommand,
    /// Sweep output directory (relative to the working directory); default
    /// `out/sweeps/<file stem>`.
    #[serde(default)]
    pub output: Option<String>,
    /// `--set` overrides applied to every run (before the axis values).
    #[serde(default)]
    pub set: Vec<String>,
    /// Further command-line arguments of the command (e.g. `["--rtol", "1e-3"]`).
    #[serde(default)]
    pub args: Vec<String>,
    /// `--threads` of each run (solver threads).
    #[serde(default = "one")]
    pub threads_per_run: usize,
    /// Axes (`[[axis]]`): a grid over their values, or samples with `[sample]`.
    #[serde(rename = "axis", default)]
    pub axes: Vec<AxisSpec>,
    #[serde(default)]
    pub sample: Option<SampleSpec>,
    #[serde(default)]
    pub slurm: SlurmSpec,
    #[serde(default)]
    pub collect: CollectSpec,
}

fn one() -> usize {
    1
}

/// One axis: a scene key and its values.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AxisSpec {
    /// Scene key as in `--set` (`body.0.material.youngs_modulus`).
    pub key: String,
    /// Short name for tables and plots (default: the key).
    #[serde(default)]
    pub name: Option<String>,
    /// Explicit values (any TOML values).
    #[serde(default)]
    pub values: Option<Vec<toml::Value>>,
    /// `count` evenly spaced values from `from` to `to`.
    #[serde(default)]
    pub linear: Option<RangeSpec>,
    /// `count` log-spaced values from `from` to `to` (both > 0).
    #[serde(default)]
    pub log: Option<RangeSpec>,
    /// Sampling interval `[lo, hi]` (with `[sample]`).
    #[serde(default)]
    pub range: Option<[f64; 2]>,
    /// Scale of `range` sampling and of plots: `linear` or `log`.
    #[serde(default)]
    pub scale: Option<Scale>,
    /// Axes with the same `zip` label advance together (equal lengths) instead of
    /// spanning a grid.
    #[serde(default)]
    pub zip: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RangeSpec {
    pub from: f64,
    pub to: f64,
    pub count: usize,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    #[default]
    Linear,
    Log,
}

/// `[sample]`: `count` random or Latin-hypercube points over the axes' ranges.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleSpec {
    pub method: SampleMethod,
    pub count: usize,
    #[serde(default)]
    pub seed: u64,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SampleMethod {
    Random,
    Latin,
}

/// `[slurm]`: resources of the emitted array script (flags of `sweep emit` override them).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmSpec {
    /// `--time` per array task (e.g. `"00:20:00"`).
    #[serde(default)]
    pub time: Option<String>,
    /// `--mem` per array task (e.g. `"2G"`).
    #[serde(default)]
    pub mem: Option<String>,
    /// `--cpus-per-task` (default: `threads_per_run`).
    #[serde(default)]
    pub cpus_per_task: Option<usize>,
    /// At most this many tasks at once (`--array=0-N%K`).
    #[serde(default)]
    pub max_parallel: Option<usize>,
    #[serde(default)]
    pub partition: Option<String>,
    #[serde(default)]
    pub account: Option<String>,
    /// Further `#SBATCH` lines, verbatim (e.g. `"--qos=short"`).
    #[serde(default)]
    pub extra: Vec<String>,
}

/// `[collect]`: metrics and plots of `sweep collect` (flags add to them).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CollectSpec {
    /// Extra metrics `NAME=FILE:JSON.PATH` (e.g. `"final_x=log.json:frames.-1.time"`).
    #[serde(default)]
    pub metrics: Vec<String>,
    /// Plots `METRIC:AXIS` (line) or `METRIC:AXIS:AXIS` (heat map).
    #[serde(default)]
    pub plots: Vec<String>,
}

/// A sweep file as read, with where it lives.
#[derive(Clone, Debug)]
pub struct Sweep {
    pub spec: SweepSpec,
    /// The sweep file.
    pub path: PathBuf,
    /// The base scene (resolved against the sweep file's directory).
    pub scene: PathBuf,
}

impl Sweep {
    /// Default output directory: `out/sweeps/<stem>` (stem without `.sweep`).
    pub fn default_output(&self) -> PathBuf {
        if let Some(o) = &self.spec.output {
            return PathBuf::from(o);
        }
        let stem = self
            .path
            .file_name()
            .and_then(|s| s.to_str())
            .unwrap_or("sweep");
        let stem = stem
            .strip_suffix(".toml")
            .unwrap_or(stem)
            .trim_end_matches(".sweep");
        Path::new("out").join("sweeps").join(stem)
    }
}

/// Arguments a sweep sets itself and so refuses in `args`.
const MANAGED_ARGS: [&str; 9] = [
    "--out",
    "--set",
    "--threads",
    "--frames",
    "--solver",
    "--overwrite",
    "--dry-run",
    "--quiet",
    "-q",
];

/// Read and check a sweep file (axes are expanded by [`plan::expand`]).
pub fn load(path: &Path) -> Result<Sweep, SweepError> {
    let ps = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|err| SweepError::Io {
        path: ps.clone(),
        err,
    })?;
    load_str(&text, path)
}

/// As [`load`], from text.
pub fn load_str(text: &str, path: &Path) -> Result<Sweep, SweepError> {
    let ps = path.display().to_string();
    let spec: SweepSpec = toml::from_str(text).map_err(|e| SweepError::Toml {
        path: ps.clone(),
        msg: e.to_string(),
    })?;
    let invalid = |key: &str, msg: String| SweepError::Invalid {
        path: ps.clone(),
        key: key.to_string(),
        msg,
    };
    if spec.threads_per_run == 0 {
        return Err(invalid("threads_per_run", "must be at least 1".into()));
    }
    for a in &spec.args {
        let flag = a.split('=').next().unwrap_or(a);
        if MANAGED_ARGS.contains(&flag) {
            return Err(invalid(
                "args",
                format!("`{flag}` is set by the sweep itself (use `set = [...]` for scene keys, `threads_per_run` for threads)"),
            ));
        }
    }
    let base = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let scene = base.join(&spec.scene);
    if !scene.is_file() {
        return Err(invalid(
            "scene",
            format!("base scene {} does not exist", scene.display()),
        ));
    }
    Ok(Sweep {
        spec,
        path: path.to_path_buf(),
        scene,
    })
}
