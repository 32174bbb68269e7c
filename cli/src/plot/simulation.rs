//! The series of a simulation's `log.json`: energies and centre of mass against time, from the
//! per-frame diagnostics (`diagnostics` of a PD run, `energies` of an MPM–rigid run) and the
//! state before the first step (`initial_diagnostics`).

use super::draw::{Drawable, Line, Panel, Stroke, COLORS, GREY};
use anyhow::{bail, Context};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::Value;

const WIDTH: u32 = 1000;
const PANEL_H: u32 = 320;

#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub time: Vec<f64>,
    /// (name, values per time) of each energy, the total last.
    pub energies: Vec<(String, Vec<f64>)>,
    /// Centre of mass (x, y, z) per time.
    pub center_of_mass: Vec<[f64; 3]>,
    /// What the centre of mass is of (all bodies, or the particles of an MPM run).
    pub center_of_mass_of: &'static str,
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

fn vec3(v: &Value) -> [f64; 3] {
    [num(&v[0]), num(&v[1]), num(&v[2])]
}

/// Energy keys of a PD run's diagnostics (the law's elastic energy, not PD's surrogate).
const PD_ENERGIES: [(&str, &str); 3] = [
    ("elastic", "elastic_energy"),
    ("kinetic", "kinetic_energy"),
    ("gravitational", "gravitational_energy"),
];
/// Energy keys of an MPM–rigid run's `energies`.
const MPM_ENERGIES: [(&str, &str); 6] = [
    ("MPM elastic", "mpm_elastic"),
    ("MPM kinetic", "mpm_kinetic"),
    ("MPM affine kinetic", "mpm_affine_kinetic"),
    ("MPM gravitational", "mpm_gravitational"),
    ("rigid kinetic", "rigid_kinetic"),
    ("rigid gravitational", "rigid_gravitational"),
];

