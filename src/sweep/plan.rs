//! Expanding a sweep into its numbered run table.
//!
//! Grid axes span a Cartesian product (the first axis varies slowest); axes sharing a `zip`
//! label advance together. With `[sample]`, `count` points are drawn over the axes' ranges
//! (uniform or Latin hypercube, seeded). Run `i` always gets the same `--set` list, so
//! every executor and every scheduler task finds the same table. A run's hash covers the
//! effective scene (base scene + every override, threads included), the command, its extra
//! arguments and the binary version: a finished run with the same hash is not run again.

use super::{AxisSpec, SampleMethod, Scale, Sweep, SweepCommand, SweepError};
use crate::scene::{self, SceneError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// An axis of the run table.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AxisInfo {
    pub name: String,
    pub key: String,
    pub scale: Scale,
}

/// One run before its scene is checked.
#[derive(Clone, Debug)]
pub struct Run {
    pub id: usize,
    /// Axis values (one per axis).
    pub values: Vec<toml::Value>,
}

/// The expanded sweep.
#[derive(Clone, Debug)]
pub struct Plan {
    pub sweep: Sweep,
    pub axes: Vec<AxisInfo>,
    pub runs: Vec<Run>,
}

/// What checking a run's scene found.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunCheck {
    /// Content hash of the run (scene + overrides + threads + command + args + version).
    pub hash: String,
    /// Hash of the effective scene, as `log.json` records it (absent for invalid runs).
    pub scene_hash: Option<String>,
    /// Why the scene of this run fails validation (the run is kept: it fails when run).
    pub invalid: Option<String>,
}

/// A row of `runs.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunRow {
    pub id: usize,
    /// Directory of the run, relative to the sweep's output directory.
    pub dir: String,
    /// Axis values in axis order.
    pub values: Vec<serde_json::Value>,
    /// The run's `--set` list (fixed overrides, then axis values).
    pub sets: Vec<String>,
    #[serde(flatten)]
    pub check: RunCheck,
}

/// `runs.json`: the whole run table with what produced it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PlanTable {
    pub format: u32,
    pub sweep: String,
    pub scene: String,
    pub command: SweepCommand,
    pub args: Vec<String>,
    pub threads_per_run: usize,
    pub diffphd_version: String,
    pub git_commit: Option<String>,
    pub axes: Vec<AxisInfo>,
    /// The sweep file's `[collect]` (metrics and plots of `sweep collect`).
    #[serde(default)]
    pub collect: super::CollectSpec,
    pub runs: Vec<RunRow>,
}

/// Round to 12 significant digits, so `linear`/`log` ranges give `1e6`, not `999999.9999999999`.
fn round12(x: f64) -> f64 {
    format!("{x:.11e}").parse().unwrap_or(x)
}

/// Directory name of run `id` among `count` runs (`run_0003`).
pub fn run_dir_name(id: usize, count: usize) -> String {
    let width = count.saturating_sub(1).to_string().len().max(4);
    format!("run_{id:0width$}")
}

/// The text of a `--set` value.
pub fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn axis_err(sw: &Sweep, index: usize, key: &str, msg: String) -> SweepError {
    SweepError::Axis {
        path: sw.path.display().to_string(),
        index,
        key: key.to_string(),
        msg,
    }
}

/// The values of a grid axis.
fn grid_values(sw: &Sweep, i: usize, a: &AxisSpec) -> Result<Vec<toml::Value>, SweepError> {
    let err = |m: &str| axis_err(sw, i, &a.key, m.to_string());
    let given = [a.values.is_some(), a.linear.is_some(), a.log.is_some()];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(err(
            "give exactly one of `values`, `linear` or `log` (or use `range` with [sample])",
        ));
    }
    if a.range.is_some() {
        return Err(err(
            "`range` is for [sample] sweeps; a grid axis takes `values`, `linear` or `log`",
        ));
    }
    if let Some(v) = &a.values {
        if v.is_empty() {
            return Err(err("`values` is empty"));
        }
        return Ok(v.clone());
    }
    let (r, log) =
        match (&a.linear, &a.log) {
            (Some(r), _) => (r, false),
            (_, Some(r)) => (r, true),
            // exactly one of values/linear/log is given (checked above) and values returned
            _ => return Err(err(
                "give exactly one of `values`, `linear` or `log` (or use `range` with [sample])",
            )),
        };
    if r.count == 0 {
        return Err(err("`count` must be at least 1"));
    }
    if !r.from.is_finite() || !r.to.is_finite() {
        return Err(err("`from` and `to` must be finite"));
    }
    if log && (r.from <= 0.0 || r.to <= 0.0) {
        return Err(err("a `log` range needs `from` > 0 and `to` > 0"));
    }
    let n = r.count;
    Ok((0..n)
        .map(|k| {
            let t = if n == 1 {
                0.0
            } else {
                k as f64 / (n - 1) as f64
            };
            let x = if k + 1 == n && n > 1 {
                r.to
            } else if log {
                r.from * (r.to / r.from).powf(t)
            } else {
                r.from + (r.to - r.from) * t
            };
            toml::Value::Float(round12(x))
        })
        .collect())
}

