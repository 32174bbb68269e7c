//! `diffphd sweep` end to end (issue 17 "What it must show" 1 and 2): a 3x3 grid over E and
//! nu on a tiny scene by the local pool, the same plan run by `sweep task --index` in a shell
//! loop (what Slurm does) with identical results, resume, a failing axis point, `collect`,
//! GNU parallel (when installed) and the Slurm array script.

use crate::common;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn scene() -> String {
    common::fixture("scenes/sweep/scene", &[])
}

/// A sweep over E (log, 3 values) x nu (`nus`) of the tiny scene, `grad` per run.
fn sweep_text(nus: &str) -> String {
    sweep_with(nus, &[])
}

/// [`sweep_text`] with `extra` sets (`tests/fixtures/sweeps/grid.sweep.toml`).
fn sweep_with(nus: &str, extra: &[&str]) -> String {
    let values = format!("axis.1.values={nus}");
    let mut sets = vec![values.as_str()];
    sets.extend_from_slice(extra);
    common::fixture("sweeps/grid.sweep", &sets)
}

fn setup(sweep: &str) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("tiny.toml"), scene()).unwrap();
    let sp = d.path().join("grid.sweep.toml");
    std::fs::write(&sp, sweep).unwrap();
    (d, sp)
}

fn diffphd(dir: &Path, args: &[&str]) -> Output {
    Command::new(common::bin())
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run diffphd")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
    .unwrap()
}

