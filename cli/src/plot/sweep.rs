//! Sweep plots (`diffphd sweep collect`, `[collect] plots` / `--plot`), drawn with plotters
//! like the log charts: a metric against one axis on the axis' absolute values (log scale for
//! a log axis), one line per combination of the other axes, with the truth (dotted) and the
//! bounds (dashed) of the swept key where the base scene knows them; or a heat map over two
//! axes. The data come from the library (`diffphd::sweep::plot`).

use super::draw::{self, err, fmt_num, Drawable, Line, Panel, Stroke, COLORS, GREY};
use super::Format;
use diffphd::sweep::collect::Results;
use diffphd::sweep::plan::{json_text, PlanTable};
use diffphd::sweep::plot::{self as data, HeatData, LineData, PlotData, PlotSpec};
use plotters::coord::Shift;
use plotters::prelude::*;

/// What the base scene knows of a swept key: the true value (the value the loss's reference
/// trajectory sets for it, `[loss] reference = { set = ["KEY=VALUE", …] }`) and the bounds
/// (`lower`/`upper` of the `[[parameter]]` of that kind and body).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Marks {
    pub truth: Option<f64>,
    pub lower: Option<f64>,
    pub upper: Option<f64>,
}

impl Marks {
    /// The marks of `key` in the scene `scene` (raw TOML); none where it says nothing.
    /// A material key `body.B.material.KIND` matches a parameter `kind = "KIND"` of body B
    /// (`body` absent = 0) without a region; a top-level key `TABLE.KIND` a parameter of that
    /// kind without a body.
    pub fn of(scene: &toml::Value, key: &str) -> Marks {
        let truth = scene
            .get("loss")
            .and_then(|l| l.get("reference"))
            .and_then(|r| r.get("set"))
            .and_then(|s| s.as_array())
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str()?.split_once('='))
            .find(|(k, _)| k.trim() == key)
            .and_then(|(_, v)| v.trim().parse::<f64>().ok());
        let parts: Vec<&str> = key.split('.').collect();
        let (body, kind) = match parts[..] {
            ["body", b, "material", kind] => (b.parse::<i64>().ok(), kind),
            [_, kind] => (None, kind),
            _ => {
                return Marks {
                    truth,
                    ..Marks::default()
                }
            }
        };
        let param = scene
            .get("parameter")
            .and_then(|p| p.as_array())
            .into_iter()
            .flatten()
            .find(|p| {
                let pb = p.get("body").and_then(|b| b.as_integer());
                p.get("kind").and_then(|k| k.as_str()) == Some(kind)
                    && p.get("region").is_none()
                    && match body {
                        Some(b) => pb.unwrap_or(0) == b,
                        None => pb.is_none(),
                    }
            });
        let bound = |name: &str| {
            param
                .and_then(|p| p.get(name))
                .and_then(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)))
        };
        Marks {
            truth,
            lower: bound("lower"),
            upper: bound("upper"),
        }
    }
}

/// The line plot of a metric against an axis.
struct LinePlot {
    title: String,
    metric: String,
    x: String,
    data: LineData,
    marks: Marks,
}

impl LinePlot {
    fn panel(&self) -> Panel {
        let mut lines: Vec<Line> = self
            .data
            .series
            .iter()
            .enumerate()
            .map(|(k, (label, pts))| Line {
                label: if label.is_empty() {
                    self.metric.clone()
                } else {
                    label.clone()
                },
                color: COLORS[k % COLORS.len()],
                stroke: Stroke::Solid,
                points: pts.clone(),
            })
            .collect();
        let ys = lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
        let ymin = ys.clone().fold(f64::INFINITY, f64::min);
        let ymax = ys.fold(f64::NEG_INFINITY, f64::max);
        let log_y = ymin > 0.0 && ymax / ymin >= 100.0;
        if ymin <= ymax {
            let vertical = |x: f64, label: String, stroke: Stroke| Line {
                label,
                color: GREY,
                stroke,
                points: vec![(x, ymin), (x, ymax)],
            };
            if let Some(t) = self.marks.truth {
                lines.push(vertical(t, format!("truth {}", fmt_num(t)), Stroke::Dotted));
            }
            let bounds = [self.marks.lower, self.marks.upper];
            for (i, b) in bounds.iter().enumerate() {
                if let Some(b) = b {
                    // one legend entry for both bounds
                    let label = if i == 0 || self.marks.lower.is_none() {
                        "bounds".to_string()
                    } else {
                        String::new()
                    };
                    lines.push(vertical(*b, label, Stroke::Dashed));
                }
            }
        }
        Panel {
            title: self.title.clone(),
            x_label: self.x.clone(),
            y_label: self.metric.clone(),
            log_y,
            log_x: self.data.log_x,
            x_integer: false,
            lines,
        }
    }
}

