//! Gathering a sweep's outputs into one table: the axis values of every run, its exit status
//! and wall time (from [`STATUS_FILE`]) and metrics read from its JSON outputs by path.

use super::plan::{csv_field, json_text, PlanTable};
use super::{SweepCommand, SweepError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// Written by an executor into a run's directory when the run's process has exited.
pub const STATUS_FILE: &str = "sweep-status.json";
/// The run table of a sweep's output directory.
pub const TABLE_FILE: &str = "runs.json";

/// What an executor records about one finished run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunStatus {
    pub run: usize,
    /// The run's content hash (see [`super::plan::run_hash`]).
    pub hash: String,
    /// Exit code of the command (-1 when killed by a signal).
    pub exit_code: i32,
    pub seconds: f64,
    pub command_line: Vec<String>,
    /// Last line of the run's stderr when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub diffphd_version: String,
    pub git_commit: Option<String>,
}

/// Why a metric request (`NAME=FILE:JSON.PATH`) was refused; holds the request.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum MetricError {
    #[error("metric `{0}`: expected NAME=FILE:JSON.PATH")]
    Syntax(String),
    #[error("metric `{0}`: empty name or file")]
    Empty(String),
}

/// A metric: `NAME=FILE:JSON.PATH` (`loss=grad.json:evaluation.loss`).
#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    pub name: String,
    pub file: String,
    pub path: Vec<String>,
}

impl Metric {
    /// Parse `NAME=FILE:PATH`; `PATH` is dot-separated, array indices as numbers (negative
    /// from the end), `$.` and `[k]` accepted (`$.evaluation.gradient[0]`).
    pub fn parse(s: &str) -> Result<Metric, MetricError> {
        let syntax = || MetricError::Syntax(s.to_string());
        let (name, rest) = s.split_once('=').ok_or_else(syntax)?;
        let (file, path) = rest.split_once(':').ok_or_else(syntax)?;
        let path = path.trim().trim_start_matches('$').trim_start_matches('.');
        let path: Vec<String> = path
            .replace('[', ".")
            .replace(']', "")
            .split('.')
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect();
        if name.trim().is_empty() || file.trim().is_empty() {
            return Err(MetricError::Empty(s.to_string()));
        }
        Ok(Metric {
            name: name.trim().to_string(),
            file: file.trim().to_string(),
            path,
        })
    }

    fn new(name: &str, file: &str, path: &str) -> Metric {
        Metric::parse(&format!("{name}={file}:{path}"))
            .expect("the built-in metrics are NAME=FILE:PATH with non-empty names and files")
    }
}

/// Follow `path` into `v`.
pub fn lookup<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = v;
    for seg in path {
        cur = match cur {
            Value::Object(m) => m.get(seg)?,
            Value::Array(a) => {
                let i: i64 = seg.parse().ok()?;
                let i = if i < 0 { a.len() as i64 + i } else { i };
                a.get(usize::try_from(i).ok()?)?
            }
            _ => return None,
        };
    }
    Some(cur)
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// The default metrics of a command; `sample_dir` (a finished run's directory) supplies
/// parameter names for per-parameter gradient columns.
pub fn default_metrics(command: SweepCommand, sample_dir: Option<&Path>) -> Vec<Metric> {
    let m = Metric::new;
    match command {
        SweepCommand::Simulate => vec![
            m("run_status", "log.json", "status"),
            m("frames_done", "log.json", "summary.frames_done"),
            m("pd_iterations", "log.json", "summary.total_iterations"),
            m(
                "nonconverged_frames",
                "log.json",
                "summary.nonconverged_frames",
            ),
            m("max_penetration", "log.json", "summary.max_penetration"),
            m("seconds_total", "log.json", "summary.seconds_total"),
        ],
        SweepCommand::Grad => {
            let mut v = vec![
                m("loss", "grad.json", "evaluation.loss"),
                m("pd_iterations", "grad.json", "evaluation.pd_iterations"),
                m(
                    "adjoint_iterations",
                    "grad.json",
                    "evaluation.adjoint_iterations",
                ),
                m("forward_seconds", "grad.json", "evaluation.forward_seconds"),
                m(
                    "backward_seconds",
                    "grad.json",
                    "evaluation.backward_seconds",
                ),
            ];
            let names = sample_dir
                .and_then(|d| read_json(&d.join("grad.json")))
                .and_then(|j| j.get("parameters").cloned())
                .and_then(|p| serde_json::from_value::<Vec<String>>(p).ok())
                .unwrap_or_default();
            for (k, n) in names.iter().enumerate() {
                let col = n
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                    .collect::<Vec<_>>()
                    .join("_");
                v.push(Metric {
                    name: format!("grad_{col}"),
                    file: "grad.json".into(),
                    path: vec!["evaluation".into(), "gradient".into(), k.to_string()],
                });
            }
            v
        }
        SweepCommand::Gradcheck => vec![m("all_pass", "gradcheck.json", "all_pass")],
        SweepCommand::Optimize => vec![
            m("optimize_status", "optimize.json", "status"),
            m("best_loss", "optimize.json", "best.loss"),
            m("initial_loss", "optimize.json", "summary.initial_loss"),
            m("iterations", "optimize.json", "summary.iterations"),
            m("evaluations", "optimize.json", "summary.evaluations"),
        ],
    }
}

