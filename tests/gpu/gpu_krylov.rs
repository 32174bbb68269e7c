//! The Krylov methods with their vectors on a device (issue 15, docs/gpu.md "Krylov vectors":
//! `Offload::krylov_space`, `gpu::krylov`) against the CPU path, one solve at a time: the
//! adjoint's GMRES ($K=A-\Delta A$ at a deformed state, right-preconditioned by $A^{-1}$) and
//! the Newton–Krylov phase's PCG (the projected, positive definite $K$). Emulator everywhere,
//! a CUDA device with `--features cuda`. Each check also asserts, from the device system's
//! counters, that the solve ran on device vectors (a silent fallback to the host loop would
//! otherwise pass).

use crate::common;
use crate::on_every_device;

use common::gpu::{deformed, muscle_scene_with, noise, rel};
use diffphd::gpu::offload::DeviceOffload;
use diffphd::gpu::system::SolveCounts;
use diffphd::gpu::{Device, Emulator};
use diffphd::model::Model;
use diffphd::solver::backward::{
    solve_a, solve_gmres, solve_pcg, solve_steihaug, StepLinearization,
};
use diffphd::solver::config::BackwardConfig;
use diffphd::solver::offload::OffloadError;
use diffphd::solver::Simulator;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

on_every_device! {
    adjoint_gmres_matches_the_cpu_path => gmres_on;
    newton_pcg_matches_the_cpu_path => pcg_on;
    trust_region_steps_match_the_cpu_path => steihaug_on;
    a_stale_linearization_fails_the_device_solve_loudly => stale_on;
}

/// The corotated cantilever (20×5×5 hex, 2,268 DoFs: three chunks of the two-pass dot
/// products) and the Neo-Hookean tet muscle beam (4×4×16 cells, 1,275 DoFs, muscle term in
/// $\Delta A$), both clamped, with the amplitude of their deformed states.
fn scenes() -> Vec<(&'static str, String, f64)> {
    let cantilever =
        std::fs::read_to_string(common::repo().join("scenes/cantilever.toml")).unwrap();
    let beam = muscle_scene_with(
        "tet4",
        "neohookean",
        4,
        &["body.0.mesh.cells=[4, 4, 16]", "body.0.mesh.dx=0.0125"],
    );
    vec![
        ("cantilever", cantilever, 0.002),
        ("NH muscle beam", beam, 0.001),
    ]
}

/// A CPU simulator and one with `dev`'s offload, of the same model, and the device system's
/// counters.
fn pair<'m, D: Device + Clone + 'static>(
    dev: &D,
    m: &'m Model,
    ls: &diffphd::scene::LoadedScene,
) -> (Simulator<'m>, Simulator<'m>, Arc<SolveCounts>) {
    let cpu = Simulator::new(m, &ls.scene.solver).unwrap();
    let mut gpu = Simulator::new(m, &ls.scene.solver).unwrap();
    let off = DeviceOffload::new(dev.clone(), &gpu, usize::MAX).unwrap();
    let counts = off.solve_counts();
    gpu.offload = Some(Box::new(off));
    (cpu, gpu, counts)
}

/// What one device solve did, from the counters: (Krylov solves on device vectors, their
/// preconditioner's axis solves, homogeneous solves through the host loop's seam).
fn counted(c: &SolveCounts) -> [usize; 3] {
    [
        c.krylov_solves.load(Relaxed),
        c.krylov_axis.load(Relaxed),
        c.homogeneous.load(Relaxed),
    ]
}

/// One Krylov method on a simulator: (iterations, converged).
type Solve<'a> = dyn Fn(&Simulator, &StepLinearization, &[f64], &mut [f64]) -> (usize, bool) + 'a;

