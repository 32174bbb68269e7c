//! Hand-written SVG plots of collected sweep results: a metric against one axis (one line
//! per combination of the other axes) or a heat map over two axes. Plain SVG 1.1, readable
//! in any browser without other tools.

use super::collect::Results;
use super::plan::{json_text, PlanTable};
use super::Scale;
use serde_json::Value;
use std::fmt::Write;

const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn fmt_num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 1e4 || v.abs() < 1e-2 {
        format!("{v:.2e}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

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

    /// File name of the plot (`plot_loss_vs_E.svg`, `plot_loss_over_E_nu.svg`).
    pub fn file_name(&self) -> String {
        let clean = |s: &str| -> String {
            s.chars()
                .map(|c| if c.is_alphanumeric() { c } else { '_' })
                .collect()
        };
        match &self.y {
            None => format!("plot_{}_vs_{}.svg", clean(&self.metric), clean(&self.x)),
            Some(y) => format!(
                "plot_{}_over_{}_{}.svg",
                clean(&self.metric),
                clean(&self.x),
                clean(y)
            ),
        }
    }
}

/// Axis transform for plotting.
#[derive(Clone, Copy)]
struct Map {
    lo: f64,
    hi: f64,
    log: bool,
    p0: f64,
    p1: f64,
}

impl Map {
    fn new(vals: impl Iterator<Item = f64>, log: bool, p0: f64, p1: f64) -> Map {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in vals {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        if hi <= lo {
            let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
            if log {
                (lo, hi) = (lo / 2.0, hi * 2.0);
            } else {
                (lo, hi) = (lo - pad, hi + pad);
            }
        }
        Map {
            lo,
            hi,
            log,
            p0,
            p1,
        }
    }
    fn t(&self, v: f64) -> f64 {
        if self.log {
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }
    fn px(&self, v: f64) -> f64 {
        self.p0 + self.t(v) * (self.p1 - self.p0)
    }
    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let (a, b) = (
                self.lo.log10().ceil() as i32,
                self.hi.log10().floor() as i32,
            );
            if b - a < 2 {
                // Short spans: 1-2-5 ticks inside the range.
                let mut out = Vec::new();
                for k in (a - 1)..=(b + 1) {
                    for m in [1.0, 2.0, 5.0] {
                        let v = m * 10f64.powi(k);
                        if v >= self.lo * (1.0 - 1e-9) && v <= self.hi * (1.0 + 1e-9) {
                            out.push(v);
                        }
                    }
                }
                if out.len() >= 2 {
                    return out;
                }
            }
            if b >= a {
                let every = ((b - a) / 8 + 1).max(1);
                return (a..=b)
                    .filter(|k| (k - a) % every == 0)
                    .map(|k| 10f64.powi(k))
                    .collect();
            }
            return vec![self.lo, self.hi];
        }
        let raw = (self.hi - self.lo) / 6.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| *s >= raw)
            .unwrap_or(10.0 * mag);
        let mut out = Vec::new();
        let mut k = (self.lo / step).ceil();
        while k * step <= self.hi + 1e-9 * step {
            out.push(k * step);
            k += 1.0;
        }
        out
    }
}

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    }
    .filter(|x| x.is_finite())
}

