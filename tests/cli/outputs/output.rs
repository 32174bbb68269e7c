//! Output files: PLY frames readable by an independent parser, `log.json` valid at every
//! moment, a killed run leaving finished frames intact, divergence reported with frame,
//! iteration and element (issue 2 "Outputs" and "Bad input").

use crate::common;
use common::run_cli;
use ply_rs_bw::ply::Property;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn scene() -> String {
    common::fixture("scenes/output/scene", &[])
}

fn read_ply(path: &std::path::Path) -> ply_rs_bw::ply::Ply<ply_rs_bw::ply::DefaultElement> {
    let mut f = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    ply_rs_bw::parser::Parser::<ply_rs_bw::ply::DefaultElement>::new()
        .read_ply(&mut f)
        .expect("valid PLY")
}

fn float(p: &Property) -> f64 {
    match p {
        Property::Float(v) => *v as f64,
        Property::Int(v) => *v as f64,
        other => panic!("unexpected property {other:?}"),
    }
}

#[test]
fn ply_frames_round_trip_through_an_independent_parser() {
    let r = run_cli(
        "simulate",
        &scene(),
        &[],
        &["--set", "output.format=\"ply\""],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let log = r.log();
    assert_eq!(log["status"], "completed");
    // every = 2: frames 0, 2, 4 written, 1 and 3 not
    for (f, exists) in [(0, true), (1, false), (2, true), (3, false), (4, true)] {
        assert_eq!(
            r.out().join(format!("frame_{f:05}.ply")).exists(),
            exists,
            "frame {f}"
        );
    }
    let ply0 = read_ply(&r.out().join("frame_00000.ply"));
    let ply4 = read_ply(&r.out().join("frame_00004.ply"));
    let v0 = &ply0.payload["vertex"];
    let faces = &ply4.payload["face"];
    // 4x3x3 = 36 nodes, 2 of them interior: 34 on the boundary
    assert_eq!(v0.len(), 34);
    // boundary of a 3x2x2 box: 2*(3*2 + 3*2 + 2*2) = 32 squares = 64 triangles
    assert_eq!(faces.len(), 64);
    for f in faces {
        match &f["vertex_indices"] {
            Property::ListInt(ix) => {
                assert!(ix.len() == 3 && ix.iter().all(|&i| (i as usize) < v0.len()))
            }
            other => panic!("{other:?}"),
        }
    }
    // frame 0: initial velocity (0, 0, 0.5) on free nodes, Young's modulus per node from the two regions
    let mut seen_stiff = false;
    for v in v0 {
        let vz = float(&v["vz"]);
        let x = float(&v["x"]);
        let e = float(&v["youngs_modulus"]);
        // free nodes carry the initial velocity; clamped ones (x = 0) are at rest
        let expect = if float(&v["x"]).abs() < 1e-9 {
            0.0
        } else {
            0.5
        };
        assert!((vz - expect).abs() < 1e-6);
        assert!((1e5..=4e5).contains(&e));
        if x > 0.12 {
            assert!((e - 4e5).abs() < 1.0);
            seen_stiff = true;
        }
        assert!(float(&v["node"]) >= 0.0);
    }
    assert!(seen_stiff);
    // clamped nodes (x = 0) stay put in frame 4
    for v in &ply4.payload["vertex"] {
        if float(&v["x"]).abs() < 1e-9 {
            assert!(float(&v["vx"]).abs() < 1e-9);
        }
    }
    assert_eq!(log["header"]["backend"], "cpu");
    assert_eq!(log["frames"].as_array().unwrap().len(), 4);
    assert!(log["header"]["scene_hash"].as_str().unwrap().len() == 64);
}

#[test]
fn killed_run_leaves_valid_frames_and_log() {
    let scene = &common::fixture(
        "scenes/output/scene",
        &[
            "simulation.frames=100000",
            "output.every=1",
            "body.0.mesh.cells=[8, 4, 4]",
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let sp = dir.path().join("s.toml");
    std::fs::write(&sp, scene).unwrap();
    let out = dir.path().join("out");
    let mut child = Command::new(common::bin())
        .args([
            "simulate",
            sp.to_str().unwrap(),
            "--quiet",
            "--out",
            out.to_str().unwrap(),
            "--set",
            "output.format=\"ply\"",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !out.join("frame_00005.ply").exists() && t0.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let log: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("log.json")).unwrap())
            .expect("log.json is valid JSON after a kill");
    assert_eq!(log["status"], "running");
    let mut n = 0;
    for entry in std::fs::read_dir(&out).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().and_then(|e| e.to_str()) == Some("ply") {
            let ply = read_ply(&p);
            assert_eq!(
                ply.payload["vertex"].len(),
                9 * 5 * 5 - 7 * 3 * 3,
                "{}",
                p.display()
            );
            n += 1;
        }
    }
    assert!(n >= 5, "only {n} frames written");
    // every frame listed in the log has its file
    for f in log["frames"].as_array().unwrap() {
        let n = common::ply_vertices(&out.join(f["file"].as_str().unwrap()));
        assert_eq!(n, 9 * 5 * 5 - 7 * 3 * 3);
    }
}

#[test]
fn divergence_is_reported_with_frame_iteration_and_element_and_the_log_survives() {
    // A mass-dominated fall of 3e38 m/s² for a 10 s step: the state leaves the range the
    // frame files can hold in the first frame (x ≈ h²g = 3e40; scene values beyond that
    // range, like the 1e308 this test used, are now refused as input).
    let scene = &common::fixture(
        "scenes/output/scene",
        &[
            "simulation.gravity=[0.0, 0.0, -3e38]",
            "simulation.dt=10.0",
            "body.0.material.density=3e38",
        ],
    );
    let r = run_cli("simulate", scene, &[], &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    for needle in ["frame 1", "iteration", "element"] {
        assert!(r.stderr.contains(needle), "{:?} lacks {needle:?}", r.stderr);
    }
    let log = r.log();
    assert_eq!(log["status"], "failed");
    assert!(log["error"].as_str().unwrap().contains("frame 1"));
    assert!(!common::vtu_points(&r.out().join("frame_00000.vtu")).is_empty());
}

/// The numbers of `DataArray Name="{name}"` in every `<Piece>` of a `.vtu` text (a minimal,
/// independent reading of the XML).
fn vtu_pieces(xml: &str, name: &str) -> Vec<Vec<f64>> {
    let tag = format!("Name=\"{name}\"");
    xml.split("<Piece ")
        .skip(1)
        .map(|piece| {
            let start = piece
                .find(&tag)
                .unwrap_or_else(|| panic!("no array {name}"));
            let open = start + piece[start..].find('>').unwrap() + 1;
            let close = open + piece[open..].find("</DataArray>").unwrap();
            piece[open..close]
                .split_whitespace()
                .map(|t| t.parse().unwrap())
                .collect()
        })
        .collect()
}

/// `[output] format = "vtu"`: every body (a tet body and a hex body) in one volume piece, node
/// positions identical to the PLY frames of the same run, a `frames.pvd` listing each frame
/// with its time (issue 6).
#[test]
fn vtu_frames_hold_every_body_and_match_the_ply_frames() {
    let two_bodies = common::fixture(
        "scenes/output/scene",
        &[
            r#"body+={ name = "hexes", mesh = { generator = "box", element = "hex8", cells = [2, 2, 1], dx = 0.05 }, material = { model = "corotated", youngs_modulus = 2e5, poisson_ratio = 0.3, density = 1000.0 }, initial = { translation = [0.0, 0.5, 0.0] }, dirichlet = [{ select = { face = "x_min" } }] }"#,
        ],
    );
    let vtu = run_cli(
        "simulate",
        &two_bodies,
        &[],
        &[
            "--set",
            "output.format=\"vtu\"",
            "--set",
            "output.vtu_encoding=\"ascii\"",
        ],
    );
    assert_eq!(vtu.code, 0, "{}", vtu.stderr);
    // The default encoding (appended, zlib-compressed binary) holds the same arrays, bit for
    // bit, as read by the library's reader.
    let zlib = run_cli(
        "simulate",
        &two_bodies,
        &[],
        &["--set", "output.format=\"vtu\""],
    );
    assert_eq!(zlib.code, 0, "{}", zlib.stderr);
    let bytes = std::fs::read(zlib.out().join("frame_00004.vtu")).unwrap();
    assert!(String::from_utf8_lossy(&bytes).contains("compressor=\"vtkZLibDataCompressor\""));
    let grid = diffphd::io::vtu_read::parse_vtu_grid(&bytes).expect("zlib frame");
    let ascii_xml = std::fs::read_to_string(vtu.out().join("frame_00004.vtu")).unwrap();
    assert_eq!(
        grid.points.concat(),
        vtu_pieces(&ascii_xml, "Points").concat()
    );
    let (point_xml, cell_xml) = ascii_xml.split_once("<CellData").unwrap();
    let cell_xml = format!("<Piece {cell_xml}");
    for (arrays, xml) in [
        (&grid.point_data, point_xml),
        (&grid.cell_data, &cell_xml[..]),
    ] {
        for a in arrays {
            assert_eq!(
                a.values.to_f64(),
                vtu_pieces(xml, &a.name).concat(),
                "{}",
                a.name
            );
        }
    }
    let names: Vec<&str> = grid
        .point_data
        .iter()
        .chain(&grid.cell_data)
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "velocity",
            "node",
            "body",
            "tag",
            "body",
            "youngs_modulus",
            "strain_energy_density",
            "von_mises_stress"
        ]
    );
    // `body` per point (36 nodes of body 0, then 18 of body 1) and per cell (72 tets, 4 hexes).
    let expect = |n0: usize, n1: usize| [vec![0.0; n0], vec![1.0; n1]].concat();
    assert_eq!(vtu_pieces(point_xml, "body")[0], expect(36, 18));
    assert_eq!(vtu_pieces(&cell_xml, "body")[0], expect(72, 4));
    assert_eq!(
        vtu_pieces(point_xml, "node")[0],
        (0..54).map(f64::from).collect::<Vec<_>>()
    );
    let ply = run_cli(
        "simulate",
        &two_bodies,
        &[],
        &["--set", "output.format=\"ply\""],
    );
    assert_eq!(ply.code, 0, "{}", ply.stderr);
    for f in [0, 2, 4] {
        let xml = std::fs::read_to_string(vtu.out().join(format!("frame_{f:05}.vtu"))).unwrap();
        let points = vtu_pieces(&xml, "Points");
        assert_eq!(
            (points.len(), points[0].len()),
            (1, 3 * (36 + 18)),
            "frame {f}"
        );
        assert!(!vtu.out().join(format!("frame_{f:05}.ply")).exists());
    }
    assert!(!vtu.out().join("frame_00001.vtu").exists());
    let pvd = std::fs::read_to_string(vtu.out().join("frames.pvd")).unwrap();
    assert_eq!(pvd.matches("<DataSet ").count(), 3, "{pvd}");
    assert!(pvd.contains("timestep=\"4e-2\"") && pvd.contains("file=\"frame_00004.vtu\""));
    let xml = std::fs::read_to_string(vtu.out().join("frame_00004.vtu")).unwrap();
    let points = vtu_pieces(&xml, "Points");
    let types = vtu_pieces(&xml, "types");
    let tags = vtu_pieces(&xml, "tag");
    // ONE piece (meshio reads only the last of several): body 0 = 4x3x3 nodes and
    // 3*2*2*6 tets, then body 1 = 3x3x2 nodes and 4 hexes; `tag` is the body index.
    assert_eq!(points.len(), 1, "one <Piece>");
    assert_eq!(points[0].len() / 3, 36 + 18);
    assert_eq!(types[0].len(), 76);
    assert!(types[0][..72].iter().all(|&t| t == 10.0));
    assert!(types[0][72..].iter().all(|&t| t == 12.0));
    assert!(tags[0][..72].iter().all(|&t| t == 0.0));
    assert!(tags[0][72..].iter().all(|&t| t == 1.0));
    let youngs = vtu_pieces(&xml, "youngs_modulus");
    assert!(youngs[0][..72].iter().all(|&e| e == 1e5 || e == 4e5));
    assert!(youngs[0][72..].iter().all(|&e| e == 2e5));
    // Per-element strain-energy density and von Mises stress: finite, non-negative, and
    // zero in the rest state of frame 0.
    let psi = vtu_pieces(&xml, "strain_energy_density");
    let mises = vtu_pieces(&xml, "von_mises_stress");
    assert_eq!((psi[0].len(), mises[0].len()), (76, 76));
    assert!(psi[0]
        .iter()
        .chain(&mises[0])
        .all(|v| v.is_finite() && *v >= 0.0));
    assert!(
        psi[0].iter().any(|&v| v > 0.0),
        "the bodies deform by frame 4"
    );
    let xml0 = std::fs::read_to_string(vtu.out().join("frame_00000.vtu")).unwrap();
    assert!(vtu_pieces(&xml0, "strain_energy_density")[0]
        .iter()
        .all(|v| v.abs() < 1e-9));
    let conn = vtu_pieces(&xml, "connectivity");
    assert!(
        conn[0][..72 * 4].iter().all(|&i| i < 36.0),
        "body 0 uses its own nodes"
    );
    assert!(
        conn[0][72 * 4..].iter().all(|&i| (36.0..54.0).contains(&i)),
        "body 1's connectivity is shifted past body 0's nodes"
    );
    // the same positions as the PLY surface of the same frame (PLY stores f32)
    let global: Vec<f64> = points.concat();
    let p4 = read_ply(&ply.out().join("frame_00004.ply"));
    let verts = &p4.payload["vertex"];
    assert_eq!(verts.len(), 34 + 18);
    for v in verts {
        let i = float(&v["node"]) as usize;
        for (d, c) in ["x", "y", "z"].iter().enumerate() {
            let a = global[3 * i + d];
            assert!(
                (float(&v[*c]) - a).abs() <= 1e-6 * (1.0 + a.abs()),
                "node {i}"
            );
        }
    }
    // frame 0 is the rest state, body transforms applied
    let x0 = vtu_pieces(
        &std::fs::read_to_string(vtu.out().join("frame_00000.vtu")).unwrap(),
        "Points",
    );
    assert!(
        (x0[0][3 * 36 + 1] - 0.5).abs() < 1e-12,
        "translated hex body starts at y = 0.5"
    );
}

/// `grad --final-state` (the frontier benchmark's state error): the positions in grad.json
/// are the last frame of the same rollout written by `simulate` (VTU, full precision), and
/// `max_displacement` is the largest node distance from rest over all frames, not only the
/// last one.
#[test]
fn grad_final_state_is_the_simulated_last_frame() {
    let sets = [
        "--set",
        "output.every=1",
        "--set",
        "output.format=\"vtu\"",
        "--set",
        "output.vtu_encoding=\"ascii\"",
        "--set",
        "loss.term=[{type=\"random_linear\", seed=1}]",
        "--set",
        "parameter=[{kind=\"youngs_modulus\", log=true}]",
    ];
    let sim = run_cli("simulate", &scene(), &[], &sets);
    assert_eq!(sim.code, 0, "{}", sim.stderr);
    let grad = run_cli(
        "grad",
        &scene(),
        &[],
        &[&sets[..], &["--final-state"]].concat(),
    );
    assert_eq!(grad.code, 0, "{}", grad.stderr);
    let g: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(grad.out().join("grad.json")).unwrap())
            .unwrap();
    let fs = &g["final_state"];
    assert_eq!(fs["frame"], 4);
    let pos: Vec<f64> = fs["positions"]
        .as_array()
        .expect("positions")
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let frame = |k: usize| {
        let xml = std::fs::read_to_string(sim.out().join(format!("frame_{k:05}.vtu"))).unwrap();
        vtu_pieces(&xml, "Points").remove(0)
    };
    let rest = frame(0);
    let last = frame(4);
    assert_eq!(pos.len(), last.len());
    assert!(
        pos.iter().zip(&last).all(|(a, b)| (a - b).abs() <= 1e-12),
        "grad's final state differs from simulate's last frame"
    );
    let dist = |x: &[f64]| {
        x.chunks(3)
            .zip(rest.chunks(3))
            .map(|(p, r)| (0..3).map(|d| (p[d] - r[d]).powi(2)).sum::<f64>().sqrt())
            .fold(0.0, f64::max)
    };
    let per_frame: Vec<f64> = (0..=4).map(|k| dist(&frame(k))).collect();
    let max = per_frame.iter().cloned().fold(0.0, f64::max);
    let reported = fs["max_displacement"].as_f64().unwrap();
    assert!(
        (reported - max).abs() <= 1e-12,
        "{reported} vs {per_frame:?}"
    );
    assert!(max > 0.0);
    // Without the flag grad.json has no final_state.
    let plain = run_cli("grad", &scene(), &[], &sets);
    let p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(plain.out().join("grad.json")).unwrap())
            .unwrap();
    assert!(p.get("final_state").is_none());
}
