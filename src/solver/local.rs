//! PD local step (spec §6.2 step 6–7): per quadrature sample, project the deformation
//! gradient onto the energy's constraint set / proximal point and accumulate the projection
//! part of the right-hand side $b_p=\sum_s G_s^T\mathrm{vec}\,Q_s$ with
//! $Q_s=w^{cor}_sR_s+w^{vol}_sD_s$ (corotated + volume) or $Q_s=w^{nh}_sp_s$ (NH prox).

use crate::material::{corotated, neohookean, svd, volume, MaterialModel};
use crate::model::{Derived, Model};
use nalgebra::{Matrix3, Vector3};
use rayon::prelude::*;

/// Per-sample projections of one local step.
pub struct LocalResult {
    /// $Q_s$ per sample (weighted projections).
    pub q: Vec<Matrix3<f64>>,
}

/// First sample whose projection is not finite.
#[derive(Debug)]
pub struct NonFiniteSample {
    pub sample: usize,
    pub element: usize,
}

/// Compute $Q_s$ for all samples in parallel. `warm` holds the NH stretch solution of the
/// previous call per sample (warm start, spec §3.3) and is updated.
pub fn project_all(
    model: &Model,
    d: &Derived,
    x: &[f64],
    warm: &mut [Vector3<f64>],
) -> Result<LocalResult, NonFiniteSample> {
    let mut q: Vec<Matrix3<f64>> = warm
        .par_iter_mut()
        .enumerate()
        .map(|(s, w)| project_sample(model, d, x, s, w))
        .collect();
    super::muscle::add_projections(model, x, d.muscle_time, &mut q);
    if let Some(s) = q.iter().position(|m| !m.iter().all(|v| v.is_finite())) {
        return Err(NonFiniteSample {
            sample: s,
            element: model.samples.elem[s],
        });
    }
    Ok(LocalResult { q })
}

/// Weighted projection $Q_s$ of one sample.
pub fn project_sample(
    model: &Model,
    d: &Derived,
    x: &[f64],
    s: usize,
    warm: &mut Vector3<f64>,
) -> Matrix3<f64> {
    let f = model.deformation_gradient(s, x);
    let b = model.elem_body[model.samples.elem[s]];
    let usv = svd::svd3(&f);
    match model.bodies[b].model {
        MaterialModel::Corotated => {
            let r = corotated::project(&usv);
            let (dm, _) = volume::project(&usv);
            r * d.w_cor[s] + dm * d.w_vol[s]
        }
        MaterialModel::Neohookean => {
            let start = if warm[0] > 0.0 { Some(*warm) } else { None };
            let (p, st) = neohookean::prox(&d.nh[b], &usv, start.as_ref());
            *warm = st.sigma_star;
            p * d.w_nh[s]
        }
    }
}

/// Scatter $b_p=\sum_sG_s^T\mathrm{vec}Q_s$.
pub fn scatter(model: &Model, q: &[Matrix3<f64>], bp: &mut [f64]) {
    bp.iter_mut().for_each(|v| *v = 0.0);
    for (s, qs) in q.iter().enumerate() {
        model.scatter_gt(s, qs, bp);
    }
}
