//! Contact on the device (issue 38 item 6, must-show 5; docs/gpu.md "Contact on the device"):
//! a contact step's PD iterations run on the resident loop with the Delassus columns
//! $X=A^{-1}J^T$ kept on the device, and per PD iteration the host↔device copies do not grow
//! with the number of contacts. Counted from the device's traffic counters (`Counted`) per
//! step on the CI napkin (9 to 25 candidates) and the CI Oreo (263 body–body
//! candidates, 789 rows).

use crate::common;
use crate::on_every_device;

use diffphd::contact::ContactSet;
use diffphd::gpu::{Counted, Device, Emulator};
use diffphd::model::Model;

on_every_device! {
    contact_copies_per_iteration_do_not_grow_with_contacts => copies_per_iteration_on;
    oreo_states_match_the_cpu_path => oreo_states_on;
}

/// One step's counts: PD iterations, contact candidates and rows, and the device traffic.
struct StepTraffic {
    frame: usize,
    iterations: usize,
    candidates: usize,
    launches: u64,
    downloads: u64,
    uploads: u64,
    download_bytes: u64,
    upload_bytes: u64,
}

/// `frames` steps of `scene_file` (+ `sets`) with a counted device attached.
fn counted_rollout<D: Device + Clone + 'static>(
    dev: &D,
    scene_file: &str,
    sets: &[&str],
    frames: usize,
) -> Vec<StepTraffic> {
    use diffphd::gpu::offload::DeviceOffload;
    let text = std::fs::read_to_string(common::repo().join(scene_file)).unwrap();
    // the device runs PD: pin it (the default `auto` is chosen before the device is attached)
    let sets: Vec<String> = std::iter::once("solver.method=\"diffphd\"")
        .chain(sets.iter().copied())
        .map(String::from)
        .collect();
    let ls = diffphd::scene::load_str(&text, &common::repo().join(scene_file), &sets).unwrap();
    let m = Model::from_scene(&ls).unwrap();
    let mut sim = diffphd::solver::Simulator::new(&m, &ls.scene.solver).unwrap();
    let off = DeviceOffload::new(Counted::new(dev.clone()), &sim, 1 << 28).unwrap();
    sim.offload = Some(Box::new(off));
    let (mut x, mut v) = (m.x0.clone(), m.v0.clone());
    let mut out = Vec::new();
    for frame in 1..=frames {
        let t0 = sim.offload.as_ref().unwrap().traffic().unwrap();
        let (xn, st) = sim.step(frame, &x, &v).unwrap();
        let t = sim.offload.as_ref().unwrap().traffic().unwrap().since(&t0);
        v = xn.iter().zip(&x).map(|(a, b)| (a - b) / m.h).collect();
        x = xn;
        let c = st.contact.as_ref();
        out.push(StepTraffic {
            frame,
            iterations: st.iterations,
            candidates: c.map_or(0, |c| c.candidates),
            launches: t.launches,
            downloads: t.downloads,
            uploads: t.uploads,
            download_bytes: t.download_bytes,
            upload_bytes: t.upload_bytes,
        });
    }
    out
}