/// Device solve against CPU solve: one Krylov solve on device vectors (and no host-loop
/// solve through the seam), solution within `bound` of the CPU's, iteration counts equal or
/// ±1.
fn compare<D: Device + Clone + 'static>(
    dev: &D,
    what: &str,
    lin_of: &dyn Fn(&Simulator, &[f64]) -> StepLinearization<'static>,
    solve: &Solve<'_>,
) {
    for (name, text, amp) in scenes() {
        let ls = common::load(&text, &[]);
        let m = Model::from_scene(&ls).unwrap();
        let (cpu, gpu, counts) = pair(dev, &m, &ls);
        let x = deformed(&m, amp, 3);
        let mut g = noise(3 * m.num_nodes(), 11);
        cpu.zero_prescribed(&mut g);
        let (lin_c, lin_d) = (lin_of(&cpu, &x), lin_of(&gpu, &x));
        let (mut zc, mut zd) = (vec![0.0; g.len()], vec![0.0; g.len()]);
        let (ic, cc) = solve(&cpu, &lin_c, &g, &mut zc);
        let before = counted(&counts);
        let (id, cd) = solve(&gpu, &lin_d, &g, &mut zd);
        let after = counted(&counts);
        let e = rel(&zd, &zc);
        eprintln!(
            "{what}, {name} ({} DoFs): iterations cpu {ic} device {id}, solution {e:.2e}; device counters [Krylov solves, their axis solves, host-loop A⁻¹ solves] {before:?} -> {after:?}",
            g.len()
        );
        assert!(
            cc && cd,
            "{what}, {name}: not converged (cpu {cc}, device {cd})"
        );
        assert_eq!(
            after[0] - before[0],
            1,
            "{what}, {name}: not on device vectors"
        );
        assert!(
            after[1] - before[1] >= 3 * id,
            "{what}, {name}: preconditioner"
        );
        assert_eq!(after[2], before[2], "{what}, {name}: host-loop solves ran");
        // the emulator's iterates follow the CPU's to the last bits (±1 iteration); a GPU's
        // fused multiply-adds round differently (H100, 2026-11-27: GMRES 544 vs 540 on the
        // cantilever, the same solution to 7.9e-14), so allow 2 %
        assert!(
            ic.abs_diff(id) <= 1 + ic / 50,
            "{what}, {name}: iterations {ic} vs {id}"
        );
        assert!(e <= 1e-10, "{what}, {name}: solution differs by {e:e}");
    }
}

/// The adjoint's GMRES (restart 30, so it restarts; to 1e-13) on $K=A-\Delta A$ at a
/// deformed state. Measured: see the printed lines.
fn gmres_on<D: Device + Clone + 'static>(dev: &D) {
    let cfg = BackwardConfig::gmres(1e-13, 3000, 30, 10.0);
    compare(
        dev,
        "GMRES",
        &|sim, x| StepLinearization::new(sim, x, 0.0).unwrap(),
        &|sim, lin, g, z| {
            let st = solve_gmres(sim, lin, g, z, &cfg).unwrap();
            (st.iterations, st.converged)
        },
    );
}

/// PCG on the projected $K\succeq M/h^2$ of the Newton–Krylov phase (to 1e-13).
fn pcg_on<D: Device + Clone + 'static>(dev: &D) {
    let cfg = BackwardConfig::gmres(1e-13, 3000, 30, 10.0);
    compare(
        dev,
        "PCG",
        &|sim, x| StepLinearization::projected(sim, x).unwrap(),
        &|sim, lin, g, z| {
            let (it, converged, _) = solve_pcg(sim, lin, g, z, &cfg).unwrap();
            (it, converged)
        },
    );
}

