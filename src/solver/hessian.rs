//! The Newton baseline's linear system: the persistent Hessian pattern, the free-DoF map
//! and the factor whose ordering and symbolic analysis are reused across iterations and
//! steps; the factored Hessian as a [`LinearSolver`] for the contact machinery.

use crate::linalg::{ordering, CscMatrix, LinalgError, LinearSolver, SparseCholesky};
use crate::material::Mat9;
use crate::model::Model;
use crate::solver::records::error::SolverError;
use rayon::prelude::*;

/// Persistent Hessian pattern, free-DoF map and the factor whose symbolic analysis is reused.
pub struct NewtonSystem {
    /// $3n\times3n$ element pattern (unreduced).
    pub(crate) pattern: CscMatrix,
    /// Free DoFs (sorted) and the map DoF → free index (`usize::MAX` if prescribed).
    pub(crate) free: Vec<usize>,
    pub(crate) map: Vec<usize>,
    pub(crate) perm: Option<(Vec<usize>, Vec<usize>)>,
    pub(crate) factor: Option<SparseCholesky>,
    /// The free block of the pattern (its values overwritten at each factorization) and,
    /// per stored value, the pattern's value it copies (plan once: the free block's
    /// pattern never changes).
    reduced: CscMatrix,
    reduced_src: Vec<usize>,
    /// Gather plan of the assembly (plan once, execute per Hessian in parallel over column
    /// nodes, [`AssemblyGather`]).
    pub(crate) gather: AssemblyGather,
    /// Position of the diagonal entry of each DoF.
    pub(crate) diag: Vec<u32>,
}

impl NewtonSystem {
    /// The pattern of `model`'s elements with the prescribed DoFs `prescribed` (sorted
    /// node-major indices) removed.
    pub fn new(model: &Model, prescribed: &[usize]) -> Self {
        let n3 = 3 * model.num_nodes();
        let mut conn = Vec::with_capacity(3 * model.conn.len());
        let mut ptr = vec![0];
        for e in 0..model.num_elements() {
            for &i in model.element(e) {
                conn.extend([3 * i, 3 * i + 1, 3 * i + 2]);
            }
            ptr.push(conn.len());
        }
        let pattern = CscMatrix::pattern_from_elements(n3, &conn, &ptr);
        let mut map = vec![usize::MAX; n3];
        let free: Vec<usize> = (0..n3)
            .filter(|k| prescribed.binary_search(k).is_err())
            .collect();
        for (j, &k) in free.iter().enumerate() {
            map[k] = j;
        }
        let diag = (0..pattern.n)
            .map(|k| {
                pattern
                    .position(k, k)
                    .expect("the element pattern stores every diagonal entry")
                    as u32
            })
            .collect();
        let gather = AssemblyGather::new(model, &pattern);
        let mut positions = pattern.clone();
        for (k, v) in positions.values.iter_mut().enumerate() {
            *v = k as f64;
        }
        let mut reduced = positions.submatrix(&free, &map);
        let reduced_src = reduced.values.iter().map(|&k| k as usize).collect();
        reduced.values.fill(0.0);
        NewtonSystem {
            reduced,
            reduced_src,
            pattern,
            free,
            map,
            perm: None,
            factor: None,
            gather,
            diag,
        }
    }

    /// Factor the free block of `h` (a matrix on [`NewtonSystem::pattern`]; numeric only
    /// after the first call). `Err(index)` on a non-positive pivot.
    pub(crate) fn factor(&mut self, h: &CscMatrix, shift: f64) -> Result<(), SolverError> {
        debug_assert_eq!(h.values.len(), self.pattern.values.len());
        let sub = &mut self.reduced;
        for (v, &k) in sub.values.iter_mut().zip(&self.reduced_src) {
            *v = h.values[k];
        }
        if shift != 0.0 {
            sub.add_diagonal(&vec![shift; sub.n]);
        }
        let sub = &self.reduced;
        if self.perm.is_none() {
            self.perm = Some(ordering::nested_dissection(sub)?);
        }
        let res = match self.factor.as_mut() {
            Some(f) => f.refactor(sub),
            None => {
                let (p, ip) = self
                    .perm
                    .as_ref()
                    .expect("perm is set just above when it was None");
                SparseCholesky::factor(sub, p, ip).map(|f| {
                    self.factor = Some(f);
                })
            }
        };
        res.map_err(SolverError::Linalg)
    }

    /// Solve with the current factor: `rhs` full length, prescribed entries ignored; result
    /// has zeros there. [`LinalgError::NotFactored`] before the first successful factor.
    pub(crate) fn solve(&self, rhs: &[f64]) -> Result<Vec<f64>, LinalgError> {
        self.solve_by(rhs, |f, r| f.solve_in_place(r))
    }

