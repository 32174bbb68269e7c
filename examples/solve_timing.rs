//! Micro-benchmark of the per-iteration linear algebra (docs/benchmarks-log.md,
//! "Per-iteration cost"):
//! * the global solve on a clamped hex beam: three one-RHS passes over the factor (the
//!   former solve) vs one three-RHS pass, and `GlobalSystem::solve` end to end (gather with
//!   the precomputed Dirichlet coupling, one pass, scatter), next to the memory-streaming
//!   bound $2\,\mathrm{nnz}(L)\cdot3\cdot8\,$B / bandwidth (bandwidth measured here by
//!   summing a 256 MiB array);
//! * the backward's per-sample $\Delta A$ product: coefficients recomputed in every product
//!   (corotated + volume `jacobian_apply`, the former code) vs precomputed
//!   (`svd::SpectralLinear`).
//!
//! `cargo run --release --example solve_timing [-- REPS]`; medians over REPS (default 9),
//! wall clock, one thread.
//!
//! `cargo run --release --example solve_timing -- split SCENE [KEY=VALUE ...]`: the scene's
//! PD global solve (`GlobalSystem::solve`, all axes) on a pool of one thread and of two
//! (where a factor's tree splits, [`diffphd::linalg::tree_solve`] or
//! [`diffphd::linalg::simplicial_split`]), median of 15 runs of 20 solves each, and whether
//! the two give the same bits.

use diffphd::linalg::{ordering, GlobalSystem, LinearSolver, SparseCholesky};
use diffphd::material::svd::{spectral_pair_coefficients, svd3, SpectralLinear};
use diffphd::material::{corotated, volume};
use diffphd::mesh::generate::box_hex;
use diffphd::model::ModelBuilder;
use diffphd::solver::assembly;
use nalgebra::{Matrix3, Vector3};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn time<F: FnMut()>(reps: usize, inner: usize, mut f: F) -> f64 {
    f();
    let mut t = vec![];
    for _ in 0..reps {
        let t0 = Instant::now();
        for _ in 0..inner {
            f();
        }
        t.push(t0.elapsed().as_secs_f64() / inner as f64);
    }
    median(t)
}

/// Read bandwidth (bytes/s) of summing a 256 MiB array.
fn bandwidth(reps: usize) -> f64 {
    let v: Vec<f64> = (0..(32 << 20)).map(|i| i as f64).collect();
    let mut acc = 0.0;
    let s = time(reps, 1, || {
        let mut a = [0.0; 8];
        for c in v.chunks_exact(8) {
            for (ak, ck) in a.iter_mut().zip(c) {
                *ak += ck;
            }
        }
        acc += a.iter().sum::<f64>();
    });
    assert!(acc > 0.0);
    (v.len() * 8) as f64 / s
}