/// Per contact step with $k$ PD iterations: at most $3k+2$ downloads (per iteration the
/// map's norms, Anderson's dot products and $\delta_0$; per step $W$ and the final state) and
/// $2k+C$ uploads (per iteration Anderson's coefficients and $\lambda$; per step the step's
/// constants, the contact rows, the spike positions and the zeroed buffers: $C$ = 20 here,
/// one reduced system and one multi-RHS pass; frame 1 also builds the loop's buffers), the
/// same bound on 9 candidates as on 263.
/// Before (the host loop, baseline 0df1538, `simulate --backend emulator`): 4.06–4.24
/// downloads and 4.12–4.38 uploads per PD iteration plus the Delassus columns' right-hand
/// sides and solutions, $3n$ numbers per contact node each way (Oreo: 149 kB per iteration).
fn copies_per_iteration_on<D: Device + Clone + 'static>(dev: &D) {
    // paper mode: every PD iteration is a PD map (the accurate mode's Newton–Krylov phase
    // runs on frames whose contacts carry no load, with traffic of its own)
    let napkin = [
        "body.0.mesh.cells=[8, 8, 1]",
        "body.0.mesh.dx=0.05",
        "solver.mode=\"paper\"",
    ];
    let runs = [
        ("scenes/napkin.toml", &napkin[..], 24),
        ("scenes/oreo.toml", &[][..], 5),
    ];
    let mut candidates = Vec::new();
    for (scene, sets, frames) in runs {
        let steps = counted_rollout(dev, scene, sets, frames);
        for s in &steps {
            let k = s.iterations as u64;
            eprintln!(
                "{scene} frame {}: {} PD iterations, {} candidates; {} launches, {} downloads ({} B), {} uploads ({} B); per iteration {:.2} downloads, {:.2} uploads",
                s.frame,
                k,
                s.candidates,
                s.launches,
                s.downloads,
                s.download_bytes,
                s.uploads,
                s.upload_bytes,
                s.downloads as f64 / k as f64,
                s.uploads as f64 / k as f64,
            );
            assert!(s.candidates > 0, "{scene} frame {}: no contact", s.frame);
            assert!(
                s.downloads <= 3 * k + 2,
                "{scene} frame {}: {} downloads for {k} PD iterations",
                s.frame,
                s.downloads
            );
            // frame 1 also builds the resident loop's and the contact's buffers (once)
            assert!(
                s.frame == 1 || s.uploads <= 2 * k + 20,
                "{scene} frame {}: {} uploads for {k} PD iterations",
                s.frame,
                s.uploads
            );
            candidates.push(s.candidates);
        }
    }
    let (lo, hi) = (
        candidates.iter().min().unwrap(),
        candidates.iter().max().unwrap(),
    );
    assert!(
        *hi >= 20 * *lo,
        "candidates {lo}..{hi}: too narrow a range to show"
    );
}

/// $J^T\lambda$ on the free DoFs (prescribed DoFs zeroed): the contact forces that move the
/// free nodes.
fn free_forces(set: &ContactSet, lambda: &[f64], prescribed: &[usize], n3: usize) -> Vec<f64> {
    let mut f = vec![0.0; n3];
    for (r, l) in lambda.iter().enumerate() {
        for (i, c) in set.row_terms(r) {
            for a in 0..3 {
                f[3 * i + a] += set.row_dir[r][a] * c * l;
            }
        }
    }
    for &d in prescribed {
        f[d] = 0.0;
    }
    f
}

fn max_abs(v: impl Iterator<Item = f64>) -> f64 {
    v.fold(0.0, |m, x| m.max(x.abs()))
}