    /// [`Self::solve`] with `solve` applied to the free entries by the current factor.
    fn solve_by(
        &self,
        rhs: &[f64],
        solve: impl FnOnce(&SparseCholesky, &mut [f64]),
    ) -> Result<Vec<f64>, LinalgError> {
        let factor = self.factor.as_ref().ok_or(LinalgError::NotFactored)?;
        let mut r: Vec<f64> = self.free.iter().map(|&k| rhs[k]).collect();
        solve(factor, &mut r);
        let mut out = vec![0.0; rhs.len()];
        for (j, &k) in self.free.iter().enumerate() {
            out[k] = r[j];
        }
        Ok(out)
    }
}

/// A factored Newton Hessian $H$ (free-DoF block) as a [`LinearSolver`], so that the contact
/// machinery built for the PD factor (`Delassus`, `ContactAdjoint`) uses $H^{-1}$.
/// $H$ couples the axes ([`LinearSolver::axis_coupled`]).
pub struct NewtonFactor<'a> {
    pub(crate) sys: &'a NewtonSystem,
    /// The assembled (unreduced) matrix, for [`LinearSolver::apply_a`] and the Dirichlet
    /// coupling of [`LinearSolver::solve`]; `None` when only homogeneous solves are needed.
    pub(crate) k: Option<&'a CscMatrix>,
    pub(crate) n: usize,
}

impl LinearSolver for NewtonFactor<'_> {
    fn num_nodes(&self) -> usize {
        self.n
    }
    /// $x_F=H_{FF}^{-1}(b_F-H_{FD}\bar x_D)$, $x_D=\bar x_D$.
    fn solve(&self, b: &[f64], dirichlet_values: &[f64], x: &mut [f64]) -> Result<(), LinalgError> {
        let mut xd = vec![0.0; b.len()];
        for (k, v) in xd.iter_mut().enumerate() {
            if self.sys.map[k] == usize::MAX {
                *v = dirichlet_values[k];
            }
        }
        let mut r = b.to_vec();
        if let Some(k) = self.k {
            let mut hx = vec![0.0; b.len()];
            k.matvec(&xd, &mut hx);
            r.iter_mut().zip(&hx).for_each(|(a, c)| *a -= c);
        }
        let sol = self.sys.solve(&r)?;
        for (k, v) in x.iter_mut().enumerate() {
            *v = if self.sys.map[k] == usize::MAX {
                xd[k]
            } else {
                sol[k]
            };
        }
        Ok(())
    }
    fn solve_homogeneous(&self, q: &[f64], z: &mut [f64]) -> Result<(), LinalgError> {
        z.copy_from_slice(&self.sys.solve(q)?);
        Ok(())
    }
    /// The columns in parallel, each solved on its task's thread (no split of each solve
    /// over the pool as well; see `GlobalSystem`'s): the same bits per column.
    fn solve_homogeneous_many(&self, qs: &[Vec<f64>]) -> Result<Vec<Vec<f64>>, LinalgError> {
        qs.par_iter()
            .map_init(
                || None,
                |w, q| {
                    self.sys.solve_by(q, |f, r| {
                        f.solve_many_seq(r, 1, w.get_or_insert_with(|| f.solve_scratch(1)))
                    })
                },
            )
            .collect()
    }
    fn apply_a(&self, x: &[f64], y: &mut [f64]) {
        match self.k {
            Some(k) => k.matvec(x, y),
            None => y.iter_mut().for_each(|v| *v = 0.0),
        }
    }
    fn axis_coupled(&self) -> bool {
        true
    }
}

/// The gather form of the Newton assembly $\nabla^2g=\dots+\sum_sG_s^T\big(H_s+
/// \tfrac{\beta_ew_s}h\,I\big)G_s$, parallel over column nodes. The blocks $(a,b)$ of every
/// sample with column node $b$ are stored in the columns $3b..3b+2$ of the pattern, so a
/// task that owns a range of column nodes owns a contiguous range of the stored values. For
/// each of its nodes $b$ it visits the (sample, corner) pairs of $b$ in sample order
/// ([`crate::model::NodeSamples`]), forms $H_sG_b$ once and adds
/// $G_a^T(H_sG_b)+c_s(\nabla N_a\cdot\nabla N_b)I$ into the block of every corner $a$. Each
/// stored value so receives the serial sample loop's terms, each by the same arithmetic, in
/// the same (sample) order: the same bits for any thread count, with the serial loop's
/// operation count (issue 37: a scatter written as a gather; the earlier gather per stored
/// value formed $H_sG_b$ once per value, three times the work, and two threads ran it
/// slower than one ran the serial loop).
pub(crate) struct AssemblyGather {
    /// Per element, the block of each of its node pairs $(a, b)$
    /// (`elem_blocks[elem_ptr[e] + a·n_e + b]`), and per block its nine stored values.
    elem_ptr: Vec<usize>,
    elem_blocks: Vec<u32>,
    block_vals: Vec<[u32; 9]>,
    /// The tasks: task $t$ owns the column nodes `task_node[t]..task_node[t + 1]`, whose
    /// stored values are `task_val[t]..task_val[t + 1]`.
    task_node: Vec<usize>,
    task_val: Vec<usize>,
}

