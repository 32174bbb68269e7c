//! Every kernel in `kernels/` compiles with NVRTC for sm_90 (the lent H100/H200), through the
//! same code path the CUDA device uses (`gpu::nvrtc`). Needs no GPU, only the NVRTC library:
//! `.ci/run` installs the pinned wheel (scripts/nvrtc_env.sh) and sets `REQUIRE_NVRTC=1`, so
//! on CI a missing library fails instead of skipping. Elsewhere the test skips with a reason.

use diffphd::gpu::nvrtc::Nvrtc;

#[test]
fn every_kernel_compiles_for_sm_90_with_nvrtc() {
    let nv = match Nvrtc::load() {
        Ok(nv) => nv,
        Err(why) => {
            assert!(
                std::env::var_os("REQUIRE_NVRTC").is_none(),
                "REQUIRE_NVRTC is set but {why}"
            );
            eprintln!("skipping the NVRTC compile check: {why}");
            return;
        }
    };
    let (major, minor) = nv.version().expect("nvrtcVersion");
    let mut failures = Vec::new();
    for c in nv.compile_all("sm_90") {
        match c.result {
            Ok(ptx) => {
                assert!(
                    ptx.contains(".target sm_90"),
                    "{}: no sm_90 target in PTX",
                    c.name
                );
                eprintln!(
                    "ok {} ({} bytes of PTX, NVRTC {major}.{minor})",
                    c.name,
                    ptx.len()
                );
            }
            Err(log) => failures.push(format!("{}:\n{log}", c.name)),
        }
    }
    assert!(
        failures.is_empty(),
        "NVRTC failures:\n{}",
        failures.join("\n")
    );
}

/// A kernel with an error is reported with its file name and NVRTC's log (the check can fail).
#[test]
fn a_broken_kernel_fails_with_its_log() {
    let Ok(nv) = Nvrtc::load() else {
        eprintln!("skipping: NVRTC not found");
        return;
    };
    let src = "#include \"device.h\"\nDPHD_KERNEL(bad)(DPHD_ITEM_PARAM long long n, double* y) { y[0] = undefined_fn(n); }\n";
    let log = nv
        .compile("kernels/bad.cu", src, "sm_90")
        .unwrap_err()
        .to_string();
    assert!(
        log.contains("kernels/bad.cu") && log.contains("undefined_fn"),
        "{log}"
    );
}
