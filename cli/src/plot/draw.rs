//! Drawing the series of a log with plotters: panels of lines on linear or log axes, onto an
//! SVG string or an RGB buffer encoded as PNG.

use super::{font, Format};
use anyhow::{anyhow, Context};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Something drawn into a drawing area of a fixed size in pixels.
pub trait Drawable {
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> anyhow::Result<()>;
}

/// The image bytes of `what` in `format`.
pub fn render<T: Drawable>(format: Format, what: &T) -> anyhow::Result<Vec<u8>> {
    font::register();
    let (w, h) = what.size();
    match format {
        Format::Svg => {
            let mut text = String::new();
            {
                let area = SVGBackend::with_string(&mut text, (w, h)).into_drawing_area();
                area.fill(&WHITE).map_err(err)?;
                what.draw(&area)?;
                area.present().map_err(err)?;
            }
            Ok(text.into_bytes())
        }
        Format::Png => {
            let mut rgb = vec![255u8; 3 * w as usize * h as usize];
            {
                let area = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
                what.draw(&area)?;
                area.present().map_err(err)?;
            }
            png(&rgb, w, h)
        }
    }
}

/// An 8-bit RGB PNG of `rgb` (row-major, `w`×`h`).
fn png(rgb: &[u8], w: u32, h: u32) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::Best);
    let mut writer = enc.write_header().context("PNG header")?;
    writer.write_image_data(rgb).context("PNG data")?;
    writer.finish().context("PNG end")?;
    Ok(out)
}

/// plotters' drawing errors (generic over the backend's error type) as one message.
pub fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("plotting failed: {e:?}")
}

/// How a line is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stroke {
    Solid,
    Dashed,
    Dotted,
    /// Markers only.
    Dots,
}

/// One labelled series of a panel.
#[derive(Clone, Debug)]
pub struct Line {
    pub label: String,
    pub color: RGBColor,
    pub stroke: Stroke,
    pub points: Vec<(f64, f64)>,
}

/// One chart: title, axis labels, a log or linear y axis and its lines.
#[derive(Clone, Debug)]
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_y: bool,
    /// A log x axis (sweep axes sampled on a log scale).
    pub log_x: bool,
    /// The x axis counts something (iterations): label whole numbers only.
    pub x_integer: bool,
    pub lines: Vec<Line>,
}

pub const COLORS: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x17, 0xbe, 0xcf),
];
pub const GREY: RGBColor = RGBColor(0x55, 0x55, 0x55);