/// The collected table: one row per run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Results {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

/// Read the run table of a sweep directory.
pub fn read_table(dir: &Path) -> Result<PlanTable, SweepError> {
    let p = dir.join(TABLE_FILE);
    let ps = p.display().to_string();
    let text = std::fs::read_to_string(&p).map_err(|err| SweepError::Io {
        path: ps.clone(),
        err,
    })?;
    serde_json::from_str(&text).map_err(|e| SweepError::Toml {
        path: ps,
        msg: format!("not a sweep run table: {e}"),
    })
}

/// Collect every run of `table` under `dir` with the default metrics plus `extra`.
/// Column `status`: `ok`, `failed` (non-zero exit), `not run` (no status file) or `stale`
/// (a status file for another hash: the sweep changed since).
pub fn collect(dir: &Path, table: &PlanTable, extra: &[Metric]) -> Results {
    let sample = table
        .runs
        .iter()
        .map(|r| dir.join(&r.dir))
        .find(|d| d.join(table.command.main_output()).is_file());
    let mut metrics = default_metrics(table.command, sample.as_deref());
    for m in extra {
        metrics.retain(|x| x.name != m.name);
        metrics.push(m.clone());
    }
    let mut columns = vec!["run".to_string()];
    columns.extend(table.axes.iter().map(|a| a.name.clone()));
    columns.extend(["status", "exit_code", "seconds", "error"].map(String::from));
    columns.extend(metrics.iter().map(|m| m.name.clone()));
    let rows = table
        .runs
        .iter()
        .map(|r| {
            let rd = dir.join(&r.dir);
            let st: Option<RunStatus> =
                read_json(&rd.join(STATUS_FILE)).and_then(|v| serde_json::from_value(v).ok());
            let mut row = vec![Value::from(r.id)];
            row.extend(r.values.iter().cloned());
            match &st {
                Some(s) => {
                    let status = if s.hash != r.check.hash {
                        "stale"
                    } else if s.exit_code == 0 {
                        "ok"
                    } else {
                        "failed"
                    };
                    row.push(Value::from(status));
                    row.push(Value::from(s.exit_code));
                    row.push(Value::from(s.seconds));
                    row.push(s.error.clone().map(Value::from).unwrap_or(Value::Null));
                }
                None => {
                    row.extend([
                        Value::from("not run"),
                        Value::Null,
                        Value::Null,
                        Value::Null,
                    ]);
                }
            }
            let mut files: std::collections::HashMap<&str, Option<Value>> = Default::default();
            for m in &metrics {
                let doc = files
                    .entry(m.file.as_str())
                    .or_insert_with(|| read_json(&rd.join(&m.file)));
                row.push(
                    doc.as_ref()
                        .and_then(|d| lookup(d, &m.path))
                        .cloned()
                        .unwrap_or(Value::Null),
                );
            }
            row
        })
        .collect();
    Results { columns, rows }
}

impl Results {
    pub fn to_csv(&self) -> String {
        let mut s = self
            .columns
            .iter()
            .map(|c| csv_field(c))
            .collect::<Vec<_>>()
            .join(",");
        s.push('\n');
        for r in &self.rows {
            let line: Vec<String> = r.iter().map(|v| csv_field(&json_text(v))).collect();
            s.push_str(&line.join(","));
            s.push('\n');
        }
        s
    }

    /// Rows as JSON objects keyed by column.
    pub fn to_json(&self) -> Value {
        Value::Array(
            self.rows
                .iter()
                .map(|r| {
                    Value::Object(
                        self.columns
                            .iter()
                            .cloned()
                            .zip(r.iter().cloned())
                            .collect(),
                    )
                })
                .collect(),
        )
    }

    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_paths_parse_in_both_notations_and_index_from_the_end() {
        let m = Metric::parse("g0=grad.json:$.evaluation.gradient[0]").unwrap();
        assert_eq!(m.path, vec!["evaluation", "gradient", "0"]);
        let v: Value = serde_json::json!({"evaluation": {"gradient": [1.5, 2.5]}});
        assert_eq!(lookup(&v, &m.path), Some(&Value::from(1.5)));
        let last = Metric::parse("g=grad.json:evaluation.gradient.-1").unwrap();
        assert_eq!(lookup(&v, &last.path), Some(&Value::from(2.5)));
        assert_eq!(lookup(&v, &["nope".to_string()]), None);
        assert!(Metric::parse("loss").is_err());
        assert!(Metric::parse("=grad.json:x").is_err());
    }
}
