//! Dice Real2Sim (issue 38 item 4, "must show" 1): `scenes/dice.toml` at CI size — a soft die
//! poked by a rigid spherical probe on a scripted path — fitted to synthetic observations of a
//! ground-truth run: noisy surface point clouds (chamfer term) and the probe's noisy total
//! contact force per frame (`contact_force` term, a load cell). With the probe's path
//! prescribed the shapes alone cannot separate the contact location from E
//! (docs/paper-scenes.md "Dice"); the force fixes E. For three noise seeds the fit from a
//! start 12 mm and 2× off must recover the contact location within 1 mm and E within 5 %.
//!
//! CI size (`--set` overrides of the shipped scene): dx = 6 mm (≈ 300 nodes), a 12 mm probe
//! (the 5 mm one touches one or two nodes at this dx) starting 0.9 mm above the die, the same
//! 5 mm path in 10 steps of 5 ms (0.1 m/s); captures of frames 2, 4, …, 10 with σ = 0.2 mm
//! (every boundary node once, shuffled), forces of frames 1 … 10 with σ_F = 2 mN per
//! component (the z axis compared).
//!
//! **Ignored: the fit does not identify the location** (docs/paper-scenes.md "Dice", "Where
//! the fit ends"): E comes within 2 %, the probe stops 5–10 mm off at a stationary point. Run
//! it with `--ignored` to see where each seed ends.

use crate::common;

use super::real2sim::{capture, diffphd, fit_probe, write_cloud, Fit};
use std::path::Path;

/// Ground truth (absolute probe centre in the plane, modulus) and the scene's guess.
const TRUTH_XY: [f64; 2] = [0.004, 0.003];
const TRUTH_E: f64 = 2e5;
/// Capture noise (m), force noise (N), captured frames.
const SIGMA: f64 = 2e-4;
const SIGMA_F: f64 = 2e-3;
const CAPTURED: [usize; 5] = [2, 4, 6, 8, 10];
const FRAMES: usize = 10;
/// The CI-size overrides of scenes/dice.toml.
const CI_SIZE: [&str; 7] = [
    "body.0.mesh.dx=0.006",
    "simulation.frames=10",
    "obstacle.0.motion.velocity=[0.0, 0.0, -0.1]",
    "obstacle.0.radius=0.012",
    "obstacle.0.center=[-0.005, -0.005, 0.0432]",
    "optimize.grad_tol=1e-14",
    "optimize.rel_loss_tol=0.0",
];

/// Total contact force of frame `f` of a `simulate` output folder: the sum of the nodal
/// `contact_force` point array of its `.vtu` frame (the probe is the only obstacle).
fn frame_force(dir: &Path, f: usize) -> [f64; 3] {
    let path = dir.join(diffphd::io::frames::vtu_frame_name(f));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let grid = diffphd::io::vtu_read::parse_vtu_grid(&bytes).unwrap();
    let fc = grid
        .point_data
        .iter()
        .find(|a| a.name == "contact_force")
        .unwrap_or_else(|| panic!("{}: no contact_force", path.display()))
        .values
        .to_f64();
    let mut s = [0.0; 3];
    for (k, v) in fc.iter().enumerate() {
        s[k % 3] += v;
    }
    s
}

/// Seeded Gaussian numbers (Box–Muller on the library's seeded uniform numbers).
fn gauss(seed: u64, n: usize) -> Vec<f64> {
    let u = diffphd::model::seeded_uniform(seed, 2 * n);
    let unit = |k: usize| (0.5 * (u[k] + 1.0)).clamp(1e-300, 1.0);
    (0..n)
        .map(|i| {
            (-2.0 * unit(2 * i).ln()).sqrt() * (2.0 * std::f64::consts::PI * unit(2 * i + 1)).cos()
        })
        .collect()
}

