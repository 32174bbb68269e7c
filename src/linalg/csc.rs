//! A minimal symmetric sparse matrix in compressed-sparse-column form with both triangles
//! stored, plus element-wise assembly.

/// Symmetric `n × n` matrix, CSC, both triangles stored, row indices sorted per column.
#[derive(Clone, Debug)]
pub struct CscMatrix {
    pub n: usize,
    pub col_ptr: Vec<usize>,
    pub row_idx: Vec<usize>,
    pub values: Vec<f64>,
}

impl CscMatrix {
    /// Sparsity pattern of the node graph of elements given by `conn` with offsets
    /// `conn_ptr` (element `e` has nodes `conn[conn_ptr[e]..conn_ptr[e+1]]`). Every node
    /// gets a diagonal entry (lumped mass).
    pub fn pattern_from_elements(n: usize, conn: &[usize], conn_ptr: &[usize]) -> Self {
        let mut cols: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
        for e in 0..conn_ptr.len() - 1 {
            let el = &conn[conn_ptr[e]..conn_ptr[e + 1]];
            for &a in el {
                for &b in el {
                    cols[a].push(b);
                }
            }
        }
        let mut col_ptr = Vec::with_capacity(n + 1);
        let mut row_idx = Vec::new();
        col_ptr.push(0);
        for c in cols.iter_mut() {
            c.sort_unstable();
            c.dedup();
            row_idx.extend_from_slice(c);
            col_ptr.push(row_idx.len());
        }
        let nnz = row_idx.len();
        CscMatrix {
            n,
            col_ptr,
            row_idx,
            values: vec![0.0; nnz],
        }
    }

    /// Largest absolute column sum $\|A\|_1=\max_j\sum_i|a_{ij}|$: for the symmetric
    /// matrices stored here (both triangles) also the largest absolute row sum, an upper
    /// bound on the spectral radius (Gershgorin).
    pub fn max_abs_col_sum(&self) -> f64 {
        (0..self.n)
            .map(|j| {
                self.values[self.col_ptr[j]..self.col_ptr[j + 1]]
                    .iter()
                    .map(|v| v.abs())
                    .sum::<f64>()
            })
            .fold(0.0, f64::max)
    }

    /// Index of entry `(row, col)` in `values`, if it is in the pattern.
    #[inline]
    pub fn position(&self, row: usize, col: usize) -> Option<usize> {
        let s = self.col_ptr[col];
        let e = self.col_ptr[col + 1];
        self.row_idx[s..e].binary_search(&row).ok().map(|k| s + k)
    }

    /// Add `v` at `(row, col)`; the entry must be in the pattern.
    #[inline]
    pub fn add(&mut self, row: usize, col: usize, v: f64) {
        let k = self
            .position(row, col)
            .expect("add() is called only on entries of the pattern the matrix was assembled with");
        self.values[k] += v;
    }

    /// Same pattern, zero values.
    pub fn zeros_like(&self) -> Self {
        CscMatrix {
            values: vec![0.0; self.values.len()],
            ..self.clone()
        }
    }

    /// $y = A x$ (symmetric, both triangles stored).
    pub fn matvec(&self, x: &[f64], y: &mut [f64]) {
        y.iter_mut().for_each(|v| *v = 0.0);
        for (j, &xj) in x.iter().enumerate().take(self.n) {
            if xj == 0.0 {
                continue;
            }
            for k in self.col_ptr[j]..self.col_ptr[j + 1] {
                y[self.row_idx[k]] += self.values[k] * xj;
            }
        }
    }

    /// $y = A x$ applied to one axis of a node-major `3n` vector.
    pub fn matvec_axis(&self, x: &[f64], axis: usize, y: &mut [f64]) {
        y.iter_mut().for_each(|v| *v = 0.0);
        for j in 0..self.n {
            let xj = x[3 * j + axis];
            if xj == 0.0 {
                continue;
            }
            for k in self.col_ptr[j]..self.col_ptr[j + 1] {
                y[self.row_idx[k]] += self.values[k] * xj;
            }
        }
    }

