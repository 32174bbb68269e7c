//! Scene TOML (+ leading `#set` lines; or `#forces` + a force measurement file) → load, validate, model build (body: `diffphd_fuzz_bodies::scene`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| diffphd_fuzz_bodies::scene(data));