/// `split` mode: the global solve at one and two threads (see the module doc).
fn split_timing(scene: &str, sets: &[String]) {
    let ls = diffphd::scene::load(std::path::Path::new(scene), sets).expect("scene");
    let m = diffphd::solver::Model::from_scene(&ls).expect("model");
    let sim = diffphd::solver::Simulator::new(&m, &ls.scene.solver).expect("simulator");
    let sys = &sim.system;
    let n = sys.a.n;
    for k in 0..sys.plan().num_reduced() {
        let f = sys.reduced_factor(k);
        println!(
            "factor {k}: {} rows, nnz(L) {}, {}",
            f.n(),
            f.nnz_l(),
            if f.is_supernodal() {
                "supernodal"
            } else {
                "simplicial"
            }
        );
        if let Some(split) = f.column_split() {
            let (rows, border) = split.sizes();
            println!("  split rows L/R/T {rows:?}, border products {border:?}");
        }
        let nf = f.n();
        let rhs0: Vec<f64> = (0..3 * nf).map(|i| (i as f64 * 0.37).sin()).collect();
        let mut rhs = rhs0.clone();
        let mut scratch = f.solve_scratch(3);
        let seq = time(15, 20, || {
            rhs.copy_from_slice(&rhs0);
            f.solve_many_seq(&mut rhs, 3, &mut scratch);
        });
        for t in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .expect("pool");
            let s = pool.install(|| {
                time(15, 20, || {
                    rhs.copy_from_slice(&rhs0);
                    f.solve_many_with(&mut rhs, 3, &mut scratch);
                })
            });
            println!(
                "  3-RHS solve: faer sequential {:.3} ms, solve_many_with at {t} thread(s) {:.3} ms",
                seq * 1e3,
                s * 1e3
            );
        }
    }
    let b: Vec<f64> = (0..3 * n).map(|i| (i as f64 * 0.11).cos()).collect();
    let xd = vec![0.0; 3 * n];
    let mut out = Vec::new();
    for t in [1, 2, 1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build()
            .expect("pool");
        let mut x = vec![0.0; 3 * n];
        let s = pool.install(|| time(15, 20, || sys.solve(&b, &xd, &mut x).unwrap()));
        println!("{t} thread(s): GlobalSystem::solve {:.3} ms", s * 1e3);
        out.push(x);
    }
    let same = out[0]
        .iter()
        .zip(&out[1])
        .all(|(a, b)| a.to_bits() == b.to_bits());
    println!("same bits at one and two threads: {same}");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("split") {
        let scene = args
            .get(1)
            .expect("usage: solve_timing split SCENE [KEY=VALUE ...]");
        split_timing(scene, &args[2..]);
        return;
    }
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(9);
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build_global()
        .expect("one thread");
    for cells in [[32, 8, 8], [64, 16, 16]] {
        let model = ModelBuilder::new(box_hex(cells, 0.01, [0.0; 3]))
            .youngs_modulus(1e6)
            .fix_where(|p| p[0] == 0.0)
            .build()
            .unwrap();
        let d = model.derive(&model.params);
        let (a, _) = assembly::pd_matrices(&model, &d, model.h);
        let sets = model.dirichlet_sets();
        let n = a.n;
        // the reduced factor, as GlobalSystem builds it
        let fixed = &sets[0].nodes;
        let free: Vec<usize> = (0..n).filter(|i| fixed.binary_search(i).is_err()).collect();
        let mut map = vec![usize::MAX; n];
        for (k, &i) in free.iter().enumerate() {
            map[i] = k;
        }
        let sub = a.submatrix(&free, &map);
        let (p, ip) = ordering::nested_dissection(&sub).unwrap();
        let l = SparseCholesky::factor(&sub, &p, &ip).unwrap();
        let nf = free.len();
        let rhs0: Vec<f64> = (0..3 * nf).map(|i| (i as f64 * 0.37).sin()).collect();
        let mut rhs = rhs0.clone();
        let inner = (2_000_000 / l.nnz_l()).max(1);
        let three_single = time(reps, inner, || {
            for c in 0..3 {
                rhs[c * nf..(c + 1) * nf].copy_from_slice(&rhs0[c * nf..(c + 1) * nf]);
                l.solve_in_place(&mut rhs[c * nf..(c + 1) * nf]);
            }
        });
        let mut scratch = l.solve_scratch(3);
        let one_pass = time(reps, inner, || {
            rhs.copy_from_slice(&rhs0);
            l.solve_many_with(&mut rhs, 3, &mut scratch);
        });
        let mut single = rhs0.clone();
        for c in 0..3 {
            l.solve_in_place(&mut single[c * nf..(c + 1) * nf]);
        }
        let mut many = rhs0.clone();
        l.solve_many_in_place(&mut many, 3);
        let diff = single
            .iter()
            .zip(&many)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        println!("  max |one 3-RHS pass - three 1-RHS passes| = {diff:e}");
        let sys = GlobalSystem::new(a.clone(), sets.clone()).unwrap();
        let b: Vec<f64> = (0..3 * n).map(|i| (i as f64 * 0.11).cos()).collect();
        let xd: Vec<f64> = (0..3 * n).map(|i| 1e-3 * i as f64).collect();
        let mut x = vec![0.0; 3 * n];
        let full = time(reps, inner, || sys.solve(&b, &xd, &mut x).unwrap());
        let bw = bandwidth(reps.min(5));
        let bound = 2.0 * l.nnz_l() as f64 * 3.0 * 8.0 / bw;
        println!(
            "global solve, hex beam {cells:?}: {} free nodes, nnz(L) = {}, bandwidth {:.1} GB/s",
            nf,
            l.nnz_l(),
            bw / 1e9
        );
        println!(
            "  3 one-RHS passes {:.3} ms | one 3-RHS pass {:.3} ms ({:.2}x) | GlobalSystem::solve {:.3} ms | streaming bound 2*nnz(L)*3*8 B/bw {:.3} ms",
            three_single * 1e3,
            one_pass * 1e3,
            three_single / one_pass,
            full * 1e3,
            bound * 1e3
        );
    }

    // ΔA·z per-sample product: recomputed vs precomputed coefficients
    let ns = 20_000;
    let fs: Vec<Matrix3<f64>> = (0..ns)
        .map(|i| {
            let t = i as f64 * 1e-3;
            nalgebra::Rotation3::from_euler_angles(t, 2.0 * t, -t).into_inner()
                * Matrix3::new(
                    1.05,
                    0.02,
                    0.0,
                    -0.01,
                    0.97,
                    0.03,
                    0.01,
                    0.0,
                    1.01 + 0.01 * t.sin(),
                )
        })
        .collect();
    let (w_cor, w_vol) = (2.0, 3.0);
    let lin: Vec<_> = fs
        .iter()
        .map(|f| {
            let usv = svd3(f);
            let (_, vs) = volume::project(&usv);
            let vw = volume::stretch_jacobian(&usv.sigma, &vs);
            (usv, vs, vw)
        })
        .collect();
    let pre: Vec<SpectralLinear> = lin
        .iter()
        .map(|(usv, vs, vw)| {
            let one = Vector3::repeat(1.0);
            let (mc, nc) = spectral_pair_coefficients(&usv.sigma, &one, &Matrix3::zeros());
            let (mv, nv) = spectral_pair_coefficients(&usv.sigma, vs, vw);
            SpectralLinear::from_coefficients([
                usv.u,
                usv.v,
                vw * w_vol,
                mc * w_cor + mv * w_vol,
                nc * w_cor + nv * w_vol,
            ])
        })
        .collect();
    let df = Matrix3::new(0.3, -1.0, 0.2, 0.5, 0.1, -0.7, 0.9, 0.4, -0.2);
    let mut acc = 0.0;
    let before = time(reps, 10, || {
        for (usv, vs, vw) in &lin {
            let dp = corotated::jacobian_apply(usv, &df) * w_cor
                + volume::jacobian_apply(usv, vs, vw, &df) * w_vol;
            acc += dp[0];
        }
    });
    let after = time(reps, 10, || {
        for p in &pre {
            acc += p.apply(&df)[0];
        }
    });
    println!(
        "backward ΔA product per corotated+volume sample: recomputed coefficients {:.0} ns, precomputed {:.0} ns ({acc:.1e})",
        before / ns as f64 * 1e9,
        after / ns as f64 * 1e9
    );
}
