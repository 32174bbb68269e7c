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
    /// Gather plan of the assembly (plan once, execute per Hessian in parallel over the
    /// stored values, [`AssemblyGather`]).
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
        NewtonSystem {
            pattern,
            free,
            map,
            perm: None,
            factor: None,
            gather,
            diag,
        }
    }

    /// Factor the free block of `h` (numeric only after the first call). `Err(index)` on a
    /// non-positive pivot.
    pub(crate) fn factor(&mut self, h: &CscMatrix, shift: f64) -> Result<(), SolverError> {
        let mut sub = h.submatrix(&self.free, &self.map);
        if shift != 0.0 {
            sub.add_diagonal(&vec![shift; sub.n]);
        }
        if self.perm.is_none() {
            self.perm = Some(ordering::nested_dissection(&sub)?);
        }
        let res = match self.factor.as_mut() {
            Some(f) => f.refactor(&sub),
            None => {
                let (p, ip) = self
                    .perm
                    .as_ref()
                    .expect("perm is set just above when it was None");
                SparseCholesky::factor(&sub, p, ip).map(|f| {
                    self.factor = Some(f);
                })
            }
        };
        res.map_err(SolverError::Linalg)
    }

    /// Solve with the current factor: `rhs` full length, prescribed entries ignored; result
    /// has zeros there. [`LinalgError::NotFactored`] before the first successful factor.
    pub(crate) fn solve(&self, rhs: &[f64]) -> Result<Vec<f64>, LinalgError> {
        let mut r: Vec<f64> = self.free.iter().map(|&k| rhs[k]).collect();
        self.factor
            .as_ref()
            .ok_or(LinalgError::NotFactored)?
            .solve_in_place(&mut r);
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
/// \tfrac{\beta_ew_s}h\,I\big)G_s$ (blocks $(a,b)$ of each sample): every stored value $k$
/// of the pattern, entry $(i,j)$ of the $3\times3$ block of its node pair, lists the
/// (sample, $a$, $b$) that add into that block, in sample order. Summing them in that order
/// onto the value's start (the inertia and attachment diagonal) is the serial sample loop's
/// sum, so values are computed independently in parallel with the same bits for any thread
/// count (issue 37: a scatter written as a gather).
pub(crate) struct AssemblyGather {
    /// Per stored value: its node-pair block and its position $3i+j$ in the block.
    val_block: Vec<u32>,
    val_ij: Vec<u8>,
    /// Per block: `items[block_ptr[b]..block_ptr[b + 1]]` are its (sample, a, b), in sample
    /// order.
    block_ptr: Vec<usize>,
    items: Vec<(u32, u8, u8)>,
    /// The serial path's plan: per element, the block of each of its node pairs $(a, b)$
    /// (`elem_blocks[elem_ptr[e] + a·n_e + b]`), and per block its nine stored values.
    elem_ptr: Vec<usize>,
    elem_blocks: Vec<u32>,
    block_vals: Vec<[u32; 9]>,
}

/// Stored values per parallel task of [`AssemblyGather::add_samples`] (a fixed chunking;
/// values are independent, so any chunking gives the same bits).
const VALUE_CHUNK: usize = 4096;

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
        let mut val_block = vec![0u32; nnz];
        let mut val_ij = vec![0u8; nnz];
        for c in 0..pattern.n {
            for k in pattern.col_ptr[c]..pattern.col_ptr[c + 1] {
                let r = pattern.row_idx[k];
                val_block[k] = block_of[pos(r - r % 3, c - c % 3)];
                val_ij[k] = (3 * (r % 3) + c % 3) as u8;
            }
        }
        let block = |s: usize, a: usize, b: usize| {
            let el = model.element(model.samples.elem[s]);
            block_of[pos(3 * el[a], 3 * el[b])] as usize
        };
        let mut block_ptr = vec![0usize; nb + 1];
        let ns = model.num_samples();
        let nv = |s: usize| model.element(model.samples.elem[s]).len();
        for s in 0..ns {
            for a in 0..nv(s) {
                for b in 0..nv(s) {
                    block_ptr[block(s, a, b) + 1] += 1;
                }
            }
        }
        for k in 0..nb {
            block_ptr[k + 1] += block_ptr[k];
        }
        let mut next = block_ptr.clone();
        let mut items = vec![(0u32, 0u8, 0u8); block_ptr[nb]];
        for s in 0..ns {
            for a in 0..nv(s) {
                for b in 0..nv(s) {
                    let k = block(s, a, b);
                    items[next[k]] = (s as u32, a as u8, b as u8);
                    next[k] += 1;
                }
            }
        }
        let mut block_vals = vec![[0u32; 9]; nb];
        for k in 0..nnz {
            block_vals[val_block[k] as usize][val_ij[k] as usize] = k as u32;
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
        AssemblyGather {
            val_block,
            val_ij,
            block_ptr,
            items,
            elem_ptr,
            elem_blocks,
            block_vals,
        }
    }

    /// Add the samples' blocks $G_s^T(H_s+c_s I)G_s$ onto `vals` (the pattern's values):
    /// `hess[s]` is $H_s$ (9×9, on $\mathrm{vec}\,F$), `c(s)` the sample's stiffness-damping
    /// coefficient $\beta_ew_s/h$. Parallel over stored values.
    pub(crate) fn add_samples<C>(&self, model: &Model, hess: &[Mat9], c: C, vals: &mut [f64])
    where
        C: Fn(usize) -> f64 + Sync,
    {
        if rayon::current_num_threads() == 1 {
            return self.add_samples_serial(model, hess, c, vals);
        }
        vals.par_chunks_mut(VALUE_CHUNK)
            .enumerate()
            .for_each(|(ci, vc)| {
                for (o, v) in vc.iter_mut().enumerate() {
                    let k = ci * VALUE_CHUNK + o;
                    let blk = self.val_block[k] as usize;
                    let ij = self.val_ij[k] as usize;
                    let (i, j) = (ij / 3, ij % 3);
                    let mut acc = *v;
                    for &(s, a, b) in &self.items[self.block_ptr[blk]..self.block_ptr[blk + 1]] {
                        let s = s as usize;
                        let g = model.sample_grads(s);
                        acc += block_entry(&hess[s], g, (a as usize, b as usize), (i, j), c(s));
                    }
                    *v = acc;
                }
            });
    }
}