/// The CI Oreo (five bodies, 263–266 body–body candidates, 789–798 rows, friction 0.5,
/// dense form, the scene's contact compliance 1e-6 m/N) with its contact frames on the
/// device's resident loop against the CPU path, accurate mode with `residual_tol` 1e-13.
/// Asserted on every frame of 10 (the stack loaded from frame 5 on, 84 to ~140 active
/// contacts): states within 1e-10 of the motion, the same contact states, multipliers within
/// 1e-8 of the largest, free-DoF contact forces within 1e-9 of their size.
///
/// With rigid contact (`contact.compliance = 0`) this does not hold, and cannot: the claws'
/// nodes are prescribed, so their active rows outnumber the free DoFs they act on, $W$ is
/// singular there and $\lambda$ is not unique. The device's $W$ (its own factor, other
/// round-off) then led the semismooth Newton solve to another point of the solution set at
/// frame 5 (multipliers 4.2e-3 N = 11 % of the largest apart, forces on the free DoFs 5e-13
/// apart), frame 6 warm-started from it (other friction cones, 16 contacts changing
/// stick/slip, states 3.45e-8 of the motion apart) and frame 8 was 4.65e-4 apart (130 PD
/// iterations against 26). With the compliance (measured, session 31): multipliers 5e-12 N
/// apart and states within 8.2e-12 of the motion through frame 10
/// (docs/gpu.md "Contact on the device", parity).
fn oreo_states_on<D: Device + Clone + 'static>(dev: &D) {
    use diffphd::gpu::offload::DeviceOffload;
    use std::sync::atomic::Ordering;
    let ls = oreo_accurate();
    let m = Model::from_scene(&ls).unwrap();
    let mut cpu = diffphd::solver::Simulator::new(&m, &ls.scene.solver).unwrap();
    let mut gpu = diffphd::solver::Simulator::new(&m, &ls.scene.solver).unwrap();
    let off = DeviceOffload::new(dev.clone(), &gpu, 1 << 28).unwrap();
    let counts = off.solve_counts();
    gpu.offload = Some(Box::new(off));
    let (mut xc, mut vc) = (m.x0.clone(), m.v0.clone());
    let (mut xg, mut vg) = (m.x0.clone(), m.v0.clone());
    let mut motion: f64 = 0.0;
    for frame in 1..=10 {
        let (nc, sc) = cpu.step(frame, &xc, &vc).unwrap();
        let (ng, sg) = gpu.step(frame, &xg, &vg).unwrap();
        vc = nc.iter().zip(&xc).map(|(a, b)| (a - b) / m.h).collect();
        vg = ng.iter().zip(&xg).map(|(a, b)| (a - b) / m.h).collect();
        (xc, xg) = (nc, ng);
        motion = motion.max(max_abs(xc.iter().zip(&m.x0).map(|(a, b)| a - b)));
        let rel = max_abs(xc.iter().zip(&xg).map(|(a, b)| a - b)) / motion;
        let (rc, rg) = (
            sc.contact_record.as_ref().unwrap(),
            sg.contact_record.as_ref().unwrap(),
        );
        let active = sc.contact.as_ref().map_or(0, |c| c.active);
        let same_states = rc.set.node == rg.set.node && rc.state == rg.state;
        let (dlambda, dforce, force) = if rc.lambda.len() == rg.lambda.len() {
            let dl: Vec<f64> = rc
                .lambda
                .iter()
                .zip(&rg.lambda)
                .map(|(a, b)| a - b)
                .collect();
            let f = |l: &[f64]| free_forces(&rc.set, l, &cpu.prescribed, xc.len());
            (
                max_abs(dl.iter().copied()),
                max_abs(f(&dl).into_iter()),
                max_abs(f(&rc.lambda).into_iter()),
            )
        } else {
            (f64::NAN, f64::NAN, f64::NAN)
        };
        eprintln!(
            "oreo frame {frame}: PD iterations cpu {} device {}, {active} active, contact states equal {same_states}; states {rel:.2e} of the motion ({motion:.3e} m); multipliers {dlambda:.2e} apart, free-DoF contact forces {dforce:.2e} of {force:.2e}",
            sc.iterations, sg.iterations
        );
        assert!(
            rel <= 1e-10,
            "frame {frame}: states {rel:e} of the motion apart"
        );
        assert!(same_states, "frame {frame}: the contact states differ");
        let lmax = max_abs(rc.lambda.iter().copied());
        assert!(
            dlambda <= 1e-8 * lmax,
            "frame {frame}: multipliers {dlambda:e} of {lmax:e} apart"
        );
        assert!(
            dforce <= 1e-9 * force,
            "frame {frame}: contact forces {dforce:e} of {force:e} apart"
        );
        if frame == 5 {
            assert!(active > 0, "the stack must carry load by frame 5");
        }
    }
    // every frame has candidates: one multi-RHS pass of Delassus columns each, no host solve
    assert!(counts.multi_passes.load(Ordering::Relaxed) >= 6);
    assert_eq!(counts.homogeneous.load(Ordering::Relaxed), 0);
}

