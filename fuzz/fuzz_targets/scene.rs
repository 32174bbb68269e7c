//! Scene TOML → load + overrides + validate, and for small generated meshes the model
//! build (selectors, regions, initial state, forces, contact settings resolved); for MPM and
//! rigid scenes (`[mpm]`, `[[mpm_body]]`, `[[rigid_body]]`) the system build (seeding, the
//! domain, CFL and memory checks, shapes, drives, obstacle colliders) under a 1 MiB budget.
//! Input: leading lines `#set KEY=VALUE` are `--set` overrides, the rest is the scene; an
//! input starting with the line `#forces` is a `contact_force` loss term's measurement file.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
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
    let path = std::path::Path::new("/nonexistent-diffphd-fuzz/scene.toml");
    let Ok(ls) = diffphd::scene::load_str(body, path, &sets) else {
        return;
    };
    // The model build reads mesh files (none exist under the fake path) and generates
    // meshes (box, sphere, cylinder, rounded box, crab): keep generated meshes small so one input costs milliseconds (the size guard of
    // the box generator itself is tested in tests/, not here).
    let small = ls.scene.bodies.iter().all(|b| {
        let m = &b.mesh;
        m.file.is_none()
            && m.cells.is_none_or(|c| {
                c.iter()
                    .try_fold(1usize, |a, &n| a.checked_mul(n))
                    .is_some_and(|n| n <= 512)
            })
            && m.radius
                .is_none_or(|r| m.dx.is_some_and(|dx| r / dx <= 8.0))
            && m.height
                .is_none_or(|h| m.dx.is_some_and(|dx| h / dx <= 8.0))
            && m.size.is_none_or(|s| {
                m.dx.is_some_and(|dx| s.iter().all(|e| e / dx <= 8.0))
            })
            // the crab at its coarsest size is 551 cells; finer ones cost milliseconds more
            && m.resolution.is_none_or(|r| r <= 16)
    });
    if ls.scene.is_mpm() {
        // The memory budget keeps one input to milliseconds (at most ~2000 particles).
        let _ = diffphd::mpm::build(&ls, Some((1 << 20, "the fuzz budget".into())));
        return;
    }
    if small && ls.scene.bodies.len() <= 4 {
        let _ = diffphd::solver::Model::from_scene(&ls);
    }
});
