//! Contact on the device (issue 38 item 6, must-show 5; docs/gpu.md "Contact on the device"):
//! a contact step's PD iterations run on the resident loop with the Delassus columns
//! $X=A^{-1}J^T$ kept on the device, and per PD iteration the host↔device copies do not grow
//! with the number of contacts. Counted from the device's traffic counters (`Counted`) per
//! step on the CI napkin (9 to 25 candidates) and the CI Oreo (263 body–body
//! candidates, 789 rows).

use crate::common;
use crate::on_every_device;

use diffphd::gpu::{Counted, Device, Emulator};
use diffphd::model::Model;

on_every_device! {
    contact_copies_per_iteration_do_not_grow_with_contacts => copies_per_iteration_on;
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
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
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
