//! Real2Sim fit from captured geometry (issue 16, item 5): `scenes/real2sim_probe.toml` — a
//! soft flap lifted by a rising spherical probe — fitted to synthetic captures made here by
//! a ground-truth run plus Gaussian noise. The fit must recover where the probe touches the
//! flap within 1 mm and the flap's Young's modulus within 5 %, starting ≥ 1 cm and 2× off.
//! The captures are passed as an explicit frame map (`captures = [{ frame, file }]`) of
//! shuffled PLY and OBJ point clouds with file names unrelated to the frame numbers.

use crate::common;

use std::path::Path;
use std::process::Command;

/// Ground truth of the fit (absolute probe centre in the plane, modulus).
const TRUTH_XY: [f64; 2] = [0.045, 0.006];
const TRUTH_E: f64 = 4e4;
/// Noise of the captures (m) and the captured frames.
const SIGMA: f64 = 2e-4;
const FRAMES: [usize; 10] = [2, 4, 6, 8, 10, 12, 14, 16, 18, 20];

/// Run the command line with `args` (quietly) and require success.
pub(crate) fn diffphd(args: &[&str]) {
    let out = Command::new(common::bin())
        .args(args)
        .args(["--quiet", "--threads", "1"])
        .output()
        .expect("run diffphd");
    assert!(
        out.status.success(),
        "diffphd {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Where an `optimize` of a probe scene ended: the probe's (x, y) and E, their errors against
/// the truth (m, m, relative) and `optimize.json`.
pub(crate) struct Fit {
    pub x: f64,
    pub y: f64,
    pub e: f64,
    pub dx: f64,
    pub dy: f64,
    pub de: f64,
    pub log: serde_json::Value,
}

/// `optimize` `scene` into `out` with the overrides `sets` (parameters: the probe's x and y
/// offsets from its start `c0`, then E) and read where it ended against the truth; prints
/// the errors under `label`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fit_probe(
    out: &Path,
    scene: &str,
    sets: &[&str],
    c0: [f64; 2],
    truth_xy: [f64; 2],
    truth_e: f64,
    label: &str,
    t0: std::time::Instant,
) -> Fit {
    let mut args = vec!["optimize", scene, "--out", out.to_str().unwrap()];
    for s in sets {
        args.extend(["--set", s]);
    }
    diffphd(&args);
    let log: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("optimize.json")).unwrap()).unwrap();
    let best = &log["best"]["parameters"];
    let (x, y, e) = (
        c0[0] + best[0].as_f64().unwrap(),
        c0[1] + best[1].as_f64().unwrap(),
        best[2].as_f64().unwrap(),
    );
    let (dx, dy, de) = (x - truth_xy[0], y - truth_xy[1], e / truth_e - 1.0);
    eprintln!(
        "{label}: probe error ({:.3}, {:.3}) mm, E error {:.2} %, {} evaluations, {}, {:.1} s",
        1e3 * dx,
        1e3 * dy,
        1e2 * de,
        log["evaluations"].as_array().unwrap().len(),
        log["termination"],
        t0.elapsed().as_secs_f64()
    );
    Fit {
        x,
        y,
        e,
        dx,
        dy,
        de,
        log,
    }
}

/// `points` plus isotropic Gaussian noise of deviation `sigma` (Box–Muller on the library's
/// seeded uniform numbers), in a seeded random order.
pub(crate) fn capture(points: &[[f64; 3]], sigma: f64, seed: u64) -> Vec<[f64; 3]> {
    let u = diffphd::model::seeded_uniform(seed, 7 * points.len());
    let unit = |k: usize| (0.5 * (u[k] + 1.0)).clamp(1e-300, 1.0);
    let gauss =
        |k: usize| (-2.0 * unit(k).ln()).sqrt() * (2.0 * std::f64::consts::PI * unit(k + 1)).cos();
    let mut out: Vec<(f64, [f64; 3])> = points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let n = [gauss(7 * i), gauss(7 * i + 2), gauss(7 * i + 4)];
            (u[7 * i + 6], [0, 1, 2].map(|d| p[d] + sigma * n[d]))
        })
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out.into_iter().map(|(_, p)| p).collect()
}

