//! PLY frames as read by tracking losses (`io::ply::read_node_positions`).
#![no_main]
use libfuzzer_sys::fuzz_target;
#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let p = common::file("frame_00001.ply", data);
    let _ = diffphd::io::ply::read_node_positions(&p);
});
