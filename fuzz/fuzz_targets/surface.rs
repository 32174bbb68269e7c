//! Triangle surfaces for `mesh voxelize` (body: `diffphd_fuzz_bodies::surface`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| diffphd_fuzz_bodies::surface(data));
