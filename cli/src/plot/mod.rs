//! `diffphd plot LOG.json -o OUT.svg|OUT.png`: charts of a run's JSON log, drawn by the
//! plotters crate — SVG or PNG by the output's extension, text in the embedded DejaVu Sans
//! (`font.rs`), so no system font or fontconfig is needed.
//!
//! - `optimize.json` (`diffphd optimize`): loss and gradient norm per L-BFGS iteration on log
//!   axes (every evaluation's loss as a dot), and each parameter on its own absolute axis with
//!   its bounds (dashed) and, given `--truth NAME=VALUE`, the true value (dotted).
//! - `log.json` of `diffphd simulate`: the per-frame diagnostics against time — elastic,
//!   kinetic, gravitational and total energy, and the centre of mass.
//!
//! - sweep plots of `diffphd sweep collect` (`sweep.rs`): a metric against a sweep axis on its
//!   absolute values, with the swept key's truth and bounds where the base scene knows them,
//!   or a heat map over two axes.
//!
//! Reading a log into series (`optimize.rs`, `simulation.rs`) is separate from drawing them
//! (`draw.rs`), so the series are unit-tested without a backend.

mod draw;
mod font;
mod optimize;
mod simulation;
pub mod sweep;

use crate::failure::Failure;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct PlotArgs {
    /// `optimize.json` written by `diffphd optimize`, or `log.json` written by `diffphd simulate`.
    pub input: PathBuf,
    /// Output file: `.svg` or `.png` (default: `loss.svg` for an optimize log, `energy.svg`
    /// for a simulation log, in the current folder).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// True value of a parameter, drawn as a dotted line on its panel: `NAME=VALUE` with the
    /// parameter's name in the log (e.g. `"log youngs_modulus[0]=1e6"`) or its index
    /// (`0=1e6`); repeatable. Optimize logs only.
    #[arg(long, value_name = "NAME=VALUE")]
    pub truth: Vec<String>,
}

/// Image format, from the output's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

impl Format {
    fn of(path: &Path) -> anyhow::Result<Format> {
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
        {
            Some(e) if e == "svg" => Ok(Format::Svg),
            Some(e) if e == "png" => Ok(Format::Png),
            _ => bail!("{}: the output must end in .svg or .png", path.display()),
        }
    }
}

/// What a log holds, recognised from its keys.
enum Chart {
    Optimize(optimize::Series),
    Simulation(simulation::Series),
}

fn chart(log: &serde_json::Value, truth: &[String]) -> anyhow::Result<Chart> {
    if log.get("iterations").is_some() {
        return Ok(Chart::Optimize(optimize::Series::read(log, truth)?));
    }
    if log.get("frames").is_some() {
        if !truth.is_empty() {
            bail!("--truth applies to optimize logs only");
        }
        return Ok(Chart::Simulation(simulation::Series::read(log)?));
    }
    bail!("neither an optimize log (`iterations`) nor a simulation log (`frames`)")
}

/// The image of a log (optimize or simulation) in `format`, as `diffphd plot` writes it
/// (also the fuzz target `plot_json`'s entry: any JSON value gives bytes or an error).
pub fn render_log(
    log: &serde_json::Value,
    truth: &[String],
    format: Format,
) -> anyhow::Result<Vec<u8>> {
    draw_chart(&chart(log, truth)?, format)
}

fn draw_chart(chart: &Chart, format: Format) -> anyhow::Result<Vec<u8>> {
    match chart {
        Chart::Optimize(s) => draw::render(format, s),
        Chart::Simulation(s) => draw::render(format, s),
    }
}

pub fn run(args: &PlotArgs) -> Result<(), Failure> {
    let input = args.input.display().to_string();
    let text = std::fs::read_to_string(&args.input)
        .with_context(|| format!("cannot read {input}"))
        .map_err(Failure::input)?;
    let log: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{input}: not valid JSON"))
        .map_err(Failure::input)?;
    let chart = chart(&log, &args.truth)
        .with_context(|| input.clone())
        .map_err(Failure::input)?;
    let default = match chart {
        Chart::Optimize(_) => "loss.svg",
        Chart::Simulation(_) => "energy.svg",
    };
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(default));
    let format = Format::of(&output).map_err(Failure::input)?;
    let bytes = draw_chart(&chart, format)
        .with_context(|| format!("cannot draw {}", output.display()))
        .map_err(Failure::input)?;
    diffphd::io::write_atomic(&output, &bytes)
        .with_context(|| format!("cannot write {}", output.display()))
        .map_err(Failure::input)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_follows_the_extension() {
        assert_eq!(Format::of(Path::new("a/loss.svg")).unwrap(), Format::Svg);
        assert_eq!(Format::of(Path::new("E.PNG")).unwrap(), Format::Png);
        let e = Format::of(Path::new("loss.pdf")).unwrap_err().to_string();
        assert!(e.contains("loss.pdf") && e.contains(".svg or .png"), "{e}");
    }

    #[test]
    fn a_log_of_neither_kind_is_refused() {
        let e = chart(&serde_json::json!({"rows": []}), &[]).err().unwrap();
        assert!(e.to_string().contains("neither an optimize log"), "{e}");
    }
}
