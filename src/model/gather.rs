//! The node-parallel form of the scatter $b=\sum_sG_s^T\mathrm{vec}\,Q_s$ (the PD local step's
//! $b_p$, the adjoint's $\Delta A\,z$, Newton's elastic gradient): each node gathers
//! $Q_s\nabla N_a$ over its (sample, corner) pairs instead of every sample adding into its
//! nodes. A node's pairs are listed in increasing sample order, so node $i$ receives
//! $b_i=(((b_i^0+v_{s_1})+v_{s_2})+\dots)$ — the additions of the serial sample loop, in the
//! same order — and the result is the same bits for any thread count (and the same bits as
//! the serial loop). Scatters written as gathers need no atomics and no per-thread copies.

use super::discrete::Model;
pub use super::discrete::NodeSamples;
use nalgebra::{Matrix3, Vector3};
use rayon::prelude::*;

/// Nodes per parallel task of [`Model::gather_gt`] (a fixed chunking; any chunking gives
/// the same bits, since nodes are independent).
const NODE_CHUNK: usize = 512;

impl NodeSamples {
    /// The adjacency of `model`'s elements and samples (a counting sort over samples in
    /// order, so each node's list is sorted by sample).
    pub fn new(model: &Model) -> Self {
        let n = model.num_nodes();
        let ns = model.num_samples();
        let mut count = vec![0usize; n + 1];
        for s in 0..ns {
            for &i in model.element(model.samples.elem[s]) {
                count[i + 1] += 1;
            }
        }
        for i in 0..n {
            count[i + 1] += count[i];
        }
        let ptr = count.clone();
        let mut next = count;
        let mut pairs = vec![(0u32, 0u32); ptr[n]];
        for s in 0..ns {
            for (a, &i) in model.element(model.samples.elem[s]).iter().enumerate() {
                pairs[next[i]] = (s as u32, a as u32);
                next[i] += 1;
            }
        }
        NodeSamples {
            ptr,
            pairs,
            num_samples: ns,
        }
    }

    /// The (sample, corner) pairs of node `i`, in sample order.
    pub fn of(&self, i: usize) -> &[(u32, u32)] {
        &self.pairs[self.ptr[i]..self.ptr[i + 1]]
    }

    /// Whether this adjacency was built for `model`'s nodes and samples.
    fn fits(&self, model: &Model) -> bool {
        self.ptr.len() == model.num_nodes() + 1 && self.num_samples == model.num_samples()
    }
}

impl Model {
    /// The node → (sample, corner) adjacency, built at the first call and kept (the
    /// topology is fixed once the model is built; a model grown after that call gets a
    /// fresh one).
    pub fn node_samples(&self) -> std::borrow::Cow<'_, NodeSamples> {
        let cached = self.node_samples.get_or_init(|| NodeSamples::new(self));
        if cached.fits(self) {
            std::borrow::Cow::Borrowed(cached)
        } else {
            std::borrow::Cow::Owned(NodeSamples::new(self))
        }
    }

    /// Add $G_s^T\mathrm{vec}\,Q_s$ of every sample into `out` (`q(s)` gives $Q_s$): node $a$
    /// of sample $s$ receives $Q_s\nabla N_a$, added in sample order onto `out`'s values, in
    /// parallel over nodes — the bits of [`Model::scatter_gt`] called for `s = 0, 1, …` in
    /// turn, for any thread count.
    pub fn gather_gt<Q>(&self, q: Q, out: &mut [f64])
    where
        Q: Fn(usize) -> Matrix3<f64> + Sync,
    {
        let adj = self.node_samples();
        let n = self.num_nodes();
        out[..3 * n]
            .par_chunks_mut(3 * NODE_CHUNK)
            .enumerate()
            .for_each(|(c, oc)| {
                for (k, oi) in oc.chunks_mut(3).enumerate() {
                    let i = c * NODE_CHUNK + k;
                    let mut acc = [oi[0], oi[1], oi[2]];
                    for &(s, a) in adj.of(i) {
                        let s = s as usize;
                        let g = self.samples.grads[self.samples.grad_ptr[s] + a as usize];
                        let v = q(s) * Vector3::from(g);
                        acc[0] += v[0];
                        acc[1] += v[1];
                        acc[2] += v[2];
                    }
                    oi.copy_from_slice(&acc);
                }
            });
    }
}

#[cfg(test)]
mod tests {
    use crate::mesh::generate::{box_hex, box_tet};
    use crate::model::ModelBuilder;
    use nalgebra::Matrix3;

    /// The gather equals the serial sample loop bit for bit (tets and 8-sample hexes, onto a
    /// non-zero start), and the same bits on 1, 2 and 3 threads.
    #[test]
    fn gather_is_the_serial_scatter_bitwise_on_any_thread_count() {
        for mesh in [
            box_tet([5, 3, 2], 0.1, [0.0; 3]),
            box_hex([4, 3, 2], 0.1, [0.0; 3]),
        ] {
            let model = ModelBuilder::new(mesh).build().unwrap();
            let ns = model.num_samples();
            let q: Vec<Matrix3<f64>> = (0..ns)
                .map(|s| Matrix3::from_fn(|r, c| ((s * 9 + 3 * r + c) as f64 * 0.731).sin()))
                .collect();
            let start: Vec<f64> = (0..3 * model.num_nodes())
                .map(|k| (k as f64 * 0.37).cos())
                .collect();
            let mut serial = start.clone();
            for (s, qs) in q.iter().enumerate() {
                model.scatter_gt(s, qs, &mut serial);
            }
            assert!(serial.iter().zip(&start).any(|(a, b)| a != b));
            for t in [1, 2, 3] {
                let mut par = start.clone();
                crate::linalg::test_matrices::on_threads(t, || model.gather_gt(|s| q[s], &mut par));
                let same = serial
                    .iter()
                    .zip(&par)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{t} threads: the gather differs from the sample loop");
            }
        }
    }
}
