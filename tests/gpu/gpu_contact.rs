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
/// dense form) with its contact frames on the device's resident loop against the CPU path,
/// accurate mode with `residual_tol` 1e-13 (both runs stop at the force-balance target that
/// `residual_contact_tolerance` raises to its round-off floor: 1.9e-8 to 3.4e-8 of $r^0$).
/// Frames 1–4 (contact without load) agree to the bit; frame 5, the first with load (84
/// sticking contacts), to 4.4e-17 m with the same contact states — but its multipliers do
/// not: more active rows than the free DoFs they act on (the claws' nodes are prescribed; the
/// 71 contacts whose multipliers differ all touch a claw), so
/// $\lambda$ is not unique, and the device's $W$ and $\delta_0$ (its own factor, other
/// round-off) lead the semismooth Newton solve (76 / 77 iterations) to another point of the
/// solution set: $\|\Delta\lambda\|_\infty$ = 4.2e-3 N (11 % of the largest
/// multiplier) with $\|J_F^T\Delta\lambda\|_\infty$ = 5.1e-13 N (1e-11 of the forces).
/// Frame 6 warm-starts each run from its own multipliers: other friction cones
/// $\mu\lambda_n$, 16 contacts change stick/slip, and the states differ by 5.2e-12 m =
/// 3.45e-8 of the motion (measured, emulator, session 21). That is what the step's own
/// determinacy allows: a perturbation of $x^0$ by 1e-15 (relative) moves the CPU path's frame
/// 5 by 1.3e-7 m, and a tight CPU solve (`contact.tolerance` 1e-14, `residual_tol` 1e-15)
/// is 1.4e-7 m from both (docs/gpu.md "Contact on the device", parity). Asserted: frames
/// 1–5 within 1e-10 of the motion, frame 5's contact states equal and its free-DoF contact
/// forces within 1e-9 of their size, frame 6 within 1e-7.
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
    for frame in 1..=6 {
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
        if frame <= 5 {
            assert!(
                rel <= 1e-10,
                "frame {frame}: states {rel:e} of the motion apart"
            );
        }
        if frame == 5 {
            assert!(active > 0, "the stack must carry load by frame 5");
            assert!(same_states, "frame 5: the contact states differ");
            assert!(
                dforce <= 1e-9 * force,
                "frame 5: contact forces {dforce:e} of {force:e} apart"
            );
        }
        assert!(
            rel <= 1e-7,
            "frame {frame}: states {rel:e} of the motion apart"
        );
    }
    // every frame has candidates: one multi-RHS pass of Delassus columns each, no host solve
    assert!(counts.multi_passes.load(Ordering::Relaxed) >= 6);
    assert_eq!(counts.homogeneous.load(Ordering::Relaxed), 0);
}

/// The CI Oreo in accurate mode with the force-balance test tight (`residual_tol` 1e-13).
fn oreo_accurate() -> diffphd::scene::LoadedScene {
    let file = "scenes/oreo.toml";
    let text = std::fs::read_to_string(common::repo().join(file)).unwrap();
    // the PD path on both sides (the CPU default `auto` runs Newton on the first frames)
    let sets = [
        "solver.method=\"diffphd\"",
        "solver.mode=\"accurate\"",
        "solver.rel_tol=1e-6",
        "solver.residual_tol=1e-13",
    ]
    .map(String::from);
    diffphd::scene::load_str(&text, &common::repo().join(file), &sets).unwrap()
}

/// The determinacy of the CI Oreo's first loaded frame on the CPU path alone: every
/// seventh coordinate of $x^0$ scaled by $1+10^{-15}$ (3e-17 m) moves frame 5's state by
/// more than 1e-8 m (measured 1.3e-7 m: 274 PD iterations instead of 20, 60 sticking
/// contacts instead of 84), four orders above the device path's difference
/// ([`oreo_states_on`]: 4.4e-17 m there, 5.2e-12 m at frame 6). Not in CI (76 s on
/// this machine, loaded; `cargo test --release -p diffphd-cli --test gpu -- --ignored perturbation`).
#[test]
#[ignore]
fn oreo_first_loaded_frame_moves_with_a_round_off_perturbation_on_the_cpu() {
    let ls = oreo_accurate();
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
    let d = max_abs(a.iter().zip(&b).map(|(p, q)| p - q));
    eprintln!("oreo frame 5, x0 perturbed by 1e-15: states {d:.2e} m apart");
    assert!(d > 1e-8, "frame 5 moved only {d:e} m");
}