/// The forward's trust-region subproblem (Steihaug–Toint CG on the exact $K=A-\Delta A$,
/// preconditioned by $A^{-1}$) on device vectors against the CPU path, with the phase's
/// first region (1,000 PD steps $\|A^{-1}g\|_A$) and one of 30 PD steps: the same exit
/// (interior, boundary, negative curvature), model decrease within 1e-10 and step within
/// 1e-6, one Krylov solve on the device. Measured on the emulator: the steps agree to 2e-13
/// where CG converges or stops after 17 iterations, to 2.9e-8 on the cantilever's first
/// region (27 iterations on a nearly singular $K$: the step's residual is 26× the
/// right-hand side, so summation order shows), where the model decreases agree to 9e-12.
fn steihaug_on<D: Device + Clone + 'static>(dev: &D) {
    let cfg = BackwardConfig::gmres(1e-12, 3000, 30, 10.0);
    for (name, text, amp) in scenes() {
        let ls = common::load(&text, &[]);
        let m = Model::from_scene(&ls).unwrap();
        let (cpu, gpu, counts) = pair(dev, &m, &ls);
        let x = deformed(&m, amp, 3);
        let mut g = noise(3 * m.num_nodes(), 11);
        cpu.zero_prescribed(&mut g);
        let lin_c = StepLinearization::for_newton(&cpu, &x, false).unwrap();
        let lin_d = StepLinearization::for_newton(&gpu, &x, false).unwrap();
        let mut ag = vec![0.0; g.len()];
        solve_a(&cpu, &g, &mut ag).unwrap();
        let pd_step = g.iter().zip(&ag).map(|(a, b)| a * b).sum::<f64>().sqrt();
        for radius in [1e3 * pd_step, 30.0 * pd_step] {
            let (mut zc, mut zd) = (vec![0.0; g.len()], vec![0.0; g.len()]);
            let sc = solve_steihaug(&cpu, &lin_c, &g, &mut zc, radius, &cfg).unwrap();
            let before = counted(&counts);
            let sd = solve_steihaug(&gpu, &lin_d, &g, &mut zd, radius, &cfg).unwrap();
            let after = counted(&counts);
            let e = rel(&zd, &zc);
            let de = (sd.model_decrease - sc.model_decrease).abs() / sc.model_decrease.abs();
            eprintln!(
                "Steihaug, {name}, radius {radius:.3e}: cpu {sc:?}, device iterations {}, step {e:.2e}, decrease {de:.2e}",
                sd.krylov.iterations
            );
            assert_eq!(after[0] - before[0], 1, "{name}: not on device vectors");
            assert_eq!(after[2], before[2], "{name}: host-loop solves ran");
            assert_eq!(
                (sc.boundary, sc.negative_curvature),
                (sd.boundary, sd.negative_curvature),
                "{name}, radius {radius:e}: exits differ"
            );
            assert!(sc.model_decrease > 0.0, "{name}: {sc:?}");
            assert!(
                e <= 1e-6 && de <= 1e-10,
                "{name}: step {e:e}, decrease {de:e}"
            );
            assert!(sc.krylov.iterations > 1, "{name}: {sc:?}");
        }
    }
}

/// A solve on the device asked for a linearization that is no longer the device's (a later
/// one was planned) fails loudly: the solve returns `OffloadError::Stale` (which the
/// rollout turns into an error naming the frame); the current linearization then solves.
fn stale_on<D: Device + Clone + 'static>(dev: &D) {
    let (_, text, amp) = scenes().remove(0);
    let ls = common::load(&text, &[]);
    let m = Model::from_scene(&ls).unwrap();
    let (_, gpu, _) = pair(dev, &m, &ls);
    let (x1, x2) = (deformed(&m, amp, 3), deformed(&m, amp, 4));
    let mut g = noise(3 * m.num_nodes(), 11);
    gpu.zero_prescribed(&mut g);
    let cfg = BackwardConfig::gmres(1e-8, 500, 30, 10.0);
    let old = StepLinearization::new(&gpu, &x1, 0.0).unwrap();
    let new = StepLinearization::new(&gpu, &x2, 0.0).unwrap();
    let mut z = vec![0.0; g.len()];
    let err = solve_gmres(&gpu, &old, &g, &mut z, &cfg).expect_err("a stale linearization");
    eprintln!("stale linearization: {err:?}");
    assert!(
        matches!(err, OffloadError::Stale { token, current, .. } if token + 1 == current),
        "{err:?}"
    );
    assert!(err.to_string().contains("linearization"), "{err}");
    let mut z = vec![0.0; g.len()];
    let st = solve_gmres(&gpu, &new, &g, &mut z, &cfg).unwrap();
    assert!(st.converged, "{st:?}");
}