/// Draw `count` samples of every axis (one column per axis).
fn sample_values(sw: &Sweep, s: &super::SampleSpec) -> Result<Vec<Vec<toml::Value>>, SweepError> {
    let path = sw.path.display().to_string();
    if s.count == 0 {
        return Err(SweepError::Invalid {
            path,
            key: "sample.count".into(),
            msg: "must be at least 1".into(),
        });
    }
    let mut rng = super::rng::SplitMix64::new(s.seed);
    let mut cols = Vec::new();
    for (i, a) in sw.spec.axes.iter().enumerate() {
        let err = |m: &str| axis_err(sw, i, &a.key, m.to_string());
        if a.linear.is_some() || a.log.is_some() {
            return Err(err(
                "with [sample], give `range = [lo, hi]` (and `scale = \"log\"`) or `values`",
            ));
        }
        if a.zip.is_some() {
            return Err(err("`zip` applies to grids, not to [sample] sweeps"));
        }
        // Unit coordinates of the samples on this axis.
        let u: Vec<f64> = match s.method {
            SampleMethod::Random => (0..s.count).map(|_| rng.uniform()).collect(),
            SampleMethod::Latin => {
                let perm = rng.permutation(s.count);
                perm.iter()
                    .map(|&p| (p as f64 + rng.uniform()) / s.count as f64)
                    .collect()
            }
        };
        let col = match (&a.values, a.range) {
            (Some(v), None) if !v.is_empty() => u
                .iter()
                .map(|x| v[((x * v.len() as f64) as usize).min(v.len() - 1)].clone())
                .collect(),
            (None, Some([lo, hi])) => {
                if !(lo.is_finite() && hi.is_finite() && lo < hi) {
                    return Err(err("`range` needs finite lo < hi"));
                }
                let log = a.scale == Some(Scale::Log);
                if log && lo <= 0.0 {
                    return Err(err("a log-scale `range` needs lo > 0"));
                }
                u.iter()
                    .map(|x| {
                        let v = if log {
                            lo * (hi / lo).powf(*x)
                        } else {
                            lo + (hi - lo) * x
                        };
                        toml::Value::Float(round12(v))
                    })
                    .collect()
            }
            _ => return Err(err("give either `range = [lo, hi]` or non-empty `values`")),
        };
        cols.push(col);
    }
    Ok(cols)
}

