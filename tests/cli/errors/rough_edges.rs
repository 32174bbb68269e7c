//! Issue 39's rough edges and the physics diagnostics in `log.json`, end to end: a rerun
//! that differs only in `--threads` replaces the folder's output, the `done:` line's contact
//! time, `mesh generate` in `mesh --help`, "expected a number", and the per-frame
//! diagnostics of a falling ball.

use crate::common;
use std::process::{Command, Output};

fn diffphd(args: &[&str]) -> Output {
    Command::new(common::bin())
        .current_dir(common::repo())
        .args(args)
        .output()
        .expect("run diffphd")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn log(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("log.json")).expect("log.json"))
        .expect("JSON")
}

#[test]
fn a_rerun_at_another_thread_count_replaces_the_output_and_other_changes_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let out = out.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut a = vec![
            "simulate",
            "scenes/cantilever.toml",
            "--frames",
            "2",
            "--out",
            out,
        ];
        a.extend_from_slice(extra);
        diffphd(&a)
    };
    let o = run(&["--threads", "1", "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["--threads", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the same run at another thread count: removed"),
        "{}",
        stderr(&o)
    );
    let l = log(std::path::Path::new(out));
    assert_eq!(l["header"]["threads"], 2);
    assert_eq!(l["status"], "completed");
    assert!(l["header"]["overrides"]
        .as_array()
        .unwrap()
        .contains(&"solver.threads=2".into()));
    // Anything else still needs --overwrite.
    let o = run(&[
        "--threads",
        "2",
        "--set",
        "body.0.material.youngs_modulus=2e6",
        "-q",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--overwrite"), "{}", stderr(&o));
}

#[test]
fn the_done_line_has_the_contact_time_and_the_log_the_diagnostics_of_a_falling_ball() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let o = diffphd(&[
        "simulate",
        "scenes/bouncing_ball.toml",
        "--frames",
        "3",
        "--threads",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    let done = e
        .lines()
        .find(|l| l.starts_with("done:"))
        .expect("a done line");
    assert!(
        done.contains(", contact ") && done.contains(", total "),
        "{done}"
    );
    let l = log(&out);
    let d0 = &l["initial_diagnostics"];
    let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k}: {v}"));
    let frames = l["frames"].as_array().unwrap();
    assert_eq!(frames.len(), 3);
    for k in [
        "elastic_energy",
        "kinetic_energy",
        "gravitational_energy",
        "total_energy",
        "max_principal_strain",
        "min_principal_strain",
        "inverted_elements",
    ] {
        for r in frames {
            f(&r["diagnostics"], k);
        }
        f(d0, k);
    }
    for k in ["center_of_mass", "linear_momentum", "angular_momentum"] {
        assert_eq!(
            frames[2]["diagnostics"][k].as_array().unwrap().len(),
            3,
            "{k}"
        );
    }
    // The total is the sum of its parts; the ball falls (momentum and centre-of-mass
    // velocity point down) and loses gravitational energy.
    let h = l["header"]["dt"].as_f64().unwrap();
    let last = &frames[2]["diagnostics"];
    let before = &frames[1]["diagnostics"];
    let sum =
        f(last, "elastic_energy") + f(last, "kinetic_energy") + f(last, "gravitational_energy");
    assert!((f(last, "total_energy") - sum).abs() <= 1e-12 * sum.abs().max(1.0));
    let c = |v: &serde_json::Value| v["center_of_mass"][2].as_f64().unwrap();
    let pz = last["linear_momentum"][2].as_f64().unwrap();
    let vz = (c(last) - c(before)) / h;
    assert!(
        pz < 0.0 && vz < 0.0,
        "the ball falls: p_z = {pz}, v_z = {vz}"
    );
    assert!(f(d0, "gravitational_energy") > f(last, "gravitational_energy"));
}

#[test]
fn mesh_help_lists_generate_and_a_string_for_a_number_says_expected_a_number() {
    let o = diffphd(&["mesh", "--help"]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(
        t.lines().any(|l| l.trim_start().starts_with("generate")),
        "{t}"
    );
    let o = diffphd(&[
        "simulate",
        "scenes/cantilever.toml",
        "--dry-run",
        "--set",
        "body.0.material.youngs_modulus=\"1 MPa\"",
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("expected a number") && !e.contains("f64"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "{e}");
}

#[test]
fn an_implausible_youngs_modulus_is_named_even_with_quiet() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let o = diffphd(&[
        "simulate",
        "scenes/bouncing_ball.toml",
        "--frames",
        "1",
        "-q",
        "--set",
        "body.0.material.youngs_modulus=1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let e = stderr(&o);
    assert!(
        e.contains("warning: body 0 (")
            && e.contains("youngs_modulus = 1e0 Pa is softer than any solid")
            && e.contains("1 MPa is 1e6"),
        "{e}"
    );
    let l = log(&out);
    let w = l["header"]["warnings"].as_array().unwrap();
    assert!(w
        .iter()
        .any(|w| w.as_str().unwrap().contains("softer than any solid")));
}
