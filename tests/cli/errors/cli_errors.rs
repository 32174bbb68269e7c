//! Bad input gets a clear error and a non-zero exit (issue 2, item 6). Each message must
//! name the key, file, line or element.

use crate::common;
use common::run_cli;

fn good() -> String {
    common::fixture("scenes/cli_errors/good", &[])
}

fn expect_error(scene: &str, files: &[(&str, &str)], needles: &[&str]) {
    let r = run_cli("simulate", scene, files, &[]);
    assert_eq!(r.code, 2, "expected exit 2, got {}: {}", r.code, r.stderr);
    for n in needles {
        assert!(
            r.stderr.contains(n),
            "message {:?} does not contain {:?}",
            r.stderr,
            n
        );
    }
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}

#[test]
fn good_scene_runs() {
    let r = run_cli("simulate", &good(), &[], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let n = common::vtu_points(&r.out().join("frame_00002.vtu")).len();
    let x0 = common::vtu_points(&r.out().join("frame_00000.vtu")).len();
    assert_eq!(n, x0, "every frame holds every node");
}

#[test]
fn unknown_key_is_named() {
    expect_error(
        &good().replace("density = 1000.0", "density = 1000.0\ndensty = 3"),
        &[],
        &["densty"],
    );
    expect_error(
        // a misspelt table header: the fixture's first `simulation` is its header
        &good().replacen("simulation", "simulaton", 1),
        &[],
        &["simulaton"],
    );
}

#[test]
fn poisson_ratio_at_or_above_half_is_rejected() {
    expect_error(
        &good().replace("poisson_ratio = 0.3", "poisson_ratio = 0.5"),
        &[],
        &["body[0].material.poisson_ratio", "0.5"],
    );
}

#[test]
fn non_positive_youngs_modulus_is_rejected() {
    expect_error(
        &good().replace("youngs_modulus = 1e6", "youngs_modulus = -1.0"),
        &[],
        &["body[0].material.youngs_modulus"],
    );
    expect_error(
        &good().replace("youngs_modulus = 1e6", "youngs_modulus = 0.0"),
        &[],
        &["youngs_modulus"],
    );
}

#[test]
fn non_positive_dt_is_rejected() {
    expect_error(
        &good().replace("dt = 0.01", "dt = 0.0"),
        &[],
        &["simulation.dt"],
    );
}

#[test]
fn bad_override_is_named() {
    let r = run_cli(
        "simulate",
        &good(),
        &[],
        &["--set", "body.5.material.density=2"],
    );
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("body.5.material.density"), "{}", r.stderr);
}

/// `[body.material] mass` takes "lumped" or "uniform"; anything else is an exit-2 error
/// naming the key and the accepted values (in the file: the TOML error with its line; by
/// `--set`: one line).
#[test]
fn bad_mass_convention_is_named() {
    for (scene, args) in [
        (
            &good().replace("density = 1000.0", "density = 1000.0\nmass = \"diffpd\""),
            vec![],
        ),
        (
            &good().to_string(),
            vec!["--set", "body.0.material.mass=\"lumpd\""],
        ),
    ] {
        let r = run_cli("simulate", scene, &[], &args);
        assert_eq!(r.code, 2, "{}", r.stderr);
        if !args.is_empty() {
            assert_eq!(r.stderr.trim().lines().count(), 1, "{}", r.stderr);
            assert!(r.stderr.contains("material"), "{}", r.stderr);
        }
        for needle in ["mass", "`lumped`", "`uniform`"] {
            assert!(r.stderr.contains(needle), "{needle}: {}", r.stderr);
        }
    }
    let ok = run_cli(
        "simulate",
        &good(),
        &[],
        &["--set", "body.0.material.mass=\"uniform\""],
    );
    assert_eq!(ok.code, 0, "{}", ok.stderr);
}

fn file_scene() -> String {
    common::fixture("scenes/cli_errors/file_scene", &[])
}

#[test]
fn missing_mesh_file_is_named() {
    expect_error(&file_scene(), &[], &["m.node", "body[0].mesh.file"]);
}

#[test]
fn malformed_mesh_line_is_named() {
    let node = "4 3 0 0\n0 0 0 0\n1 1 0 0\n2 0 1 0\n3 0 0 oops\n";
    let ele = "1 4 0\n0 0 1 2 3\n";
    expect_error(
        &file_scene(),
        &[("m.node", node), ("m.ele", ele)],
        &["m.node:5"],
    );
}