impl Drawable for LinePlot {
    fn size(&self) -> (u32, u32) {
        (820, 500)
    }
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> anyhow::Result<()> {
        self.panel().draw(area)
    }
}

/// The heat map of a metric over two axes: one cell per pair of values, labelled with its
/// value (`n/a` where no run has a finite one), and a colour bar (log colours when the values
/// span ≥ 100×).
struct HeatPlot {
    title: String,
    x: String,
    y: String,
    data: HeatData,
}

/// Cell size and the width of the colour bar's area (px).
const CELL: (u32, u32) = (90, 60);
const BAR_W: u32 = 150;

/// Viridis colour at t in [0, 1] (five stops, linear between them).
pub fn viridis(t: f64) -> RGBColor {
    const STOPS: [[f64; 3]; 5] = [
        [68.0, 1.0, 84.0],
        [59.0, 82.0, 139.0],
        [33.0, 145.0, 140.0],
        [94.0, 201.0, 98.0],
        [253.0, 231.0, 37.0],
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    } * 4.0;
    let i = (t.floor() as usize).min(3);
    let f = t - i as f64;
    let c = |k: usize| (STOPS[i][k] + f * (STOPS[i + 1][k] - STOPS[i][k])).round() as u8;
    RGBColor(c(0), c(1), c(2))
}

impl HeatPlot {
    /// The colour scale: (lo, hi, log) of the finite cells.
    fn scale(&self) -> Option<(f64, f64, bool)> {
        let vals: Vec<f64> = self
            .data
            .cells
            .iter()
            .flatten()
            .flatten()
            .copied()
            .collect();
        let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo <= hi).then_some((lo, hi, lo > 0.0 && hi / lo >= 100.0))
    }

    fn t(&self, v: f64) -> f64 {
        match self.scale() {
            Some((lo, hi, _)) if hi == lo => 0.5,
            Some((lo, hi, true)) => (v.ln() - lo.ln()) / (hi.ln() - lo.ln()),
            Some((lo, hi, false)) => (v - lo) / (hi - lo),
            None => 0.0,
        }
    }
}

