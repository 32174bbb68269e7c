//! Runs that reproduce (issue 18): for every kind of inverse problem, `simulate
//! optimized.toml` reproduces the final rollout `optimize` wrote, to 1e-10 m, and the
//! `--set` lines optimized.toml suggests reproduce it on the source scene. Frames are VTU
//! (64-bit positions), so the comparison is not limited by the PLY's 32-bit floats.

use crate::common;
use common::bin;
use std::path::Path;
use std::process::Command;

/// Stiffness-amplified damping with `e_ref` at its default (the body's smallest E): the log
/// E of the softest region is optimized (the defect: the re-simulation recomputed E_ref
/// from the optimized moduli).
fn sysid_damped_regions() -> String {
    common::fixture("scenes/reproduce/sysid_damped_regions", &[])
}

/// Loads and whole-body scalars: force scale, gravity, density, both damping coefficients
/// and the whole-body E (amplified damping, default e_ref again).
fn loads_and_scalars() -> String {
    common::fixture("scenes/reproduce/loads_and_scalars", &[])
}

/// Muscle activations (two fibre groups bending the beam).
fn muscles() -> String {
    common::fixture("scenes/reproduce/muscles", &[])
}

/// Initial state (translation, rotation, velocity) of a block landing on the ground.
fn initial_state_contact() -> String {
    common::fixture("scenes/reproduce/initial_state_contact", &[])
}

/// Material identification through contact (E, ν and the ground's friction).
fn sysid_contact() -> String {
    common::fixture("scenes/reproduce/sysid_contact", &[])
}

/// Obstacle positions (a probe's x and y, the ground's height), written back as moved
/// `center` and `point` keys (session 27; before, optimized.toml only noted the offsets).
fn obstacle_offset() -> String {
    common::fixture("scenes/reproduce/obstacle_offset", &[])
}

fn run(args: &[&std::ffi::OsStr]) -> (i32, String) {
    let out = Command::new(bin())
        .args(args)
        .output()
        .expect("run diffphd");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Node positions of every `frame_NNNNN.vtu` in `dir`, by file name.
fn frames(dir: &Path) -> Vec<(String, Vec<[f64; 3]>)> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("frame_") && n.ends_with(".vtu"))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let text = std::fs::read_to_string(dir.join(&n)).unwrap();
            (n, vtu_points(&text))
        })
        .collect()
}

/// The `Points` array of a VTU written by diffphd (ASCII Float64, one piece per body).
fn vtu_points(text: &str) -> Vec<[f64; 3]> {
    let mut pts = Vec::new();
    for piece in text.split("<Points>").skip(1) {
        let body = &piece[piece.find('>').unwrap() + 1..piece.find("</DataArray>").unwrap()];
        let v: Vec<f64> = body
            .split_whitespace()
            .map(|t| t.parse().unwrap())
            .collect();
        pts.extend(v.chunks(3).map(|c| [c[0], c[1], c[2]]));
    }
    assert!(!pts.is_empty());
    pts
}

fn max_diff(a: &[(String, Vec<[f64; 3]>)], b: &[(String, Vec<[f64; 3]>)]) -> f64 {
    assert_eq!(
        a.iter().map(|f| &f.0).collect::<Vec<_>>(),
        b.iter().map(|f| &f.0).collect::<Vec<_>>(),
        "the same frames"
    );
    let mut m = 0.0f64;
    for ((_, x), (_, y)) in a.iter().zip(b) {
        assert_eq!(x.len(), y.len());
        for (p, q) in x.iter().zip(y) {
            for d in 0..3 {
                m = m.max((p[d] - q[d]).abs());
            }
        }
    }
    m
}

