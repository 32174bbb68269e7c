//! The device memory a scene's PD run needs and the global-solve path it would take, at any
//! size, without a device (issue 38 item 2: the estimate committed before a lease). The
//! factor's sizes come from the symbolic analysis alone (`gpu::factor::FactorSizes`: METIS
//! nested dissection, elimination tree, column counts; no numeric factorization), so the
//! paper-size Crab (742k nodes) is estimated on a laptop. The byte counts are docs/gpu.md's
//! "Memory" formulas; the path is the explicit inverse factor when its bytes fit a third of
//! the card's free memory (`offload::inverse_budget`), else the level-scheduled triangular
//! solves.
//!
//! Bounds and omissions: the factor is of the whole per-axis matrix (a scene's Dirichlet
//! nodes are not removed: an upper bound); contact adds a dense Delassus matrix of $8m^2$
//! bytes for $m$ contact rows per step (printed at two sizes of $m$, which the motion sets);
//! muscle fibres and the CUDA context (about 0.5 GiB) are not counted.
//!
//! `cargo run --release --example device_memory -- SCENE [key.path=value ...]`
use diffphd::gpu::factor::FactorSizes;
use diffphd::gpu::pipeline::{inverse_factor_bytes, sliced_len, SEGMENT};
use diffphd::linalg::{ordering, CscMatrix};
use std::time::Instant;

/// Usable memory of the two lent cards (bytes; nvidia-smi's totals less about 1 GiB for the
/// context and the model's first buffers).
const CARDS: [(&str, f64); 2] = [("H100 80GB", 79.0), ("H200", 139.0)];
const GIB: f64 = (1u64 << 30) as f64;

/// The value, or the error's one line and exit `code` (2: bad input, 1: a failed ordering).
fn or_exit<T, E: std::fmt::Display>(r: Result<T, E>, code: i32) -> T {
    r.unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(code)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(scene) = args.first() else {
        eprintln!("usage: device_memory SCENE [key.path=value ...]");
        std::process::exit(2);
    };
    let t = Instant::now();
    let ls = or_exit(
        diffphd::scene::load(std::path::Path::new(scene), &args[1..]),
        2,
    );
    let m = or_exit(diffphd::session::build_model(&ls), 2);
    let t_model = t.elapsed().as_secs_f64();
    let (n, ns, ne) = (m.num_nodes(), m.num_samples(), m.conn_ptr.len() - 1);
    let entries = m.samples.grads.len();
    let t = Instant::now();
    let a = CscMatrix::pattern_from_elements(n, &m.conn, &m.conn_ptr);
    let (p, ip) = or_exit(
        ordering::nested_dissection(&a).map_err(|e| format!("ordering: {e}")),
        1,
    );
    let f = FactorSizes::new(&a, &p, &ip);
    let t_sym = t.elapsed().as_secs_f64();
    let restart = ls.scene.backward.device_gmres_restart;
    let (n8, s8, e8, ent) = (
        n as f64 * 8.0,
        ns as f64 * 8.0,
        ne as f64 * 8.0,
        entries as f64,
    );
    // docs/gpu.md "Memory": each term in bytes
    let l_bytes = 2.0 * f.nnz_l as f64 * 16.0 + 2.0 * (n8 + 8.0) + 2.0 * n8;
    let s_bytes = inverse_factor_bytes(f.nnz_s, n) as f64;
    let segs = f.nnz_s / SEGMENT + n + 1;
    let s_bytes_64 = s_bytes + 2.0 * sliced_len(segs) as f64 * 4.0;
    let local = s8 * (9.0 + 2.0) + ent * (8.0 + 24.0 + 16.0) + 3.0 * 3.0 * n8;
    let backward = s8 * (5.0 * 9.0 + 9.0 + 1.0) + 6.0 * n8;
    let params = s8 * (2.0 * 9.0 + 3.0 + 3.0 + 6.0 + 2.0) + 2.0 * e8 + 6.0 * n8;
    let energies = s8 + 3.0 * n8 + 4096.0 * 8.0;
    let nodal = (3.0 + 9.0 + 5.0 + 2.0) * n8;
    let step_vectors = 48.0 * 3.0 * n8;
    let krylov = (3.0 * restart as f64 + 4.0) * 3.0 * n8;
    let rest = local + backward + params + energies + nodal + step_vectors + krylov;
    println!(
        "{scene} {}: {n} nodes ({} DoF), {ne} elements, {ns} samples; model {t_model:.1} s, symbolic analysis {t_sym:.1} s",
        args[1..].join(" "),
        3 * n
    );
    println!(
        "factor: nnz(L) {}, nnz(S) {} ({:.1}x), forest height {}",
        f.nnz_l,
        f.nnz_s,
        f.nnz_s as f64 / f.nnz_l as f64,
        f.height
    );
    let terms = [
        ("L, both row forms and level lists", l_bytes),
        ("S, explicit inverse factor (32-bit columns)", s_bytes),
        ("local step", local),
        ("backward: ΔA·z coefficients", backward),
        ("backward: parameter gradients", params),
        ("trust-region energies", energies),
        ("nodal, force and muscle gradient terms", nodal),
        ("PD loop and Newton-Krylov vectors (48 x 3n)", step_vectors),
        ("device GMRES basis, restart", krylov),
    ];
    for (what, b) in terms {
        println!("  {what:<46} {:>9.3} GiB", b / GIB);
    }
    println!(
        "  (S with the 64-bit column indices before session 15: {:.3} GiB)",
        s_bytes_64 / GIB
    );
    println!(
        "  contact (not in the totals): the dense Delassus matrix of m rows, 8 m^2 ({:.2} GiB \
         at m = 10,000, {:.1} GiB at 50,000), and the multi-RHS solves' two blocks of at most \
         256 MiB",
        8e8 / GIB,
        8.0 * 2.5e9 / GIB
    );
    for (card, gib) in CARDS {
        let budget = gib * GIB / 3.0;
        let (path, total) = if s_bytes <= budget {
            ("explicit inverse factor", l_bytes + s_bytes + rest)
        } else {
            ("triangular solves (S over the budget)", l_bytes + rest)
        };
        println!(
            "{card}: budget for S {:.1} GiB -> {path}; total {:.2} GiB of {gib:.0} without contact",
            budget / GIB,
            total / GIB
        );
    }
}