/// Expand the axes into runs (no scene is loaded; see [`Plan::check_run`]).
pub fn expand(sw: &Sweep) -> Result<Plan, SweepError> {
    let spec = &sw.spec;
    let mut axes = Vec::new();
    for (i, a) in spec.axes.iter().enumerate() {
        let name = a.name.clone().unwrap_or_else(|| a.key.clone());
        if name.is_empty() || a.key.trim().is_empty() {
            return Err(axis_err(sw, i, &a.key, "empty key or name".into()));
        }
        if axes
            .iter()
            .any(|x: &AxisInfo| x.name == name || x.key == a.key)
        {
            return Err(axis_err(
                sw,
                i,
                &a.key,
                format!("axis `{name}` given twice"),
            ));
        }
        let scale = a.scale.unwrap_or(if a.log.is_some() {
            Scale::Log
        } else {
            Scale::Linear
        });
        axes.push(AxisInfo {
            name,
            key: a.key.clone(),
            scale,
        });
    }
    let runs: Vec<Run> = if let Some(s) = &spec.sample {
        let cols = sample_values(sw, s)?;
        (0..s.count)
            .map(|id| Run {
                id,
                values: cols.iter().map(|c| c[id].clone()).collect(),
            })
            .collect()
    } else {
        let vals: Vec<Vec<toml::Value>> = spec
            .axes
            .iter()
            .enumerate()
            .map(|(i, a)| grid_values(sw, i, a))
            .collect::<Result<_, _>>()?;
        // Groups: zipped axes share one; every other axis is its own.
        let mut groups: Vec<(Option<String>, Vec<usize>)> = Vec::new();
        for (i, a) in spec.axes.iter().enumerate() {
            match a
                .zip
                .as_ref()
                .and_then(|z| groups.iter_mut().find(|(g, _)| g.as_ref() == Some(z)))
            {
                Some((_, members)) => {
                    let first = members[0];
                    if vals[first].len() != vals[i].len() {
                        return Err(axis_err(
                            sw,
                            i,
                            &a.key,
                            format!(
                                "zipped with `{}` but has {} values, not {}",
                                spec.axes[first].key,
                                vals[i].len(),
                                vals[first].len()
                            ),
                        ));
                    }
                    members.push(i);
                }
                None => groups.push((a.zip.clone(), vec![i])),
            }
        }
        let sizes: Vec<usize> = groups.iter().map(|(_, m)| vals[m[0]].len()).collect();
        let count: usize = sizes.iter().product();
        (0..if spec.axes.is_empty() { 1 } else { count })
            .map(|id| {
                let mut values = vec![toml::Value::Boolean(false); spec.axes.len()];
                let mut rest = id;
                for (g, (_, members)) in groups.iter().enumerate().rev() {
                    let k = rest % sizes[g];
                    rest /= sizes[g];
                    for &m in members {
                        values[m] = vals[m][k].clone();
                    }
                }
                Run { id, values }
            })
            .collect()
    };
    let plan = Plan {
        sweep: sw.clone(),
        axes,
        runs,
    };
    plan.check_axes()?;
    Ok(plan)
}

/// A run's content hash.
pub fn run_hash(command: SweepCommand, scene_hash: &str, args: &[String], version: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"diffphd sweep run v1\n");
    h.update(version.as_bytes());
    h.update(b"\n");
    h.update(command.as_str().as_bytes());
    h.update(b"\n");
    h.update(scene_hash.as_bytes());
    for a in args {
        h.update(b"\n");
        h.update(a.as_bytes());
    }
    format!("{:x}", h.finalize())
}

impl Plan {
    /// The `--set` list of run `id` (fixed overrides, then one per axis).
    pub fn run_sets(&self, id: usize) -> Vec<String> {
        let mut sets = self.sweep.spec.set.clone();
        for (a, v) in self.axes.iter().zip(&self.runs[id].values) {
            sets.push(format!("{}={}", a.key, value_text(v)));
        }
        sets
    }

    /// The overrides as the command sees them (`--threads` becomes `solver.threads`).
    fn effective_sets(&self, id: usize) -> Vec<String> {
        let mut sets = self.run_sets(id);
        sets.push(format!(
            "solver.threads={}",
            self.sweep.spec.threads_per_run
        ));
        sets
    }

    /// Refuse an axis whose key or value type the scene does not accept, naming the axis
    /// (checked with the axis's first value and every other key at its base value).
    fn check_axes(&self) -> Result<(), SweepError> {
        let Some(run) = self.runs.first() else {
            return Ok(());
        };
        for (i, a) in self.axes.iter().enumerate() {
            let mut sets = self.sweep.spec.set.clone();
            sets.push(format!("{}={}", a.key, value_text(&run.values[i])));
            match scene::load(&self.sweep.scene, &sets) {
                Ok(_) | Err(SceneError::Invalid { .. }) => {}
                Err(e) => return Err(axis_err(&self.sweep, i, &a.key, e.to_string())),
            }
        }
        Ok(())
    }

    /// Index check for `sweep task --index`.
    pub fn run(&self, index: usize) -> Result<&Run, SweepError> {
        self.runs.get(index).ok_or_else(|| SweepError::Index {
            path: self.sweep.path.display().to_string(),
            index,
            count: self.runs.len(),
        })
    }