impl AssemblyGather {
    /// [`AssemblyGather::add_samples`] on one thread: the sample loop, with $H_sG_b$ formed
    /// once per node $b$ of the sample instead of once per stored value. Every value
    /// receives the same terms in the same (sample) order, each computed by the same
    /// arithmetic as [`block_entry`] (an element's node pairs are distinct blocks, so the
    /// order inside a sample does not matter): the same bits as the gather, at about a third
    /// of its operations (issue 34, "no slower" at one thread).
    fn add_samples_serial<C>(&self, model: &Model, hess: &[Mat9], c: C, vals: &mut [f64])
    where
        C: Fn(usize) -> f64,
    {
        for (s, hs) in hess.iter().enumerate() {
            let e = model.samples.elem[s];
            let g = model.sample_grads(s);
            let nv = g.len();
            let cs = c(s);
            let blocks = &self.elem_blocks[self.elem_ptr[e]..self.elem_ptr[e + 1]];
            for (b, &gb) in g.iter().enumerate() {
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
                            vals[slots[3 * i + j] as usize] += v;
                        }
                    }
                }
            }
        }
    }
}

/// Entry $(3a+i, 3b+j)$ of $G_s^T H_s G_s$ plus $c\,(\nabla N_a\cdot\nabla N_b)\,\delta_{ij}$:
/// $\sum_k g_{a,k}(Hg_b)_{3i+k,j}$ with $(Hg_b)_{r,j}=\sum_l H_{r,3j+l}\,g_{b,l}$ (the
/// arithmetic of the serial assembly it replaced, term for term).
#[inline]
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
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(t)
                    .build()
                    .unwrap();
                let mut par = start.clone();
                pool.install(|| sys.gather.add_samples(&model, &hess, c, &mut par));
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
