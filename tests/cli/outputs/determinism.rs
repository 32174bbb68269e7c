//! Determinism (issue 18, docs/RELIABILITY.md): for a fixed thread count, frames and
//! gradients are bitwise identical from run to run (1 and 2 threads, twice each); across
//! thread counts they agree to the documented tolerance (frames 1e-12 m, gradients 1e-9
//! relative). Small scenes: a heterogeneous Neo-Hookean tet block thrown onto the ground.

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

/// All numbers of a VTU text, in order.
fn numbers(bytes: &[u8]) -> Vec<f64> {
    String::from_utf8_lossy(bytes)
        .split(|c: char| c.is_whitespace() || c == '<' || c == '>' || c == '"')
        .filter_map(|t| t.parse::<f64>().ok())
        .collect()
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
    // Across thread counts: the documented tolerance.
    let (one, two) = (&per_threads[0], &per_threads[1]);
    let mut dx = 0.0f64;
    for ((n1, f1), (n2, f2)) in one.0.iter().zip(&two.0) {
        assert_eq!(n1, n2);
        let (a, b) = (numbers(f1), numbers(f2));
        assert_eq!(a.len(), b.len(), "{n1}");
        for (x, y) in a.iter().zip(&b) {
            dx = dx.max((x - y).abs());
        }
    }
    let scale = one.1.iter().fold(0.0f64, |m, g| m.max(g.abs()));
    let dg = one
        .1
        .iter()
        .zip(&two.1)
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    eprintln!(
        "1 vs 2 threads: frames differ by {dx:e}, gradients by {:e} relative",
        dg / scale
    );
    assert!(dx <= 1e-12, "frames differ across thread counts by {dx:e}");
    assert!(
        dg <= 1e-9 * scale,
        "gradients differ across thread counts by {dg:e}"
    );
}
