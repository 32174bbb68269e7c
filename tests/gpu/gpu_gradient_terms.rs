//! Parity of the backward's device stages of issue 15 (docs/gpu.md "Gradient terms") on the
//! emulator against the CPU path: $\Delta A\,z$ with the muscle term as one device product
//! through the seam (`backward::delta_a`), and the per-step nodal (ρ, α, gravity), force-group
//! and muscle-activation gradient sums of `gradient::accumulate_step`; end to end,
//! `grad --backend emulator` on a muscle scene with those parameter classes.

use crate::common;
use crate::on_every_device;

use common::gpu::{deformed, muscle_scene, muscle_scene_with, noise, rel};
use diffphd::gpu::device::Device;
use diffphd::gpu::offload::DeviceOffload;
use diffphd::gpu::Emulator;
use diffphd::model::Model;
use diffphd::solver::backward::{delta_a, StepLinearization};
use diffphd::solver::gradient::{accumulate_step, Gradients, StepStates};
use diffphd::solver::Simulator;

on_every_device! {
    muscle_delta_a_through_the_seam_matches_the_cpu_product => muscle_delta_a_on;
    nodal_force_and_muscle_gradient_terms_match_the_cpu_path => gradient_terms_on;
}

/// A CPU simulator and one with device `d`'s offload, of the same model.
fn pair<'m, D: Device + Clone + 'static>(
    d: &D,
    m: &'m Model,
    ls: &diffphd::scene::LoadedScene,
) -> (Simulator<'m>, Simulator<'m>) {
    let cpu = Simulator::new(m, &ls.scene.solver).unwrap();
    let mut dev = Simulator::new(m, &ls.scene.solver).unwrap();
    dev.offload = Some(Box::new(
        DeviceOffload::new(d.clone(), &dev, usize::MAX).unwrap(),
    ));
    (cpu, dev)
}

/// `delta_a` with the offload (spectral + muscle kernels, one device product; the host adds
/// nothing) against `StepLinearization::apply` on the CPU (material + `MuscleLin::apply`),
/// muscle beams hex/corotated and tet/Neo-Hookean at two times. The muscle term is a visible
/// part of the product (checked), so a device product without it would fail.
/// Measured 2026-11-26: ≤ 4.4e-16 (bound 1e-13).
fn muscle_delta_a_on<D: Device + Clone + 'static>(d: &D) {
    for (element, material) in [("hex8", "corotated"), ("tet4", "neohookean")] {
        let ls = common::load(&muscle_scene(element, material, 4), &[]);
        let m = Model::from_scene(&ls).unwrap();
        let (mut cpu, mut dev) = pair(d, &m, &ls);
        for (t, amp, seed) in [(0.01, 0.01, 4u64), (0.04, 0.1, 5)] {
            cpu.derived.muscle_time = t;
            dev.derived.muscle_time = t;
            let x = deformed(&m, amp, seed);
            let z = noise(3 * m.num_nodes(), seed + 100);
            let lin_c = StepLinearization::new(&cpu, &x, 0.0).unwrap();
            let lin_d = StepLinearization::new(&dev, &x, 0.0).unwrap();
            let mut want = vec![0.0; z.len()];
            lin_c.apply(&m, &z, &mut want);
            let mut got = vec![0.0; z.len()];
            delta_a(&dev, &lin_d, &z, &mut got).unwrap();
            let mut muscle = vec![0.0; z.len()];
            lin_c.muscle.apply(&m, &z, &mut muscle);
            let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
            let (e, share) = (rel(&got, &want), norm(&muscle) / norm(&want));
            eprintln!("{material} {element} t {t}: ΔA·z through the seam rel {e:.1e}, muscle share {share:.1e}");
            assert!(
                share > 1e-3,
                "the muscle term is too small to test: {share:e}"
            );
            assert!(e <= 1e-13, "{material} t {t}: {e:e}");
        }
    }
}

/// Two bodies: the muscle beam (hex, corotated; 4×4×12 cells, so 325 nodes and ~700 fibres
/// per group: every per-group sum has several chunks of the two-pass reduction) with a
/// force group, and a Neo-Hookean tet block beside it with its own force group and mass
/// damping; gravity on.
fn two_body_scene() -> String {
    muscle_scene_with(
        "hex8",
        "corotated",
        3,
        &[
            "body.0.mesh.cells=[4, 4, 12]",
            "body.0.mesh.dx=0.0125",
            "simulation.gravity=[0.3, -0.2, -9.81]",
            "body.0.damping={ alpha = 1.5 }",
            r#"body.0.force=[{ select = { face = "z_max" }, force = [0.5, -0.25, 1.0], profile = { type = "ramp", duration = 0.05 } }]"#,
            r#"body+={ mesh = { generator = "box", element = "tet4", cells = [2, 2, 3], dx = 0.02, origin = [0.2, 0.0, 0.0] }, material = { model = "neohookean", youngs_modulus = 2e5, poisson_ratio = 0.35, density = 800.0 }, damping = { alpha = 0.7 }, force = [{ select = { face = "x_max" }, force = [-0.2, 0.1, 0.3] }], dirichlet = [{ select = { face = "x_min" } }] }"#,
        ],
    )
}

