//! Build steps:
//! 1. Compiles the CUDA kernel sources in `kernels/` as host C++ for the GPU emulator
//!    (`gpu::Emulator`): the same `.cu` files that NVRTC compiles for the GPU at run time.
//!    `kernels/device.h` switches the entry macros between the two compilers.
//! 2. Records the git commit the binary was built from (`DIFFPHD_GIT_COMMIT`, empty outside a
//!    checkout; suffixed `-dirty` when tracked files had uncommitted changes), so every output
//!    can say exactly which code wrote it.

use std::process::Command;

fn main() {
    compile_kernels();
    record_git_commit();
}

fn compile_kernels() {
    let kernels = [
        "kernels/vector.cu",
        "kernels/sparse.cu",
        "kernels/local.cu",
        "kernels/gradient.cu",
        "kernels/muscle.cu",
        "kernels/resident.cu",
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
    build.compile("diffphd_kernels_host");
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn record_git_commit() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=Cargo.toml");
    for p in ["HEAD", "logs/HEAD", "index"] {
        if let Some(path) = git(&["rev-parse", "--git-path", p]) {
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    let commit = match git(&["rev-parse", "HEAD"]) {
        Some(c) if !c.is_empty() => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .map(|s| !s.is_empty())
                .unwrap_or(false);
            if dirty {
                format!("{c}-dirty")
            } else {
                c
            }
        }
        _ => String::new(),
    };
    println!("cargo:rustc-env=DIFFPHD_GIT_COMMIT={commit}");
}
