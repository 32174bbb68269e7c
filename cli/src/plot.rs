//! `diffphd plot optimize.json -o loss.svg`: a hand-written SVG of an optimization log — loss
//! (log scale) and gradient norm (log scale) per L-BFGS iteration, with every evaluation's
//! loss as a faint dot at the iteration that requested it, and the parameter trajectories
//! normalized to [0, 1] over each parameter's range (legend: start → final value).

use super::Failure;
use anyhow::Context;
use std::fmt::Write;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct PlotArgs {
    /// `optimize.json` written by `diffphd optimize`.
    pub input: PathBuf,
    /// Output SVG file.
    #[arg(short, long, default_value = "loss.svg")]
    pub output: PathBuf,
}

const W: f64 = 980.0;
const PANEL_H: f64 = 230.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 310.0;
const TOP: f64 = 40.0;
const GAP: f64 = 70.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Ticks of a linear axis: (value, label), about `n` of them at 1-2-5 steps.
pub fn linear_ticks(lo: f64, hi: f64, n: usize) -> Vec<(f64, String)> {
    let span = (hi - lo).max(1e-300);
    let raw = span / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut out = Vec::new();
    let mut k = (lo / step).ceil();
    while k * step <= hi + 1e-9 * step {
        let v = k * step;
        let v = if v.abs() < 1e-12 * step { 0.0 } else { v };
        out.push((v, fmt_num(v)));
        k += 1.0;
    }
    out
}

/// Decade ticks of a log axis over [lo, hi] (positive).
pub fn log_ticks(lo: f64, hi: f64) -> Vec<(f64, String)> {
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let every = ((b - a) / 8).max(1);
    (a..=b)
        .filter(|k| (k - a) % every == 0)
        .map(|k| (10f64.powi(k), format!("1e{k}")))
        .collect()
}