/// Every class of `accumulate_step` for one step with the offload (device sums: material,
/// nodal, force-group and muscle-activation terms) against the CPU path, same states and
/// adjoint, per class ≤ 1e-12 relative, each class nonzero. Measured 2026-11-26: see the
/// printed line (≤ 1e-15 per class).
fn gradient_terms_on<D: Device + Clone + 'static>(d: &D) {
    let ls = common::load(&two_body_scene(), &[]);
    let m = Model::from_scene(&ls).unwrap();
    assert_eq!((m.bodies.len(), m.forces.len(), m.muscles.len()), (2, 2, 3));
    // several chunks of the two-pass sums per body (nodes) and per muscle group (fibres)
    assert!(m.node_body.iter().filter(|&&b| b == 0).count() > 256);
    assert!(m.muscles.iter().all(|g| g.samples.len() > 256));
    let (mut cpu, mut dev) = pair(d, &m, &ls);
    let n = 3 * m.num_nodes();
    for (frame, seed) in [(2usize, 7u64), (4, 17)] {
        // the step producing frame n uses the activations at t_n (as the reverse sweep sets)
        cpu.derived.muscle_time = frame as f64 * m.h;
        dev.derived.muscle_time = frame as f64 * m.h;
        let x_t = deformed(&m, 0.01, seed);
        let x_next = deformed(&m, 0.05, seed + 1);
        let v_t = noise(n, seed + 2);
        let z = noise(n, seed + 3);
        let step = StepStates {
            frame,
            x_t: &x_t,
            v_t: &v_t,
            x_next: &x_next,
        };
        let (mut gc, mut gd) = (Gradients::zeros(&cpu), Gradients::zeros(&dev));
        let lin_c = StepLinearization::new(&cpu, &x_next, 0.0).unwrap();
        accumulate_step(&cpu, &lin_c, step, &z, &mut gc).unwrap();
        let lin_d = StepLinearization::new(&dev, &x_next, 0.0).unwrap();
        accumulate_step(&dev, &lin_d, step, &z, &mut gd).unwrap();
        let classes: [(&str, Vec<f64>, Vec<f64>); 8] = [
            ("density", gd.density.clone(), gc.density.clone()),
            ("alpha", gd.alpha.clone(), gc.alpha.clone()),
            ("gravity", gd.gravity.to_vec(), gc.gravity.to_vec()),
            (
                "force_scale",
                gd.force_scale.clone(),
                gc.force_scale.clone(),
            ),
            (
                "muscle_activation",
                gd.muscle_activation.concat(),
                gc.muscle_activation.concat(),
            ),
            ("youngs", gd.youngs.clone(), gc.youngs.clone()),
            ("nu", gd.nu.clone(), gc.nu.clone()),
            ("beta0", gd.beta0.clone(), gc.beta0.clone()),
        ];
        let mut line = format!("frame {frame}:");
        for (name, d, c) in &classes {
            let e = rel(d, c);
            line += &format!(" {name} {e:.1e}");
            // every entry nonzero, except the knots a step does not weigh
            let zeros = c.iter().filter(|v| **v == 0.0).count();
            let allowed = if *name == "muscle_activation" { 2 } else { 0 };
            assert!(zeros <= allowed, "{name}: zero CPU terms {c:?}");
            assert!(e <= 1e-12, "{name}: {e:e} ({d:?} vs {c:?})");
        }
        eprintln!("{line}");
    }
}

/// `diffphd grad --backend emulator` on the muscle beam with muscle-activation (per knot),
/// density, mass-damping, gravity, force-scale and Young's-modulus parameters writes the CPU
/// run's gradient to 1e-8 (converged steps, adjoint to 1e-10, as the cantilever's CLI test
/// in tests/gpu/gpu_parity.rs). Measured 2026-11-26: see the printed line.
#[test]
fn grad_cli_on_the_emulator_matches_the_cpu_gradient_with_muscles() {
    let text = muscle_scene_with(
        "hex8",
        "corotated",
        4,
        &[
            "simulation.gravity=[0.0, 0.0, -9.81]",
            "body.0.damping={ alpha = 1.5 }",
            r#"body.0.force=[{ select = { face = "z_max" }, force = [0.5, -0.25, 1.0], profile = { type = "ramp", duration = 0.05 } }]"#,
            r#"loss.term=[
                { type = "random_linear", seed = 11 },
                { type = "node_target", select = { face = "z_max" }, target = [0.03, 0.02, 0.08] },
            ]"#,
            r#"parameter=[
                { kind = "muscle_activation", muscle = 0 },
                { kind = "muscle_activation", muscle = 1 },
                { kind = "muscle_activation", muscle = 2 },
                { kind = "density" },
                { kind = "damping_alpha" },
                { kind = "gravity" },
                { kind = "force_scale" },
                { kind = "youngs_modulus" },
            ]"#,
        ],
    );
    let args: Vec<String> = [
        "solver.residual_tol=1e-14",
        "solver.newton_polish=8",
        "solver.polish_tol=0",
        "backward.rel_tol=1e-10",
        "backward.abs_tol=0",
        "backward.direct_after=0",
    ]
    .iter()
    .flat_map(|s| ["--set".to_string(), s.to_string()])
    .collect();
    let (g_cpu, l_cpu) = common::gpu::grad_cli(&text, &args, "cpu");
    let (g_dev, l_dev) = common::gpu::grad_cli(&text, &args, "emulator");
    let e = rel(&g_dev, &g_cpu);
    eprintln!("grad --backend emulator (muscles): gradient {g_dev:?} vs cpu {g_cpu:?}: {e:.2e}; loss {l_dev} vs {l_cpu}");
    // 2 + 2 + 1 knots, density, alpha, 3 gravity components, force scale, E
    assert_eq!(g_cpu.len(), 12, "{g_cpu:?}");
    assert!(g_cpu.iter().all(|v| *v != 0.0), "{g_cpu:?}");
    assert!(e <= 1e-8, "gradient differs by {e:e}");
    assert!((l_dev - l_cpu).abs() <= 1e-10 * l_cpu.abs());
}
