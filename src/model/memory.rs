//! Memory estimate of a model and of the per-run solver state sized by it (issue 18, memory
//! guards). Numbers only: the command line compares the estimate with `--max-memory` or
//! the memory available and refuses before allocating; the sparse factor is estimated by
//! `linalg::SystemPlan::factor_bytes` and the rollout tape by the command line.

use super::Model;

/// Node-major vectors of `3n` values a step keeps: iterates, local-step right-hand sides,
/// global-step work, constant right-hand side, Dirichlet values, external and contact
/// forces, the state and velocities of the time loop (16), and a Krylov basis of up to 32
/// vectors (the Newton–Krylov steps of `mode = "accurate"` and the adjoint GMRES).
pub const STEP_VECTORS: u64 = 16 + 32;

/// Bytes per quadrature sample: derived weights (3 values), projection warm start (3), the
/// local step's target (9), and the step linearization of the Newton–Krylov steps and of
/// the backward (SVD, projection Jacobian and spectral coefficients: about 100 values;
/// measured as the largest per-sample allocation of a `simulate` run).
pub const PER_SAMPLE_STATE: u64 = 8 * (3 + 3 + 9 + 100);

/// Bytes per node of the derived masses and damping coefficients.
pub const PER_NODE_DERIVED: u64 = 8 * 2;

/// Bytes of `len` values of `size` bytes.
fn bytes(len: usize, size: usize) -> u64 {
    (len as u64).saturating_mul(size as u64)
}

impl Model {
    /// Bytes of the model's own arrays (geometry, connectivity, samples, parameters,
    /// initial state, surfaces): already allocated when this is called, counted because the
    /// run keeps them.
    pub fn model_bytes(&self) -> u64 {
        let f = 8;
        let p = &self.params;
        [
            bytes(self.rest.len(), 24),
            bytes(
                self.conn.len() + self.conn_ptr.len() + self.elem_body.len(),
                8,
            ),
            bytes(self.elem_volume.len() + self.node_body.len(), f),
            bytes(
                self.samples.elem.len() + self.samples.vol.len() + self.samples.grad_ptr.len(),
                8,
            ),
            bytes(self.samples.grads.len(), 24),
            bytes(
                p.youngs.len()
                    + p.nu.len()
                    + p.nu_elem.as_ref().map_or(0, Vec::len)
                    + p.density.len()
                    + p.alpha.len()
                    + p.beta0.len(),
                f,
            ),
            bytes(
                self.x0.len() + self.v0.len() + self.base_x0.len() + self.base_v0.len(),
                f,
            ),
            bytes(self.boundary_nodes.len() + self.contact_kappa.len(), 8),
            bytes(self.bodies.iter().map(|b| b.surface.len()).sum(), 24),
        ]
        .iter()
        .fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// Bytes of the solver state a run allocates for this model, besides the factor and the
    /// tape: derived per-node and per-sample quantities, [`STEP_VECTORS`] step vectors and
    /// `2·anderson_window` Anderson history vectors of `3n` values.
    pub fn solver_state_bytes(&self, anderson_window: usize) -> u64 {
        let n = self.num_nodes() as u64;
        let vectors = STEP_VECTORS.saturating_add(2 * anderson_window as u64);
        (24 * n)
            .saturating_mul(vectors)
            .saturating_add(PER_NODE_DERIVED.saturating_mul(n))
            .saturating_add(PER_SAMPLE_STATE.saturating_mul(self.num_samples() as u64))
            .saturating_add(bytes(self.num_elements(), 8))
    }

    /// [`Model::model_bytes`] + [`Model::solver_state_bytes`].
    pub fn memory_bytes(&self, anderson_window: usize) -> u64 {
        self.model_bytes()
            .saturating_add(self.solver_state_bytes(anderson_window))
    }
}

#[cfg(test)]
mod tests {
    use crate::mesh::generate::box_hex;
    use crate::model::ModelBuilder;

    /// The estimate counts the model's arrays and grows with the mesh and the Anderson
    /// window as its formula says.
    #[test]
    fn estimate_counts_the_arrays_and_scales_with_the_mesh() {
        let small = ModelBuilder::new(box_hex([2, 2, 2], 0.1, [0.0; 3]))
            .build()
            .unwrap();
        let large = ModelBuilder::new(box_hex([4, 4, 4], 0.1, [0.0; 3]))
            .build()
            .unwrap();
        let n = small.num_nodes() as u64;
        // at least positions, connectivity and initial state
        assert!(small.model_bytes() >= 24 * n + 8 * small.conn.len() as u64 + 48 * n);
        let d = small.solver_state_bytes(3) - small.solver_state_bytes(2);
        assert_eq!(d, 2 * 24 * n, "one more Anderson pair per node");
        assert!(large.memory_bytes(5) > 4 * small.memory_bytes(5));
    }
}