/// Stored values per parallel task of [`AssemblyGather::add_samples`] (a fixed chunking of
/// the column nodes; tasks are independent, so any chunking gives the same bits).
const VALUE_CHUNK: usize = 16_384;

impl AssemblyGather {
    /// The plan of `model`'s samples on the $3n\times3n$ element pattern `pattern` (full
    /// $3\times3$ node blocks).
    pub(crate) fn new(model: &Model, pattern: &CscMatrix) -> Self {
        let nnz = pattern.row_idx.len();
        let pos = |r: usize, c: usize| {
            pattern
                .position(r, c)
                .expect("the pattern is assembled from the same elements")
        };
        // blocks numbered by their (0, 0) entries in storage order
        let mut block_of = vec![u32::MAX; nnz];
        let mut nb = 0usize;
        for c in (0..pattern.n).step_by(3) {
            for k in pattern.col_ptr[c]..pattern.col_ptr[c + 1] {
                if pattern.row_idx[k].is_multiple_of(3) {
                    block_of[k] = nb as u32;
                    nb += 1;
                }
            }
        }
        let mut block_vals = vec![[0u32; 9]; nb];
        for c in 0..pattern.n {
            for k in pattern.col_ptr[c]..pattern.col_ptr[c + 1] {
                let r = pattern.row_idx[k];
                let blk = block_of[pos(r - r % 3, c - c % 3)] as usize;
                block_vals[blk][3 * (r % 3) + c % 3] = k as u32;
            }
        }
        let ne = model.num_elements();
        let mut elem_ptr = vec![0usize; ne + 1];
        let mut elem_blocks = Vec::new();
        for e in 0..ne {
            let el = model.element(e);
            for &na in el {
                for &nb_ in el {
                    elem_blocks.push(block_of[pos(3 * na, 3 * nb_)]);
                }
            }
            elem_ptr[e + 1] = elem_blocks.len();
        }
        let n = pattern.n / 3;
        let (mut task_node, mut task_val) = (vec![0], vec![0]);
        for b in 1..=n {
            let v = pattern.col_ptr[3 * b];
            if b == n || v - task_val[task_val.len() - 1] >= VALUE_CHUNK {
                task_node.push(b);
                task_val.push(v);
            }
        }
        AssemblyGather {
            elem_ptr,
            elem_blocks,
            block_vals,
            task_node,
            task_val,
        }
    }

    /// Add the samples' blocks $G_s^T(H_s+c_s I)G_s$ onto `vals` (the pattern's values):
    /// `hess[s]` is $H_s$ (9×9, on $\mathrm{vec}\,F$), `c(s)` the sample's stiffness-damping
    /// coefficient $\beta_ew_s/h$. Parallel over column nodes.
    pub(crate) fn add_samples<C>(&self, model: &Model, hess: &[Mat9], c: C, vals: &mut [f64])
    where
        C: Fn(usize) -> f64 + Sync,
    {
        let adj = model.node_samples();
        let mut parts = Vec::with_capacity(self.task_node.len() - 1);
        let mut rest = vals;
        for w in self.task_val.windows(2) {
            let (part, tail) = rest.split_at_mut(w[1] - w[0]);
            parts.push(part);
            rest = tail;
        }
        let task = |(t, part): (usize, &mut [f64])| {
            let off = self.task_val[t];
            for b in self.task_node[t]..self.task_node[t + 1] {
                for &(s, lb) in adj.of(b) {
                    let s = s as usize;
                    self.add_column(model, (s, lb as usize), &hess[s], c(s), (part, off));
                }
            }
        };
        if rayon::current_num_threads() == 1 {
            parts.into_iter().enumerate().for_each(task);
        } else {
            parts.into_par_iter().enumerate().for_each(task);
        }
    }