#[test]
fn degenerate_element_is_named() {
    // Second tet is flat (all four nodes in the plane z = 0).
    let node = "6 3 0 0\n0 0 0 0\n1 1 0 0\n2 0 1 0\n3 0 0 1\n4 1 1 0\n5 2 2 0\n";
    let ele = "2 4 0\n0 0 1 2 3\n1 1 2 4 5\n";
    expect_error(
        &file_scene(),
        &[("m.node", node), ("m.ele", ele)],
        &["element 1"],
    );
}

/// An inverted tet (unambiguous orientation) is repaired, and the repair is said: on
/// stderr and in `log.json`, naming the element.
#[test]
fn inverted_tet_is_repaired_and_reported() {
    // Element 1 lists its nodes in negative orientation.
    let node = "5 3 0 0\n0 0 0 0\n1 1 0 0\n2 0 1 0\n3 0 0 1\n4 1 1 1\n";
    let ele = "2 4 0\n0 0 1 2 3\n1 1 3 2 4\n";
    let r = run_cli(
        "simulate",
        &file_scene(),
        &[("m.node", node), ("m.ele", ele)],
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let log = r.log();
    let w = log["header"]["warnings"].as_array().unwrap();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].as_str().unwrap().contains("inverted element(s)")
            && w[0].as_str().unwrap().ends_with(": 1"),
        "{w:?}"
    );
}

/// An inverted hexahedron that is not a plain mirror cannot be repaired: error naming it.
#[test]
fn inverted_hexahedron_is_rejected_with_its_index() {
    // Two unit cubes (MEDIT, VTK node order); in the second the top face is rotated by
    // 180 degrees, which inverts some corners but not all.
    let mesh = "MeshVersionFormatted 2\nDimension 3\nVertices\n12\n0 0 0 0\n1 0 0 0\n1 1 0 0\n0 1 0 0\n0 0 1 0\n1 0 1 0\n1 1 1 0\n0 1 1 0\n2 0 0 0\n2 1 0 0\n2 0 1 0\n2 1 1 0\nHexahedra\n2\n1 2 3 4 5 6 7 8 1\n2 9 10 3 7 11 12 6 1\nEnd\n";
    let scene = &file_scene().replace("m.node", "m.mesh");
    let r = run_cli("simulate", scene, &[("m.mesh", mesh)], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("element 1") && r.stderr.contains("inverted"),
        "{}",
        r.stderr
    );
}

// ---- Error classes of issue 18 -------------------------------------------------------

/// [`good`] with a loss (and optionally parameters: the `parameter` array, a TOML inline
/// array), for `grad`/`gradcheck`.
fn with_loss(params: &str) -> String {
    let set = format!("parameter={params}");
    let sets: &[&str] = if params.is_empty() { &[] } else { &[&set] };
    common::fixture("scenes/cli_errors/good_with_loss", sets)
}

