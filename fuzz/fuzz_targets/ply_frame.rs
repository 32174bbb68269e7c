//! PLY frames as tracking losses read them (body: `diffphd_fuzz_bodies::ply_frame`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| diffphd_fuzz_bodies::ply_frame(data));