fn fmt_num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 1e4 || v.abs() < 1e-3 {
        format!("{v:.1e}")
    } else {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

struct Panel {
    y0: f64,
    x_lo: f64,
    x_hi: f64,
    y_lo: f64,
    y_hi: f64,
    log: bool,
}

impl Panel {
    fn px(&self, x: f64) -> f64 {
        LEFT + (x - self.x_lo) / (self.x_hi - self.x_lo).max(1e-300) * (W - LEFT - RIGHT)
    }
    fn py(&self, y: f64) -> f64 {
        let (a, b, v) = if self.log {
            (self.y_lo.log10(), self.y_hi.log10(), y.log10())
        } else {
            (self.y_lo, self.y_hi, y)
        };
        self.y0 + PANEL_H - (v - a) / (b - a).max(1e-300) * PANEL_H
    }
    fn frame(&self, s: &mut String, title: &str, ylabel: &str) {
        let (x1, x2) = (LEFT, W - RIGHT);
        let (y1, y2) = (self.y0, self.y0 + PANEL_H);
        let _ = writeln!(
            s,
            r##"<rect x="{x1}" y="{y1}" width="{}" height="{PANEL_H}" fill="none" stroke="#333"/>"##,
            x2 - x1
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" font-size="14" text-anchor="middle" font-weight="bold">{}</text>"#,
            (x1 + x2) / 2.0,
            y1 - 10.0,
            esc(title)
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" font-size="12" text-anchor="middle" transform="rotate(-90 {} {})">{}</text>"#,
            20.0,
            (y1 + y2) / 2.0,
            20.0,
            (y1 + y2) / 2.0,
            esc(ylabel)
        );
        let xt = linear_ticks(self.x_lo, self.x_hi, 8);
        for (v, l) in xt.iter().filter(|(v, _)| v.fract() == 0.0) {
            let x = self.px(*v);
            let _ = writeln!(
                s,
                r##"<line x1="{x}" y1="{y2}" x2="{x}" y2="{}" stroke="#333"/><text x="{x}" y="{}" font-size="11" text-anchor="middle">{l}</text>"##,
                y2 + 5.0,
                y2 + 18.0
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" font-size="12" text-anchor="middle">L-BFGS iteration</text>"#,
            (x1 + x2) / 2.0,
            y2 + 34.0
        );
        let yt = if self.log {
            log_ticks(self.y_lo, self.y_hi)
        } else {
            linear_ticks(self.y_lo, self.y_hi, 5)
        };
        for (v, l) in yt {
            let y = self.py(v);
            if y < y1 - 0.5 || y > y2 + 0.5 {
                continue;
            }
            let _ = writeln!(
                s,
                r##"<line x1="{}" y1="{y}" x2="{x1}" y2="{y}" stroke="#333"/><line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" font-size="11" text-anchor="end">{l}</text>"##,
                x1 - 5.0,
                x1 - 8.0,
                y + 4.0
            );
        }
    }
    fn polyline(&self, s: &mut String, pts: &[(f64, f64)], color: &str) {
        let p: Vec<String> = pts
            .iter()
            .filter(|(_, y)| !self.log || *y > 0.0)
            .map(|(x, y)| format!("{:.2},{:.2}", self.px(*x), self.py(*y)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
            p.join(" ")
        );
        for q in &p {
            let (x, y) = q.split_once(',').expect("pair");
            let _ = writeln!(s, r#"<circle cx="{x}" cy="{y}" r="3" fill="{color}"/>"#);
        }
    }
}

fn log_range(v: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = v
        .filter(|x| *x > 0.0 && x.is_finite())
        .fold((f64::INFINITY, 0.0f64), |(a, b), x| (a.min(x), b.max(x)));
    if !lo.is_finite() {
        return (0.1, 10.0);
    }
    let (a, b) = (
        10f64.powf(lo.log10().floor()),
        10f64.powf(hi.log10().ceil()),
    );
    if a == b {
        (a / 10.0, b * 10.0)
    } else {
        (a, b)
    }
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// The SVG text of an `optimize.json` value: loss, gradient norm and (when the log names
/// parameters) the normalised parameters, one panel each, against the L-BFGS iteration.
pub fn svg(log: &serde_json::Value) -> anyhow::Result<String> {
    let iters = log["iterations"]
        .as_array()
        .context("`iterations` array missing (is this an optimize.json?)")?;
    anyhow::ensure!(!iters.is_empty(), "the log has no iterations yet");
    let evals = log["evaluations"].as_array().cloned().unwrap_or_default();
    let names: Vec<String> = log["parameters"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| p["name"].as_str().unwrap_or("?").to_string())
                .collect()
        })
        .unwrap_or_default();
    let k: Vec<f64> = iters.iter().map(|i| f(&i["iteration"])).collect();
    let x_hi = k.iter().cloned().fold(1.0, f64::max);
    let n_panels = if names.is_empty() { 2 } else { 3 };
    let legend_h = 18.0 * names.len() as f64;
    let h = TOP + n_panels as f64 * (PANEL_H + GAP) + (legend_h - PANEL_H - GAP).max(0.0) + 10.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" font-family="sans-serif">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    loss_panel(&mut s, iters, &evals, &k, x_hi);
    gradient_panel(&mut s, iters, &k, x_hi);
    if !names.is_empty() {
        parameter_panel(&mut s, iters, &names, &k, x_hi);
    }
    s.push_str("</svg>\n");
    Ok(s)
}

/// Loss of the accepted iterates (line) and of every evaluation (grey dots), log scale.
fn loss_panel(
    s: &mut String,
    iters: &[serde_json::Value],
    evals: &[serde_json::Value],
    k: &[f64],
    x_hi: f64,
) {
    let loss: Vec<f64> = iters.iter().map(|i| f(&i["loss"])).collect();
    let eval_pts: Vec<(f64, f64)> = evals
        .iter()
        .map(|e| (f(&e["iteration"]), f(&e["loss"])))
        .filter(|(_, l)| *l > 0.0)
        .collect();
    let (lo, hi) = log_range(loss.iter().cloned().chain(eval_pts.iter().map(|p| p.1)));
    let p = Panel {
        y0: TOP,
        x_lo: 0.0,
        x_hi,
        y_lo: lo,
        y_hi: hi,
        log: true,
    };
    p.frame(s, "Loss", "loss (log scale)");
    for (x, y) in &eval_pts {
        let _ = writeln!(
            s,
            r##"<circle cx="{:.2}" cy="{:.2}" r="2" fill="#999" fill-opacity="0.6"/>"##,
            p.px(*x),
            p.py(*y)
        );
    }
    let pts: Vec<(f64, f64)> = k.iter().cloned().zip(loss.iter().cloned()).collect();
    p.polyline(s, &pts, COLORS[0]);
    let _ = writeln!(
        s,
        r##"<text x="{}" y="{}" font-size="11">— accepted iterate</text><text x="{}" y="{}" font-size="11" fill="#777">• every evaluation</text>"##,
        W - RIGHT + 10.0,
        TOP + 15.0,
        W - RIGHT + 10.0,
        TOP + 32.0
    );
}

/// ‖dL/du‖ of the accepted iterates, log scale.
fn gradient_panel(s: &mut String, iters: &[serde_json::Value], k: &[f64], x_hi: f64) {
    let grad: Vec<f64> = iters.iter().map(|i| f(&i["gradient_norm"])).collect();
    let (lo, hi) = log_range(grad.iter().cloned());
    let p = Panel {
        y0: TOP + PANEL_H + GAP,
        x_lo: 0.0,
        x_hi,
        y_lo: lo,
        y_hi: hi,
        log: true,
    };
    p.frame(s, "Gradient norm", "‖dL/du‖ (log scale)");
    let pts: Vec<(f64, f64)> = k.iter().cloned().zip(grad.iter().cloned()).collect();
    p.polyline(s, &pts, COLORS[1]);
}

/// Each parameter normalised to [0, 1] over its range, with its first and last value.
fn parameter_panel(
    s: &mut String,
    iters: &[serde_json::Value],
    names: &[String],
    k: &[f64],
    x_hi: f64,
) {
    let p = Panel {
        y0: TOP + 2.0 * (PANEL_H + GAP),
        x_lo: 0.0,
        x_hi,
        y_lo: -0.05,
        y_hi: 1.05,
        log: false,
    };
    p.frame(
        s,
        "Parameters (normalized: (v − min) / (max − min))",
        "normalized value",
    );
    for (j, name) in names.iter().enumerate() {
        let v: Vec<f64> = iters.iter().map(|i| f(&i["parameters"][j])).collect();
        let (a, b) = v
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
                (a.min(*x), b.max(*x))
            });
        let span = if b > a { b - a } else { 1.0 };
        let pts: Vec<(f64, f64)> = k
            .iter()
            .zip(&v)
            .map(|(x, y)| (*x, (y - a) / span))
            .collect();
        let c = COLORS[j % COLORS.len()];
        p.polyline(s, &pts, c);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" font-size="10" fill="{c}">{}: {} → {}</text>"#,
            W - RIGHT + 10.0,
            p.y0 + 15.0 + 18.0 * j as f64,
            esc(name),
            fmt_num(v[0]),
            fmt_num(*v.last().unwrap_or(&f64::NAN))
        );
    }
}

