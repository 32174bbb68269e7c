//! Every committed scene in `scenes/` loads, validates, builds its model and (when it
//! declares `[[parameter]]`s) its inverse problem, and a simulator is set up for it. This
//! catches scene files left behind by a renamed key, a changed default or a moved mesh.
//! Nothing is simulated here; the scenes' own runs live in `scripts/`.

mod common;

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
    for p in &paths {
        let name = p.display();
        let ls = diffphd::scene::load(p, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
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
