//! JSON logs → SVG as `diffphd plot` does it (body: `diffphd_fuzz_bodies::plot_json`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| diffphd_fuzz_bodies::plot_json(data));