pub fn run(args: &PlotArgs) -> Result<(), Failure> {
    let text = std::fs::read_to_string(&args.input)
        .with_context(|| format!("cannot read {}", args.input.display()))
        .map_err(Failure::input)?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: not valid JSON", args.input.display()))
        .map_err(Failure::input)?;
    let svg = svg(&v)
        .with_context(|| args.input.display().to_string())
        .map_err(Failure::input)?;
    diffphd::io::write_atomic(&args.output, svg.as_bytes())
        .with_context(|| format!("cannot write {}", args.output.display()))
        .map_err(Failure::input)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let t: Vec<f64> = linear_ticks(0.0, 17.0, 8).iter().map(|p| p.0).collect();
        assert_eq!(t, vec![0.0, 5.0, 10.0, 15.0]);
        let t = linear_ticks(-0.05, 1.05, 5);
        assert_eq!(t.first().unwrap().1, "0");
        assert_eq!(t.last().unwrap().1, "1");
        let l = log_ticks(1e-7, 1e-1);
        assert_eq!(l.first().unwrap().1, "1e-7");
        assert_eq!(l.last().unwrap().1, "1e-1");
    }

    #[test]
    fn svg_of_a_small_log_is_well_formed() {
        let log = serde_json::json!({
            "parameters": [{"name": "log youngs_modulus[0]"}, {"name": "poisson_ratio[0]"}],
            "iterations": [
                {"iteration": 0, "loss": 1.0, "gradient_norm": 2.0, "parameters": [3e5, 0.3]},
                {"iteration": 1, "loss": 1e-3, "gradient_norm": 1e-2, "parameters": [1.2e5, 0.38]},
                {"iteration": 2, "loss": 1e-9, "gradient_norm": 1e-6, "parameters": [1e5, 0.4]}
            ],
            "evaluations": [{"iteration": 0, "loss": 1.0}, {"iteration": 1, "loss": 0.5}]
        });
        let s = svg(&log).unwrap();
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 4);
        assert!(s.contains("1e-9") && s.contains("L-BFGS iteration"));
        assert!(s.contains("poisson_ratio[0]: 0.3 → 0.4"));
    }
}
