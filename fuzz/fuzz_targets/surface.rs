//! Triangle surfaces for `mesh voxelize` through `mesh::trisurf::read_surface`. The first
//! byte picks the format (OBJ, OFF, STL, PLY), the rest is the file.
#![no_main]
use libfuzzer_sys::fuzz_target;
#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let ext = ["obj", "off", "stl", "ply"][sel as usize % 4];
    let p = common::file(&format!("s.{ext}"), rest);
    if let Ok(s) = diffphd::mesh::trisurf::read_surface(&p) {
        let _ = diffphd::mesh::trisurf::topology(&s);
    }
});