#[test]
#[ignore = "the fit stops 5-10 mm off the contact location (docs/paper-scenes.md, Dice)"]
fn dice_fit_recovers_contact_location_and_modulus_over_three_seeds() {
    let t0 = std::time::Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let caps = dir.path().join("caps");
    let forces = dir.path().join("force.csv");
    std::fs::create_dir_all(&caps).unwrap();
    let mut sets: Vec<String> = CI_SIZE.iter().map(|s| s.to_string()).collect();
    sets.push(format!(
        "loss.term.0.capture_dir={:?}",
        caps.to_str().unwrap()
    ));
    sets.push(format!("loss.term.1.file={:?}", forces.to_str().unwrap()));
    let set_refs: Vec<&str> = sets.iter().map(String::as_str).collect();
    let text = common::scene_file(&common::repo().join("scenes/dice.toml"), &set_refs);
    let scene = dir.path().join("dice.toml");
    std::fs::write(&scene, &text).unwrap();
    let scene_s = scene.to_str().unwrap();

    // The guess of the scene is at least 1 cm and 2x off the truth.
    let base = diffphd::solver::Model::from_scene(&common::load(&text, &[])).unwrap();
    let c0 = base.obstacles[0].center;
    let e0 = base.params.youngs[0];
    let off = [TRUTH_XY[0] - c0[0], TRUTH_XY[1] - c0[1]];
    assert!(off[0].hypot(off[1]) >= 0.01, "{off:?}");
    assert!(e0 >= 2.0 * TRUTH_E, "{e0}");

    // Ground truth: surface frames (PLY) and the contact forces (VTU).
    let center = format!(
        "obstacle.0.center=[{}, {}, {}]",
        TRUTH_XY[0], TRUTH_XY[1], c0[2]
    );
    let modulus = format!("body.0.material.youngs_modulus={TRUTH_E}");
    let (ply, vtu) = (dir.path().join("truth_ply"), dir.path().join("truth_vtu"));
    for (out, format) in [(&ply, "ply"), (&vtu, "vtu")] {
        let fmt = format!("output.format=\"{format}\"");
        diffphd(&[
            "simulate",
            scene_s,
            "--out",
            out.to_str().unwrap(),
            "--set",
            &center,
            "--set",
            &modulus,
            "--set",
            &fmt,
        ]);
    }
    let truth_f: Vec<[f64; 3]> = (1..=FRAMES).map(|f| frame_force(&vtu, f)).collect();
    let peak = truth_f.iter().map(|f| f[2].abs()).fold(0.0, f64::max);
    assert!(peak > 50.0 * SIGMA_F, "the probe pushes: peak {peak} N");

    let mut worst = (0.0f64, 0.0f64);
    for seed in 1..=3u64 {
        for (k, f) in CAPTURED.iter().enumerate() {
            let frame = ply.join(diffphd::io::frames::frame_name(*f));
            let pts = diffphd::mesh::points::read_points(&frame).unwrap();
            let name = diffphd::io::frames::frame_name(*f);
            write_cloud(
                &caps.join(name),
                &capture(&pts, SIGMA, 1000 * seed + k as u64),
            );
        }
        let noise = gauss(77 + seed, 3 * FRAMES);
        let mut csv = String::from("frame,fx,fy,fz\n");
        for (t, f) in truth_f.iter().enumerate() {
            let g = [0, 1, 2].map(|d| f[d] + SIGMA_F * noise[3 * t + d]);
            csv.push_str(&format!("{}, {:e}, {:e}, {:e}\n", t + 1, g[0], g[1], g[2]));
        }
        std::fs::write(&forces, csv).unwrap();

        let fit = dir.path().join(format!("fit{seed}"));
        let Fit {
            x,
            y,
            e,
            dx,
            dy,
            de,
            ..
        } = fit_probe(
            &fit,
            scene_s,
            [c0[0], c0[1]],
            TRUTH_XY,
            TRUTH_E,
            &format!("dice seed {seed}"),
            t0,
        );
        worst = (worst.0.max(dx.hypot(dy)), worst.1.max(de.abs()));
        assert!(dx.hypot(dy) < 1e-3, "seed {seed}: probe at ({x}, {y})");
        assert!(de.abs() < 0.05, "seed {seed}: E = {e}");
    }
    eprintln!(
        "dice: worst location error {:.3} mm, worst E error {:.2} %",
        1e3 * worst.0,
        1e2 * worst.1
    );
}
