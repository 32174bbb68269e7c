//! `docs/tutorial.md` runs as written: every `diffphd` line of its `sh` blocks, in order, in a
//! scratch folder holding links to the repository's `scenes/` and `meshes/` (the build and
//! the viewer steps are not run). Then the tutorial's claims are checked on the outputs: the
//! fit recovers the reference E and ν, the sweep's loss is smallest at the reference E, the
//! frames it names exist.

use crate::common::{bin, repo};
use std::path::Path;
use std::process::Command;

/// The `diffphd` command lines of the tutorial's ```sh blocks, in order.
fn tutorial_commands(text: &str) -> Vec<Vec<String>> {
    let mut in_sh = false;
    let mut out = vec![];
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_sh = !in_sh && t == "```sh";
            continue;
        }
        if in_sh && t.starts_with("diffphd ") {
            out.push(t.split_whitespace().skip(1).map(String::from).collect());
        }
    }
    out
}

/// A number after `key = ` in a TOML text.
fn toml_number(text: &str, key: &str) -> f64 {
    let v: toml::Value = toml::from_str(text).expect("optimized.toml parses");
    v["body"][0]["material"][key]
        .as_float()
        .unwrap_or_else(|| panic!("optimized.toml has no body.0.material.{key}"))
}

#[test]
fn the_tutorial_runs_as_written_and_its_claims_hold() {
    let root = repo();
    let text = std::fs::read_to_string(root.join("docs/tutorial.md")).expect("docs/tutorial.md");
    let cmds = tutorial_commands(&text);
    let names: Vec<&str> = cmds.iter().map(|c| c[0].as_str()).collect();
    assert_eq!(
        names,
        ["simulate", "simulate", "grad", "optimize", "simulate", "sweep", "sweep"],
        "the tutorial's commands changed: update this test's checks with them"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    for sub in ["scenes", "meshes"] {
        std::os::unix::fs::symlink(root.join(sub), dir.path().join(sub)).expect("link");
    }
    for c in &cmds {
        let out = Command::new(bin())
            .args(c)
            .current_dir(dir.path())
            .output()
            .expect("run diffphd");
        assert!(
            out.status.success(),
            "docs/tutorial.md: `diffphd {}` failed ({:?}): {}",
            c.join(" "),
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let t = |p: &str| dir.path().join("out/tutorial").join(p);
    for f in [
        "cantilever/frame_00030.vtu",
        "cantilever/frames.pvd",
        "fitted/log.json",
    ] {
        assert!(t(f).is_file(), "the tutorial names {f}, not written");
    }
    // Step 4: "E ≈ 1.0e5 Pa and ν ≈ 0.40, the reference's".
    let fitted = std::fs::read_to_string(t("fit/optimized.toml")).expect("optimized.toml");
    let e = toml_number(&fitted, "youngs_modulus");
    let nu = toml_number(&fitted, "poisson_ratio");
    assert!((e / 1e5 - 1.0).abs() < 1e-3, "fitted E {e}");
    assert!((nu - 0.4).abs() < 1e-3, "fitted nu {nu}");
    // Step 5: the loss over E is smallest at the reference 1e5 Pa.
    let csv = std::fs::read_to_string(t("sweep/results.csv")).expect("results.csv");
    let rows = sweep_losses(&csv);
    assert_eq!(rows.len(), 5, "{csv}");
    let best = rows.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
    assert!(
        (best.0 / 1e5 - 1.0).abs() < 1e-9,
        "loss smallest at E = {}: {rows:?}",
        best.0
    );
    // Step 1's override reached the model: the frames carry the beam's E (the soft ends; the
    // middle third is ten times stiffer), 1e6 Pa as shipped and 2e6 Pa with the override.
    assert_eq!(youngs_range(&t("cantilever/frame_00030.vtu")), (1e6, 1e7));
    assert_eq!(youngs_range(&t("stiffer/frame_00030.vtu")), (2e6, 2e7));
}

/// (E, loss) of each row of a sweep's `results.csv`.
fn sweep_losses(csv: &str) -> Vec<(f64, f64)> {
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).expect(name);
    let (ce, cl) = (col("E"), col("loss"));
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[ce].parse().unwrap(), f[cl].parse().unwrap())
        })
        .collect()
}

/// The smallest and largest per-element Young's modulus of a VTU frame (Pa).
fn youngs_range(p: &Path) -> (f64, f64) {
    let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let grid = diffphd::io::vtu_read::parse_vtu_grid(&bytes).expect("frame parses");
    let e = grid
        .cell_data
        .iter()
        .find(|a| a.name == "youngs_modulus")
        .expect("youngs_modulus cell array")
        .values
        .to_f64();
    let lo = e.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = e.iter().copied().fold(0.0, f64::max);
    (lo, hi)
}

#[test]
fn the_tutorial_parser_finds_commands_only_in_sh_blocks() {
    let text = "```sh\ncargo build\ndiffphd simulate a.toml --frames 3\n```\n```python\ndiffphd x\n```\ndiffphd not-in-a-block\n";
    assert_eq!(
        tutorial_commands(text),
        vec![vec![
            "simulate".to_string(),
            "a.toml".into(),
            "--frames".into(),
            "3".into()
        ]]
    );
}
