//! The series of an `optimize.json`: loss, gradient norm and evaluations per L-BFGS
//! iteration, and each parameter's trajectory with its bounds and an optional true value.

use super::draw::{Drawable, Line, Panel, Stroke, COLORS, GREY};
use anyhow::{bail, Context};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::Value;

/// At most this many parameter panels (a field parameter can have hundreds of entries).
pub const MAX_PARAMETERS: usize = 12;
const WIDTH: u32 = 1000;
const TOP_H: u32 = 300;
const PARAM_H: u32 = 230;

/// One parameter's trajectory and reference lines.
#[derive(Clone, Debug, PartialEq)]
pub struct Parameter {
    pub name: String,
    pub log: bool,
    pub values: Vec<f64>,
    pub lower: Option<f64>,
    pub upper: Option<f64>,
    pub truth: Option<f64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub iterations: Vec<f64>,
    pub loss: Vec<f64>,
    pub gradient_norm: Vec<f64>,
    /// (iteration that requested it, loss) of every evaluation.
    pub evaluations: Vec<(f64, f64)>,
    pub parameters: Vec<Parameter>,
    /// Number of parameters in the log (panels are drawn for the first `MAX_PARAMETERS`).
    pub total_parameters: usize,
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// `NAME=VALUE` of `--truth`, NAME a parameter's name or index.
fn truth_of(spec: &str, names: &[String]) -> anyhow::Result<(usize, f64)> {
    let (name, value) = spec
        .rsplit_once('=')
        .with_context(|| format!("--truth {spec:?}: expected NAME=VALUE"))?;
    let value: f64 = value
        .trim()
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .with_context(|| format!("--truth {spec:?}: {:?} is not a number", value.trim()))?;
    let name = name.trim();
    let index = names
        .iter()
        .position(|n| n == name)
        .or_else(|| name.parse::<usize>().ok().filter(|i| *i < names.len()));
    match index {
        Some(i) => Ok((i, value)),
        None => bail!(
            "--truth {spec:?}: no parameter {name:?} in the log (names: {}; or an index 0..{})",
            names.join(", "),
            names.len()
        ),
    }
}

impl Series {
    pub fn read(log: &Value, truth: &[String]) -> anyhow::Result<Series> {
        let iters = log["iterations"]
            .as_array()
            .context("`iterations` is not an array")?;
        let params = log["parameters"].as_array().cloned().unwrap_or_default();
        let names: Vec<String> = params
            .iter()
            .enumerate()
            .map(|(j, p)| {
                p["name"]
                    .as_str()
                    .map_or_else(|| format!("{j}"), str::to_string)
            })
            .collect();
        let mut truths = vec![None; names.len()];
        for spec in truth {
            let (i, v) = truth_of(spec, &names)?;
            truths[i] = Some(v);
        }
        let bound = |p: &Value, key: &str| p[key].as_f64().filter(|v| v.is_finite());
        let parameters = params
            .iter()
            .zip(&names)
            .zip(truths)
            .enumerate()
            .take(MAX_PARAMETERS)
            .map(|(j, ((p, name), truth))| Parameter {
                name: name.clone(),
                log: p["log"].as_bool().unwrap_or(false),
                values: iters.iter().map(|i| num(&i["parameters"][j])).collect(),
                lower: bound(p, "lower"),
                upper: bound(p, "upper"),
                truth,
            })
            .collect();
        Ok(Series {
            iterations: iters.iter().map(|i| num(&i["iteration"])).collect(),
            loss: iters.iter().map(|i| num(&i["loss"])).collect(),
            gradient_norm: iters.iter().map(|i| num(&i["gradient_norm"])).collect(),
            evaluations: log["evaluations"]
                .as_array()
                .map(|e| {
                    e.iter()
                        .map(|e| (num(&e["iteration"]), num(&e["loss"])))
                        .collect()
                })
                .unwrap_or_default(),
            parameters,
            total_parameters: names.len(),
        })
    }

    fn loss_panel(&self) -> Panel {
        let mut title = "Loss".to_string();
        if self.total_parameters > self.parameters.len() {
            title += &format!(
                " (parameter panels: first {} of {})",
                self.parameters.len(),
                self.total_parameters
            );
        }
        Panel {
            title,
            x_label: "L-BFGS iteration".into(),
            y_label: "loss (log scale)".into(),
            log_y: true,
            log_x: false,
            x_integer: true,
            lines: vec![
                Line {
                    label: "evaluations".into(),
                    color: GREY,
                    stroke: Stroke::Dots,
                    points: self.evaluations.clone(),
                },
                Line {
                    label: "loss".into(),
                    color: COLORS[0],
                    stroke: Stroke::Solid,
                    points: self.at_iterations(&self.loss),
                },
            ],
        }
    }

    fn gradient_panel(&self) -> Panel {
        Panel {
            title: "Gradient norm".into(),
            x_label: "L-BFGS iteration".into(),
            y_label: "‖dL/du‖ (log scale)".into(),
            log_y: true,
            log_x: false,
            x_integer: true,
            lines: vec![Line {
                label: String::new(),
                color: COLORS[1],
                stroke: Stroke::Solid,
                points: self.at_iterations(&self.gradient_norm),
            }],
        }
    }