pub(crate) fn write_cloud(path: &Path, pts: &[[f64; 3]]) {
    let mut s = String::new();
    if path.extension().is_some_and(|e| e == "ply") {
        s.push_str(&format!(
            "ply\nformat ascii 1.0\nelement vertex {}\nproperty double x\nproperty double y\nproperty double z\nend_header\n",
            pts.len()
        ));
        for p in pts {
            s.push_str(&format!("{:e} {:e} {:e}\n", p[0], p[1], p[2]));
        }
    } else {
        for p in pts {
            s.push_str(&format!("v {:e} {:e} {:e}\n", p[0], p[1], p[2]));
        }
    }
    std::fs::write(path, s).unwrap();
}

#[test]
fn real2sim_fit_recovers_probe_location_and_modulus() {
    let t0 = std::time::Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let scene_text = std::fs::read_to_string(common::repo().join("scenes/real2sim_probe.toml"))
        .expect("the committed scene");
    // The captures of the fit: an explicit frame map instead of the scene's capture folder.
    let map: Vec<String> = FRAMES
        .iter()
        .enumerate()
        .map(|(k, f)| {
            let ext = if k % 2 == 0 { "ply" } else { "obj" };
            format!("{{ frame = {f}, file = \"scan_{k}.{ext}\" }}")
        })
        .collect();
    let text = scene_text.replace(
        "capture_dir = \"real2sim_probe\"",
        &format!("captures = [{}]", map.join(", ")),
    );
    assert_ne!(text, scene_text, "the scene's capture key moved");
    let scene = dir.path().join("scene.toml");
    std::fs::write(&scene, &text).unwrap();

    // The guess of the scene is at least 1 cm and 2x off the truth.
    let base = diffphd::solver::Model::from_scene(&common::load(&text, &[])).unwrap();
    let c0 = base.obstacles[0].center;
    let e0 = base.params.youngs[0];
    let off = [TRUTH_XY[0] - c0[0], TRUTH_XY[1] - c0[1]];
    assert!(off[0].hypot(off[1]) >= 0.01, "{off:?}");
    assert!(e0 >= 2.0 * TRUTH_E, "{e0}");

    // Ground truth and its noisy captures.
    let truth = dir.path().join("truth");
    let center = format!(
        "obstacle.0.center=[{}, {}, {}]",
        TRUTH_XY[0], TRUTH_XY[1], c0[2]
    );
    let modulus = format!("body.0.material.youngs_modulus={TRUTH_E}");
    let (scene_s, truth_s) = (scene.to_str().unwrap(), truth.to_str().unwrap());
    // PLY frames: their vertices are the boundary surface a scan would see
    diffphd(&[
        "simulate",
        scene_s,
        "--out",
        truth_s,
        "--set",
        &center,
        "--set",
        &modulus,
        "--set",
        "output.format=\"ply\"",
    ]);
    for (k, f) in FRAMES.iter().enumerate() {
        let frame = truth.join(diffphd::io::frames::frame_name(*f));
        let pts = diffphd::mesh::points::read_points(&frame).unwrap();
        let ext = if k % 2 == 0 { "ply" } else { "obj" };
        write_cloud(
            &dir.path().join(format!("scan_{k}.{ext}")),
            &capture(&pts, SIGMA, 100 + k as u64),
        );
    }

    // The fit.
    let fit = dir.path().join("fit");
    let Fit {
        x,
        y,
        e,
        dx,
        dy,
        de,
        log,
    } = fit_probe(
        &fit,
        scene_s,
        &[],
        [c0[0], c0[1]],
        TRUTH_XY,
        TRUTH_E,
        "real2sim",
        t0,
    );
    assert!(dx.abs() < 1e-3 && dy.abs() < 1e-3, "probe at ({x}, {y})");
    assert!(de.abs() < 0.05, "E = {e}");
    // the fit reached the noise floor: far below the loss of the guess
    let l0 = log["evaluations"][0]["loss"].as_f64().unwrap();
    assert!(log["best"]["loss"].as_f64().unwrap() < 0.05 * l0);
}
