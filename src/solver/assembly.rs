//! Assembly of the per-axis PD matrices (spec §5.1, Eq. 31):
//! $\hat K=\sum_s w_s\,\hat G_s^T\hat G_s$ and $\hat K_\beta=\sum_s\beta_{e(s)}w_s\,\hat G_s^T\hat G_s$,
//! so that $\hat A=(\tfrac1{h^2}+\tfrac{\alpha}{h})\,\mathrm{diag}(m)+\hat K+\tfrac1h\hat K_\beta$.

use crate::linalg::CscMatrix;
use crate::model::{Derived, Model};

/// $\sum_s c_s\,\hat G_s^T\hat G_s$ on the node graph pattern, with per-sample coefficients `c`.
pub fn laplacian(model: &Model, pattern: &CscMatrix, c: &[f64]) -> CscMatrix {
    let mut k = pattern.zeros_like();
    for s in 0..model.num_samples() {
        if c[s] == 0.0 {
            continue;
        }
        let e = model.samples.elem[s];
        let el = model.element(e);
        let g = model.sample_grads(s);
        for (a, &i) in el.iter().enumerate() {
            for (b, &j) in el.iter().enumerate() {
                let v = g[a][0] * g[b][0] + g[a][1] * g[b][1] + g[a][2] * g[b][2];
                k.add(i, j, c[s] * v);
            }
        }
    }
    k
}

/// The PD matrices of a model: `(A, K_beta)` with $A$ of Eq. 31 (unreduced) and
/// $K_\beta$ the stiffness-damping Laplacian needed in the right-hand side.
pub fn pd_matrices(model: &Model, derived: &Derived, h: f64) -> (CscMatrix, CscMatrix) {
    let pattern = CscMatrix::pattern_from_elements(model.num_nodes(), &model.conn, &model.conn_ptr);
    let ns = model.num_samples();
    let w: Vec<f64> = (0..ns).map(|s| derived.w_total(s)).collect();
    let wb: Vec<f64> = (0..ns)
        .map(|s| derived.w_total(s) * derived.beta[model.samples.elem[s]])
        .collect();
    let k = laplacian(model, &pattern, &w);
    let kb = laplacian(model, &pattern, &wb);
    let mut a = k.combine(1.0, &kb, 1.0 / h);
    super::muscle::add_to_matrix(model, &mut a);
    let diag: Vec<f64> = derived
        .mass
        .iter()
        .zip(&derived.node_alpha)
        .map(|(m, al)| (1.0 / (h * h) + al / h) * m)
        .zip(crate::model::attachment::matrix_diagonal(
            &model.attachments,
            model.num_nodes(),
        ))
        .map(|(a, k)| a + k)
        .collect();
    a.add_diagonal(&diag);
    (a, kb)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::generate::box_tet;
    use crate::model::ModelBuilder;

    /// The stiffness Laplacians annihilate a uniform translation, so $A\mathbf 1$ is the
    /// lumped inertia and mass damping $(\tfrac1{h^2}+\tfrac\alpha h)m_i$ and the masses sum
    /// to $\rho V$.
    #[test]
    fn pd_matrix_applied_to_a_translation_is_the_lumped_inertia() {
        let (rho, alpha) = (800.0, 3.0);
        let model = ModelBuilder::new(box_tet([2, 2, 1], 0.1, [0.0; 3]))
            .density(rho)
            .damping(alpha, 0.02)
            .build()
            .unwrap();
        let derived = model.derive(&model.params);
        let h = model.h;
        let (a, kb) = pd_matrices(&model, &derived, h);
        let n = model.num_nodes();
        let ones = vec![1.0; 3 * n];
        let (mut a1, mut kb1) = (vec![0.0; n], vec![0.0; n]);
        a.matvec_axis(&ones, 0, &mut a1);
        kb.matvec_axis(&ones, 0, &mut kb1);
        for i in 0..n {
            let inertia = (1.0 / (h * h) + alpha / h) * derived.mass[i];
            assert!((a1[i] - inertia).abs() < 1e-9 * inertia, "row {i}");
            assert!(kb1[i].abs() < 1e-9 * inertia, "K_beta row {i}");
        }
        let volume: f64 = model.elem_volume.iter().sum();
        let mass: f64 = derived.mass.iter().sum();
        assert!((mass - rho * volume).abs() < 1e-12 * mass);
    }
}