/// The CI Oreo in accurate mode with the force-balance test tight (`residual_tol` 1e-13),
/// with `extra` overrides.
fn oreo_accurate_with(extra: &[&str]) -> diffphd::scene::LoadedScene {
    let file = "scenes/oreo.toml";
    let text = std::fs::read_to_string(common::repo().join(file)).unwrap();
    // the PD path on both sides (the CPU default `auto` runs Newton on the first frames)
    let sets: Vec<String> = [
        "solver.method=\"diffphd\"",
        "solver.mode=\"accurate\"",
        "solver.rel_tol=1e-6",
        "solver.residual_tol=1e-13",
    ]
    .iter()
    .chain(extra)
    .map(|s| s.to_string())
    .collect();
    diffphd::scene::load_str(&text, &common::repo().join(file), &sets).unwrap()
}

/// [`oreo_accurate_with`] the scene's own contact compliance.
fn oreo_accurate() -> diffphd::scene::LoadedScene {
    oreo_accurate_with(&[])
}

/// The CPU path's frame-5 states of the CI Oreo from $x^0$ and from $x^0$ with every seventh
/// coordinate scaled by $1+10^{-15}$ (3e-17 m): their largest difference and the motion.
fn oreo_round_off_sensitivity(extra: &[&str]) -> (f64, f64) {
    let ls = oreo_accurate_with(extra);
    let m = Model::from_scene(&ls).unwrap();
    let run = |scale: f64| {
        let mut sim = diffphd::solver::Simulator::new(&m, &ls.scene.solver).unwrap();
        let mut x = m.x0.clone();
        for xi in x.iter_mut().skip(3).step_by(7) {
            *xi *= scale;
        }
        let mut v = m.v0.clone();
        for frame in 1..=5 {
            let (xn, _) = sim.step(frame, &x, &v).unwrap();
            v = xn.iter().zip(&x).map(|(a, b)| (a - b) / m.h).collect();
            x = xn;
        }
        x
    };
    let (a, b) = (run(1.0), run(1.0 + 1e-15));
    let motion = max_abs(a.iter().zip(&m.x0).map(|(p, q)| p - q));
    (max_abs(a.iter().zip(&b).map(|(p, q)| p - q)), motion)
}

/// With rigid contact (`contact.compliance = 0`) the CI Oreo's first loaded frame is not
/// determined to round-off on the CPU path alone: a perturbation of $x^0$ by 1e-15 (relative)
/// moves frame 5 by more than 1e-8 m (measured 1.3e-7 m: 274 PD iterations instead of 20, 60
/// sticking contacts instead of 84), because its multipliers are not unique
/// ([`oreo_states_on`]). Not in CI (76 s on this machine, loaded;
/// `cargo test --release -p diffphd-cli --test gpu -- --ignored perturbation`).
#[test]
#[ignore]
fn oreo_rigid_contact_moves_with_a_round_off_perturbation_on_the_cpu() {
    let (d, _) = oreo_round_off_sensitivity(&["contact.compliance=0.0"]);
    eprintln!("rigid oreo frame 5, x0 perturbed by 1e-15: states {d:.2e} m apart");
    assert!(d > 1e-8, "frame 5 moved only {d:e} m");
}

/// With the scene's contact compliance (1e-6 m/N) the same perturbation moves frame 5 by
/// no more than 1e-10 of the motion: the multipliers are unique and the step is determined.
#[test]
fn oreo_compliant_contact_is_determined_to_round_off_on_the_cpu() {
    let (d, motion) = oreo_round_off_sensitivity(&[]);
    eprintln!("compliant oreo frame 5, x0 perturbed by 1e-15: states {d:.2e} m apart, motion {motion:.2e} m");
    assert!(d <= 1e-10 * motion, "frame 5 moved {d:e} m of {motion:e}");
}
