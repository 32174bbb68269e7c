//! Sizes of the GPU path's factor for a generated box, without a device: nnz(L), nnz(S), the
//! explicit inverse factor's bytes (`pipeline::inverse_factor_bytes`) and the level counts of
//! the triangular path (docs/gpu.md "Global solve: two paths"), with the host time of the
//! ordering and of the simplicial factor, and the same for the CPU path's (faer) factor
//! unpacked (`SimplicialFactor::from_lower`, what the GPU path uses since 2026-11-27).
//! With `pattern` last, also the host seconds of $S$'s index patterns as the device build of
//! [`diffphd::gpu::pipeline::DeviceFactor`] makes them (column pattern, its transpose, the
//! segments of both forms).
//! Usage: `cargo run --release --example factor_stats -- NX NY NZ [tet4|hex8] [pattern]`
use diffphd::gpu::factor::SimplicialFactor;
use diffphd::gpu::pipeline::inverse_factor_bytes;
use diffphd::linalg::ordering;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let c: Vec<usize> = args.iter().take(3).filter_map(|a| a.parse().ok()).collect();
    if c.len() != 3 {
        eprintln!("usage: factor_stats NX NY NZ [tet4|hex8]");
        std::process::exit(2);
    }
    let element = args.get(3).map_or("tet4", |s| s.as_str());
    let text = format!(
        "schema_version = 1\n[simulation]\nframes = 1\ndt = 0.01\n[[body]]\n[body.mesh]\ngenerator = \"box\"\nelement = \"{element}\"\ncells = [{}, {}, {}]\ndx = 0.01\n[body.material]\nmodel = \"corotated\"\nyoungs_modulus = 1e6\npoisson_ratio = 0.45\ndensity = 1000.0\n",
        c[0], c[1], c[2]
    );
    let ls = diffphd::scene::load_str(&text, std::path::Path::new("box.toml"), &[]).expect("scene");
    let m = diffphd::solver::Model::from_scene(&ls).expect("model");
    let sim = diffphd::solver::Simulator::new(&m, &ls.scene.solver).expect("simulator");
    let a = &sim.system.a;
    let t = Instant::now();
    let (p, ip) = ordering::nested_dissection(a).expect("ordering");
    let t_order = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let f = SimplicialFactor::new(a, &p, &ip).expect("factor");
    let t_factor = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let cpu = diffphd::linalg::SparseCholesky::factor(a, &p, &ip).expect("cpu factor");
    let t_cpu = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let g = SimplicialFactor::from_lower(cpu.lower_csc(), &p, &ip);
    let t_unpack = t.elapsed().as_secs_f64();
    let g_nnz_s = g.inverse_nnz();
    println!(
        "CPU factor ({}) {t_cpu:.1} s + unpacked {t_unpack:.2} s: nnz(L) {}, nnz(S) {g_nnz_s}, inverse factor {:.2} GiB",
        if cpu.is_supernodal() { "supernodal" } else { "simplicial" },
        g.values.len(),
        inverse_factor_bytes(g_nnz_s, g.n) as f64 / (1u64 << 30) as f64,
    );
    let ((lp, _), (up, _)) = f.levels();
    let nnz_s = f.inverse_nnz();
    println!(
        "{element} box {c:?}: {} nodes, {} samples; ordering {t_order:.1} s, simplicial factor {t_factor:.1} s; nnz(L) {}, nnz(S) {nnz_s} ({:.1}x), inverse factor {:.2} GiB; levels {} / {}",
        m.num_nodes(),
        m.num_samples(),
        f.values.len(),
        nnz_s as f64 / f.values.len() as f64,
        inverse_factor_bytes(nnz_s, f.n) as f64 / (1u64 << 30) as f64,
        lp.len() - 1,
        up.len() - 1
    );
    if args.get(4).map(|s| s.as_str()) == Some("pattern") {
        host_pattern_seconds(&g);
    }
}

/// The host's share of building $S$ on the device: since 2026-11-27 the per-column arrays
/// (depth schedule, postorder, pointers) and the segments, against the whole patterns the
/// host built before (column pattern and its transpose with the value map).
fn host_pattern_seconds(g: &SimplicialFactor) {
    use diffphd::gpu::factor::transpose_pattern;
    use diffphd::gpu::pipeline::{segments, sliced_len, InversePlan, SEGMENT};
    let t = Instant::now();
    let plan = InversePlan::new(g);
    let t_arrays = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let a = segments(&plan.col_ptr, SEGMENT);
    let b = segments(&plan.row_ptr, SEGMENT);
    let t_seg = t.elapsed().as_secs_f64();
    let slots = sliced_len(a.1.len() - 1) + sliced_len(b.1.len() - 1);
    println!(
        "host share of S's build now: per-column arrays {t_arrays:.2} s, segments {t_seg:.2} s ({} + {} segments; sliced slots {slots}, {:.2}% over 2 nnz(S))",
        a.1.len() - 1,
        b.1.len() - 1,
        100.0 * (slots as f64 / (2 * plan.col_ptr[g.n]) as f64 - 1.0)
    );
    let t = Instant::now();
    let (sp, sr) = g.inverse_pattern();
    let t_cols = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let (_, cols, _) = transpose_pattern(g.n, &sp, &sr);
    let t_rows = t.elapsed().as_secs_f64();
    println!(
        "host patterns of S as built before: column pattern {t_cols:.2} s, transpose and value map {t_rows:.2} s ({} entries)",
        cols.len()
    );
}
