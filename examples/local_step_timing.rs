//! Micro-benchmark of the PD local step (`solver::local`): nanoseconds per sample per
//! iteration, exact kernel (one sample at a time through `svd3`) vs the interleaved kernel
//! (`material::interleaved`), for a corotated + volume hex beam and a Neo-Hookean tet beam,
//! on 1 and 2 threads, plus the serial scatter $b_p=\sum_sG_s^T\mathrm{vec}\,Q_s$.
//!
//! `cargo run --release --example local_step_timing [-- REPS]`
//!
//! The beams are twisted (up to 1 rad) and bent, so the samples carry large rotations and
//! strains of a few percent; the NH warm start alternates between two nearby states, as in
//! consecutive PD iterations. Each figure is the median over REPS (default 15) repetitions
//! of wall-clock time; `cpu` is the median of this process's CPU time (user + system, all
//! threads) per sample, which on a loaded machine is closer to the uncontended cost.

use diffphd::material::MaterialModel;
use diffphd::mesh::generate::{box_hex, box_tet};
use diffphd::model::{Model, ModelBuilder};
use diffphd::solver::local::{self, LocalKernel};
use nalgebra::{Matrix3, Vector3};
use std::time::Instant;

/// Process CPU time (user + system) in seconds, from `/proc/self/stat` (Linux; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // fields 14 and 15 of stat (utime, stime) are 12 and 13 after the ')'
    (ticks(11) + ticks(12)) / 100.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Twisted and bent beam positions (amplitude `amp` scales the deformation).
fn deformed(model: &Model, len: f64, amp: f64) -> Vec<f64> {
    let mut x = vec![0.0; 3 * model.num_nodes()];
    for (i, p) in model.rest.iter().enumerate() {
        let t = p[0] / len;
        let angle = amp * t;
        let (c, s) = (angle.cos(), angle.sin());
        let (y, z) = (p[1] - 0.05, p[2] - 0.05);
        x[3 * i] = p[0] * (1.0 + 0.02 * amp);
        x[3 * i + 1] = 0.05 + c * y - s * z;
        x[3 * i + 2] = 0.05 + s * y + c * z - 0.1 * amp * t * t * len;
    }
    x
}

struct Timing {
    wall_ns: f64,
    cpu_ns: f64,
}

fn time_local(model: &Model, xs: &[Vec<f64>; 2], kernel: LocalKernel, reps: usize) -> Timing {
    let d = model.derive(&model.params);
    let ns = model.num_samples();
    let mut warm = vec![Vector3::zeros(); ns];
    let mut q = vec![Matrix3::zeros(); ns];
    // warm-up (fills the NH warm start)
    for x in xs {
        local::project_into(model, &d, x, &mut warm, kernel, &mut q);
    }
    let iters = (2_000_000 / ns).max(2);
    let (mut wall, mut cpu) = (vec![], vec![]);
    for _ in 0..reps {
        let (t0, c0) = (Instant::now(), cpu_seconds());
        for k in 0..iters {
            local::project_into(model, &d, &xs[k % 2], &mut warm, kernel, &mut q);
        }
        let n = (iters * ns) as f64;
        wall.push(t0.elapsed().as_secs_f64() / n * 1e9);
        cpu.push((cpu_seconds() - c0) / n * 1e9);
    }
    Timing {
        wall_ns: median(wall),
        cpu_ns: median(cpu),
    }
}

fn time_scatter(model: &Model, x: &[f64], reps: usize) -> f64 {
    let d = model.derive(&model.params);
    let mut warm = vec![Vector3::zeros(); model.num_samples()];
    let q = local::project_all(model, &d, x, &mut warm).unwrap().q;
    let mut bp = vec![0.0; x.len()];
    let iters = (2_000_000 / q.len()).max(2);
    let mut wall = vec![];
    for _ in 0..reps {
        let t0 = Instant::now();
        for _ in 0..iters {
            local::scatter(model, &q, &mut bp);
        }
        wall.push(t0.elapsed().as_secs_f64() / (iters * q.len()) as f64 * 1e9);
    }
    median(wall)
}

fn main() {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(15);
    let len = 0.4;
    let beams = [
        (
            "corotated+volume hex",
            ModelBuilder::new(box_hex([40, 10, 10], 0.01, [0.0; 3]))
                .youngs_modulus(1e6)
                .poisson_ratio(0.45)
                .build()
                .unwrap(),
        ),
        (
            "Neo-Hookean tet",
            ModelBuilder::new(box_tet([20, 5, 5], 0.02, [0.0; 3]))
                .material(MaterialModel::Neohookean)
                .youngs_modulus(1e6)
                .poisson_ratio(0.45)
                .build()
                .unwrap(),
        ),
    ];
    println!(
        "local step, ns per sample per iteration (median of {reps}; wall clock, cpu = process CPU time)"
    );
    println!("| body | samples | threads | exact wall | exact cpu | interleaved wall | interleaved cpu | speed-up (wall) |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, model) in &beams {
        let xs = [deformed(model, len, 1.0), deformed(model, len, 1.001)];
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("thread pool");
            let (e, f) = pool.install(|| {
                (
                    time_local(model, &xs, LocalKernel::Exact, reps),
                    time_local(model, &xs, LocalKernel::Interleaved, reps),
                )
            });
            println!(
                "| {name} | {} | {threads} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2}x |",
                model.num_samples(),
                e.wall_ns,
                e.cpu_ns,
                f.wall_ns,
                f.cpu_ns,
                e.wall_ns / f.wall_ns
            );
        }
        println!(
            "| {name}: serial scatter b_p | {} | 1 | {:.1} | | | | |",
            model.num_samples(),
            time_scatter(model, &xs[0], reps)
        );
    }
}
