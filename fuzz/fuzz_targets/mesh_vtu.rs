//! VTK XML unstructured grids through `mesh::readers::read_mesh` (`.vtu`: ASCII, base64,
//! raw and zlib-compressed binary).
#![no_main]
use libfuzzer_sys::fuzz_target;
#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let p = common::file("m.vtu", data);
    let _ = diffphd::mesh::readers::read_mesh(&p);
});
