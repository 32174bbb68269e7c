//! Every committed scene in `scenes/` loads, validates, builds its model and (when it
//! declares `[[parameter]]`s) its inverse problem, and a simulator is set up for it (MPM/rigid
//! scenes: their system is built). This
//! catches scene files left behind by a renamed key, a changed default or a moved mesh.
//! Nothing is simulated here; the scenes' own runs live in `scripts/`.

use crate::common;

#[test]
fn every_committed_scene_loads_and_builds() {
    let dir = common::repo().join("scenes");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("scenes/ exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 10, "found only {} scenes", paths.len());
    let stand_in = tempfile::tempdir().expect("tempdir");
    for p in &paths {
        let name = p.display();
        let sets = external_mesh_override(p, stand_in.path());
        let ls = diffphd::scene::load(p, &sets).unwrap_or_else(|e| panic!("{name}: {e}"));
        if ls.scene.is_mpm() {
            // MPM/rigid scenes: the system build (seeding, CFL, shapes, drives, colliders).
            let (sys, state) =
                diffphd::mpm::build(&ls, None).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(sys.frames > 0 && !state.world.bodies.is_empty(), "{name}");
            eprintln!("{name}: ok (MPM/rigid)");
            continue;
        }
        let model =
            diffphd::solver::Model::from_scene(&ls).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(model.num_nodes() > 0 && model.frames > 0, "{name}");
        diffphd::solver::Simulator::new(&model, &ls.scene.solver)
            .unwrap_or_else(|e| panic!("{name}: simulator: {e}"));
        if !ls.scene.parameters.is_empty() {
            diffphd::optimize::problem::Problem::new(ls)
                .unwrap_or_else(|e| panic!("{name}: problem: {e}"));
        }
        eprintln!("{name}: ok ({} nodes)", model.num_nodes());
    }
}

/// Scenes whose mesh is not in the repository (DiffPD's `plant.bin`, given by path at run
/// time): the real mesh from `$DIFFPHD_ANCHOR_MESHES` when that is set, else a two-voxel
/// DiffPD `.bin` stand-in written into `tmp`, so that the rest of the scene (root selector,
/// push, loss, parameters) is still checked.
fn external_mesh_override(scene: &std::path::Path, tmp: &std::path::Path) -> Vec<String> {
    if scene.file_name().is_none_or(|n| n != "plant.toml") {
        return vec![];
    }
    let mesh = match std::env::var_os("DIFFPHD_ANCHOR_MESHES") {
        Some(dir) => std::path::PathBuf::from(dir).join("plant.bin"),
        None => {
            let path = tmp.join("plant_stand_in.bin");
            std::fs::write(&path, two_voxel_column_bin(0.011628)).expect("write stand-in");
            path
        }
    };
    vec![format!("body.0.mesh.file={:?}", mesh.display().to_string())]
}

/// DiffPD's binary hex mesh (`Mesh<3, 8>`, little-endian) of a column of two voxels of edge
/// `dx` standing on z = 0: corner `4a + 2b + c` of a voxel sits at offset `(a, b, c)·dx`.
fn two_voxel_column_bin(dx: f64) -> Vec<u8> {
    let node = |a: usize, b: usize, k: usize| a + 2 * (b + 2 * k);
    let mut xyz = [vec![], vec![], vec![]];
    for k in 0..3 {
        for b in 0..2 {
            for a in 0..2 {
                for (d, v) in [a, b, k].into_iter().enumerate() {
                    xyz[d].push(v as f64 * dx);
                }
            }
        }
    }
    let mut out = Vec::new();
    for v in [3i32, 8, 3, 12] {
        out.extend(v.to_le_bytes());
    }
    for v in xyz.concat() {
        out.extend(v.to_le_bytes());
    }
    for v in [8i32, 2] {
        out.extend(v.to_le_bytes());
    }
    for corner in 0..8 {
        let (a, b, c) = (corner / 4, (corner / 2) % 2, corner % 2);
        for voxel in 0..2 {
            out.extend((node(a, b, voxel + c) as i32).to_le_bytes());
        }
    }
    out
}

/// The frontier benchmark's analysis (scripts/bench_frontier.py: errors, Pareto frontier,
/// log-log interpolation, speed-up bounds) on synthetic input. Skipped where `python3` is
/// missing (the script needs it anyway).
#[test]
fn bench_frontier_analysis_self_test() {
    let script = common::repo().join("scripts/bench_frontier.py");
    match std::process::Command::new("python3")
        .arg(&script)
        .arg("--self-test")
        .output()
    {
        Err(e) => common::skip_unless_ci(&format!("python3 not runnable: {e}")),
        Ok(out) => assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ok"),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}