    /// Load run `id`'s scene: its hash, or why it is invalid. Errors other than range
    /// validation (a key the schema rejects, a value of the wrong type) refuse the sweep.
    pub fn check_run(&self, id: usize) -> Result<RunCheck, SweepError> {
        let sets = self.effective_sets(id);
        let spec = &self.sweep.spec;
        let version = crate::io::VERSION;
        match scene::load(&self.sweep.scene, &sets) {
            Ok(ls) => Ok(RunCheck {
                hash: run_hash(spec.command, &ls.hash, &spec.args, version),
                scene_hash: Some(ls.hash),
                invalid: None,
            }),
            Err(e @ SceneError::Invalid { .. }) => {
                let text = std::fs::read_to_string(&self.sweep.scene).unwrap_or_default();
                let pseudo = format!(
                    "{:x}",
                    Sha256::digest(format!("{text}\n{}", sets.join("\n")).as_bytes())
                );
                Ok(RunCheck {
                    hash: run_hash(spec.command, &pseudo, &spec.args, version),
                    scene_hash: None,
                    invalid: Some(e.to_string()),
                })
            }
            Err(source) => Err(SweepError::Scene {
                path: self.sweep.path.display().to_string(),
                run: id,
                source,
            }),
        }
    }

    /// The row of run `id` with its check.
    pub fn row(&self, id: usize, check: RunCheck) -> RunRow {
        RunRow {
            id,
            dir: run_dir_name(id, self.runs.len()),
            values: self.runs[id]
                .values
                .iter()
                .map(|v| serde_json::to_value(v).unwrap_or(serde_json::Value::Null))
                .collect(),
            sets: self.run_sets(id),
            check,
        }
    }

    /// Check every run and build `runs.json`.
    pub fn table(&self) -> Result<PlanTable, SweepError> {
        let rows = (0..self.runs.len())
            .map(|i| self.check_run(i).map(|c| self.row(i, c)))
            .collect::<Result<Vec<_>, _>>()?;
        let spec = &self.sweep.spec;
        Ok(PlanTable {
            format: 1,
            sweep: self.sweep.path.display().to_string(),
            scene: self.sweep.scene.display().to_string(),
            command: spec.command,
            args: spec.args.clone(),
            threads_per_run: spec.threads_per_run,
            diffphd_version: crate::io::VERSION.to_string(),
            git_commit: crate::io::git_commit().map(String::from),
            axes: self.axes.clone(),
            collect: spec.collect.clone(),
            runs: rows,
        })
    }
}