impl Drawable for HeatPlot {
    fn size(&self) -> (u32, u32) {
        let nx = self.data.x.len().max(1) as u32;
        let ny = self.data.y.len().max(1) as u32;
        (110 + CELL.0 * nx + BAR_W + 20, 60 + CELL.1 * ny + 80)
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> anyhow::Result<()> {
        let (w, _) = self.size();
        let (grid, bar) = area.split_horizontally(w - BAR_W);
        let (nx, ny) = (self.data.x.len(), self.data.y.len());
        let label =
            |v: &serde_json::Value| data::num(v).map(fmt_num).unwrap_or_else(|| json_text(v));
        let xl: Vec<String> = self.data.x.iter().map(label).collect();
        let yl: Vec<String> = self.data.y.iter().map(label).collect();
        let mut chart = ChartBuilder::on(&grid)
            .caption(&self.title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(0.0..nx.max(1) as f64, 0.0..ny.max(1) as f64)
            .map_err(err)?;
        let (xf, yf) = (|v: &f64| cell_label(&xl, *v), |v: &f64| cell_label(&yl, *v));
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(2 * nx + 1)
            .y_labels(2 * ny + 1)
            .x_label_formatter(&xf)
            .y_label_formatter(&yf)
            .x_desc(self.x.as_str())
            .y_desc(self.y.as_str())
            .label_style(("sans-serif", 12))
            .axis_desc_style(("sans-serif", 13))
            .draw()
            .map_err(err)?;
        for (j, row) in self.data.cells.iter().enumerate() {
            for (i, c) in row.iter().enumerate() {
                let (x, y) = (i as f64, j as f64);
                let (fill, text, dark) = match c {
                    Some(v) => (viridis(self.t(*v)), fmt_num(*v), self.t(*v) > 0.6),
                    None => (RGBColor(0xcc, 0xcc, 0xcc), "n/a".to_string(), true),
                };
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x, y), (x + 1.0, y + 1.0)],
                        fill.filled(),
                    )))
                    .map_err(err)?;
                let style = ("sans-serif", 12)
                    .into_font()
                    .color(if dark { &BLACK } else { &WHITE })
                    .pos(plotters::style::text_anchor::Pos::new(
                        plotters::style::text_anchor::HPos::Center,
                        plotters::style::text_anchor::VPos::Center,
                    ));
                chart
                    .draw_series(std::iter::once(Text::new(text, (x + 0.5, y + 0.5), style)))
                    .map_err(err)?;
            }
        }
        let Some((lo, hi, log)) = self.scale() else {
            return Ok(());
        };
        let mut cb = ChartBuilder::on(&bar)
            .margin_top(40)
            .margin_bottom(80)
            .margin_right(70)
            .y_label_area_size(0)
            .right_y_label_area_size(60)
            .build_cartesian_2d(0.0..1.0, 0.0..1.0)
            .map_err(err)?;
        let bar_fmt = move |t: &f64| {
            let v = if log {
                (lo.ln() + t * (hi.ln() - lo.ln())).exp()
            } else {
                lo + t * (hi - lo)
            };
            fmt_num(v)
        };
        cb.configure_mesh()
            .disable_mesh()
            .disable_x_axis()
            .y_labels(3)
            .y_label_formatter(&bar_fmt)
            .label_style(("sans-serif", 11))
            .draw()
            .map_err(err)?;
        const STEPS: usize = 40;
        cb.draw_series((0..STEPS).map(|k| {
            let (a, b) = (k as f64 / STEPS as f64, (k + 1) as f64 / STEPS as f64);
            Rectangle::new([(0.0, a), (1.0, b)], viridis(a).filled())
        }))
        .map_err(err)?;
        if log {
            bar.draw(&Text::new("log colour", (10, 20), ("sans-serif", 12)))
                .map_err(err)?;
        }
        Ok(())
    }
}

/// The label of the cell whose centre is at `v` (tick positions 0, 0.5, 1, …: only the
/// centres i + 0.5 are labelled).
fn cell_label(labels: &[String], v: f64) -> String {
    let i = v - 0.5;
    if (i - i.round()).abs() > 1e-6 || i < -1e-6 {
        return String::new();
    }
    labels.get(i.round() as usize).cloned().unwrap_or_default()
}

