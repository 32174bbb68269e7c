//! Helpers of the GPU parity tests (`tests/gpu/gpu_parity.rs`, `tests/gpu/gpu_rollouts.rs`, `tests/gpu/gpu_gradient_terms.rs`):
//! deterministic noise, relative differences, deformed states and the muscle beam.

use diffphd::model::Model;

/// Deterministic pseudo-random numbers in [-0.5, 0.5).
pub fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        })
        .collect()
}

pub fn rel(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt();
    let den: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
    num / den.max(f64::MIN_POSITIVE)
}

/// Deformed positions: rest + a large twist-like perturbation (some elements far from rest,
/// a few inverted) so every branch of the SVD and the volume projection is exercised.
pub fn deformed(m: &Model, amp: f64, seed: u64) -> Vec<f64> {
    let r = noise(3 * m.num_nodes(), seed);
    m.rest
        .iter()
        .enumerate()
        .flat_map(|(i, p)| {
            let (c, s) = ((3.0 * p[0]).cos(), (3.0 * p[0]).sin());
            [
                p[0] + amp * r[3 * i],
                c * p[1] - s * p[2] + amp * r[3 * i + 1],
                s * p[1] + c * p[2] + amp * r[3 * i + 2],
            ]
        })
        .collect()
}

/// A 1×1×4 beam (2×2×4 cells) with three overlapping muscle groups (two vertical-fibre
/// halves, one circumferential top group), activations varying in time.
pub fn muscle_scene(element: &str, material: &str, frames: usize) -> String {
    muscle_scene_with(element, material, frames, &[])
}

/// [`muscle_scene`] with `extra` sets applied last (`scenes/gpu/muscle_beam.toml`).
pub fn muscle_scene_with(element: &str, material: &str, frames: usize, extra: &[&str]) -> String {
    let sets = [
        format!("simulation.frames={frames}"),
        format!("body.0.mesh.element={element}"),
        format!("body.0.material.model={material}"),
    ];
    super::fixture_sets("scenes/gpu/muscle_beam", &sets, extra)
}

/// Each parity check runs on the emulator everywhere, and on a CUDA device when the binary is
/// built with `--features cuda` and a device is present (it says so and skips otherwise).
#[macro_export]
macro_rules! on_every_device {
    ($($name:ident => $body:ident;)*) => {
        mod emulator {
            $(#[test]
            fn $name() {
                super::$body(&super::Emulator);
            })*
        }
        #[cfg(feature = "cuda")]
        mod cuda {
            $(#[test]
            fn $name() {
                match diffphd::gpu::cuda::Cuda::new(0) {
                    Ok(dev) => super::$body(&dev),
                    Err(e) => $crate::common::skip_unless_cuda_required(&e.to_string()),
                }
            })*
        }
    };
}

/// Solver settings under which the CPU and the device forward converge to the same solution
/// of every step, so that their states can agree to 1e-10 of the motion: accurate mode with
/// the force-balance test at its floor (`residual_tol = 1e-14`: ‖F(x)‖ ≤ 1e-14‖F(x⁰)‖ +
/// 2.2e-13‖b‖), then Newton polish until a step no longer lowers the residual
/// (`polish_tol = 0`, at most 8 steps; the polish residuals land at 1e-15 to 3e-15 of ‖b‖,
/// round-off).
///
/// Why not the force-balance test alone: its floor, 2.2e-13‖b‖ (`gate::RESIDUAL_FLOOR`), is
/// relative to ‖b‖, which the inertial term $M/h^2\,y$ dominates (absolute positions), so it
/// resolves the state to about 1e-12 of the positions but not of a small motion. Measured
/// (2026-11-25, emulator vs CPU, residual_tol 1e-14 without the polish): cantilever 2.1e-10 of
/// the motion, NH bands 4.2e-8 (3 frames, 1.9e-3 m of motion; gradient 2.1e-8) and 3.0e-9
/// (4 frames at twist magnitude 20, 2.5e-2 m; gradient 2.8e-8): the two runs stop at different
/// points under the floor (Newton–Krylov residuals 1e-9 to 4e-8 of ‖F(x⁰)‖, different on each
/// side because the device factor is simplicial and the CPU's supernodal, so the PD iterates
/// before the hand-over differ at round-off and grow apart). With the polish both go to
/// round-off.
///
/// The method is pinned to `diffphd`: these runs compare the device's PD with the CPU's PD
/// (under the default `auto` the CPU side would pick Newton, and switch per frame).
pub const CONVERGED: &[&str] = &[
    "solver.method=\"diffphd\"",
    "solver.residual_tol=1e-14",
    "solver.newton_polish=8",
    "solver.polish_tol=0",
];

/// `diffphd grad` on the scene text `text` with `args` (e.g. `--set` pairs) and
/// `--backend backend`: exit 0, the backend recorded in `grad.json`, and its (gradient, loss).
pub fn grad_cli(text: &str, args: &[String], backend: &str) -> (Vec<f64>, f64) {
    let json = grad_cli_json(text, args, backend);
    let g: Vec<f64> = json["evaluation"]["gradient"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    (g, json["evaluation"]["loss"].as_f64().unwrap())
}

/// `diffphd grad` of `text` with `args` on `backend`: its grad.json, after checking that a
/// device backend launched kernels in the forward and in the backward and the CPU none.
pub fn grad_cli_json(text: &str, args: &[String], backend: &str) -> serde_json::Value {
    let mut a = args.to_vec();
    a.extend(["--backend".to_string(), backend.to_string()]);
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    let r = super::run_cli("grad", text, &[], &a);
    assert_eq!(r.code, 0, "{backend}: {}", r.stderr);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.out().join("grad.json")).unwrap()).unwrap();
    assert_eq!(json["backend"], backend, "{json}");
    // The label is what the flag asked for; the device counters prove where the work ran
    // (a silent fall-back to the CPU has no device launches).
    for phase in ["forward_traffic", "backward_traffic"] {
        let launches = json["evaluation"][phase]["launches"].as_u64();
        if backend == "cpu" {
            assert_eq!(launches, None, "cpu: {phase} recorded device traffic");
        } else {
            assert!(
                launches.is_some_and(|n| n > 0),
                "{backend}: no device launches in evaluation.{phase}"
            );
        }
    }
    json
}