impl Series {
    pub fn read(log: &Value) -> anyhow::Result<Series> {
        let frames = log["frames"]
            .as_array()
            .context("`frames` is not an array")?;
        let Some(first) = frames.first() else {
            bail!("the log has no frames");
        };
        let (key, names, com, com_of): (&str, &[(&str, &str)], &str, &'static str) = if first
            .get("diagnostics")
            .is_some()
        {
            ("diagnostics", &PD_ENERGIES, "center_of_mass", "all bodies")
        } else if first.get("energies").is_some() {
            ("energies", &MPM_ENERGIES, "mpm_center_of_mass", "particles")
        } else {
            bail!("its frames carry no `diagnostics` or `energies` (a log of an older diffphd?)");
        };
        let dt = num(&log["header"]["dt"]);
        let time_of = |k: usize, f: &Value| f["time"].as_f64().unwrap_or((k as f64 + 1.0) * dt);
        let mut records: Vec<(f64, &Value)> = Vec::new();
        if let Some(init) = log
            .get("initial_diagnostics")
            .filter(|_| key == "diagnostics")
        {
            records.push((time_of(0, first) - dt, init));
        }
        for (k, f) in frames.iter().enumerate() {
            records.push((time_of(k, f), &f[key]));
        }
        let mut energies: Vec<(String, Vec<f64>)> = names
            .iter()
            .filter(|(_, k)| records.iter().any(|r| r.1.get(k).is_some()))
            .map(|(label, k)| {
                (
                    label.to_string(),
                    records.iter().map(|r| num(&r.1[k])).collect(),
                )
            })
            .collect();
        let total = (0..records.len())
            .map(|i| energies.iter().map(|e| e.1[i]).sum())
            .collect();
        energies.push(("total".into(), total));
        Ok(Series {
            time: records.iter().map(|r| r.0).collect(),
            energies,
            center_of_mass: records.iter().map(|r| vec3(&r.1[com])).collect(),
            center_of_mass_of: com_of,
        })
    }

    pub fn energy_panel(&self) -> Panel {
        let n = self.energies.len();
        let lines = self
            .energies
            .iter()
            .enumerate()
            .map(|(i, (name, v))| Line {
                label: name.clone(),
                color: if i + 1 == n {
                    GREY
                } else {
                    COLORS[i % COLORS.len()]
                },
                stroke: if i + 1 == n {
                    Stroke::Dashed
                } else {
                    Stroke::Solid
                },
                points: self.time.iter().copied().zip(v.iter().copied()).collect(),
            })
            .collect();
        Panel {
            title: "Energy".into(),
            x_label: "time (s)".into(),
            y_label: "energy (J)".into(),
            log_y: false,
            log_x: false,
            x_integer: false,
            lines,
        }
    }

    pub fn center_of_mass_panel(&self) -> Panel {
        let lines = ["x", "y", "z"]
            .iter()
            .enumerate()
            .map(|(a, name)| Line {
                label: name.to_string(),
                color: COLORS[a],
                stroke: Stroke::Solid,
                points: self
                    .time
                    .iter()
                    .zip(&self.center_of_mass)
                    .map(|(t, c)| (*t, c[a]))
                    .collect(),
            })
            .collect();
        Panel {
            title: format!("Centre of mass ({})", self.center_of_mass_of),
            x_label: "time (s)".into(),
            y_label: "position (m)".into(),
            log_y: false,
            log_x: false,
            x_integer: false,
            lines,
        }
    }
}

impl Drawable for Series {
    fn size(&self) -> (u32, u32) {
        (WIDTH, 2 * PANEL_H)
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> anyhow::Result<()> {
        let (top, bottom) = area.split_vertically(PANEL_H);
        self.energy_panel().draw(&top)?;
        self.center_of_mass_panel().draw(&bottom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diag(e: f64, k: f64, g: f64, z: f64) -> Value {
        serde_json::json!({"elastic_energy": e, "kinetic_energy": k, "gravitational_energy": g,
                           "center_of_mass": [0.0, 0.0, z]})
    }

    #[test]
    fn a_pd_log_gives_energies_from_the_initial_state_on() {
        let log = serde_json::json!({
            "header": {"dt": 0.01},
            "initial_diagnostics": diag(0.0, 0.0, 1.0, 0.1),
            "frames": [
                {"time": 0.01, "diagnostics": diag(0.1, 0.2, 0.7, 0.07)},
                {"time": 0.02, "diagnostics": diag(0.2, 0.3, 0.4, 0.04)}
            ]
        });
        let s = Series::read(&log).unwrap();
        assert_eq!(s.time, vec![0.0, 0.01, 0.02]);
        assert_eq!(s.energies.len(), 4);
        let total = &s.energies[3].1;
        assert!((total[1] - 1.0).abs() < 1e-15 && (total[2] - 0.9).abs() < 1e-15);
        assert_eq!(s.center_of_mass[2], [0.0, 0.0, 0.04]);
        let svg = super::super::draw::render(super::super::Format::Svg, &s).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        for text in [
            "Energy",
            "kinetic",
            "total",
            "Centre of mass (all bodies)",
            "time (s)",
        ] {
            assert!(svg.contains(text), "missing {text:?}");
        }
    }

    #[test]
    fn an_mpm_log_gives_its_own_energies() {
        let log = serde_json::json!({
            "header": {"dt": 0.001},
            "frames": [{"time": 0.001, "energies": {"mpm_kinetic": 1.0, "mpm_elastic": 0.5,
                "mpm_gravitational": -2.0, "mpm_center_of_mass": [1.0, 2.0, 3.0]}}]
        });
        let s = Series::read(&log).unwrap();
        let names: Vec<&str> = s.energies.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(
            names,
            ["MPM elastic", "MPM kinetic", "MPM gravitational", "total"]
        );
        assert_eq!(s.energies[3].1, vec![-0.5]);
        assert_eq!(s.center_of_mass_of, "particles");
    }

    #[test]
    fn a_log_without_diagnostics_is_refused() {
        let log = serde_json::json!({"frames": [{"time": 0.1}]});
        let e = Series::read(&log).unwrap_err().to_string();
        assert!(e.contains("no `diagnostics` or `energies`"), "{e}");
    }
}
