//! What a sweep plot shows, as data: the plot request (`--plot METRIC:AXIS[:AXIS]`), the
//! line series of a metric against one axis (one per combination of the other axes) and the
//! cells of a heat map over two axes. Drawing them (plotters, SVG or PNG) is the CLI's
//! (`cli/src/plot/sweep.rs`); the library does no plotting.

use super::collect::Results;
use super::plan::{json_text, PlanTable};
use super::Scale;
use serde_json::Value;

/// Why a plot request was refused (`--plot`), naming what it asked for.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PlotError {
    #[error("plot `{0}`: expected METRIC:AXIS (line) or METRIC:AXIS:AXIS (heat map)")]
    Syntax(String),
    #[error("plot: no column `{name}` (columns: {})", columns.join(", "))]
    NoColumn { name: String, columns: Vec<String> },
    #[error("plot: `{name}` is not an axis of the sweep (axes: {axes:?})")]
    NotAnAxis { name: String, axes: Vec<String> },
}

/// A plot request: `METRIC:AXIS` or `METRIC:AXIS:AXIS`.
#[derive(Clone, Debug, PartialEq)]
pub struct PlotSpec {
    pub metric: String,
    pub x: String,
    pub y: Option<String>,
}

impl PlotSpec {
    pub fn parse(s: &str) -> Result<PlotSpec, PlotError> {
        let parts: Vec<&str> = s.split(':').map(str::trim).collect();
        match parts[..] {
            [m, x] if !m.is_empty() && !x.is_empty() => Ok(PlotSpec {
                metric: m.into(),
                x: x.into(),
                y: None,
            }),
            [m, x, y] if !m.is_empty() && !x.is_empty() && !y.is_empty() => Ok(PlotSpec {
                metric: m.into(),
                x: x.into(),
                y: Some(y.into()),
            }),
            _ => Err(PlotError::Syntax(s.to_string())),
        }
    }

    /// File name of the plot with extension `ext` (`plot_loss_vs_E.svg`,
    /// `plot_loss_over_E_nu.png`).
    pub fn file_name(&self, ext: &str) -> String {
        let clean = |s: &str| -> String {
            s.chars()
                .map(|c| if c.is_alphanumeric() { c } else { '_' })
                .collect()
        };
        match &self.y {
            None => format!("plot_{}_vs_{}.{ext}", clean(&self.metric), clean(&self.x)),
            Some(y) => format!(
                "plot_{}_over_{}_{}.{ext}",
                clean(&self.metric),
                clean(&self.x),
                clean(y)
            ),
        }
    }
}

/// A metric's finite value (booleans as 0/1), `None` for anything else.
pub fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    }
    .filter(|x| x.is_finite())
}

/// A line plot's data: the series (label = the other axes' values, empty with one series),
/// each sorted by x, and whether the x axis is logarithmic (a `log` axis whose values are all
/// positive).
#[derive(Clone, Debug, PartialEq)]
pub struct LineData {
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    pub log_x: bool,
    /// Scene key of the x axis (where the plot looks up truth and bounds).
    pub x_key: String,
}

/// A heat map's data: the distinct x and y values (numeric order where numeric) and the
/// cells `[y][x]`, each the mean of the finite metric values of its runs (other axes
/// averaged), `None` where there is none.
#[derive(Clone, Debug, PartialEq)]
pub struct HeatData {
    pub x: Vec<Value>,
    pub y: Vec<Value>,
    pub cells: Vec<Vec<Option<f64>>>,
}

/// What `spec` shows of `results`.
#[derive(Clone, Debug, PartialEq)]
pub enum PlotData {
    Line(LineData),
    Heat(HeatData),
}

/// The data of `spec` from collected `results` of `table` (refused for an unknown column or
/// a column that is not an axis).
pub fn data(results: &Results, table: &PlanTable, spec: &PlotSpec) -> Result<PlotData, PlotError> {
    let col = |n: &str| -> Result<usize, PlotError> {
        results.column(n).ok_or_else(|| PlotError::NoColumn {
            name: n.to_string(),
            columns: results.columns.clone(),
        })
    };
    let axis = |n: &str| -> Result<&super::plan::AxisInfo, PlotError> {
        table
            .axes
            .iter()
            .find(|a| a.name == n)
            .ok_or_else(|| PlotError::NotAnAxis {
                name: n.to_string(),
                axes: table.axes.iter().map(|a| a.name.clone()).collect(),
            })
    };
    let m = col(&spec.metric)?;
    let x = col(&spec.x)?;
    let xa = axis(&spec.x)?;
    match &spec.y {
        None => {
            let series = line_series(results, table, spec, m, x);
            let log_x =
                xa.scale == Scale::Log && series.iter().flat_map(|s| s.1.iter()).all(|p| p.0 > 0.0);
            Ok(PlotData::Line(LineData {
                series,
                log_x,
                x_key: xa.key.clone(),
            }))
        }
        Some(y) => {
            let yc = col(y)?;
            axis(y)?;
            let (xv, yv) = (distinct(results, x), distinct(results, yc));
            let cells = heat_cells(results, (m, x, yc), &xv, &yv);
            Ok(PlotData::Heat(HeatData {
                x: xv,
                y: yv,
                cells,
            }))
        }
    }
}

