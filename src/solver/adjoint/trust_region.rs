//! Trust-region statistics of a forward step (spec Eqs. 26–29, §6.5), which select the blend
//! α of the backward's prox-Hessian filter.
//!
//! $\delta x=x^K-x^{K-1}$; $\Delta\mathcal E_{pred}=-r^T\delta x-\tfrac12\delta x^TA\delta x$ with
//! $r=Ax^{K-1}-b(x^{K-1})$ (free DoFs); $\Delta\mathcal E_{act}=\mathcal E_{PD}(x^{K-1})-\mathcal E_{PD}(x^K)$;
//! $\rho=\Delta\mathcal E_{act}/\Delta\mathcal E_{pred}$; $\alpha=\tfrac12$ if $|\rho-1|<\eta$ else 1,
//! and $\alpha=\tfrac12$ when the predicted decrease is at round-off.

use crate::material::interleaved::LANES;
use crate::material::svd;
use crate::solver::context::StepContext;
use crate::solver::offload::OffloadError;
use crate::solver::records::stats::TrStats;
use crate::solver::stages::local::{self, CHUNK};
use rayon::prelude::*;

/// TR tolerance η (Chen et al. 2024a; spec Eq. 29).
pub const ETA: f64 = 0.01;

/// The PD objective (spec U1 / §6.5):
/// $\mathcal E_{PD}(x)=\tfrac1{2h^2}\|x-y\|_M^2+\tfrac1{2h}\|x-x_t\|_{\mathcal D}^2
/// +\sum_s\big[\tfrac{w_s}2\|F_s-p_s(x)\|^2+\tfrac{w_s}{\bar k}\bar\psi(\sigma^*_s)\big]$
/// (corotated + volume: the bracket is $\tfrac{w^{cor}}2\|F-R\|^2+\tfrac{w^{vol}}2\|F-D\|^2$).
/// Fails only where the accelerator computing the material part does.
pub fn pd_energy(
    sim: &StepContext,
    x: &[f64],
    y: &[f64],
    x_t: &[f64],
) -> Result<f64, OffloadError> {
    let model = sim.model;
    let d = &sim.derived;
    let h = model.h;
    let n = model.num_nodes();
    let mut e = 0.0;
    let dx: Vec<f64> = x.iter().zip(x_t).map(|(a, b)| a - b).collect();
    for i in 0..n {
        for k in 0..3 {
            let j = 3 * i + k;
            e += d.mass[i]
                * ((x[j] - y[j]).powi(2) / (2.0 * h * h)
                    + d.node_alpha[i] * dx[j].powi(2) / (2.0 * h));
        }
    }
    let mut t = vec![0.0; n];
    for k in 0..3 {
        sim.kbeta.matvec_axis(&dx, k, &mut t);
        for i in 0..n {
            e += dx[3 * i + k] * t[i] / (2.0 * h);
        }
    }
    Ok(e + material_energy(sim, x)?)
}

/// $\sum_s\big[\tfrac{w_s}2\|F_s-p_s\|^2+\dots\big]$ at `x`: on the accelerator when the
/// simulator has one that offers it ([`crate::solver::offload::Offload::material_energy`];
/// its failure is returned), else on the host.
fn material_energy(sim: &StepContext, x: &[f64]) -> Result<f64, OffloadError> {
    if let Some(r) = sim.accelerator().and_then(|o| o.material_energy(x)) {
        return r;
    }
    let model = sim.model;
    // per-block sums in parallel, added in block order (the same total for any thread count)
    let mut blocks = Vec::new();
    (0..model.num_samples().div_ceil(LANES))
        .into_par_iter()
        .with_min_len(CHUNK / LANES)
        .map(|b| block_energy(sim, x, b * LANES))
        .collect_into_vec(&mut blocks);
    Ok(blocks.iter().sum::<f64>())
}