/// `grad` on a scene without `[[parameter]]` is bad input (it exited 0), in one line.
#[test]
fn grad_without_parameters_exits_2_in_one_line() {
    let r = run_cli("grad", &with_loss(""), &[], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert_eq!(r.stderr.trim().lines().count(), 1, "{}", r.stderr);
    assert!(r.stderr.contains("[[parameter]]"), "{}", r.stderr);
}

/// `gradcheck --eps nan|0|-1|inf` (and non-finite or negative tolerances, absurd
/// `--decades`) are bad input, refused before any work (they exited 1, "run failed").
#[test]
fn gradcheck_bad_numeric_arguments_exit_2() {
    let scene = with_loss(r#"[{ kind = "density" }]"#);
    for arg in [
        "--eps=nan",
        "--eps=0",
        "--eps=-1",
        "--eps=inf",
        "--rtol=nan",
        "--rtol=-1",
        "--atol=-1e-3",
        "--decades=400",
    ] {
        let r = run_cli("gradcheck", &scene, &[], &[arg]);
        assert_eq!(r.code, 2, "{arg}: {}", r.stderr);
        let flag = arg.split('=').next().unwrap();
        assert!(r.stderr.contains(flag), "{arg}: {}", r.stderr);
        assert_eq!(r.stderr.trim().lines().count(), 1, "{arg}: {}", r.stderr);
        assert!(!r.out().join("gradcheck.json").exists(), "{arg}");
    }
}

/// An error in the file is reported at its line even when `--frames`/`--threads` were given
/// (they are applied as overrides; the message used to blame "--set overrides").
#[test]
fn frames_and_threads_do_not_blame_a_set_never_given() {
    let bad = &good().replace("density = 1000.0", "density = 1000.0\ndensty = 3");
    // the typo's line in the file (the fixture's header comment comes first)
    let line = bad
        .lines()
        .position(|l| l == "densty = 3")
        .expect("the typo")
        + 1;
    for args in [
        &["--frames", "1"][..],
        &["--threads", "1"],
        &["--frames", "1", "--threads", "1"],
    ] {
        let r = run_cli("simulate", bad, &[], args);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stderr.contains("densty"), "{}", r.stderr);
        assert!(
            r.stderr.contains(&format!("line {line}")),
            "{args:?}: {}",
            r.stderr
        );
        assert!(!r.stderr.contains("override"), "{args:?}: {}", r.stderr);
    }
}

/// Errors an override causes name the override and the right table, with array indices (a
/// table-level error used to name the table *before* the offending one).
#[test]
fn override_errors_name_the_right_table() {
    let r = run_cli(
        "simulate",
        &with_loss(""),
        &[],
        &["--set", "loss.term.0.foo=3", "--frames", "1"],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("loss.term[0]"), "{}", r.stderr);
    assert!(r.stderr.contains("loss.term.0.foo=3"), "{}", r.stderr);
    assert!(!r.stderr.contains("body"), "{}", r.stderr);
    let r = run_cli(
        "simulate",
        &good(),
        &[],
        &["--set", "body.0.material.densty=3"],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("body[0].material") && r.stderr.contains("densty = 3"),
        "{}",
        r.stderr
    );
    // The same mistake in the file, with --frames: the file's line.
    let bad = format!("{}foo = 1\n", with_loss(""));
    let r = run_cli("simulate", &bad, &[], &["--frames", "1"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("[[loss.term]]") && r.stderr.contains("foo"),
        "{}",
        r.stderr
    );
}

// ---- Captured geometry of a chamfer loss term (issue 16, item 5) ---------------------

/// [`good`] with a chamfer term whose frame map is `captures` (TOML array body), and one
/// declared parameter, for `grad`.
fn with_chamfer(captures: &str) -> String {
    common::fixture(
        "scenes/cli_errors/good_chamfer",
        &[&format!("loss.term.0.captures=[{captures}]")],
    )
}

/// (frame map, files to write, needles of the message) of one bad-capture case.
type CaptureCase<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a [&'a str]);

const CLOUD: &str = "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\nproperty float z\nend_header\n0 0 0\n0.1 0.05 0.1\n";

/// A good capture runs; a missing file, an empty point cloud, a NaN coordinate and a frame
/// outside the simulated frames each exit 2 with one line naming the key and the file or
/// frame.
#[test]
fn bad_captures_are_named() {
    let run = |captures: &str, files: &[(&str, &str)]| {
        run_cli("grad", &with_chamfer(captures), files, &[])
    };
    let ok = run("{ frame = 2, file = \"a.ply\" }", &[("a.ply", CLOUD)]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    let cases: [CaptureCase; 5] = [
        (
            "{ frame = 1, file = \"missing.ply\" }",
            &[],
            &["loss.term[0].captures[0].file", "missing.ply"],
        ),
        (
            "{ frame = 1, file = \"a.ply\" }, { frame = 2, file = \"empty.obj\" }",
            &[("a.ply", CLOUD), ("empty.obj", "# nothing\n")],
            &["loss.term[0].captures[1].file", "empty.obj", "no points"],
        ),
        (
            "{ frame = 1, file = \"nan.obj\" }",
            &[("nan.obj", "v 0 0 0\nv 0 nan 1\n")],
            &["loss.term[0].captures[0].file", "nan.obj:2", "finite"],
        ),
        (
            "{ frame = 3, file = \"a.ply\" }",
            &[("a.ply", CLOUD)],
            &["loss.term[0].captures[0].frame", "frame 3", "1..=2"],
        ),
        (
            "{ frame = 0, file = \"a.ply\" }",
            &[("a.ply", CLOUD)],
            &["loss.term[0].captures[0].frame"],
        ),
    ];
    for (captures, files, needles) in cases {
        let r = run(captures, files);
        assert_eq!(r.code, 2, "{captures}: {}", r.stderr);
        assert_eq!(
            r.stderr.trim().lines().count(),
            1,
            "{captures}: {}",
            r.stderr
        );
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
        for n in needles {
            assert!(
                r.stderr.contains(n),
                "{captures}: {:?} lacks {n:?}",
                r.stderr
            );
        }
    }
    // no frame map at all, and a capture folder without frame files
    let r = run_cli(
        "grad",
        &common::fixture(
            "scenes/cli_errors/good_chamfer",
            &[r#"loss.term.0={ type = "chamfer", capture_dir = "." }"#],
        ),
        &[],
        &[],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("loss.term[0].capture_dir"),
        "{}",
        r.stderr
    );
    let r = run("", &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("loss.term[0].captures"), "{}", r.stderr);
}

// ---- Measured contact force of a loss term (issue 38, item 4: Dice) ------------------

/// [`good`]'s chamfer fixture with its loss term replaced by a `contact_force` term (extra
/// keys `keys`, inline-table syntax) against a sphere obstacle, for `grad`.
fn with_force(keys: &str, extra: &[&str]) -> String {
    let term = format!("loss.term.0={{ type = \"contact_force\", {keys} }}");
    let mut sets = vec![
        r#"obstacle=[{ type = "sphere", center = [0.1, 0.05, 0.3], radius = 0.05 }]"#,
        term.as_str(),
    ];
    sets.extend_from_slice(extra);
    common::fixture("scenes/cli_errors/good_chamfer", &sets)
}

/// A good force file runs; a missing file, a short line, a non-finite force, a frame outside
/// the simulated frames or measured twice, an empty file, a missing obstacle and penalty
/// contact each exit 2 with one line naming the key (and the file and line).
#[test]
fn bad_force_measurements_are_named() {
    let run = |keys: &str, files: &[(&str, &str)], extra: &[&str]| {
        run_cli("grad", &with_force(keys, extra), files, &[])
    };
    let good = "frame,fx,fy,fz\n1, 0.0, 0.0, 0.5\n2 0.1 0 0.7 # space-separated\n";
    let ok = run("file = \"f.csv\"", &[("f.csv", good)], &[]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    let file = "file = \"f.csv\"";
    let cases: [(&str, &str, &[&str], &[&str]); 8] = [
        (
            "file = \"missing.csv\"",
            "",
            &[],
            &["loss.term[0].file", "missing.csv"],
        ),
        (
            file,
            "1, 0, 0\n",
            &[],
            &["loss.term[0].file", "f.csv:1", "4 values"],
        ),
        (
            file,
            "1, 0, nan, 0\n",
            &[],
            &["loss.term[0].file", "f.csv:1", "finite"],
        ),
        (
            file,
            "# c\n3, 0, 0, 1\n",
            &[],
            &["loss.term[0].file", "f.csv:2", "frame 3", "1..=2"],
        ),
        (
            file,
            "1 0 0 1\n1 0 0 2\n",
            &[],
            &["loss.term[0].file", "f.csv:2", "twice"],
        ),
        (
            file,
            "frame,fx,fy,fz\n",
            &[],
            &["loss.term[0].file", "no measurement"],
        ),
        (
            "file = \"f.csv\", obstacle = 1",
            good,
            &[],
            &["loss.term[0].obstacle", "obstacle 1"],
        ),
        (
            file,
            good,
            &["contact.model=\"penalty\""],
            &["loss.term[0].type", "penalty"],
        ),
    ];
    for (keys, text, extra, needles) in cases {
        let files: &[(&str, &str)] = if text.is_empty() {
            &[]
        } else {
            &[("f.csv", text)]
        };
        let r = run(keys, files, extra);
        assert_eq!(r.code, 2, "{keys} {text:?}: {}", r.stderr);
        assert_eq!(r.stderr.trim().lines().count(), 1, "{keys}: {}", r.stderr);
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
        for n in needles {
            assert!(
                r.stderr.contains(n),
                "{keys} {text:?}: {:?} lacks {n:?}",
                r.stderr
            );
        }
    }
}
