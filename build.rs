//! Build steps:
//! 1. Compiles the CUDA kernel sources in `kernels/` as host C++ for the GPU emulator
//!    (`gpu::Emulator`): the same `.cu` files that NVRTC compiles for the GPU at run time.
//!    `kernels/device.h` switches the entry macros between the two compilers.
//!
//! The git commit an output records is embedded by the programs on top (`cli/build.rs`, the
//! Python extension's), not here: a commit then rebuilds only them, not the library.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    compile_kernels();
}

fn compile_kernels() {
    let kernels = [
        "kernels/vector.cu",
        "kernels/sparse.cu",
        "kernels/local.cu",
        "kernels/gradient.cu",
        "kernels/muscle.cu",
        "kernels/resident.cu",
        "kernels/sort.cu",
        "kernels/mpm.cu",
        "kernels/mpm_contact.cu",
    ];
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .flag("-x")
        .flag("c++")
        .flag_if_supported("-std=c++17")
        .flag_if_supported("-fno-fast-math")
        .flag_if_supported("-ffp-contract=off")
        .define("DPHD_HOST", None)
        .include("kernels")
        .opt_level(2)
        .warnings(true);
    for k in kernels {
        build.file(k);
        println!("cargo:rerun-if-changed={k}");
    }
    println!("cargo:rerun-if-changed=kernels/device.h");
    println!("cargo:rerun-if-changed=kernels/material.h");
    println!("cargo:rerun-if-changed=kernels/mpm.h");
    build.compile("diffphd_kernels_host");
}
