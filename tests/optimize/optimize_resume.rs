//! `diffphd optimize --resume` (issue 18, kill safety): a run stopped early (here by an
//! evaluation cap, the same state a SIGKILL leaves: `optimize.json` rewritten atomically after
//! every evaluation) continues where it stopped and ends exactly where an uninterrupted run
//! ends; a resume of another problem is refused with exit 2 naming the file.

use crate::common;
use common::{bin, repo};
use std::path::Path;
use std::process::{Command, Output};

/// `scenes/sysid_cantilever.toml` at CI size: 3 frames, a 4×2×2 mesh, one thread.
const SMALL: [&str; 4] = [
    "simulation.frames=3",
    "body.0.mesh.cells=[4, 2, 2]",
    "solver.threads=1",
    "optimize.max_iterations=4",
];

fn optimize(out: &Path, extra: &[&str]) -> Output {
    let mut cmd = Command::new(bin());
    cmd.arg("optimize")
        .arg(repo().join("scenes/sysid_cantilever.toml"))
        .arg("--out")
        .arg(out)
        .arg("--quiet");
    for s in SMALL {
        cmd.arg("--set").arg(s);
    }
    cmd.args(extra).output().expect("run diffphd")
}

fn log(out: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join("optimize.json")).expect("optimize.json");
    serde_json::from_str(&text).expect("valid JSON")
}

/// (loss, parameters) of every evaluation, as exact bits.
fn trajectory(v: &serde_json::Value) -> Vec<(u64, Vec<u64>)> {
    v["evaluations"]
        .as_array()
        .expect("evaluations")
        .iter()
        .map(|e| {
            let p = e["parameters"].as_array().unwrap();
            (
                e["loss"].as_f64().unwrap().to_bits(),
                p.iter().map(|x| x.as_f64().unwrap().to_bits()).collect(),
            )
        })
        .collect()
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn resumed_run_ends_bitwise_where_an_uninterrupted_run_ends() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole");
    let o = optimize(&whole, &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let full = log(&whole);
    let n = full["evaluations"].as_array().unwrap().len();
    assert!(
        n >= 5,
        "the reference run must outlast the cap ({n} evaluations)"
    );

    let part = dir.path().join("part");
    let o = optimize(&part, &["--max-evaluations", "3"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let stopped = log(&part);
    assert_eq!(stopped["evaluations"].as_array().unwrap().len(), 3);

    let cap = full["settings"]["max_evaluations"]
        .as_u64()
        .unwrap()
        .to_string();
    let o = optimize(&part, &["--resume", "--max-evaluations", &cap]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let resumed = log(&part);
    assert_eq!(resumed["header"]["resumed_evaluations"], 3);
    assert_eq!(trajectory(&resumed), trajectory(&full));
    assert_eq!(resumed["termination"], full["termination"]);
    assert_eq!(resumed["best"], full["best"]);
    assert_eq!(
        resumed["iterations"].as_array().unwrap().len(),
        full["iterations"].as_array().unwrap().len()
    );
    // The first three evaluations were replayed from the record, not recomputed: their
    // timings are the stopped run's, to the bit.
    let clock = |v: &serde_json::Value| -> Vec<u64> {
        v["evaluations"].as_array().unwrap()[..3]
            .iter()
            .map(|e| e["elapsed_seconds"].as_f64().unwrap().to_bits())
            .collect()
    };
    assert_eq!(clock(&resumed), clock(&stopped));
    common::assert_optimized_scene(&part, &resumed["best"]);
}

#[test]
fn resume_of_another_problem_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = optimize(&out, &["--max-evaluations", "2"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = optimize(&out, &["--resume", "--set", "body.0.material.density=1200"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("optimize.json") && e.contains("problem_hash"),
        "{e}"
    );
    assert_eq!(e.trim().lines().count(), 1, "{e}");
}

#[test]
fn resume_without_an_earlier_run_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    let o = optimize(&dir.path().join("empty"), &["--resume"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("optimize.json"), "{}", stderr(&o));
}