    /// A parameter's absolute values, its bounds (dashed) and true value (dotted).
    pub fn parameter_panel(&self, j: usize) -> Panel {
        let p = &self.parameters[j];
        let (x0, x1) = (
            self.iterations.first().copied().unwrap_or(0.0),
            self.iterations.last().copied().unwrap_or(0.0),
        );
        let level = |label: &str, color, stroke, v: f64| Line {
            label: label.into(),
            color,
            stroke,
            points: vec![(x0, v), (x1, v)],
        };
        let mut lines = vec![Line {
            label: "value".into(),
            color: COLORS[(j + 2) % COLORS.len()],
            stroke: Stroke::Solid,
            points: self.at_iterations(&p.values),
        }];
        for (i, b) in [p.lower, p.upper].into_iter().enumerate() {
            if let Some(b) = b {
                lines.push(level(
                    if i == 0 { "bounds" } else { "" },
                    GREY,
                    Stroke::Dashed,
                    b,
                ));
            }
        }
        if let Some(t) = p.truth {
            lines.push(level("truth", COLORS[1], Stroke::Dotted, t));
        }
        Panel {
            title: p.name.clone(),
            x_label: "L-BFGS iteration".into(),
            y_label: if p.log { "value (log scale)" } else { "value" }.into(),
            log_y: p.log,
            log_x: false,
            x_integer: true,
            lines,
        }
    }

    fn at_iterations(&self, v: &[f64]) -> Vec<(f64, f64)> {
        self.iterations
            .iter()
            .copied()
            .zip(v.iter().copied())
            .collect()
    }

    fn rows(&self) -> u32 {
        self.parameters.len().div_ceil(2) as u32
    }
}

impl Drawable for Series {
    fn size(&self) -> (u32, u32) {
        (WIDTH, TOP_H + PARAM_H * self.rows())
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> anyhow::Result<()> {
        let (top, rest) = area.split_vertically(TOP_H);
        let (left, right) = top.split_horizontally(WIDTH / 2);
        self.loss_panel().draw(&left)?;
        self.gradient_panel().draw(&right)?;
        if self.parameters.is_empty() {
            return Ok(());
        }
        let cells = rest.split_evenly((self.rows() as usize, 2));
        for (j, cell) in cells.iter().enumerate().take(self.parameters.len()) {
            self.parameter_panel(j).draw(cell)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log() -> Value {
        serde_json::json!({
            "parameters": [
                {"name": "log youngs_modulus[0]", "log": true, "lower": 1e4, "upper": 1e7},
                {"name": "poisson_ratio[0]", "log": false, "lower": 0.2, "upper": 0.45}
            ],
            "iterations": [
                {"iteration": 0, "loss": 1.0, "gradient_norm": 2.0, "parameters": [3e5, 0.3]},
                {"iteration": 1, "loss": 1e-3, "gradient_norm": 1e-2, "parameters": [1.2e5, 0.38]},
                {"iteration": 2, "loss": 1e-9, "gradient_norm": 1e-6, "parameters": [1e5, 0.4]}
            ],
            "evaluations": [{"iteration": 0, "loss": 1.0}, {"iteration": 1, "loss": 0.5}]
        })
    }

    #[test]
    fn series_carry_absolute_values_bounds_and_truth() {
        let s = Series::read(
            &log(),
            &["1=0.4".into(), "log youngs_modulus[0]=1e5".into()],
        )
        .unwrap();
        assert_eq!(s.loss, vec![1.0, 1e-3, 1e-9]);
        assert_eq!(s.evaluations, vec![(0.0, 1.0), (1.0, 0.5)]);
        let e = &s.parameters[0];
        assert_eq!(e.values, vec![3e5, 1.2e5, 1e5]);
        assert_eq!(
            (e.lower, e.upper, e.truth, e.log),
            (Some(1e4), Some(1e7), Some(1e5), true)
        );
        let panel = s.parameter_panel(1);
        assert!(!panel.log_y);
        let truth = panel.lines.iter().find(|l| l.label == "truth").unwrap();
        assert_eq!(truth.points, vec![(0.0, 0.4), (2.0, 0.4)]);
        assert_eq!(
            panel
                .lines
                .iter()
                .filter(|l| l.stroke == Stroke::Dashed)
                .count(),
            2
        );
    }

    #[test]
    fn a_truth_naming_no_parameter_is_refused_with_the_names() {
        let e = Series::read(&log(), &["nu=0.4".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"nu\"") && e.contains("poisson_ratio[0]"),
            "{e}"
        );
        let e = Series::read(&log(), &["0=abc".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a number"), "{e}");
    }

    #[test]
    fn the_svg_shows_every_panel_and_its_labels() {
        let s = Series::read(&log(), &["1=0.4".into()]).unwrap();
        let svg = super::super::draw::render(super::super::Format::Svg, &s).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        for text in [
            "Loss",
            "Gradient norm",
            "poisson_ratio[0]",
            "truth",
            "bounds",
            "L-BFGS iteration",
        ] {
            assert!(svg.contains(text), "missing {text:?}");
        }
    }

    #[test]
    fn the_png_has_the_chart_size() {
        let s = Series::read(&log(), &[]).unwrap();
        let png = super::super::draw::render(super::super::Format::Png, &s).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let w = u32::from_be_bytes(png[16..20].try_into().unwrap());
        let h = u32::from_be_bytes(png[20..24].try_into().unwrap());
        assert_eq!((w, h), s.size());
        assert_eq!(h, TOP_H + PARAM_H);
    }
}
