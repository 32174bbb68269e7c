#![allow(dead_code)]
//! Shared helpers for integration tests: run the real binary on a scene text and read
//! `log.json`, or drive the library directly.

pub mod gpu;
pub mod scenes;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `diffphd` binary: the one cargo built for this test, or `DIFFPHD_BIN` (test binaries
/// carried to another machine, `scripts/gpu_device.sh`).
pub fn bin() -> String {
    std::env::var("DIFFPHD_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_diffphd").to_string())
}

/// The repository root: where cargo built the test, or `DIFFPHD_REPO` (a copy elsewhere).
pub fn repo() -> PathBuf {
    std::env::var_os("DIFFPHD_REPO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/..")))
}

/// A test that cannot run here says why and returns; under `CI=true` (where the project's
/// scripts install what the tests need, `scripts/ci_deps.sh`) it fails instead.
pub fn skip_unless_ci(why: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true and a test would skip: {why}");
    }
    eprintln!("SKIPPED: {why}");
}

/// Under `REQUIRE_CUDA=1` (set by `scripts/gpu_device.sh`) a CUDA test without a usable
/// device fails; elsewhere it says why and skips.
pub fn skip_unless_cuda_required(why: &str) {
    if std::env::var_os("REQUIRE_CUDA").is_some_and(|v| v == "1") {
        panic!("REQUIRE_CUDA=1 but no usable CUDA device: {why}");
    }
    eprintln!("skipping on CUDA: {why}");
}

/// Outcome of one CLI run.
pub struct RunOut {
    pub code: i32,
    pub stderr: String,
    pub dir: tempfile::TempDir,
}

impl RunOut {
    pub fn log(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(self.dir.path().join("out").join("log.json"))
            .expect("log.json exists");
        serde_json::from_str(&text).expect("log.json is valid JSON")
    }
    pub fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }
}

/// Write `scene` into a fresh temp dir (plus extra files) and run `diffphd <cmd> scene.toml --out out`.
pub fn run_cli(cmd: &str, scene: &str, extra_files: &[(&str, &str)], args: &[&str]) -> RunOut {
    let dir = tempfile::tempdir().expect("tempdir");
    let sp = dir.path().join("scene.toml");
    std::fs::write(&sp, scene).unwrap();
    for (name, text) in extra_files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let out = Command::new(bin())
        .arg(cmd)
        .arg(&sp)
        .arg("--out")
        .arg(dir.path().join("out"))
        .arg("--quiet")
        .args(args)
        .output()
        .expect("run diffphd");
    RunOut {
        code: out.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        dir,
    }
}

/// `diffphd <args>` run in `dir`: exit code, stdout, stderr.
pub fn run_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(bin())
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run diffphd");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The vertex count of a frame file written by `simulate` (PLY, ASCII or binary), after
/// parsing all of it: a file that merely exists, or holds a header only, fails.
pub fn ply_vertices(path: &Path) -> usize {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let ply = ply_rs_bw::parser::Parser::<ply_rs_bw::ply::DefaultElement>::new()
        .read_ply(&mut std::io::BufReader::new(file))
        .unwrap_or_else(|e| panic!("{}: not a valid PLY: {e}", path.display()));
    let n = ply.payload.get("vertex").map_or(0, |v| v.len());
    assert!(n > 0, "{}: no vertices", path.display());
    n
}

/// The points of a `.vtu` frame written by `simulate` (the default format), after parsing
/// all of it with the library's reader: a file that merely exists, or an empty grid, fails.
pub fn vtu_points(path: &Path) -> Vec<[f64; 3]> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let grid = diffphd::io::vtu_read::parse_vtu_grid(&bytes)
        .unwrap_or_else(|e| panic!("{}: not a valid .vtu: {e}", path.display()));
    assert!(!grid.points.is_empty(), "{}: no points", path.display());
    grid.points
}

/// `optimized.toml` in `out` loads as a scene whose declared parameters hold the values of
/// `best.parameters` (user units) from the same run's optimize.json.
pub fn assert_optimized_scene(out: &Path, best: &serde_json::Value) {
    let path = out.join("optimized.toml");
    let ls = diffphd::scene::load(&path, &[])
        .unwrap_or_else(|e| panic!("{}: does not load: {e}", path.display()));
    let problem = diffphd::optimize::problem::Problem::new(ls).expect("optimized.toml's problem");
    let written = problem.values_at(&problem.theta0());
    let want: Vec<f64> = best["parameters"]
        .as_array()
        .expect("best.parameters")
        .iter()
        .map(|v| v.as_f64().expect("a number"))
        .collect();
    assert_eq!(written.len(), want.len(), "{written:?} vs {want:?}");
    for (w, b) in written.iter().zip(&want) {
        assert!(
            (w - b).abs() <= 1e-9 * b.abs(),
            "optimized.toml holds {written:?}, best is {want:?}"
        );
    }
}

