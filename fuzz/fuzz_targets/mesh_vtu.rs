//! VTK XML unstructured grids (body: `diffphd_fuzz_bodies::mesh`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| diffphd_fuzz_bodies::mesh("vtu", data));
