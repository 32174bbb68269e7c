//! TetGen `.node` + `.ele` through `mesh::readers::read_mesh`. Input: the `.node` text, a
//! line `---`, the `.ele` text.
#![no_main]
use libfuzzer_sys::fuzz_target;
#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let split = data.windows(5).position(|w| w == b"\n---\n");
    let (node, ele) = match split {
        Some(i) => (&data[..i + 1], &data[i + 5..]),
        None => (data, &b""[..]),
    };
    common::file("m.node", node);
    let p = common::file("m.ele", ele);
    let _ = diffphd::mesh::readers::read_mesh(&p);
});