/// $\sum_s\big[\tfrac{w_s}2\|F_s-p_s\|^2+\dots\big]$ over the samples `s0 ..` (at most
/// [`LANES`]): the interleaved kernel ([`crate::material::Material::pd_energy_lanes`]) on a
/// full block of one law, the exact path (`svd3` and [`crate::material::Material::pd_energy`])
/// for the lanes it refuses, mixed blocks and the tail.
fn block_energy(sim: &StepContext, x: &[f64], s0: usize) -> f64 {
    let (model, d) = (sim.model, &sim.derived);
    let body = |s: usize| model.elem_body[model.samples.elem[s]];
    let len = LANES.min(model.num_samples() - s0);
    let fast = match local::uniform_block(model, s0, len) {
        Some(law) => {
            let f = local::block_gradients(model, x, s0);
            law.pd_energy_lanes(&f, &d.w[s0..s0 + LANES], |l| d.nh[body(s0 + l)])
        }
        None => [None; LANES],
    };
    let exact = |s: usize| {
        let f = model.deformation_gradient(s, x);
        let b = body(s);
        let law = model.bodies[b].model;
        law.pd_energy(&f, &svd::svd3(&f), &d.w[s], &d.nh[b])
    };
    (0..len)
        .map(|l| fast[l].unwrap_or_else(|| exact(s0 + l)))
        .sum()
}

/// Blend rule of Eq. 29.
pub fn blend(pred: f64, act: f64, energy: f64) -> TrStats {
    let rho = act / pred;
    let alpha = if pred <= 1e-14 * (energy.abs() + 1.0) || (rho - 1.0).abs() < ETA {
        0.5
    } else {
        1.0
    };
    TrStats {
        rho,
        alpha,
        predicted_decrease: pred,
        actual_decrease: act,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linalg::LinearSolver;
    use crate::material::MaterialModel;
    use crate::model::{ModelBuilder, SolverSettings};
    use crate::solver::stages::local;
    use crate::solver::Simulator;
    use nalgebra::Vector3;

    /// Envelope theorem (spec U1): $\nabla\mathcal E_{PD}(x)=Ax-b(x)$ with
    /// $b(x)=\tfrac1{h^2}My+\tfrac1h\mathcal Dx_t+b_p(x)$. Central differences of the PD surrogate
    /// energy against the PD residual ("forces"), corotated+volume and Neo-Hookean, damped.
    #[test]
    fn pd_energy_gradient_is_the_pd_residual() {
        for material in [MaterialModel::Corotated, MaterialModel::Neohookean] {
            let mesh = crate::mesh::generate::box_tet([2, 1, 1], 0.1, [0.0; 3]);
            // stiff half x > 0.1 (10x), damped
            let youngs = (0..mesh.num_elements())
                .map(|e| if mesh.centroid(e)[0] > 0.1 { 1e6 } else { 1e5 })
                .collect();
            let model = ModelBuilder::new(mesh)
                .material(material)
                .youngs_per_element(youngs)
                .poisson_ratio(0.4)
                .damping(2.0, 0.01)
                .build()
                .unwrap();
            let sim = Simulator::new(&model, &SolverSettings::default()).unwrap();
            let n3 = model.x0.len();
            let u = crate::solver::adjoint::loss::seeded_uniform(5, 3 * n3);
            let x_t: Vec<f64> = (0..n3).map(|j| model.x0[j] + 0.01 * u[j]).collect();
            let v_t: Vec<f64> = (0..n3).map(|j| 0.3 * u[n3 + j]).collect();
            let x: Vec<f64> = (0..n3).map(|j| x_t[j] + 0.02 * u[2 * n3 + j]).collect();
            let f = model.external_force(0.0, &sim.derived.mass);
            let y = sim.inertial_target(&x_t, &v_t, &f);
            let c = sim.rhs_constant(&x_t, &v_t, &f);
            let mut warm = vec![Vector3::zeros(); model.num_samples()];
            let q = local::project_all(&model, &sim.derived, &x, &mut warm)
                .unwrap()
                .q;
            let mut bp = vec![0.0; n3];
            local::scatter(&model, &q, &mut bp);
            let mut ax = vec![0.0; n3];
            sim.system.apply_a(&x, &mut ax);
            let eps = 1e-6;
            for j in 0..n3 {
                let r = ax[j] - c[j] - bp[j];
                let mut xp = x.clone();
                xp[j] += eps;
                let mut xm = x.clone();
                xm[j] -= eps;
                let fd = (pd_energy(&sim, &xp, &y, &x_t).unwrap()
                    - pd_energy(&sim, &xm, &y, &x_t).unwrap())
                    / (2.0 * eps);
                assert!(
                    (fd - r).abs() <= 1e-6 * (1.0 + r.abs()),
                    "{material:?} dof {j}: FD {fd} vs residual {r}"
                );
            }
        }
    }
}