/// (loss, gradient) of every run directory under `dir`, in run order.
fn grads(dir: &Path, n: usize) -> Vec<(f64, Vec<f64>)> {
    (0..n)
        .map(|i| {
            let g = json(&dir.join(format!("run_{i:04}/grad.json")));
            let e = &g["evaluation"];
            (
                e["loss"].as_f64().unwrap(),
                e["gradient"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_f64().unwrap())
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn grid_by_local_pool_equals_task_loop_and_resume_skips_finished_runs() {
    let (d, _) = setup(&sweep_text("[0.3, 0.4, 0.45]"));
    let o = diffphd(
        d.path(),
        &[
            "sweep",
            "run",
            "grid.sweep.toml",
            "--out",
            "pool",
            "--jobs",
            "2",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("2 jobs x 1 thread(s) per run"), "{t}");
    assert!(t.contains("9 ok, 0 already done, 0 failed"), "{t}");
    let pool = grads(&d.path().join("pool"), 9);
    assert!(pool
        .iter()
        .all(|(l, g)| l.is_finite() && *l > 0.0 && g.len() == 2));

    // What a scheduler does: one `sweep task --index I` per run, here a shell loop.
    let o = Command::new("bash")
        .current_dir(d.path())
        .args([
            "-c",
            r#"set -e; "$0" sweep plan grid.sweep.toml --out loop; for i in $(seq 0 8); do "$0" sweep task grid.sweep.toml --out loop --index "$i"; done"#,
            &common::bin(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        grads(&d.path().join("loop"), 9),
        pool,
        "bitwise-identical runs"
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("loop/runs.csv")).unwrap(),
        std::fs::read_to_string(d.path().join("pool/runs.csv")).unwrap()
    );

    // Resume: nothing reruns; a deleted run (and only it) runs again.
    let o = diffphd(
        d.path(),
        &["sweep", "run", "grid.sweep.toml", "--out", "pool"],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("0 ok, 9 already done, 0 failed"),
        "{}",
        text(&o)
    );
    std::fs::remove_dir_all(d.path().join("pool/run_0004")).unwrap();
    let o = diffphd(
        d.path(),
        &["sweep", "run", "grid.sweep.toml", "--out", "pool"],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("1 ok, 8 already done, 0 failed"), "{t}");
    assert!(t.contains("run_0004 ok"), "{t}");
    assert_eq!(grads(&d.path().join("pool"), 9), pool);

    // A task index past the end is bad input.
    let o = diffphd(
        d.path(),
        &[
            "sweep",
            "task",
            "grid.sweep.toml",
            "--out",
            "loop",
            "--index",
            "9",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("run index 9 out of range"),
        "{}",
        text(&o)
    );

    // collect: one row per run with the axis values, status and loss; both plots.
    let o = diffphd(d.path(), &["sweep", "collect", "pool"]);
    assert!(o.status.success(), "{}", text(&o));
    let csv = std::fs::read_to_string(d.path().join("pool/results.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 10, "{csv}");
    let head: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(&head[..4], &["run", "E", "nu", "status"], "{csv}");
    let loss_col = head.iter().position(|c| *c == "loss").expect("loss column");
    assert!(head.contains(&"grad_log_youngs_modulus_0"), "{csv}");
    let expect_e = [
        3e4,
        3e4,
        3e4,
        94868.3298051,
        94868.3298051,
        94868.3298051,
        3e5,
        3e5,
        3e5,
    ];
    let expect_nu = [0.3, 0.4, 0.45, 0.3, 0.4, 0.45, 0.3, 0.4, 0.45];
    for (i, line) in lines[1..].iter().enumerate() {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f[0], i.to_string());
        assert_eq!(f[1].parse::<f64>().unwrap(), expect_e[i], "{line}");
        assert_eq!(f[2].parse::<f64>().unwrap(), expect_nu[i], "{line}");
        assert_eq!(f[3], "ok", "{line}");
        assert_eq!(f[loss_col].parse::<f64>().unwrap(), pool[i].0, "{line}");
    }
    // The loss is smallest at the reference (E = 1e5 nearest, nu = 0.4).
    let best = (0..9)
        .min_by(|&a, &b| pool[a].0.total_cmp(&pool[b].0))
        .unwrap();
    assert_eq!(best, 4);
    for svg in ["plot_loss_vs_E.svg", "plot_loss_over_E_nu.svg"] {
        let s = std::fs::read_to_string(d.path().join("pool").join(svg)).unwrap();
        assert!(
            s.starts_with("<svg") && s.trim_end().ends_with("</svg>"),
            "{svg}"
        );
    }
    let heat = std::fs::read_to_string(d.path().join("pool/plot_loss_over_E_nu.svg")).unwrap();
    assert_eq!(
        heat.matches("<rect").count(),
        1 + 9 + 40,
        "the background, nine cells and 40 colour-bar steps"
    );
    // the line plot runs on E's absolute values: its tick labels are in Pa
    let line = std::fs::read_to_string(d.path().join("pool/plot_loss_vs_E.svg")).unwrap();
    assert!(line.contains("\n1e5\n"), "E axis in Pa: {line}");
}

#[test]
fn a_failing_axis_point_is_reported_without_stopping_the_others() {
    let (d, _) = setup(&sweep_text("[0.3, 0.7]"));
    let o = diffphd(d.path(), &["sweep", "run", "grid.sweep.toml", "--out", "s"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("3 ok, 0 already done, 3 failed"), "{t}");
    for i in [1, 3, 5] {
        let rd = d.path().join(format!("s/run_{i:04}"));
        let st = json(&rd.join("sweep-status.json"));
        assert_eq!(st["exit_code"], 2, "{st}");
        let err = std::fs::read_to_string(rd.join("stderr.log")).unwrap();
        assert!(err.contains("poisson_ratio"), "{err}");
        assert!(st["error"].as_str().unwrap().contains("poisson_ratio"));
    }
    for i in [0, 2, 4] {
        let g = json(&d.path().join(format!("s/run_{i:04}/grad.json")));
        let grad = g["evaluation"]["gradient"].as_array().expect("a gradient");
        assert!(!grad.is_empty() && grad.iter().all(|v| v.as_f64().is_some_and(f64::is_finite)));
    }
    let o = diffphd(d.path(), &["sweep", "collect", "s"]);
    assert!(o.status.success(), "{}", text(&o));
    let csv = std::fs::read_to_string(d.path().join("s/results.csv")).unwrap();
    assert_eq!(
        csv.lines().filter(|l| l.contains(",failed,2,")).count(),
        3,
        "{csv}"
    );
    assert_eq!(
        csv.lines().filter(|l| l.contains(",ok,0,")).count(),
        3,
        "{csv}"
    );
    // A resumed sweep reruns the failed runs only (and they fail again).
    let o = diffphd(d.path(), &["sweep", "run", "grid.sweep.toml", "--out", "s"]);
    assert!(
        text(&o).contains("0 ok, 3 already done, 3 failed"),
        "{}",
        text(&o)
    );
}

#[test]
fn bad_axes_are_refused_with_the_key_named() {
    let (d, _) = setup(&sweep_with("[0.3]", &["axis.0.key=body.0.material.youngs"]));
    let o = diffphd(
        d.path(),
        &["sweep", "plan", "grid.sweep.toml", "--out", "s"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("axis 0 (`body.0.material.youngs`)"), "{t}");
    assert!(!d.path().join("s").exists());
}

/// `sweep run` (one job, `-q`, stderr to `stderr`) of a 12-run sweep of 40-frame runs,
/// returned once its first run has finished (its `sweep-status.json`, within 60 s).
fn start_long_sweep(
    stderr: std::process::Stdio,
) -> (tempfile::TempDir, std::process::Child, std::path::PathBuf) {
    let (d, _) = setup(&sweep_with(
        "[0.3, 0.35, 0.4, 0.45]",
        &[r#"set=["simulation.frames=40"]"#],
    ));
    let child = Command::new(common::bin())
        .current_dir(d.path())
        .args([
            "sweep",
            "run",
            "grid.sweep.toml",
            "--out",
            "k",
            "--jobs",
            "1",
            "-q",
        ])
        .stderr(stderr)
        .spawn()
        .unwrap();
    let first = d.path().join("k/run_0000/sweep-status.json");
    let t0 = std::time::Instant::now();
    while !first.exists() && t0.elapsed().as_secs() < 60 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    (d, child, first)
}

#[test]
fn a_killed_sweep_keeps_its_finished_runs() {
    let (d, mut child, first) = start_long_sweep(std::process::Stdio::inherit());
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(json(&first)["exit_code"], 0, "the first run finished");
    let done: Vec<usize> = (0..12)
        .filter(|i| {
            d.path()
                .join(format!("k/run_{i:04}/sweep-status.json"))
                .exists()
        })
        .collect();
    eprintln!("killed after runs {done:?} had finished");
    std::thread::sleep(std::time::Duration::from_millis(300)); // let an orphaned run end
    let o = diffphd(d.path(), &["sweep", "run", "grid.sweep.toml", "--out", "k"]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains(&format!(
            "{} ok, {} already done, 0 failed",
            12 - done.len(),
            done.len()
        )),
        "{done:?}: {t}"
    );
}

#[test]
fn gnu_parallel_runs_the_emitted_job_file() {
    let have = Command::new("parallel")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !have {
        common::skip_unless_ci(
            "gnu_parallel_runs_the_emitted_job_file: GNU `parallel` is not installed (apt-get install parallel, scripts/ci_deps.sh)",
        );
        return;
    }
    let (d, _) = setup(&sweep_text("[0.3, 0.4, 0.45]"));
    let o = diffphd(
        d.path(),
        &[
            "sweep",
            "emit",
            "grid.sweep.toml",
            "--parallel",
            "--out",
            "p",
            "--jobs",
            "2",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let jobs = std::fs::read_to_string(d.path().join("p/parallel.jobs")).unwrap();
    assert_eq!(jobs.lines().count(), 9);
    let o = Command::new("sh")
        .current_dir(d.path())
        .arg(d.path().join("p/parallel.sh"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let joblog = std::fs::read_to_string(d.path().join("p/parallel.joblog")).unwrap();
    let rows: Vec<&str> = joblog.lines().skip(1).collect();
    assert_eq!(rows.len(), 9, "{joblog}");
    assert!(
        rows.iter().all(|r| r.split('\t').nth(6) == Some("0")),
        "{joblog}"
    );
    let o = diffphd(d.path(), &["sweep", "run", "grid.sweep.toml", "--out", "p"]);
    assert!(text(&o).contains("0 ok, 9 already done"), "{}", text(&o));
}

#[test]
fn slurm_array_script_runs_sweep_task_and_chunks_big_sweeps() {
    let (d, _) = setup(&sweep_text("[0.3, 0.4, 0.45]"));
    let o = diffphd(
        d.path(),
        &[
            "sweep",
            "emit",
            "grid.sweep.toml",
            "--slurm",
            "--out",
            "sl",
            "--time",
            "00:05:00",
            "--mem",
            "1G",
            "--max-parallel",
            "3",
            "--max-array-size",
            "4",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let s = std::fs::read_to_string(d.path().join("sl/sweep.sbatch")).unwrap();
    for want in [
        "#SBATCH --array=0-3%3",
        "#SBATCH --time=00:05:00",
        "#SBATCH --mem=1G",
        "#SBATCH --cpus-per-task=1",
        "sweep task",
        "--index \"$I\"",
        "SLURM_ARRAY_TASK_ID + ${SWEEP_OFFSET:-0}",
    ] {
        assert!(s.contains(want), "{want}: {s}");
    }
    let t = text(&o);
    assert!(t.contains("--export=ALL,SWEEP_OFFSET=4"), "{t}");
    assert!(
        t.contains("--array=0-0%3 --export=ALL,SWEEP_OFFSET=8"),
        "{t}"
    );
    // The script's task line, run by hand for index 8 with Slurm's variables.
    let o = Command::new("bash")
        .current_dir(d.path())
        .env("SLURM_ARRAY_TASK_ID", "0")
        .env("SWEEP_OFFSET", "8")
        .arg(d.path().join("sl/sweep.sbatch"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let g = json(&d.path().join("sl/run_0008/grad.json"));
    let grad = g["evaluation"]["gradient"].as_array().expect("a gradient");
    assert!(!grad.is_empty() && grad.iter().all(|v| v.as_f64().is_some_and(f64::is_finite)));
}

/// Ctrl-C on `sweep run` (SIGINT to the sweep process): no further run starts, the running
/// one ends, the one-line summary is printed (also under `-q`) and the message names the
/// command that finishes the sweep; exit 130. The rerun it names completes the rest.
#[test]
fn sweep_run_interrupted_says_what_to_rerun() {
    let (d, child, _) = start_long_sweep(std::process::Stdio::piped());
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let o = child.wait_with_output().unwrap();
    let t = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{t}");
    assert!(t.contains("sweep: "), "no summary under -q: {t}");
    assert!(
        t.contains("rerun `diffphd sweep run grid.sweep.toml --out ")
            && t.contains("to finish them"),
        "{t}"
    );
    assert!(
        !d.path().join("k/run_0011/sweep-status.json").exists(),
        "the last run started after the interrupt"
    );
    let o = diffphd(
        d.path(),
        &["sweep", "run", "grid.sweep.toml", "--out", "k", "-q"],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains(" already done, 0 failed"), "the -q summary: {t}");
}