    /// The blocks $(a, b)$ of sample `s` for its corner `b`, every corner $a$: $H_sG_b$
    /// formed once, then $G_a^T(H_sG_b)+c_s(\nabla N_a\cdot\nabla N_b)I$ added into the
    /// block's stored values (`cs` is $c_s$; `part` holds the stored values from `off`).
    fn add_column(
        &self,
        model: &Model,
        (s, b): (usize, usize),
        hs: &Mat9,
        cs: f64,
        (part, off): (&mut [f64], usize),
    ) {
        let e = model.samples.elem[s];
        let g = model.sample_grads(s);
        let nv = g.len();
        let blocks = &self.elem_blocks[self.elem_ptr[e]..self.elem_ptr[e + 1]];
        let gb = g[b];
        // (H_s g_b)_{r,j} = Σ_l H_{r,3j+l} g_{b,l}
        let mut hg = [[0.0f64; 3]; 9];
        for (r, row) in hg.iter_mut().enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                *v = (0..3).map(|l| hs[(r, 3 * j + l)] * gb[l]).sum();
            }
        }
        for (a, ga) in g.iter().enumerate() {
            let slots = &self.block_vals[blocks[a * nv + b] as usize];
            let lap = ga[0] * gb[0] + ga[1] * gb[1] + ga[2] * gb[2];
            for i in 0..3 {
                for j in 0..3 {
                    let mut v: f64 = (0..3).map(|kk| ga[kk] * hg[3 * i + kk][j]).sum();
                    if i == j {
                        v += cs * lap;
                    }
                    part[slots[3 * i + j] as usize - off] += v;
                }
            }
        }
    }
}

/// Entry $(3a+i, 3b+j)$ of $G_s^T H_s G_s$ plus $c\,(\nabla N_a\cdot\nabla N_b)\,\delta_{ij}$:
/// $\sum_k g_{a,k}(Hg_b)_{3i+k,j}$ with $(Hg_b)_{r,j}=\sum_l H_{r,3j+l}\,g_{b,l}$ (the
/// arithmetic of the serial assembly it replaced, term for term).
#[cfg(test)]
fn block_entry(
    hs: &Mat9,
    g: &[[f64; 3]],
    (a, b): (usize, usize),
    (i, j): (usize, usize),
    c: f64,
) -> f64 {
    let gb = g[b];
    let hg = |r: usize| -> f64 { (0..3).map(|l| hs[(r, 3 * j + l)] * gb[l]).sum() };
    let mut v: f64 = (0..3).map(|kk| g[a][kk] * hg(3 * i + kk)).sum();
    if i == j {
        let lap = g[a][0] * g[b][0] + g[a][1] * g[b][1] + g[a][2] * g[b][2];
        v += c * lap;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::generate::{box_hex, box_tet};
    use crate::model::ModelBuilder;

    /// The gather assembly equals the serial sample loop it replaced (every sample's
    /// $G_s^T(H_s+c_sI)G_s$ added block by block onto the diagonal start) bit for bit, on 1,
    /// 2 and 3 threads, for tets and 8-sample hexes.
    #[test]
    fn gather_assembly_is_the_serial_loop_bitwise_on_any_thread_count() {
        for mesh in [
            box_tet([4, 3, 2], 0.1, [0.0; 3]),
            box_hex([3, 2, 2], 0.1, [0.0; 3]),
        ] {
            let model = ModelBuilder::new(mesh).build().unwrap();
            let sys = NewtonSystem::new(&model, &[]);
            let ns = model.num_samples();
            let hess: Vec<Mat9> = (0..ns)
                .map(|s| Mat9::from_fn(|r, c| ((s * 81 + 9 * r + c) as f64 * 0.377).sin()))
                .collect();
            let c = |s: usize| 0.1 + (s as f64 * 0.71).cos();
            let mut start = vec![0.0; sys.pattern.values.len()];
            for (k, &d) in sys.diag.iter().enumerate() {
                start[d as usize] = 1.0 + k as f64 * 0.013;
            }
            // the serial loop: samples in order, each block entry added into its slot
            let mut serial = start.clone();
            for (s, hs) in hess.iter().enumerate() {
                let el = model.element(model.samples.elem[s]);
                let g = model.sample_grads(s);
                for (a, &na) in el.iter().enumerate() {
                    for (b, &nb) in el.iter().enumerate() {
                        for i in 0..3 {
                            for j in 0..3 {
                                let k = sys.pattern.position(3 * na + i, 3 * nb + j).unwrap();
                                serial[k] += block_entry(hs, g, (a, b), (i, j), c(s));
                            }
                        }
                    }
                }
            }
            assert!(serial.iter().zip(&start).any(|(x, y)| x != y));
            for t in [1, 2, 3] {
                let mut par = start.clone();
                crate::linalg::test_matrices::on_threads(t, || {
                    sys.gather.add_samples(&model, &hess, c, &mut par)
                });
                let same = serial
                    .iter()
                    .zip(&par)
                    .all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(
                    same,
                    "{t} threads: the gather assembly differs from the serial loop"
                );
            }
        }
    }
}
