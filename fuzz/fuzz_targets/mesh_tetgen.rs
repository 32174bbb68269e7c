//! TetGen `.node` + `---` + `.ele` (body: `diffphd_fuzz_bodies::mesh_tetgen`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| diffphd_fuzz_bodies::mesh_tetgen(data));
