//! Matrices and comparisons shared by the linear-algebra unit tests.

use super::CscMatrix;

/// Run `f` on a fresh rayon pool of `threads` threads: the thread-count tests of the solves,
/// gathers and factorizations (the same bits at 1, 2, 3 and 4 threads).
pub(crate) fn on_threads<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a rayon pool of a few threads")
        .install(f)
}

/// The "Laplacian plus mass" of a grid of 8-node hex cells (`cells` per axis, nodes numbered
/// $i+(n_x+1)(j+(n_y+1)k)$): 7 on each cell's diagonal, −1 off it, summed over cells, plus
/// `shift` on the diagonal. SPD for `shift` > 0.
pub fn hex_laplacian(cells: [usize; 3], shift: f64) -> CscMatrix {
    let [nx, ny, nz] = cells;
    let id = |i: usize, j: usize, k: usize| i + (nx + 1) * (j + (ny + 1) * k);
    let (mut conn, mut ptr) = (Vec::new(), vec![0]);
    for k in 0..nz {
        for j in 0..ny {
            for i in 0..nx {
                conn.extend((0..8).map(|c| id(i + (c & 1), j + ((c >> 1) & 1), k + (c >> 2))));
                ptr.push(conn.len());
            }
        }
    }
    let n = (nx + 1) * (ny + 1) * (nz + 1);
    let mut a = CscMatrix::pattern_from_elements(n, &conn, &ptr);
    for el in conn.chunks(8) {
        for &p in el {
            for &q in el {
                a.add(p, q, if p == q { 7.0 } else { -1.0 });
            }
        }
    }
    a.add_diagonal(&vec![shift; n]);
    a
}

/// Whether two vectors are the same bit for bit.
pub fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}
