//! Per-operation timings of the GPU path against the CPU path on a generated box
//! (`scripts/bench_gpu.sh` runs it; docs/gpu.md). Each operation is checked for agreement
//! with the CPU result before it is timed, and the relative difference is printed with it.
//!
//! `cargo run --release --example gpu_ops -- [cells_x cells_y cells_z] [tet4|hex8] [emulator|cuda]`
//! (`cuda` needs `--features cuda`). The emulator row measures the host emulator: it shows
//! the pipeline runs, not GPU speed.

use diffphd::gpu::factor::SimplicialFactor;
use diffphd::gpu::local::{DeviceAdjointProduct, DeviceLocalStep, LocalArrays};
use diffphd::gpu::pipeline::DeviceFactor;
use diffphd::gpu::Device;
use diffphd::linalg::{ordering, LinearSolver};
use std::time::Instant;

fn median_seconds(reps: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[reps / 2]
}

fn rel(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt();
    num / b
        .iter()
        .map(|y| y * y)
        .sum::<f64>()
        .sqrt()
        .max(f64::MIN_POSITIVE)
}

fn run<D: Device>(dev: &D, cells: [usize; 3], element: &str) {
    let text = format!(
        "schema_version = 1\n[simulation]\nframes = 1\ndt = 0.01\n[[body]]\n[body.mesh]\ngenerator = \"box\"\nelement = \"{element}\"\ncells = [{}, {}, {}]\ndx = 0.01\n[body.material]\nmodel = \"corotated\"\nyoungs_modulus = 1e6\npoisson_ratio = 0.45\ndensity = 1000.0\n",
        cells[0], cells[1], cells[2]
    );
    let ls = diffphd::scene::load_str(&text, std::path::Path::new("box.toml"), &[]).expect("scene");
    let m = diffphd::solver::Model::from_scene(&ls).expect("model");
    let sim = diffphd::solver::Simulator::new(&m, &ls.scene.solver).expect("simulator");
    let n = m.num_nodes();
    println!(
        "device: {}; {element} box {:?}: {} nodes ({} DoF), {} samples",
        dev.name(),
        cells,
        n,
        3 * n,
        m.num_samples()
    );
    let x: Vec<f64> = m
        .rest
        .iter()
        .flat_map(|p| [p[0], p[1] + 0.1 * p[0] * p[0], p[2] + 0.05 * p[0]])
        .collect();
    let reps = 5;

    // local step
    let arrays = LocalArrays::from_model(&m);
    let mut step = DeviceLocalStep::new(dev, &m, &arrays, &sim.derived).expect("upload");
    let mut warm = vec![nalgebra::Vector3::zeros(); m.num_samples()];
    let mut bp_cpu = vec![0.0; 3 * n];
    let t_cpu = median_seconds(reps, || {
        let q = diffphd::solver::local::project_all(&m, &sim.derived, &x, &mut warm).unwrap();
        diffphd::solver::local::scatter(&m, &q.q, &mut bp_cpu);
    });
    let mut bp_dev = Vec::new();
    let t_dev = median_seconds(reps, || bp_dev = step.run(dev, &x).unwrap());
    println!(
        "local step + gather   cpu {:9.3} ms   device {:9.3} ms   rel.diff {:.1e}",
        1e3 * t_cpu,
        1e3 * t_dev,
        rel(&bp_dev, &bp_cpu)
    );

    // global solve, one axis block (no Dirichlet), both device paths
    let a = &sim.system.a;
    let (p, ip) = ordering::nested_dissection(a).expect("ordering");
    let f = SimplicialFactor::new(a, &p, &ip).expect("factor");
    let cpu = diffphd::linalg::SparseCholesky::factor(a, &p, &ip).expect("factor");
    let b: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
    let mut x_cpu = b.clone();
    let t_cpu = median_seconds(reps, || {
        x_cpu.copy_from_slice(&b);
        cpu.solve_in_place(&mut x_cpu);
    });
    for budget in [0usize, 8usize << 30] {
        let mut df = DeviceFactor::new(dev, &f, budget).expect("device factor");
        let mut x_dev = Vec::new();
        let t_dev = median_seconds(reps, || x_dev = df.solve(dev, &b).unwrap());
        println!(
            "solve, one axis       cpu {:9.3} ms   device {:9.3} ms   rel.diff {:.1e}   {:?}",
            1e3 * t_cpu,
            1e3 * t_dev,
            rel(&x_dev, &x_cpu),
            df.path
        );
    }

    // the three axes at once on device vectors (the resident PD iteration's and the Krylov
    // preconditioner's global solve, `DeviceFactor::solve_block_device`): one block upload,
    // the block solve, one download (to wait for the device), against three CPU solves
    let cols3: Vec<Vec<f64>> = (0..3)
        .map(|c| (0..n).map(|i| ((i + 7 * c) as f64 * 0.37).sin()).collect())
        .collect();
    let permuted: Vec<f64> = (0..3 * n).map(|t| cols3[t % 3][p[t / 3]]).collect();
    let mut x3_cpu = vec![vec![0.0; n]; 3];
    let t_cpu = median_seconds(reps, || {
        for (xc, bc) in x3_cpu.iter_mut().zip(&cols3) {
            xc.copy_from_slice(bc);
            cpu.solve_in_place(xc);
        }
    });
    {
        let mut df = DeviceFactor::new(dev, &f, 8usize << 30).expect("device factor");
        let mut blk = dev.upload(&permuted).expect("upload");
        let mut scratch = dev.zeros(3 * n).expect("buffer");
        let mut out = Vec::new();
        let t_dev = median_seconds(reps, || {
            dev.write(&mut blk, &permuted).unwrap();
            df.solve_block_device(dev, 3, &mut blk, &mut scratch)
                .unwrap();
            out = dev.download(&blk).unwrap();
        });
        let got: Vec<f64> = (0..3)
            .flat_map(|c| (0..n).map(move |j| (c, j)))
            .map(|(c, j)| out[ip[j] * 3 + c])
            .collect();
        let want: Vec<f64> = x3_cpu.concat();
        println!(
            "solve, three axes     cpu {:9.3} ms   device {:9.3} ms   rel.diff {:.1e}   block of 3 on device vectors, {:?}",
            1e3 * t_cpu,
            1e3 * t_dev,
            rel(&got, &want),
            df.path
        );
    }

    // k right-hand sides with one factor (the contact Delassus columns: one spike per
    // contact node), one axis block: k single CPU solves vs one multi-RHS device pass
    let k = n.min(64);
    let cols: Vec<Vec<f64>> = (0..k)
        .map(|c| {
            let mut e = vec![0.0; n];
            e[(c * 7919) % n] = 1.0;
            e
        })
        .collect();
    let block: Vec<f64> = (0..n)
        .flat_map(|r| cols.iter().map(move |col| col[r]))
        .collect();
    let mut many_cpu = vec![0.0; n * k];
    let t_cpu = median_seconds(reps, || {
        for (c, col) in cols.iter().enumerate() {
            let mut xc = col.clone();
            cpu.solve_in_place(&mut xc);
            for (r, v) in xc.iter().enumerate() {
                many_cpu[r * k + c] = *v;
            }
        }
    });
    for budget in [0usize, 8usize << 30] {
        let df = DeviceFactor::new(dev, &f, budget).expect("device factor");
        let mut many_dev = Vec::new();
        let t_dev = median_seconds(reps, || many_dev = df.solve_many(dev, &block, k).unwrap());
        println!(
            "solve, {k:3} RHS        cpu {:9.3} ms   device {:9.3} ms   rel.diff {:.1e}   {:?}",
            1e3 * t_cpu,
            1e3 * t_dev,
            rel(&many_dev, &many_cpu),
            df.path
        );
    }
    // the wide block on the flat copy of S (docs/gpu.md "Next" 1; bitwise the sliced one)
    let mut df = DeviceFactor::new(dev, &f, 8usize << 30).expect("device factor");
    if df.enable_wide(dev).expect("flat copy") {
        let sliced = DeviceFactor::new(dev, &f, 8usize << 30).expect("device factor");
        let want = sliced.solve_many(dev, &block, k).unwrap();
        let mut many_dev = Vec::new();
        let t_dev = median_seconds(reps, || many_dev = df.solve_many(dev, &block, k).unwrap());
        println!(
            "solve, {k:3} RHS, flat  cpu {:9.3} ms   device {:9.3} ms   rel.diff {:.1e}   bitwise the sliced: {}",
            1e3 * t_cpu,
            1e3 * t_dev,
            rel(&many_dev, &many_cpu),
            many_dev == want
        );
    }

    // the backward's ΔA·z
    let lin = diffphd::solver::backward::StepLinearization::new(&sim, &x, 0.0).unwrap();
    let mut prod = DeviceAdjointProduct::new(dev, &arrays).expect("buffers");
    prod.set_step(dev, |s| lin.spectral_coefficients(s))
        .expect("coefficients");
    let z: Vec<f64> = (0..3 * n).map(|i| (i as f64 * 0.11).cos()).collect();
    let mut y_cpu = vec![0.0; 3 * n];
    let t_cpu = median_seconds(reps, || lin.apply(&m, &z, &mut y_cpu));
    let mut y_dev = Vec::new();
    let t_dev = median_seconds(reps, || y_dev = prod.apply(dev, &step, &z).unwrap());
    println!(
        "ΔA·z                  cpu {:9.3} ms   device {:9.3} ms   rel.diff {:.1e}",
        1e3 * t_cpu,
        1e3 * t_dev,
        rel(&y_dev, &y_cpu)
    );

    // the Newton–Krylov phase's linearization at x and one ΔA·z with it: the host's
    // `StepLinearization::new` + apply against `dphd_linearize` + the device product (its
    // download waits for the device)
    let t_cpu = median_seconds(reps, || {
        let lin = diffphd::solver::backward::StepLinearization::new(&sim, &x, 0.0).unwrap();
        lin.apply(&m, &z, &mut y_cpu);
    });
    let t_dev = median_seconds(reps, || {
        prod.set_step_at(dev, &step, &x, (0.0, false)).unwrap();
        y_dev = prod.apply(dev, &step, &z).unwrap();
    });
    println!(
        "linearize + ΔA·z      cpu {:9.3} ms   device {:9.3} ms   rel.diff {:.1e}",
        1e3 * t_cpu,
        1e3 * t_dev,
        rel(&y_dev, &y_cpu)
    );
    let _ = sim.system.num_nodes();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cells: Vec<usize> = args.iter().take(3).filter_map(|a| a.parse().ok()).collect();
    let cells = if cells.len() == 3 {
        [cells[0], cells[1], cells[2]]
    } else {
        [20, 5, 5]
    };
    let element = args
        .iter()
        .find(|a| *a == "tet4" || *a == "hex8")
        .map_or("tet4", |s| s.as_str());
    let device = args
        .iter()
        .find(|a| *a == "cuda" || *a == "emulator")
        .map_or("emulator", |s| s.as_str());
    match device {
        #[cfg(feature = "cuda")]
        "cuda" => match diffphd::gpu::cuda::Cuda::new(0) {
            Ok(dev) => run(&dev, cells, element),
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(2);
            }
        },
        #[cfg(not(feature = "cuda"))]
        "cuda" => {
            eprintln!("error: built without --features cuda");
            std::process::exit(2);
        }
        _ => run(&diffphd::gpu::Emulator, cells, element),
    }
}
