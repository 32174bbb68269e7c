//! GPU backend: the probe must report a missing driver cleanly (no panic), and `--backend
//! cuda` must refuse to run with the reason. Skips with a printed reason where no device
//! exists or the binary was built without `--features cuda`, except under `REQUIRE_CUDA=1`
//! (`scripts/gpu_device.sh`), where a missing device fails.

use crate::common;

#[test]
fn cuda_probe_reports_a_reason_or_a_device() {
    match diffphd::gpu::cuda_status() {
        Err(why) => {
            assert!(!why.to_string().is_empty());
            common::skip_unless_cuda_required(&why.to_string());
        }
        Ok(()) => eprintln!("CUDA device found"),
    }
}

/// Without a usable device (no driver, no GPU, or a binary built without `--features cuda`)
/// `--backend cuda` is refused with exit 2 and the reason; with one it runs.
#[test]
fn backend_cuda_is_refused_with_the_reason() {
    let scene = common::fixture("scenes/gpu/box", &[]);
    let r = common::run_cli("simulate", &scene, &[], &["--backend", "cuda"]);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    let required = std::env::var_os("REQUIRE_CUDA").is_some_and(|v| v == "1");
    if required || (cfg!(feature = "cuda") && diffphd::gpu::cuda_status().is_ok()) {
        assert_eq!(r.code, 0, "a device is present: {}", r.stderr);
    } else {
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stderr.contains("cuda") || r.stderr.contains("CUDA"));
    }
}

#[test]
fn doctor_reports_the_cpu_path_and_exits_zero() {
    let out = std::process::Command::new(common::bin())
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["cpu_threads"].as_u64().unwrap() >= 1);
    assert_eq!(v["emulator"], true);
    assert_eq!(
        v["kernels"].as_array().unwrap().len(),
        diffphd::gpu::kernels::SOURCES.len()
    );
}

/// `--backend emulator` runs `simulate` through the GPU kernels' host emulator (the same
/// pipeline as `--backend cuda`) and records the backend; `grad` on the GPU path refuses
/// another solver method than PD up front, with exit 2 and one line, and runs muscles.
#[test]
fn backend_emulator_runs_simulate_and_grad_and_refuses_other_methods() {
    let bar = ["simulation.frames=3", "body.0.mesh.cells=[3, 1, 1]"];
    let scene = common::fixture("scenes/gpu/box", &bar);
    let r = common::run_cli("simulate", &scene, &[], &["--backend", "emulator"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let log = r.log();
    assert_eq!(log["header"]["backend"], "emulator");
    assert_eq!(log["frames"].as_array().unwrap().len(), 3);
    // the label is the flag's; the emulator's launch counter proves the device path ran
    let launches = log["summary"]["device_traffic"]["launches"].as_u64();
    assert!(
        launches.is_some_and(|n| n > 0),
        "no device launches: {}",
        log["summary"]
    );
    let loss = [
        r#"body.0.dirichlet=[{ select = { face = "x_min" } }]"#,
        r#"loss.term=[{ type = "random_linear", seed = 1 }]"#,
        r#"parameter=[{ kind = "youngs_modulus" }]"#,
    ];
    let with_loss = common::fixture("scenes/gpu/box", &[&bar[..], &loss].concat());
    let g = common::run_cli(
        "grad",
        &with_loss,
        &[],
        &["--backend", "emulator", "--solver", "newton"],
    );
    assert_eq!(g.code, 2, "{}", g.stderr);
    assert!(g.stderr.contains("PD method only"), "{}", g.stderr);
    assert_eq!(g.stderr.trim().lines().count(), 1, "{}", g.stderr);
    // muscles run on the GPU path (local step on the device, the muscle term of ΔA·z on the
    // host): `grad` completes
    let muscle = r#"body.0.muscle=[{ select = { box = { min = [-1, -1, -1], max = [1, 1, 1] } }, fiber = [1.0, 0.0, 0.0], stiffness = 1e4 }]"#;
    let muscles = common::fixture("scenes/gpu/box", &[&bar[..], &loss, &[muscle]].concat());
    let g = common::run_cli("grad", &muscles, &[], &["--backend", "emulator"]);
    assert_eq!(g.code, 0, "{}", g.stderr);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(g.out().join("grad.json")).unwrap()).unwrap();
    for phase in ["forward_traffic", "backward_traffic"] {
        let launches = json["evaluation"][phase]["launches"].as_u64();
        assert!(
            launches.is_some_and(|n| n > 0),
            "grad: no device launches in {phase}"
        );
    }
}
