//! The bodies of the fuzz targets in `fuzz/fuzz_targets/`: each takes the raw bytes of one
//! untrusted input, feeds them to the public reading API the way a user's file reaches it, and
//! ignores the `Result` — the property under test is "no panic, no hang, no abort" (bad input
//! must come back as an error). The cargo-fuzz targets call these functions; the stable corpus
//! test (`tests/cli/fuzz_corpus.rs`) runs them over the repository's own files and
//! deterministic mutations of them, so an API change or a panic on a near-valid file fails CI
//! without the nightly fuzz build.

use std::path::{Path, PathBuf};

/// A per-process scratch folder (the mesh readers' public API takes a path).
fn scratch() -> std::io::Result<PathBuf> {
    let d = std::env::temp_dir().join(format!("diffphd-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

/// Write `bytes` to `name` in the scratch folder; `None` when the scratch folder is not
/// writable (then the input is skipped: that is the harness's failure, not the reader's).
fn file(name: &str, bytes: &[u8]) -> Option<PathBuf> {
    let p = scratch().ok()?.join(name);
    std::fs::write(&p, bytes).ok()?;
    Some(p)
}

/// A mesh file with extension `ext` (`bin`, `msh`, `mesh`, `vtk`, `vtu`) through
/// `mesh::readers::read_mesh` (validation included).
pub fn mesh(ext: &str, data: &[u8]) {
    if let Some(p) = file(&format!("m.{ext}"), data) {
        let _ = diffphd::mesh::readers::read_mesh(&p);
    }
}

/// TetGen `.node` + `.ele`: the `.node` text, a line `---`, the `.ele` text.
pub fn mesh_tetgen(data: &[u8]) {
    let split = data.windows(5).position(|w| w == b"\n---\n");
    let (node, ele) = match split {
        Some(i) => (&data[..i + 1], &data[i + 5..]),
        None => (data, &b""[..]),
    };
    if file("m.node", node).is_none() {
        return;
    }
    if let Some(p) = file("m.ele", ele) {
        let _ = diffphd::mesh::readers::read_mesh(&p);
    }
}

/// Triangle surfaces for `mesh voxelize`: the first byte picks the format (OBJ, OFF, STL,
/// PLY), the rest is the file; read, then its topology.
pub fn surface(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let ext = ["obj", "off", "stl", "ply"][sel as usize % 4];
    if let Some(p) = file(&format!("s.{ext}"), rest) {
        if let Ok(s) = diffphd::mesh::trisurf::read_surface(&p) {
            let _ = diffphd::mesh::trisurf::topology(&s);
        }
    }
}

/// PLY frames as the tracking losses read them (`io::ply::read_node_positions`).
pub fn ply_frame(data: &[u8]) {
    if let Some(p) = file("frame_00001.ply", data) {
        let _ = diffphd::io::ply::read_node_positions(&p);
    }
}

/// A JSON log (`optimize.json` or a simulation's `log.json`) rendered as `diffphd plot` does.
pub fn plot_json(data: &[u8]) {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = diffphd_cli::plot::render_log(&v, &[], diffphd_cli::plot::Format::Svg);
    }
}

/// Scene TOML → load + overrides + validate, and for small generated meshes the model build
/// (selectors, regions, initial state, forces, contact settings resolved); for MPM and rigid
/// scenes the system build under a 1 MiB budget. Leading lines `#set KEY=VALUE` are `--set`
/// overrides, the rest is the scene; an input starting with the line `#forces` is a
/// `contact_force` loss term's measurement file instead.
pub fn scene(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(rest) = text.strip_prefix("#forces\n") {
        let _ = diffphd::optimize::problem::parse_forces(rest, 64);
        return;
    }
    let mut sets = Vec::new();
    let mut body = text;
    while let Some(rest) = body.strip_prefix("#set ") {
        let (line, tail) = rest.split_once('\n').unwrap_or((rest, ""));
        sets.push(line.to_string());
        body = tail;
    }
    let path = Path::new("/nonexistent-diffphd-fuzz/scene.toml");
    let Ok(ls) = diffphd::scene::load_str(body, path, &sets) else {
        return;
    };
    if ls.scene.is_mpm() {
        // The memory budget keeps one input to milliseconds (at most ~2000 particles).
        let _ = diffphd::mpm::build(&ls, Some((1 << 20, "the fuzz budget".into())));
        return;
    }
    if small_generated_meshes(&ls.scene) && ls.scene.bodies.len() <= 4 {
        let _ = diffphd::solver::Model::from_scene(&ls);
    }
}

/// Whether every body's mesh is generated and small (≤ 512 cells, ≤ 8 cells across), so one
/// model build costs milliseconds (the generators' own size guards are tested in `tests/`).
fn small_generated_meshes(scene: &diffphd::scene::Scene) -> bool {
    scene.bodies.iter().all(|b| {
        let m = &b.mesh;
        let across = |len: Option<f64>| len.is_none_or(|l| m.dx.is_some_and(|dx| l / dx <= 8.0));
        m.file.is_none()
            && m.cells.is_none_or(|c| {
                c.iter()
                    .try_fold(1usize, |a, &n| a.checked_mul(n))
                    .is_some_and(|n| n <= 512)
            })
            && across(m.radius)
            && across(m.height)
            && m.size.is_none_or(|s| s.iter().all(|&e| across(Some(e))))
            // the crab at its coarsest size is 551 cells; finer ones cost milliseconds more
            && m.resolution.is_none_or(|r| r <= 16)
    })
}