/// Per-frame PD iteration counts from a log.
pub fn iterations(log: &serde_json::Value) -> Vec<u64> {
    log["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["iterations"].as_u64().unwrap())
        .collect()
}

/// The scene fixture `tests/fixtures/<name>.toml` with `sets` applied, as scene text.
///
/// Each set is a `--set` expression (`simulation.frames=10`, `body.0.mesh.element=tet4`,
/// `parameter=[{ kind = "density" }]`), applied by the scene loader's own
/// [`diffphd::scene::overrides::apply`]; `path+=VALUE` appends `VALUE` to the array at
/// `path` (a second `[[body]]`, one more `[[loss.term]]`), which `--set` cannot. Without
/// sets the file's text is returned as it is. Tests write a shared fixture plus what
/// differs, not a copy of the scene text.
pub fn fixture(name: &str, sets: &[&str]) -> String {
    scene_file(
        &repo().join("tests/fixtures").join(format!("{name}.toml")),
        sets,
    )
}

/// [`fixture`] with computed `sets` (`format!`ed) followed by `extra`.
pub fn fixture_sets(name: &str, sets: &[String], extra: &[&str]) -> String {
    let mut all: Vec<&str> = sets.iter().map(String::as_str).collect();
    all.extend_from_slice(extra);
    fixture(name, &all)
}

/// The scene file at `path` with `sets` applied, as scene text ([`fixture`]).
pub fn scene_file(path: &Path, sets: &[&str]) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if sets.is_empty() {
        return text;
    }
    let mut table: toml::Table =
        toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for s in sets {
        let fail = |e: &dyn std::fmt::Display| -> ! { panic!("{}: {s}: {e}", path.display()) };
        match s.split_once('=') {
            Some((key, value)) if key.ends_with('+') => {
                let mut one = toml::Table::new();
                diffphd::scene::overrides::apply(&mut one, &format!("v={value}"))
                    .unwrap_or_else(|e| fail(&e));
                let value = one.remove("v").unwrap_or_else(|| fail(&"no value"));
                let mut node = toml::Value::Table(std::mem::take(&mut table));
                let mut cur = &mut node;
                for seg in key.trim_end_matches('+').trim().split('.') {
                    cur = match (cur, seg.parse::<usize>()) {
                        (toml::Value::Array(a), Ok(i)) => a.get_mut(i),
                        (toml::Value::Table(t), _) => {
                            Some(t.entry(seg).or_insert_with(|| toml::Value::Array(vec![])))
                        }
                        _ => None,
                    }
                    .unwrap_or_else(|| fail(&format!("no `{seg}` here")));
                }
                match cur {
                    toml::Value::Array(a) => a.push(value),
                    _ => fail(&"not an array"),
                }
                if let toml::Value::Table(t) = node {
                    table = t;
                }
            }
            _ => diffphd::scene::overrides::apply(&mut table, s).unwrap_or_else(|e| fail(&e)),
        }
    }
    toml::to_string(&table).expect("a TOML table serializes")
}

/// Load a scene from text for library-level tests.
pub fn load(text: &str, sets: &[&str]) -> diffphd::scene::LoadedScene {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    diffphd::scene::load_str(text, Path::new("inline.toml"), &sets).expect("scene loads")
}

/// Least sweep of a gradient check: the spec (§10.4) and `docs/gradcheck.md` promise ≥ 4
/// decades of steps.
pub const MIN_DECADES: usize = 4;

/// Build the inverse problem of a scene text and run `diffphd gradcheck`'s own check
/// (all declared parameters, step sweep over `decades` ≥ [`MIN_DECADES`] decades; a row whose
/// adjoint and central difference are both zero fails as a "zero reference").
pub fn gradcheck_text(
    text: &str,
    rtol: f64,
    decades: usize,
) -> (
    diffphd::optimize::gradcheck::Report,
    diffphd::optimize::problem::Problem,
) {
    assert!(
        decades >= MIN_DECADES,
        "a sweep of {decades} < {MIN_DECADES} decades"
    );
    let problem =
        diffphd::optimize::problem::Problem::new(load(text, &[])).expect("problem builds");
    let opts = diffphd::optimize::gradcheck::Options {
        only: vec![],
        eps: None,
        rtol,
        atol: 0.0,
        decades,
        expect_zero: vec![],
    };
    let rep = diffphd::optimize::gradcheck::check(&problem, &opts).expect("check runs");
    eprint!("{}", diffphd::optimize::gradcheck::table(&rep));
    (rep, problem)
}

/// Every parameter passed (so none had a zero reference: adjoint and central difference both
/// ~0 fail the row, `gradcheck::ZERO_REL`), and every forward and adjoint step converged.
pub fn assert_all_pass(name: &str, rep: &diffphd::optimize::gradcheck::Report) {
    let failed: Vec<String> = rep
        .rows
        .iter()
        .filter(|r| !r.pass)
        .map(|r| {
            let zero = if r.zero_reference {
                ", zero reference"
            } else {
                ""
            };
            format!("{} (rel.err {:.2e}{zero})", r.name, r.rel_error)
        })
        .collect();
    assert!(failed.is_empty(), "{name}: failed {failed:?}");
    assert!(
        rep.rows.iter().all(|r| !r.zero_reference),
        "{name}: a zero reference"
    );
    assert!(
        rep.evaluation.nonconverged_backward_frames.is_empty(),
        "{name}: adjoint not converged"
    );
    assert!(
        rep.evaluation.nonconverged_forward_frames.is_empty(),
        "{name}: forward not converged"
    );
}

/// Forward rollout of `model` over its frames with `settings`, asserting that every step
/// converged; the step statistics of frames 1..=frames.
pub fn converged_steps(
    model: &diffphd::solver::Model,
    settings: &diffphd::scene::SolverSettings,
) -> Vec<diffphd::solver::StepStats> {
    let mut sim = diffphd::solver::Simulator::new(model, settings).unwrap();
    let (mut x, mut v) = (model.x0.clone(), model.v0.clone());
    let mut out = vec![];
    for f in 1..=model.frames {
        let (xn, st) = sim.step(f, &x, &v).unwrap();
        assert!(st.converged, "frame {f} not converged");
        v = xn.iter().zip(&x).map(|(a, b)| (a - b) / model.h).collect();
        x = xn;
        out.push(st);
    }
    out
}