    /// Linear combination `a*self + b*other` on the same pattern.
    pub fn combine(&self, a: f64, other: &CscMatrix, b: f64) -> CscMatrix {
        debug_assert_eq!(self.row_idx.len(), other.row_idx.len());
        let values = self
            .values
            .iter()
            .zip(&other.values)
            .map(|(x, y)| a * x + b * y)
            .collect();
        CscMatrix {
            values,
            ..self.clone()
        }
    }

    /// Add `d[i]` to the diagonal.
    pub fn add_diagonal(&mut self, d: &[f64]) {
        for (i, &di) in d.iter().enumerate() {
            self.add(i, i, di);
        }
    }

    /// Principal submatrix on `keep` (sorted node list); `map[i]` = new index or `usize::MAX`.
    pub fn submatrix(&self, keep: &[usize], map: &[usize]) -> CscMatrix {
        let mut col_ptr = Vec::with_capacity(keep.len() + 1);
        let mut row_idx = Vec::new();
        let mut values = Vec::new();
        col_ptr.push(0);
        for &j in keep {
            for k in self.col_ptr[j]..self.col_ptr[j + 1] {
                let r = map[self.row_idx[k]];
                if r != usize::MAX {
                    row_idx.push(r);
                    values.push(self.values[k]);
                }
            }
            col_ptr.push(row_idx.len());
        }
        CscMatrix {
            n: keep.len(),
            col_ptr,
            row_idx,
            values,
        }
    }

    /// $\|A - A^T\|_F / \|A\|_F$ (a check of spec §10.2).
    pub fn asymmetry(&self) -> f64 {
        let mut num = 0.0;
        let mut den = 0.0;
        for j in 0..self.n {
            for k in self.col_ptr[j]..self.col_ptr[j + 1] {
                let i = self.row_idx[k];
                let v = self.values[k];
                let vt = self.position(j, i).map(|p| self.values[p]).unwrap_or(0.0);
                num += (v - vt) * (v - vt);
                den += v * v;
            }
        }
        (num / den.max(f64::MIN_POSITIVE)).sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_abs_col_sum_bounds_the_spectral_radius() {
        // [[2, -1], [-1, 3]]: column sums 3 and 4; eigenvalues (5 ± √5)/2 ≤ 4
        let mut a = CscMatrix::pattern_from_elements(2, &[0, 1], &[0, 2]);
        a.add(0, 0, 2.0);
        a.add(1, 1, 3.0);
        a.add(0, 1, -1.0);
        a.add(1, 0, -1.0);
        assert_eq!(a.max_abs_col_sum(), 4.0);
        assert!((5.0 + 5f64.sqrt()) / 2.0 <= a.max_abs_col_sum());
    }

    #[test]
    fn pattern_and_matvec_of_two_triangles() {
        // two "elements" sharing an edge: {0,1,2}, {1,2,3}
        let conn = [0, 1, 2, 1, 2, 3];
        let ptr = [0, 3, 6];
        let mut a = CscMatrix::pattern_from_elements(4, &conn, &ptr);
        assert_eq!(a.position(0, 3), None);
        assert!(a.position(1, 3).is_some());
        for i in 0..4 {
            a.add(i, i, 2.0);
        }
        a.add(0, 1, -1.0);
        a.add(1, 0, -1.0);
        let mut y = vec![0.0; 4];
        a.matvec(&[1.0, 1.0, 0.0, 0.0], &mut y);
        assert_eq!(y, vec![1.0, 1.0, 0.0, 0.0]);
        assert_eq!(a.asymmetry(), 0.0);
        let sub = a.submatrix(&[1, 2, 3], &[usize::MAX, 0, 1, 2]);
        assert_eq!(sub.n, 3);
        assert_eq!(sub.values.iter().filter(|v| **v != 0.0).count(), 3);
    }
}