/// optimize (a few evaluations) → simulate optimized.toml → the same frames; and the source
/// scene with the suggested `--set` lines → the same frames.
fn reproduces(name: &str, scene: &str) {
    let dir = tempfile::tempdir().unwrap();
    let sp = dir.path().join("scene.toml");
    std::fs::write(&sp, scene).unwrap();
    let o = dir.path().join("opt");
    let (code, err) = run(&[
        "optimize".as_ref(),
        sp.as_os_str(),
        "--out".as_ref(),
        o.as_os_str(),
        "--quiet".as_ref(),
        "--max-evaluations".as_ref(),
        "4".as_ref(),
    ]);
    assert_eq!(code, 0, "{name}: optimize: {err}");
    let log: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(o.join("optimize.json")).unwrap()).unwrap();
    let start = &log["evaluations"][0]["parameters"];
    assert_ne!(
        &log["best"]["parameters"], start,
        "{name}: the optimizer moved (else the test proves nothing)"
    );
    let opt_toml = o.join("optimized.toml");
    let text = std::fs::read_to_string(&opt_toml).unwrap();
    assert!(
        text.contains("Rebuilt model matches the optimized one: yes"),
        "{name}:\n{text}"
    );
    let want = frames(&o);
    assert!(want.len() > 1, "{name}: optimize wrote its final rollout");

    let s = dir.path().join("sim");
    let (code, err) = run(&[
        "simulate".as_ref(),
        opt_toml.as_os_str(),
        "--out".as_ref(),
        s.as_os_str(),
        "--quiet".as_ref(),
    ]);
    assert_eq!(code, 0, "{name}: simulate optimized.toml: {err}");
    let d = max_diff(&want, &frames(&s));
    eprintln!("{name}: simulate optimized.toml differs by {d:.3e} m");
    assert!(
        d <= 1e-10,
        "{name}: simulate optimized.toml differs by {d:e} m"
    );

    let sets: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("#   --set "))
        .map(|w| {
            w.strip_prefix('\'')
                .and_then(|w| w.strip_suffix('\''))
                .unwrap_or(w)
        })
        .collect();
    assert!(
        !sets.is_empty(),
        "{name}: optimized.toml suggests --set lines"
    );
    let s2 = dir.path().join("sets");
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "simulate".as_ref(),
        sp.as_os_str(),
        "--out".as_ref(),
        s2.as_os_str(),
        "--quiet".as_ref(),
    ];
    for l in &sets {
        args.push("--set".as_ref());
        args.push(l.as_ref());
    }
    let (code, err) = run(&args);
    assert_eq!(code, 0, "{name}: the suggested --set lines {sets:?}: {err}");
    let d = max_diff(&want, &frames(&s2));
    assert!(d <= 1e-10, "{name}: the --set lines differ by {d:e} m");

    // The loss of optimized.toml (as `grad` evaluates it) is the best loss optimize logged:
    // the same problem, reference trajectory included. Not bitwise: the logged loss was
    // evaluated at θ, the file holds exp(θ) for log parameters (one rounding), and a contact
    // rollout's converged iterate moves by more than that rounding.
    let ls = diffphd::scene::load(&opt_toml, &[]).unwrap();
    let p = diffphd::optimize::problem::Problem::new(ls).unwrap();
    let l = p.evaluate(&p.theta0(), false).unwrap().loss;
    let best = log["best"]["loss"].as_f64().unwrap();
    assert!(
        (l - best).abs() <= 1e-6 * best.abs() + 1e-18,
        "{name}: loss of optimized.toml {l:e} vs best {best:e}"
    );
}

/// The e_ref regression (issue 18): amplified damping, default E_ref, region E optimized.
#[test]
fn damped_region_sysid_reproduces_with_default_e_ref() {
    reproduces("sysid_damped_regions", &sysid_damped_regions());
}

#[test]
fn loads_and_scalars_reproduce() {
    reproduces("loads_and_scalars", &loads_and_scalars());
}

#[test]
fn muscle_activations_reproduce() {
    reproduces("muscles", &muscles());
}

#[test]
fn initial_state_with_contact_reproduces() {
    reproduces("initial_state_contact", &initial_state_contact());
}

#[test]
fn contact_sysid_reproduces() {
    reproduces("sysid_contact", &sysid_contact());
}

#[test]
fn obstacle_offsets_reproduce() {
    reproduces("obstacle_offset", &obstacle_offset());
}
