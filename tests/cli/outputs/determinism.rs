//! Determinism (issue 18, docs/RELIABILITY.md): frames and gradients are bitwise identical
//! from run to run (1 and 2 threads, twice each) and across thread counts (issue 37: every
//! parallel loop sums in a fixed order — scatters as gathers, per-sample terms combined in
//! sample order, the two-thread tree solve gives faer's sequential bits). Small scenes: a
//! heterogeneous Neo-Hookean tet block thrown onto the ground; and a larger block whose
//! factors take the tree solve, through PD and Newton.

use crate::common;
use common::bin;
use std::path::Path;
use std::process::Command;

fn scene() -> String {
    common::fixture("scenes/determinism/scene", &[])
}

/// Frame files (name, bytes) and the gradient of one `simulate` + `grad` pair at `threads`.
fn run(dir: &Path, tag: &str, threads: usize) -> (Vec<(String, Vec<u8>)>, Vec<f64>) {
    let sp = dir.join("scene.toml");
    std::fs::write(&sp, scene()).unwrap();
    let out = dir.join(tag);
    for cmd in ["simulate", "grad"] {
        let o = Command::new(bin())
            .arg(cmd)
            .arg(&sp)
            .arg("--out")
            .arg(&out)
            .args(["--quiet", "--threads", &threads.to_string()])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let mut frames: Vec<(String, Vec<u8>)> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "vtu"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    frames.sort();
    assert_eq!(frames.len(), 7);
    let g: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("grad.json")).unwrap()).unwrap();
    let grad = g["evaluation"]["gradient"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    (frames, grad)
}

#[test]
fn frames_and_gradients_are_bitwise_identical_per_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let mut per_threads = Vec::new();
    for threads in [1, 2] {
        let a = run(dir.path(), &format!("t{threads}a"), threads);
        let b = run(dir.path(), &format!("t{threads}b"), threads);
        assert!(
            a.0 == b.0,
            "{threads} thread(s): frames differ between two runs"
        );
        let bits = |g: &[f64]| g.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&a.1),
            bits(&b.1),
            "{threads} thread(s): gradients differ"
        );
        assert!(a.1.iter().all(|g| g.is_finite() && *g != 0.0), "{:?}", a.1);
        per_threads.push(a);
    }
    // Across thread counts: the same bits.
    let (one, two) = (&per_threads[0], &per_threads[1]);
    assert_eq!(one.0.len(), two.0.len());
    for ((n1, f1), (n2, f2)) in one.0.iter().zip(&two.0) {
        assert_eq!(n1, n2);
        assert!(f1 == f2, "{n1}: the frame differs between 1 and 2 threads");
    }
    let bits = |g: &[f64]| g.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(&one.1),
        bits(&two.1),
        "gradients differ across thread counts"
    );
}

/// The final state and gradient of one `grad --final-state` run.
fn grad_run(dir: &Path, tag: &str, threads: usize, method: &str) -> (Vec<f64>, Vec<f64>) {
    let sp = dir.join("larger.toml");
    // 10×6×4 cells: Newton's Hessian is assembled by the gather. The factors are below the
    // two-thread solves' thresholds (linalg::tree_solve: 1M values since session 25,
    // linalg::simplicial_split: 100k), so their bits are the unit tests' to show
    // (tree_solve_is_faer_bitwise, column_split_solve_is_faer_bitwise)
    let text = common::fixture(
        "scenes/determinism/scene",
        &[
            "body.0.mesh.cells=[10, 6, 4]",
            "body.0.mesh.dx=0.01",
            "simulation.frames=2",
        ],
    );
    std::fs::write(&sp, text).unwrap();
    let out = dir.join(tag);
    let o = Command::new(bin())
        .arg("grad")
        .arg(&sp)
        .arg("--out")
        .arg(&out)
        .args(["--quiet", "--final-state", "--solver", method])
        .args(["--threads", &threads.to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let g: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("grad.json")).unwrap()).unwrap();
    let nums = |v: &serde_json::Value| -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    (
        nums(&g["final_state"]["positions"]),
        nums(&g["evaluation"]["gradient"]),
    )
}

/// Issue 37: PD and Newton on a larger block (parallel assembly, local step and adjoint; its
/// factors are below the two-thread solves' thresholds) give the same final state and
/// gradient bits on 1 and 2 threads.
#[test]
fn larger_factors_pd_and_newton_are_bitwise_identical_across_thread_counts() {
    let dir = tempfile::tempdir().unwrap();
    for method in ["diffphd", "newton"] {
        let (x1, g1) = grad_run(dir.path(), &format!("{method}1"), 1, method);
        let (x2, g2) = grad_run(dir.path(), &format!("{method}2"), 2, method);
        assert!(
            !x1.is_empty() && g1.iter().all(|g| g.is_finite() && *g != 0.0),
            "{g1:?}"
        );
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&x1), bits(&x2), "{method}: final states differ");
        assert_eq!(bits(&g1), bits(&g2), "{method}: gradients differ");
    }
}