/// Viridis-like colour at t in [0, 1].
fn color(t: f64) -> String {
    const STOPS: [[f64; 3]; 5] = [
        [68.0, 1.0, 84.0],
        [59.0, 82.0, 139.0],
        [33.0, 145.0, 140.0],
        [94.0, 201.0, 98.0],
        [253.0, 231.0, 37.0],
    ];
    let t = t.clamp(0.0, 1.0) * 4.0;
    let i = (t.floor() as usize).min(3);
    let f = t - i as f64;
    let c: Vec<u8> = (0..3)
        .map(|k| (STOPS[i][k] + f * (STOPS[i + 1][k] - STOPS[i][k])).round() as u8)
        .collect();
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

/// Render `spec` from collected `results` of `table`.
pub fn plot(results: &Results, table: &PlanTable, spec: &PlotSpec) -> Result<String, PlotError> {
    let col = |n: &str| -> Result<usize, PlotError> {
        results.column(n).ok_or_else(|| PlotError::NoColumn {
            name: n.to_string(),
            columns: results.columns.clone(),
        })
    };
    let axis_scale = |n: &str| -> Result<Scale, PlotError> {
        table
            .axes
            .iter()
            .find(|a| a.name == n)
            .map(|a| a.scale)
            .ok_or_else(|| PlotError::NotAnAxis {
                name: n.to_string(),
                axes: table.axes.iter().map(|a| a.name.clone()).collect(),
            })
    };
    let m = col(&spec.metric)?;
    let x = col(&spec.x)?;
    let xs = axis_scale(&spec.x)?;
    match &spec.y {
        None => Ok(line_plot(results, table, spec, m, x, xs)),
        Some(y) => {
            let yc = col(y)?;
            axis_scale(y)?;
            Ok(heat_map(results, spec, m, x, yc))
        }
    }
}

/// Points of a line plot: one series per combination of the other axes' values, each
/// sorted by x; rows whose x or metric is not a finite number are left out.
type Series = Vec<(String, Vec<(f64, f64)>)>;

fn line_series(r: &Results, table: &PlanTable, spec: &PlotSpec, m: usize, x: usize) -> Series {
    let others: Vec<usize> = table
        .axes
        .iter()
        .filter(|a| a.name != spec.x)
        .filter_map(|a| r.column(&a.name))
        .collect();
    let mut series: Series = Vec::new();
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

/// Canvas of a line plot: size and the margins around the plotting area.
struct Canvas {
    w: f64,
    h: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
}

impl Canvas {
    fn mid_x(&self) -> f64 {
        (self.left + self.w - self.right) / 2.0
    }
    fn mid_y(&self) -> f64 {
        (self.top + self.h - self.bottom) / 2.0
    }
}

fn line_plot(
    r: &Results,
    table: &PlanTable,
    spec: &PlotSpec,
    m: usize,
    x: usize,
    xscale: Scale,
) -> String {
    let series = line_series(r, table, spec, m, x);
    let all = || series.iter().flat_map(|(_, p)| p.iter());
    let logx = xscale == Scale::Log && all().all(|p| p.0 > 0.0);
    let ys: Vec<f64> = all().map(|p| p.1).collect();
    let ymin = ys.iter().cloned().fold(f64::INFINITY, f64::min);
    let ymax = ys.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let logy = ymin > 0.0 && ymax / ymin >= 100.0;
    let c = Canvas {
        w: 820.0,
        h: 500.0,
        left: 90.0,
        right: 240.0,
        top: 50.0,
        bottom: 60.0,
    };
    let mx = Map::new(all().map(|p| p.0), logx, c.left, c.w - c.right);
    let my = Map::new(ys.iter().cloned(), logy, c.h - c.bottom, c.top);
    let mut s = String::new();
    line_axes(&mut s, &c, spec, (&mx, logx), (&my, logy));
    for (k, (label, pts)) in series.iter().enumerate() {
        let label = if label.is_empty() {
            &spec.metric
        } else {
            label
        };
        line_one_series(&mut s, &c, k, label, pts, &mx, &my);
    }
    if series.is_empty() {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" font-size="14" text-anchor="middle">no finite values</text>"#,
            c.mid_x(),
            c.mid_y()
        );
    }
    s.push_str("</svg>\n");
    s
}

/// The SVG header, title, frame, grid lines with tick labels and axis labels.
fn line_axes(s: &mut String, c: &Canvas, spec: &PlotSpec, x: (&Map, bool), y: (&Map, bool)) {
    let (w, h, left, right, top, bottom) = (c.w, c.h, c.left, c.right, c.top, c.bottom);
    let ((mx, logx), (my, logy)) = (x, y);
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif">"#
    );
    let _ = writeln!(s, r##"<rect width="{w}" height="{h}" fill="#ffffff"/>"##);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="28" font-size="16" text-anchor="middle" font-weight="bold">{} vs {}{}</text>"#,
        c.mid_x(),
        esc(&spec.metric),
        esc(&spec.x),
        if logx { " (log)" } else { "" }
    );
    let _ = writeln!(
        s,
        r##"<rect x="{left}" y="{top}" width="{}" height="{}" fill="none" stroke="#333"/>"##,
        w - right - left,
        h - bottom - top
    );
    for t in mx.ticks() {
        let px = mx.px(t);
        let _ = writeln!(
            s,
            r##"<line x1="{px:.1}" y1="{}" x2="{px:.1}" y2="{}" stroke="#ddd"/><text x="{px:.1}" y="{}" font-size="12" text-anchor="middle">{}</text>"##,
            top,
            h - bottom,
            h - bottom + 18.0,
            fmt_num(t)
        );
    }
    for t in my.ticks() {
        let py = my.px(t);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{py:.1}" x2="{}" y2="{py:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" font-size="12" text-anchor="end">{}</text>"##,
            w - right,
            left - 6.0,
            py + 4.0,
            fmt_num(t)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" font-size="13" text-anchor="middle">{}</text>"#,
        c.mid_x(),
        h - 18.0,
        esc(&spec.x)
    );
    let _ = writeln!(
        s,
        r#"<text x="22" y="{y}" font-size="13" text-anchor="middle" transform="rotate(-90 22 {y})">{}{}</text>"#,
        esc(&spec.metric),
        if logy { " (log)" } else { "" },
        y = c.mid_y()
    );
}

/// Series `k`: its polyline, point markers and legend entry.
fn line_one_series(
    s: &mut String,
    c: &Canvas,
    k: usize,
    label: &str,
    pts: &[(f64, f64)],
    mx: &Map,
    my: &Map,
) {
    let col = COLORS[k % COLORS.len()];
    let path: Vec<String> = pts
        .iter()
        .map(|(a, b)| format!("{:.1},{:.1}", mx.px(*a), my.px(*b)))
        .collect();
    let _ = writeln!(
        s,
        r#"<polyline points="{}" fill="none" stroke="{col}" stroke-width="2"/>"#,
        path.join(" ")
    );
    for (a, b) in pts {
        let _ = writeln!(
            s,
            r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{col}"/>"#,
            mx.px(*a),
            my.px(*b)
        );
    }
    let ly = c.top + 10.0 + 20.0 * k as f64;
    let _ = writeln!(
        s,
        r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{col}" stroke-width="3"/><text x="{}" y="{}" font-size="12">{}</text>"#,
        c.w - c.right + 15.0,
        c.w - c.right + 40.0,
        c.w - c.right + 46.0,
        ly + 4.0,
        esc(label)
    );
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

/// Heat-map cells `[y][x]`: the mean of the finite metric values of the runs in the cell
/// (other axes, if any, are averaged); `None` where there is none.
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

/// Heat-map layout: grid origin and cell size.
struct Grid {
    left: f64,
    top: f64,
    cw: f64,
    ch: f64,
    gw: f64,
    gh: f64,
}

fn heat_map(r: &Results, spec: &PlotSpec, m: usize, x: usize, y: usize) -> String {
    let (xv, yv) = (distinct(r, x), distinct(r, y));
    let cells = heat_cells(r, (m, x, y), &xv, &yv);
    let vals: Vec<f64> = cells.iter().flatten().flatten().cloned().collect();
    let lo = vals.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let logc = lo > 0.0 && hi / lo >= 100.0;
    let cmap = Map::new(vals.iter().cloned(), logc, 0.0, 1.0);
    let (cw, ch) = (90.0, 60.0);
    let g = Grid {
        left: 110.0,
        top: 60.0,
        cw,
        ch,
        gw: cw * xv.len() as f64,
        gh: ch * yv.len() as f64,
    };
    let (w, h) = (g.left + g.gw + 170.0, g.top + g.gh + 80.0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif">"#
    );
    let _ = writeln!(s, r##"<rect width="{w}" height="{h}" fill="#ffffff"/>"##);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="30" font-size="16" text-anchor="middle" font-weight="bold">{} over {} × {}</text>"#,
        g.left + g.gw / 2.0,
        esc(&spec.metric),
        esc(&spec.x),
        esc(spec.y.as_deref().unwrap_or(""))
    );
    heat_grid(&mut s, &g, &cells, &cmap, &yv);
    heat_x_labels(&mut s, &g, spec, &xv);
    heat_colour_bar(&mut s, &g, &cmap, !vals.is_empty());
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" font-size="12">{}{}</text>"#,
        g.left + g.gw + 40.0,
        g.top - 10.0,
        esc(&spec.metric),
        if logc { " (log colour)" } else { "" }
    );
    s.push_str("</svg>\n");
    s
}

/// The coloured cells with their values, and the y labels (first y value at the bottom).
fn heat_grid(s: &mut String, g: &Grid, cells: &[Vec<Option<f64>>], cmap: &Map, yv: &[Value]) {
    let (cw, ch) = (g.cw, g.ch);
    for (j, row) in cells.iter().enumerate() {
        let py = g.top + g.gh - ch * (j + 1) as f64;
        for (i, c) in row.iter().enumerate() {
            let px = g.left + cw * i as f64;
            let (fill, label, tc) = match c {
                Some(v) => {
                    let t = cmap.t(*v);
                    (
                        color(t),
                        fmt_num(*v),
                        if t > 0.6 { "#000000" } else { "#ffffff" },
                    )
                }
                None => ("#cccccc".to_string(), "n/a".to_string(), "#000000"),
            };
            let _ = writeln!(
                s,
                r##"<rect x="{px}" y="{py}" width="{cw}" height="{ch}" fill="{fill}" stroke="#ffffff"/><text x="{}" y="{}" font-size="11" text-anchor="middle" fill="{tc}">{label}</text>"##,
                px + cw / 2.0,
                py + ch / 2.0 + 4.0
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" font-size="12" text-anchor="end">{}</text>"#,
            g.left - 6.0,
            py + ch / 2.0 + 4.0,
            esc(&json_text(&yv[j]))
        );
    }
}

/// The x value labels and both axis names.
fn heat_x_labels(s: &mut String, g: &Grid, spec: &PlotSpec, xv: &[Value]) {
    for (i, v) in xv.iter().enumerate() {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" font-size="12" text-anchor="middle">{}</text>"#,
            g.left + g.cw * (i as f64 + 0.5),
            g.top + g.gh + 18.0,
            esc(&num(v).map(fmt_num).unwrap_or_else(|| json_text(v)))
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" font-size="13" text-anchor="middle">{}</text>"#,
        g.left + g.gw / 2.0,
        g.top + g.gh + 42.0,
        esc(&spec.x)
    );
    let yl = g.top + g.gh / 2.0;
    let _ = writeln!(
        s,
        r#"<text x="24" y="{yl}" font-size="13" text-anchor="middle" transform="rotate(-90 24 {yl})">{}</text>"#,
        esc(spec.y.as_deref().unwrap_or(""))
    );
}

/// The colour bar right of the grid, labelled with the value range when there is one.
fn heat_colour_bar(s: &mut String, g: &Grid, cmap: &Map, labelled: bool) {
    let (bx, top, gh) = (g.left + g.gw + 40.0, g.top, g.gh);
    let steps = 40;
    for k in 0..steps {
        let t = k as f64 / (steps - 1) as f64;
        let by = top + gh - gh * (k + 1) as f64 / steps as f64;
        let _ = writeln!(
            s,
            r#"<rect x="{bx}" y="{by:.2}" width="20" height="{:.2}" fill="{}"/>"#,
            gh / steps as f64 + 0.5,
            color(t)
        );
    }
    if labelled {
        for (t, v) in [(0.0, cmap.lo), (1.0, cmap.hi)] {
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{:.1}" font-size="11">{}</text>"#,
                bx + 26.0,
                top + gh - gh * t + 4.0,
                fmt_num(v)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plot_specs_parse_and_name_their_files() {
        let p = PlotSpec::parse("loss:E").unwrap();
        assert_eq!(p.file_name(), "plot_loss_vs_E.svg");
        let q = PlotSpec::parse("loss:E:nu").unwrap();
        assert_eq!(q.file_name(), "plot_loss_over_E_nu.svg");
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
    fn line_plot_draws_one_series_per_other_axis_value() {
        let (r, t) = sample();
        let svg = plot(&r, &t, &PlotSpec::parse("loss:E").unwrap()).unwrap();
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 2, "ν = 0.3 and ν = 0.45");
        assert_eq!(svg.matches("<circle").count(), 4, "finite points only");
        assert!(svg.contains("nu=0.3") && svg.contains("nu=0.45"));
        assert!(svg.contains("loss vs E (log)"), "log x axis for a log axis");
        let err = plot(&r, &t, &PlotSpec::parse("loss:size").unwrap()).unwrap_err();
        assert!(err.to_string().contains("no column `size`"), "{err}");
    }

    #[test]
    fn heat_map_has_a_cell_per_axis_pair_and_marks_missing_ones() {
        let (r, t) = sample();
        let svg = plot(&r, &t, &PlotSpec::parse("loss:E:nu").unwrap()).unwrap();
        assert_eq!(
            svg.matches(r#"width="90" height="60""#).count(),
            6,
            "3 × 2 cells"
        );
        assert_eq!(
            svg.matches(">n/a</text>").count(),
            2,
            "a missing run, a null metric"
        );
        assert!(svg.contains("(log colour)"), "values span ≥ 100×");
        assert_eq!(svg.matches(r#"width="20""#).count(), 40, "colour bar");
    }

    #[test]
    fn colour_map_runs_from_dark_to_yellow() {
        assert_eq!(color(0.0), "#440154");
        assert_eq!(color(1.0), "#fde725");
        let m = Map::new([1e3, 1e6].into_iter(), true, 0.0, 100.0);
        assert!((m.px(1e4) - 100.0 / 3.0).abs() < 1e-9);
        assert_eq!(m.ticks(), vec![1e3, 1e4, 1e5, 1e6]);
        let short = Map::new([3e4, 3e5].into_iter(), true, 0.0, 100.0);
        assert_eq!(short.ticks(), vec![5e4, 1e5, 2e5]);
    }
}