/// One series per combination of the other axes' values, each sorted by x; rows whose x or
/// metric is not a finite number are left out.
fn line_series(
    r: &Results,
    table: &PlanTable,
    spec: &PlotSpec,
    m: usize,
    x: usize,
) -> Vec<(String, Vec<(f64, f64)>)> {
    let others: Vec<usize> = table
        .axes
        .iter()
        .filter(|a| a.name != spec.x)
        .filter_map(|a| r.column(&a.name))
        .collect();
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for row in &r.rows {
        let (Some(xv), Some(yv)) = (num(&row[x]), num(&row[m])) else {
            continue;
        };
        let label = others
            .iter()
            .map(|&c| format!("{}={}", r.columns[c], json_text(&row[c])))
            .collect::<Vec<_>>()
            .join(", ");
        match series.iter_mut().find(|(l, _)| *l == label) {
            Some((_, pts)) => pts.push((xv, yv)),
            None => series.push((label, vec![(xv, yv)])),
        }
    }
    for (_, pts) in &mut series {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    series
}

/// Distinct values of column `c`, in numeric order where numeric.
fn distinct(r: &Results, c: usize) -> Vec<Value> {
    let mut v: Vec<Value> = Vec::new();
    for row in &r.rows {
        if !v.contains(&row[c]) {
            v.push(row[c].clone());
        }
    }
    v.sort_by(|a, b| match (num(a), num(b)) {
        (Some(p), Some(q)) => p.total_cmp(&q),
        _ => json_text(a).cmp(&json_text(b)),
    });
    v
}

fn heat_cells(
    r: &Results,
    (m, x, y): (usize, usize, usize),
    xv: &[Value],
    yv: &[Value],
) -> Vec<Vec<Option<f64>>> {
    let mut sum = vec![vec![(0.0, 0usize); xv.len()]; yv.len()];
    for row in &r.rows {
        let (Some(i), Some(j)) = (
            xv.iter().position(|v| *v == row[x]),
            yv.iter().position(|v| *v == row[y]),
        ) else {
            continue;
        };
        if let Some(val) = num(&row[m]) {
            sum[j][i].0 += val;
            sum[j][i].1 += 1;
        }
    }
    sum.iter()
        .map(|rw| {
            rw.iter()
                .map(|(s, n)| (*n > 0).then(|| s / *n as f64))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plot_specs_parse_and_name_their_files() {
        let p = PlotSpec::parse("loss:E").unwrap();
        assert_eq!(p.file_name("svg"), "plot_loss_vs_E.svg");
        let q = PlotSpec::parse("loss:E:nu").unwrap();
        assert_eq!(q.file_name("png"), "plot_loss_over_E_nu.png");
        assert!(PlotSpec::parse("loss").is_err());
        assert!(PlotSpec::parse("loss::nu").is_err());
    }

    /// A 3 × 2 sweep over E (log) and ν with one missing run and one non-finite metric.
    fn sample() -> (Results, PlanTable) {
        let table: PlanTable = serde_json::from_value(serde_json::json!({
            "format": 1, "sweep": "s.toml", "scene": "scene.toml", "command": "simulate",
            "args": [], "threads_per_run": 1, "diffphd_version": "0", "git_commit": null,
            "axes": [
                {"name": "E", "key": "body.0.material.youngs_modulus", "scale": "log"},
                {"name": "nu", "key": "body.0.material.poisson_ratio", "scale": "linear"}
            ],
            "runs": []
        }))
        .expect("table");
        let mut rows = Vec::new();
        for (i, e) in [1e4, 1e5, 1e6].iter().enumerate() {
            for (j, nu) in [0.3, 0.45].iter().enumerate() {
                if i == 2 && j == 1 {
                    continue;
                }
                let loss = if i == 1 && j == 1 {
                    Value::Null
                } else {
                    serde_json::json!(e * (1.0 + nu))
                };
                rows.push(vec![serde_json::json!(e), serde_json::json!(nu), loss]);
            }
        }
        let columns = vec!["E".into(), "nu".into(), "loss".into()];
        (Results { columns, rows }, table)
    }

    #[test]
    fn line_data_has_one_series_per_other_axis_value_with_finite_points_only() {
        let (r, t) = sample();
        let PlotData::Line(d) = data(&r, &t, &PlotSpec::parse("loss:E").unwrap()).unwrap() else {
            panic!("a line plot")
        };
        assert!(d.log_x, "log x axis for a log axis");
        assert_eq!(d.x_key, "body.0.material.youngs_modulus");
        let labels: Vec<&str> = d.series.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(labels, ["nu=0.3", "nu=0.45"]);
        assert_eq!(
            d.series[0].1,
            vec![(1e4, 1.3e4), (1e5, 1.3e5), (1e6, 1.3e6)]
        );
        assert_eq!(
            d.series[1].1,
            vec![(1e4, 1.45e4)],
            "null and missing runs left out"
        );
        let err = data(&r, &t, &PlotSpec::parse("loss:size").unwrap()).unwrap_err();
        assert!(err.to_string().contains("no column `size`"), "{err}");
        let err = data(&r, &t, &PlotSpec::parse("E:loss").unwrap()).unwrap_err();
        assert!(err.to_string().contains("not an axis"), "{err}");
    }

    #[test]
    fn heat_cells_average_their_runs_and_mark_missing_ones() {
        let (r, t) = sample();
        let PlotData::Heat(h) = data(&r, &t, &PlotSpec::parse("loss:E:nu").unwrap()).unwrap()
        else {
            panic!("a heat map")
        };
        assert_eq!(h.x.len(), 3);
        assert_eq!(h.y.len(), 2);
        assert_eq!(h.cells[0], vec![Some(1.3e4), Some(1.3e5), Some(1.3e6)]);
        assert_eq!(
            h.cells[1],
            vec![Some(1.45e4), None, None],
            "a null metric, a missing run"
        );
    }
}
