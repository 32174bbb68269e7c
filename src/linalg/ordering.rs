//! Fill-reducing ordering by METIS nested dissection (`METIS_NodeND`, spec §5.2 step 1).
//!
//! Convention (METIS manual, checked by the fill test below): `perm[new] = old` — faer's
//! forward permutation — and `iperm[old] = new`.

use super::{CscMatrix, LinalgError};

/// Serializes [`nested_dissection`]'s calls into METIS (its random state is global).
static METIS_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Nested-dissection permutation `(perm, iperm)` of the graph of a symmetric matrix.
/// Graphs with fewer than 3 vertices get the identity.
pub fn nested_dissection(a: &CscMatrix) -> Result<(Vec<usize>, Vec<usize>), LinalgError> {
    let n = a.n;
    if n < 3 {
        let id: Vec<usize> = (0..n).collect();
        return Ok((id.clone(), id));
    }
    // Adjacency without self loops.
    let mut xadj: Vec<i32> = Vec::with_capacity(n + 1);
    let mut adjncy: Vec<i32> = Vec::with_capacity(a.row_idx.len());
    xadj.push(0);
    for j in 0..n {
        for k in a.col_ptr[j]..a.col_ptr[j + 1] {
            let i = a.row_idx[k];
            if i != j {
                adjncy.push(i as i32);
            }
        }
        xadj.push(adjncy.len() as i32);
    }
    if adjncy.is_empty() {
        let id: Vec<usize> = (0..n).collect();
        return Ok((id.clone(), id));
    }
    // METIS keeps its random generator in process-wide statics (GKlib `random.c`: `mt[]`,
    // `mti`), reseeded by every call: two calls at once (simulators set up on two threads,
    // tests running in parallel) interleave their draws, and each may get an ordering other
    // than its seed's, so a factor and every solve with it differ in the last bits from
    // run to run. One call at a time keeps the ordering a function of the graph.
    let _one_at_a_time = METIS_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut nvtxs = n as i32;
    let mut options = vec![0i32; metis_sys::METIS_NOPTIONS as usize];
    let mut perm = vec![0i32; n];
    let mut iperm = vec![0i32; n];
    // SAFETY: all arrays are sized as METIS requires (xadj n+1, adjncy xadj[n],
    // perm/iperm n, options METIS_NOPTIONS); METIS does not retain the pointers.
    let status = unsafe {
        metis_sys::METIS_SetDefaultOptions(options.as_mut_ptr());
        // Deterministic ordering from run to run.
        options[metis_sys::moptions_et_METIS_OPTION_SEED as usize] = 1;
        metis_sys::METIS_NodeND(
            &mut nvtxs,
            xadj.as_mut_ptr(),
            adjncy.as_mut_ptr(),
            std::ptr::null_mut(),
            options.as_mut_ptr(),
            perm.as_mut_ptr(),
            iperm.as_mut_ptr(),
        )
    };
    if status != metis_sys::rstatus_et_METIS_OK {
        return Err(LinalgError::Metis { status, n });
    }
    Ok((
        perm.into_iter().map(|v| v as usize).collect(),
        iperm.into_iter().map(|v| v as usize).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_dissection_is_a_permutation_and_inverse() {
        // 2-D grid Laplacian pattern 10x10.
        let m = 10;
        let n = m * m;
        let mut conn = Vec::new();
        let mut ptr = vec![0];
        for j in 0..m - 1 {
            for i in 0..m - 1 {
                let a = i + m * j;
                conn.extend_from_slice(&[a, a + 1, a + m, a + m + 1]);
                ptr.push(conn.len());
            }
        }
        let a = CscMatrix::pattern_from_elements(n, &conn, &ptr);
        let (p, ip) = nested_dissection(&a).unwrap();
        let mut seen = vec![false; n];
        for new in 0..n {
            assert_eq!(ip[p[new]], new);
            assert!(!seen[p[new]]);
            seen[p[new]] = true;
        }
    }

    /// Regression (session 18, the 2-thread determinism flake): METIS's random state is
    /// process-wide, so orderings computed on several threads at once must still be the
    /// ordering of a lone call. A 3-D grid large enough for METIS's randomized coarsening
    /// (below ~120 vertices it orders by minimum degree and draws nothing).
    #[test]
    fn concurrent_orderings_equal_a_lone_one() {
        let m = 16;
        let n = m * m * m;
        let id = |i: usize, j: usize, k: usize| i + m * (j + m * k);
        let mut conn = Vec::new();
        let mut ptr = vec![0];
        for k in 0..m - 1 {
            for j in 0..m - 1 {
                for i in 0..m - 1 {
                    for (a, b, c) in [(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0)] {
                        conn.push(id(i + a, j + b, k + c));
                        conn.push(id(i + a, j + b, k + 1));
                    }
                    ptr.push(conn.len());
                }
            }
        }
        let a = CscMatrix::pattern_from_elements(n, &conn, &ptr);
        let lone = nested_dissection(&a).unwrap();
        let all: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..6)
                .map(|_| {
                    s.spawn(|| {
                        (0..4)
                            .map(|_| nested_dissection(&a).unwrap())
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        assert!(
            all.iter().all(|o| *o == lone),
            "an ordering differed from the lone call's"
        );
    }
}