/// The image of `spec` over collected `results` of `table` in `format`; `scene` is the base
/// scene (raw TOML) where it could be read, for the truth and bounds of a line plot's axis.
pub fn render(
    results: &Results,
    table: &PlanTable,
    spec: &PlotSpec,
    scene: Option<&toml::Value>,
    format: Format,
) -> anyhow::Result<Vec<u8>> {
    match data::data(results, table, spec)? {
        PlotData::Line(d) => {
            let marks = scene.map(|s| Marks::of(s, &d.x_key)).unwrap_or_default();
            let plot = LinePlot {
                title: format!("{} vs {}", spec.metric, spec.x),
                metric: spec.metric.clone(),
                x: spec.x.clone(),
                data: d,
                marks,
            };
            draw::render(format, &plot)
        }
        PlotData::Heat(d) => {
            let y = spec.y.clone().unwrap_or_default();
            let plot = HeatPlot {
                title: format!("{} over {} × {}", spec.metric, spec.x, y),
                x: spec.x.clone(),
                y,
                data: d,
            };
            draw::render(format, &plot)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn scene() -> toml::Value {
        toml::from_str(
            r#"
loss = { reference = { set = ["body.0.material.youngs_modulus=1e5", "body.0.material.poisson_ratio=0.4"] } }
parameter = [
  { kind = "youngs_modulus", log = true, lower = 1.0e4, upper = 1.0e7 },
  { kind = "poisson_ratio", body = 1, lower = 0.2, upper = 0.45 },
]
"#,
        )
        .unwrap()
    }

    #[test]
    fn marks_come_from_the_loss_reference_and_the_parameter_bounds() {
        let s = scene();
        let e = Marks::of(&s, "body.0.material.youngs_modulus");
        assert_eq!(
            e,
            Marks {
                truth: Some(1e5),
                lower: Some(1e4),
                upper: Some(1e7)
            }
        );
        // ν's parameter is body 1's: truth known, no bounds for body 0
        let nu = Marks::of(&s, "body.0.material.poisson_ratio");
        assert_eq!((nu.truth, nu.lower, nu.upper), (Some(0.4), None, None));
        let nu1 = Marks::of(&s, "body.1.material.poisson_ratio");
        assert_eq!(
            (nu1.truth, nu1.lower, nu1.upper),
            (None, Some(0.2), Some(0.45))
        );
        assert_eq!(Marks::of(&s, "solver.rel_tol"), Marks::default());
    }

    fn sample() -> (Results, PlanTable) {
        let table: PlanTable = serde_json::from_value(json!({
            "format": 1, "sweep": "s.toml", "scene": "scene.toml", "command": "simulate",
            "args": [], "threads_per_run": 1, "diffphd_version": "0", "git_commit": null,
            "axes": [
                {"name": "E", "key": "body.0.material.youngs_modulus", "scale": "log"},
                {"name": "nu", "key": "body.0.material.poisson_ratio", "scale": "linear"}
            ],
            "runs": []
        }))
        .unwrap();
        let mut rows = Vec::new();
        for e in [1e4, 1e5, 1e6] {
            for nu in [0.3, 0.45] {
                let loss = if e == 1e5 && nu == 0.45 {
                    Value::Null
                } else {
                    json!(e * (1.0 + nu))
                };
                rows.push(vec![json!(e), json!(nu), loss]);
            }
        }
        let columns = vec!["E".into(), "nu".into(), "loss".into()];
        (Results { columns, rows }, table)
    }

    /// The line plot: one path per ν, the truth and the bounds as two more grey lines (three
    /// vertical paths), log axes, legend entries; SVG and PNG.
    #[test]
    fn line_plot_draws_series_truth_and_bounds() {
        let (r, t) = sample();
        let spec = PlotSpec::parse("loss:E").unwrap();
        let s = scene();
        let svg = String::from_utf8(render(&r, &t, &spec, Some(&s), Format::Svg).unwrap()).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("nu=0.3") && svg.contains("nu=0.45"), "legend");
        assert!(
            svg.contains("truth 1e5") && svg.contains("bounds"),
            "marks' legend"
        );
        assert!(
            svg.contains("\n1e7\n"),
            "the x axis reaches the upper bound: {svg}"
        );
        let without = String::from_utf8(render(&r, &t, &spec, None, Format::Svg).unwrap()).unwrap();
        assert!(!without.contains("truth"), "no scene, no marks");
        let png = render(&r, &t, &spec, Some(&s), Format::Png).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    }

    /// The heat map: a filled cell per (E, ν) pair, `n/a` for the null metric, a 40-step
    /// colour bar marked as log colours (values span ≥ 100×).
    #[test]
    fn heat_map_has_a_cell_per_axis_pair_and_marks_missing_ones() {
        let (r, t) = sample();
        let spec = PlotSpec::parse("loss:E:nu").unwrap();
        let svg = String::from_utf8(render(&r, &t, &spec, None, Format::Svg).unwrap()).unwrap();
        // plotters writes each text on its own line
        assert_eq!(svg.matches("\nn/a\n").count(), 1, "{svg}");
        assert!(svg.contains("log colour"));
        // background + 6 cells + 40 colour-bar steps
        assert_eq!(svg.matches("<rect").count(), 1 + 6 + 40, "{svg}");
        assert_eq!(viridis(0.0), RGBColor(0x44, 0x01, 0x54));
        assert_eq!(viridis(1.0), RGBColor(0xfd, 0xe7, 0x25));
        let png = render(&r, &t, &spec, None, Format::Png).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    }
}