/// A short label of an axis value: integers plainly, small or large magnitudes in `e`
/// notation, others with up to 4 significant digits.
pub fn fmt_num(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if !(1e-3..1e5).contains(&a) {
        let s = format!("{v:.2e}");
        return s.replace(".00e", "e").replace("0e", "e");
    }
    if v.fract() == 0.0 {
        return format!("{v:.0}");
    }
    let digits = (3 - a.log10().floor() as i32).clamp(0, 6) as usize;
    let s = format!("{v:.digits$}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `[lo, hi]` of the finite values (positive ones on a log axis), widened so that a constant
/// series and the lines at the edges stay visible: 5 % of the span on a linear axis, a
/// factor 1.3 on a log axis.
pub fn range(values: impl Iterator<Item = f64>, log: bool) -> Option<(f64, f64)> {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && (!log || *v > 0.0))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    if lo > hi {
        return None;
    }
    Some(if log {
        (lo / 1.3, hi * 1.3)
    } else {
        let pad = if hi > lo {
            0.05 * (hi - lo)
        } else {
            0.05 * lo.abs().max(1e-12)
        };
        (lo - pad, hi + pad)
    })
}

impl Panel {
    pub fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> anyhow::Result<()> {
        let xs = self.lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
        let ys = self.lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
        let (Some((x0, x1)), Some((y0, y1))) = (range(xs, self.log_x), range(ys, self.log_y))
        else {
            area.titled(&format!("{}: no data", self.title), ("sans-serif", 16))
                .map_err(err)?;
            return Ok(());
        };
        // A log axis over more than a decade is labelled at the powers of ten only (plotters
        // puts a tick at every 1..9 multiple).
        let decades = self.log_y && y1 / y0 >= 10.0;
        let y_fmt = move |v: &f64| {
            if decades && (v.log10() - v.log10().round()).abs() > 1e-9 {
                String::new()
            } else {
                fmt_num(*v)
            }
        };
        let x_integer = self.x_integer;
        let x_decades = self.log_x && x1 / x0 >= 10.0;
        let x_fmt = move |v: &f64| {
            if (x_integer && (v - v.round()).abs() > 1e-9)
                || (x_decades && (v.log10() - v.log10().round()).abs() > 1e-9)
            {
                String::new()
            } else {
                fmt_num(*v)
            }
        };
        let ok = |p: &(f64, f64)| {
            p.0.is_finite()
                && p.1.is_finite()
                && (!self.log_y || p.1 > 0.0)
                && (!self.log_x || p.0 > 0.0)
        };
        let mut builder = ChartBuilder::on(area);
        builder
            .caption(&self.title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(36)
            .y_label_area_size(70);
        // One body for both axis types: the chart's coordinate type differs.
        macro_rules! lines {
            ($chart:expr) => {{
                let mut chart = $chart.map_err(err)?;
                chart
                    .configure_mesh()
                    .x_desc(self.x_label.as_str())
                    .y_desc(self.y_label.as_str())
                    .x_label_formatter(&x_fmt)
                    .y_label_formatter(&y_fmt)
                    .label_style(("sans-serif", 12))
                    .axis_desc_style(("sans-serif", 13))
                    .light_line_style(WHITE.mix(0.0))
                    .draw()
                    .map_err(err)?;
                for line in &self.lines {
                    let color = line.color;
                    let pts = line.points.iter().copied().filter(ok);
                    let style = color.stroke_width(2);
                    let anno = match line.stroke {
                        Stroke::Solid => chart.draw_series(LineSeries::new(pts, style)),
                        Stroke::Dashed => {
                            chart.draw_series(DashedLineSeries::new(pts, 8, 5, style))
                        }
                        Stroke::Dotted => {
                            chart.draw_series(DashedLineSeries::new(pts, 2, 4, style))
                        }
                        Stroke::Dots => chart
                            .draw_series(pts.map(|p| Circle::new(p, 2, color.mix(0.5).filled()))),
                    }
                    .map_err(err)?;
                    if !line.label.is_empty() {
                        anno.label(line.label.as_str()).legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                        });
                    }
                }
                if self.lines.iter().any(|l| !l.label.is_empty()) {
                    chart
                        .configure_series_labels()
                        .label_font(("sans-serif", 12))
                        .background_style(WHITE.mix(0.85))
                        .border_style(GREY)
                        .position(SeriesLabelPosition::UpperRight)
                        .draw()
                        .map_err(err)?;
                }
            }};
        }
        match (self.log_x, self.log_y) {
            (false, true) => lines!(builder.build_cartesian_2d(x0..x1, (y0..y1).log_scale())),
            (false, false) => lines!(builder.build_cartesian_2d(x0..x1, y0..y1)),
            (true, true) => {
                lines!(builder.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale()))
            }
            (true, false) => lines!(builder.build_cartesian_2d((x0..x1).log_scale(), y0..y1)),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short() {
        assert_eq!(fmt_num(3.0), "3");
        assert_eq!(fmt_num(0.35), "0.35");
        assert_eq!(fmt_num(1e6), "1e6");
        assert_eq!(fmt_num(2.5e-7), "2.5e-7");
        assert_eq!(fmt_num(-3e-5), "-3e-5");
        assert_eq!(fmt_num(12.3456), "12.35");
    }

    #[test]
    fn ranges_pad_and_skip_what_the_axis_cannot_show() {
        let (lo, hi) = range([0.0, 10.0].into_iter(), false).unwrap();
        assert!((lo + 0.5).abs() < 1e-12 && (hi - 10.5).abs() < 1e-12);
        let (lo, hi) = range([-1.0, 1e-3, 1e2, f64::NAN].into_iter(), true).unwrap();
        assert!((lo - 1e-3 / 1.3).abs() < 1e-15 && (hi - 130.0).abs() < 1e-9);
        assert!(range([f64::NAN].into_iter(), false).is_none());
        let (lo, hi) = range([2.0, 2.0].into_iter(), false).unwrap();
        assert!(lo < 2.0 && hi > 2.0);
    }
}