/// A CSV field, quoted when needed.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A JSON value as CSV text (strings unquoted, numbers as written, null empty).
pub fn json_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `runs.csv`: id, directory, hash, one column per axis, the `--set` list, validity.
pub fn runs_csv(t: &PlanTable) -> String {
    let mut s = String::from("run,dir,hash");
    for a in &t.axes {
        s.push(',');
        s.push_str(&csv_field(&a.name));
    }
    s.push_str(",sets,invalid\n");
    for r in &t.runs {
        s.push_str(&format!("{},{},{}", r.id, r.dir, r.check.hash));
        for v in &r.values {
            s.push(',');
            s.push_str(&csv_field(&json_text(v)));
        }
        s.push(',');
        s.push_str(&csv_field(&r.sets.join(" ")));
        s.push(',');
        s.push_str(&csv_field(r.check.invalid.as_deref().unwrap_or("")));
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Plan `tests/fixtures/sweeps/unit/<name>.sweep.toml` over the fixture scene `s.toml`.
    fn sweep(name: &str) -> (tempfile::TempDir, Result<Plan, SweepError>) {
        let text = crate::scene::overrides::fixture(&format!("sweeps/unit/{name}.sweep"), &[]);
        sweep_text(&text)
    }

    /// Plan the sweep `text` over the fixture scene `s.toml`.
    fn sweep_text(text: &str) -> (tempfile::TempDir, Result<Plan, SweepError>) {
        let d = tempfile::tempdir().unwrap();
        let scene = crate::scene::overrides::fixture("scenes/unit/sweep_scene", &[]);
        std::fs::write(d.path().join("s.toml"), scene).unwrap();
        let p = d.path().join("x.sweep.toml");
        std::fs::write(&p, text).unwrap();
        let r = super::super::load(&p).and_then(|s| expand(&s));
        (d, r)
    }

    fn floats(p: &Plan, axis: usize) -> Vec<f64> {
        p.runs
            .iter()
            .map(|r| r.values[axis].as_float().unwrap())
            .collect()
    }

    #[test]
    fn grid_is_a_product_with_the_first_axis_slowest_and_exact_log_points() {
        let (_d, p) = sweep("grid");
        let p = p.unwrap();
        assert_eq!(p.runs.len(), 6);
        assert_eq!(floats(&p, 0), vec![1e4, 1e4, 1e5, 1e5, 1e6, 1e6]);
        assert_eq!(floats(&p, 1), vec![0.2, 0.3, 0.2, 0.3, 0.2, 0.3]);
        assert_eq!(p.axes[0].scale, Scale::Log);
        assert_eq!(
            p.run_sets(3),
            vec![
                "body.0.material.youngs_modulus=100000.0",
                "body.0.material.poisson_ratio=0.3"
            ]
        );
        let t = p.table().unwrap();
        assert!(t.runs.iter().all(|r| r.check.invalid.is_none()));
        let hashes: std::collections::HashSet<_> = t.runs.iter().map(|r| &r.check.hash).collect();
        assert_eq!(hashes.len(), 6, "every run has its own hash");
        assert_eq!(p.table().unwrap(), t, "expansion is deterministic");
        let csv = runs_csv(&t);
        assert_eq!(csv.lines().count(), 7);
        assert!(csv.starts_with("run,dir,hash,E,body.0.material.poisson_ratio,sets,invalid\n"));
    }

    #[test]
    fn zipped_axes_advance_together_and_mismatched_lengths_name_the_axis() {
        let (_d, p) = sweep("zip");
        let p = p.unwrap();
        assert_eq!(floats(&p, 0), vec![1e5, 2e5, 3e5]);
        assert_eq!(floats(&p, 1), vec![900.0, 1000.0, 1100.0]);
        let (_d, p) = sweep("zip_mismatch");
        let e = p.unwrap_err().to_string();
        assert!(
            e.contains("axis 1 (`body.0.material.density`)") && e.contains("zipped"),
            "{e}"
        );
    }

    #[test]
    fn unknown_keys_are_refused_with_the_axis_named_and_out_of_range_values_are_marked() {
        let (_d, p) = sweep("unknown_key");
        let e = p.unwrap_err().to_string();
        assert!(
            e.contains("axis 0 (`body.0.material.youngs_modulu`)"),
            "{e}"
        );
        assert!(e.contains("youngs_modulu"), "{e}");
        let (_d, p) = sweep("out_of_range");
        let t = p.unwrap().table().unwrap();
        assert!(t.runs[0].check.invalid.is_none());
        let why = t.runs[1].check.invalid.as_deref().unwrap();
        assert!(why.contains("poisson_ratio"), "{why}");
    }

    #[test]
    fn latin_hypercube_puts_one_sample_in_every_stratum_and_is_seeded() {
        let (_d, p) = sweep("latin");
        let p = p.unwrap();
        let (_d2, q) = sweep("latin");
        assert_eq!(floats(&p, 0), floats(&q.unwrap(), 0));
        let mut strata: Vec<usize> = floats(&p, 1)
            .iter()
            .map(|v| ((v - 0.1) / 0.35 * 8.0) as usize)
            .collect();
        strata.sort();
        assert_eq!(strata, (0..8).collect::<Vec<_>>());
        let mut logs: Vec<usize> = floats(&p, 0)
            .iter()
            .map(|v| ((v.log10() - 4.0) / 2.0 * 8.0) as usize)
            .collect();
        logs.sort();
        assert_eq!(logs, (0..8).collect::<Vec<_>>());
        let _ = Path::new("");
    }

    #[test]
    fn bad_axis_specs_and_managed_args_are_refused() {
        for (axis, want) in [
            ("values = []", "empty"),
            ("log = { from = 0.0, to = 1.0, count = 3 }", "from` > 0"),
            ("linear = { from = 0.0, to = 1.0, count = 0 }", "at least 1"),
            (
                "values = [1.0], linear = { from = 0.0, to = 1.0, count = 2 }",
                "exactly one",
            ),
        ] {
            let (_d, p) = sweep_text(&format!(
                "scene = \"s.toml\"\ncommand = \"simulate\"\naxis = [{{ key = \"body.0.material.density\", {axis} }}]\n"
            ));
            let e = p.unwrap_err().to_string();
            assert!(e.contains("axis 0") && e.contains(want), "{axis}: {e}");
        }
        let (_d, p) =
            sweep_text("scene = \"s.toml\"\ncommand = \"grad\"\nargs = [\"--out\", \"x\"]\n");
        assert!(p
            .unwrap_err()
            .to_string()
            .contains("`--out` is set by the sweep"));
        let (_d, p) = sweep_text("scene = \"nope.toml\"\ncommand = \"grad\"\n");
        assert!(p.unwrap_err().to_string().contains("does not exist"));
    }
}
