//! Newton's round-off stop (issue 37 item 4): on a stiff, slowly loaded 100×-contrast twisted
//! bar the gradient floor $\epsilon\||K||x|\|$ lies above `newton_tol`; Newton at its defaults
//! ends those steps "converged to round-off" (exit 0) and agrees with the PD defaults, while
//! a Newton run that truly stalls (iteration cap) still exits 3 naming Newton iterations.

use crate::common;

fn fixture() -> String {
    let path = common::repo().join("tests/fixtures/newton_roundoff_twist.toml");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn grad_json(run: &common::RunOut) -> serde_json::Value {
    let text = std::fs::read_to_string(run.out().join("grad.json")).expect("grad.json");
    serde_json::from_str(&text).expect("grad.json is JSON")
}

fn final_positions(g: &serde_json::Value) -> Vec<f64> {
    g["final_state"]["positions"]
        .as_array()
        .expect("final_state.positions")
        .iter()
        .map(|v| v.as_f64().expect("a number"))
        .collect()
}

#[test]
fn newton_at_defaults_converges_to_roundoff_on_the_contrast_twist() {
    let scene = fixture();
    let sim = common::run_cli("simulate", &scene, &[], &["--solver", "newton"]);
    assert_eq!(sim.code, 0, "{}", sim.stderr);
    let log = sim.log();
    let frames = log["frames"].as_array().expect("frames");
    let mut roundoff = 0;
    for f in frames.iter().skip(1) {
        let n = &f["newton"];
        assert_eq!(n["converged"], true, "frame {}: {n}", f["frame"]);
        if n["stop"] == "converged to round-off" {
            roundoff += 1;
            // ended by the round-off stop, not by newton_tol = 1e-10: the gradient is
            // above the tolerance and at (below) the floor the log records
            let rel = n["relative_gradient"].as_f64().unwrap();
            let floor = n["roundoff_floor"].as_f64().expect("roundoff_floor logged");
            assert!(rel > 1e-10 && rel <= floor, "frame {}: {n}", f["frame"]);
            // a few stalls after the quadratic phase, not the iteration cap
            assert!(n["iterations"].as_u64().unwrap() < 20, "{n}");
        }
    }
    assert!(
        roundoff >= 2,
        "expected frames ended at round-off: {roundoff}"
    );

    // the same motion as the PD defaults, to 1e-6 of the largest displacement
    let newton = common::run_cli(
        "grad",
        &scene,
        &[],
        &["--solver", "newton", "--final-state"],
    );
    assert_eq!(newton.code, 0, "{}", newton.stderr);
    // the PD method's defaults (pinned: `auto` picks Newton at this contrast)
    let pd = common::run_cli(
        "grad",
        &scene,
        &[],
        &["--final-state", "--solver", "diffphd"],
    );
    assert_eq!(pd.code, 0, "{}", pd.stderr);
    let (gn, gp) = (grad_json(&newton), grad_json(&pd));
    let motion = gp["final_state"]["max_displacement"].as_f64().unwrap();
    assert!(motion > 1e-4, "the bar moves: {motion}");
    let diff = final_positions(&gn)
        .iter()
        .zip(final_positions(&gp))
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    eprintln!("Newton vs PD defaults: {diff:.3e} of motion {motion:.3e}");
    assert!(diff <= 1e-6 * motion, "{diff:e} vs motion {motion:e}");
}

#[test]
fn newton_that_truly_stalls_exits_3_naming_newton_iterations() {
    let scene = fixture();
    let run = common::run_cli(
        "simulate",
        &scene,
        &[],
        &[
            "--solver",
            "newton",
            "--frames",
            "3",
            "--set",
            "solver.newton_max_iterations=2",
        ],
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains("after 2 Newton iterations")
            && run.stderr.contains("Raise solver.newton_max_iterations")
            && !run.stderr.contains("PD iteration"),
        "{}",
        run.stderr
    );
    let log = run.log();
    assert_eq!(log["status"], "incomplete");
    assert!(log["frames"][2]["newton"]["stop"].is_null());
    // under on_nonconvergence = "error" the first such step stops the run, same exit code
    let run = common::run_cli(
        "simulate",
        &scene,
        &[],
        &[
            "--solver",
            "newton",
            "--frames",
            "3",
            "--set",
            "solver.newton_max_iterations=2",
            "--set",
            "solver.on_nonconvergence=\"error\"",
        ],
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("Newton did not converge in 2 Newton iterations"),
        "{}",
        run.stderr
    );
}
