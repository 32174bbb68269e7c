//! `diffphd plot` on the fixture logs (tests/fixtures/logs/: an optimize.json of
//! scenes/sysid_cantilever.toml, 2 iterations, and a simulate log.json of the cantilever,
//! 5 frames): SVG and PNG outputs carry every panel, the PNG its size and drawn pixels, and
//! bad arguments exit 2 with a one-line message.

use crate::common;
use std::path::PathBuf;
use std::process::Command;

fn fixture(name: &str) -> String {
    common::repo()
        .join("tests/fixtures/logs")
        .join(name)
        .display()
        .to_string()
}

fn plot(args: &[&str]) -> (i32, String) {
    let o = Command::new(common::bin())
        .arg("plot")
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Width, height and the share of non-white pixels of an 8-bit RGB PNG.
fn png_facts(path: &PathBuf) -> (u32, u32, f64) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = &buf[..info.buffer_size()];
    let ink = px.chunks(3).filter(|p| p != &[255, 255, 255]).count();
    (info.width, info.height, ink as f64 / (px.len() / 3) as f64)
}

#[test]
fn an_optimize_log_plots_loss_gradient_and_parameters_with_bounds_and_truth() {
    let d = tempfile::tempdir().unwrap();
    let svg = d.path().join("fit.svg");
    let (code, err) = plot(&[
        &fixture("optimize.json"),
        "-o",
        svg.to_str().unwrap(),
        "--truth",
        "0=1e5",
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&svg).unwrap();
    for want in [
        "Loss",
        "Gradient norm",
        "log youngs_modulus[0]",
        "poisson_ratio[0]",
        "truth",
        "bounds",
    ] {
        assert!(text.contains(want), "{want:?} missing from the SVG");
    }
    // The bounds 1e4 and 1e7 of log E are on its absolute axis.
    let labels: Vec<&str> = text.lines().map(str::trim).collect();
    assert!(
        labels.contains(&"1e7") && labels.contains(&"10000"),
        "bounds not on the axis"
    );
    let png = d.path().join("fit.png");
    let (code, err) = plot(&[&fixture("optimize.json"), "-o", png.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (w, h, ink) = png_facts(&png);
    assert_eq!((w, h), (1000, 530));
    assert!(ink > 0.02, "the PNG is nearly blank ({ink})");
}

#[test]
fn a_simulation_log_plots_energies_and_centre_of_mass() {
    let d = tempfile::tempdir().unwrap();
    let png = d.path().join("energy.png");
    let (code, err) = plot(&[&fixture("log.json"), "-o", png.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (w, h, ink) = png_facts(&png);
    assert_eq!((w, h), (1000, 640));
    assert!(ink > 0.02, "the PNG is nearly blank ({ink})");
    let svg = d.path().join("energy.svg");
    assert_eq!(
        plot(&[&fixture("log.json"), "-o", svg.to_str().unwrap()]).0,
        0
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    for want in [
        "Energy",
        "elastic",
        "kinetic",
        "gravitational",
        "total",
        "Centre of mass",
    ] {
        assert!(text.contains(want), "{want:?} missing from the SVG");
    }
}

#[test]
fn bad_plot_arguments_exit_2_with_one_line() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("x.svg");
    let out = out.to_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &[&fixture("optimize.json"), "-o", "x.pdf"],
            "must end in .svg or .png",
        ),
        (
            &[&fixture("optimize.json"), "-o", out, "--truth", "nu=0.3"],
            "no parameter \"nu\"",
        ),
        (
            &[&fixture("log.json"), "-o", out, "--truth", "0=1"],
            "optimize logs only",
        ),
        (
            &[
                &common::repo().join("Cargo.toml").display().to_string(),
                "-o",
                out,
            ],
            "not valid JSON",
        ),
    ];
    for (args, want) in cases {
        let (code, err) = plot(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
}
