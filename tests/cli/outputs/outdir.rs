//! Output-folder ownership (issue 17 item 0, issue 18 item 8): a run refuses a folder
//! holding another run's output unless `--overwrite`, which removes the stale files first;
//! every output records what produced it; `--dry-run` writes nothing.

use crate::common;
use common::run_in as diffphd;
use std::path::Path;
use std::process::Command;

fn tiny() -> String {
    common::fixture("scenes/outdir/tiny", &[])
}

fn frames_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("frame_"))
        .collect();
    v.sort();
    v
}

#[test]
fn two_scenes_into_one_folder_are_refused_and_overwrite_leaves_no_stale_frame() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.toml"), tiny()).unwrap();
    std::fs::write(
        d.path().join("b.toml"),
        common::fixture(
            "scenes/outdir/tiny",
            &["body.0.material.youngs_modulus=2e5"],
        ),
    )
    .unwrap();
    let (code, _, err) = diffphd(d.path(), &["simulate", "a.toml", "--out", "o", "-q"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(frames_in(&d.path().join("o")).len(), 4);
    let (code, _, err) = diffphd(
        d.path(),
        &["simulate", "b.toml", "--out", "o", "-q", "--frames", "1"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("output directory o") && err.contains("another run"),
        "{err}"
    );
    assert!(err.contains("--overwrite"), "{err}");
    assert_eq!(
        frames_in(&d.path().join("o")).len(),
        4,
        "refused run wrote nothing"
    );
    let (code, _, err) = diffphd(
        d.path(),
        &[
            "simulate",
            "b.toml",
            "--out",
            "o",
            "-q",
            "--frames",
            "1",
            "--overwrite",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        frames_in(&d.path().join("o")),
        vec!["frame_00000.vtu", "frame_00001.vtu"],
        "stale frames 2 and 3 of a.toml removed"
    );
    let log: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("o/log.json")).unwrap())
            .unwrap();
    assert_eq!(log["header"]["scene"], "b.toml");
    assert_eq!(log["header"]["overrides"][0], "simulation.frames=1");
    assert_eq!(log["header"]["backend"], "cpu");
    assert!(log["header"]["git_commit"].is_string() || log["header"]["git_commit"].is_null());
    // The same run again may reuse its own folder.
    let (code, _, err) = diffphd(
        d.path(),
        &["simulate", "b.toml", "--out", "o", "-q", "--frames", "1"],
    );
    assert_eq!(code, 0, "{err}");
}

#[test]
fn dry_run_prints_the_resolved_scene_and_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.toml"), tiny()).unwrap();
    let (code, out, err) = diffphd(
        d.path(),
        &[
            "simulate",
            "a.toml",
            "--out",
            "o",
            "--dry-run",
            "--set",
            "body.0.material.poisson_ratio=0.41",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(!d.path().join("o").exists());
    assert!(out.contains("poisson_ratio = 0.41"), "{out}");
    assert!(out.contains("# output directory: o"), "{out}");
    // Defaults are filled in and the printed scene loads as it is.
    let table: toml::Table = toml::from_str(&out).expect("the printed scene is TOML");
    assert!(table.get("solver").is_some_and(|v| v.is_table()), "{out}");
    let printed = diffphd::scene::load_str(&out, Path::new("printed.toml"), &[]).unwrap();
    let (code, _, err) = diffphd(
        d.path(),
        &["simulate", "a.toml", "--dry-run", "--set", "x=1"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("x"), "{err}");
    assert_eq!(printed.scene.bodies[0].material.poisson_ratio, 0.41);
}

/// Issue 17's report: `parallel diffphd simulate beam.toml --set …youngs_modulus={} ::: …`
/// without `--out` — every run shares the scene's folder. Exactly one run may own it; the
/// others are refused naming the folder (exit 2), never a temp-file clash, and the folder
/// holds only the owner's frames.
#[test]
fn concurrent_runs_into_one_folder_leave_one_owner_and_no_mixed_frames() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.toml"), tiny()).unwrap();
    let children: Vec<_> = ["1e5", "2e5", "3e5", "4e5", "5e5"]
        .iter()
        .map(|e| {
            Command::new(common::bin())
                .current_dir(d.path())
                .args(["simulate", "a.toml", "--out", "o", "-q", "--set"])
                .arg(format!("body.0.material.youngs_modulus={e}"))
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let ok = outs.iter().filter(|o| o.status.success()).count();
    assert_eq!(ok, 1, "exactly one run owns the folder");
    for o in outs.iter().filter(|o| !o.status.success()) {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("output directory o holds"), "{err}");
    }
    let dir = d.path().join("o");
    let log: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("log.json")).unwrap()).unwrap();
    let marker: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("diffphd-run.json")).unwrap())
            .unwrap();
    assert_eq!(log["header"]["scene_hash"], marker["scene_hash"]);
    assert_eq!(log["status"], "completed");
    assert_eq!(frames_in(&dir).len(), 4);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// A tracking loss against E = 2e5 and the log Young's modulus parameter (`--set`s).
const TINY_LOSS: [&str; 2] = [
    r#"loss={ reference = { set = ["body.0.material.youngs_modulus=2e5"] }, term = [{ type = "tracking" }] }"#,
    r#"parameter=[{ kind = "youngs_modulus", log = true }]"#,
];

/// Issue 17 item 5: every output records the binary version, git commit, scene hash, every
/// override (including those `--frames`/`--threads` stand for), threads and backend.
#[test]
fn every_output_records_what_produced_it() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("a.toml"),
        common::fixture("scenes/outdir/tiny", &TINY_LOSS),
    )
    .unwrap();
    let common_args = [
        "--frames",
        "2",
        "--threads",
        "1",
        "-q",
        "--set",
        "solver.rel_tol=1e-6",
    ];
    for (cmd, file, extra) in [
        ("simulate", "log.json", vec![]),
        ("grad", "grad.json", vec![]),
        ("gradcheck", "gradcheck.json", vec!["--rtol", "1e-2"]),
        ("optimize", "optimize.json", vec!["--max-iterations", "1"]),
    ] {
        let out = format!("o_{cmd}");
        let mut args = vec![cmd, "a.toml", "--out", &out];
        args.extend(common_args);
        args.extend(extra);
        let (code, _, err) = diffphd(d.path(), &args);
        assert!(
            code == 0 || (cmd == "gradcheck" && code == 1),
            "{cmd}: {err}"
        );
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.path().join(&out).join(file)).unwrap())
                .unwrap();
        let h = if v.get("header").is_some() {
            &v["header"]
        } else {
            &v
        };
        assert_eq!(h["diffphd_version"], env!("CARGO_PKG_VERSION"), "{cmd}");
        assert!(h.get("git_commit").is_some(), "{cmd}: {h}");
        assert_eq!(h["scene"], "a.toml", "{cmd}");
        assert_eq!(h["scene_hash"].as_str().unwrap().len(), 64, "{cmd}");
        let overrides: Vec<&str> = h["overrides"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        for want in [
            "solver.rel_tol=1e-6",
            "simulation.frames=2",
            "solver.threads=1",
        ] {
            assert!(overrides.contains(&want), "{cmd}: {overrides:?}");
        }
        assert_eq!(h["threads"], 1, "{cmd}");
        assert_eq!(h["backend"], "cpu", "{cmd}");
    }
    let opt = std::fs::read_to_string(d.path().join("o_optimize/optimized.toml")).unwrap();
    assert!(
        opt.contains("# diffphd ") && opt.contains("source scene hash"),
        "{opt}"
    );
}
