//! `.msh` files through `mesh::readers::read_mesh` (validation included).
#![no_main]
use libfuzzer_sys::fuzz_target;
#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let p = common::file("m.msh", data);
    let _ = diffphd::mesh::readers::read_mesh(&p);
});
