//! PD local step (spec §6.2 step 6–7): per quadrature sample, project the deformation
//! gradient onto the energy's constraint set / proximal point and accumulate the projection
//! part of the right-hand side $b_p=\sum_s G_s^T\mathrm{vec}\,Q_s$ with
//! $Q_s=\sum_kw_{s,k}p_k(F_s)$ of the body's material law
//! ([`crate::material::Material::project`]; corotated + volume $w^{cor}_sR_s+w^{vol}_sD_s$,
//! NH prox $w^{nh}_sp_s$).

use crate::material::interleaved::{Mat3Lanes, LANES};
use crate::material::svd;
use crate::material::MaterialModel;
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

/// Which local-step kernel computes the projections. Both give the same $Q_s$ to round-off
/// (`material::interleaved` tests); `Exact` is the reference the benchmarks compare with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LocalKernel {
    /// `material::interleaved`: [`LANES`] samples side by side, with the exact code as
    /// the per-sample fallback (inverted, degenerate, strongly stretched samples).
    #[default]
    Interleaved,
    /// One sample at a time through `svd3` and the exact projections.
    Exact,
}

/// Samples per parallel task of the interleaved kernel (a multiple of [`LANES`]).
pub(crate) const CHUNK: usize = 32 * LANES;

/// Compute $Q_s$ for all samples in parallel. `warm` holds the NH stretch solution of the
/// previous call per sample (warm start, spec §3.3) and is updated.
pub fn project_all(
    model: &Model,
    d: &Derived,
    x: &[f64],
    warm: &mut [Vector3<f64>],
) -> Result<LocalResult, NonFiniteSample> {
    project_all_with(model, d, x, warm, LocalKernel::default())
}

/// [`project_all`] with an explicit kernel.
pub fn project_all_with(
    model: &Model,
    d: &Derived,
    x: &[f64],
    warm: &mut [Vector3<f64>],
    kernel: LocalKernel,
) -> Result<LocalResult, NonFiniteSample> {
    // filled and checked on the pool's threads: on the Plant these two passes over the
    // samples were a serial 2 % of a two-thread run (session 26)
    let mut q = Vec::with_capacity(warm.len());
    q.par_extend(rayon::iter::repeat_n(Matrix3::zeros(), warm.len()));
    project_into(model, d, x, warm, kernel, &mut q);
    crate::solver::muscle::add_projections(model, x, d.muscle_time, &mut q);
    if let Some(s) = q
        .par_iter()
        .position_first(|m| !m.iter().all(|v| v.is_finite()))
    {
        return Err(NonFiniteSample {
            sample: s,
            element: model.samples.elem[s],
        });
    }
    Ok(LocalResult { q })
}

/// The material projections $Q_s$ (no muscles, no finiteness check) into `q` (one entry
/// per sample), in parallel; allocates nothing.
pub fn project_into(
    model: &Model,
    d: &Derived,
    x: &[f64],
    warm: &mut [Vector3<f64>],
    kernel: LocalKernel,
    q: &mut [Matrix3<f64>],
) {
    match kernel {
        LocalKernel::Exact => q
            .par_iter_mut()
            .zip(warm.par_iter_mut())
            .enumerate()
            .for_each(|(s, (qs, w))| *qs = project_sample(model, d, x, s, w)),
        LocalKernel::Interleaved => q
            .par_chunks_mut(CHUNK)
            .zip(warm.par_chunks_mut(CHUNK))
            .enumerate()
            .for_each(|(c, (qc, wc))| {
                for (b, (qb, wb)) in qc.chunks_mut(LANES).zip(wc.chunks_mut(LANES)).enumerate() {
                    project_block(model, d, x, c * CHUNK + b * LANES, qb, wb);
                }
            }),
    }
}

/// Interleaved projection of the samples `s0 ..` (at most [`LANES`]); lanes the fast path
/// refuses, blocks mixing materials and short tail blocks go through [`project_sample`].
fn project_block(
    model: &Model,
    d: &Derived,
    x: &[f64],
    s0: usize,
    q: &mut [Matrix3<f64>],
    warm: &mut [Vector3<f64>],
) {
    let body = |s: usize| model.elem_body[model.samples.elem[s]];
    let Some(mat) = uniform_block(model, s0, q.len()) else {
        for (l, (qs, w)) in q.iter_mut().zip(warm.iter_mut()).enumerate() {
            *qs = project_sample(model, d, x, s0 + l, w);
        }
        return;
    };
    let f = block_gradients(model, x, s0);
    let mut out: Mat3Lanes = [[0.0; LANES]; 9];
    let w = &d.w[s0..s0 + LANES];
    let ok = mat.project_lanes(&f, w, |l| d.nh[body(s0 + l)], warm, &mut out);
    for l in 0..LANES {
        q[l] = if ok[l] {
            Matrix3::from_fn(|r, c| out[3 * c + r][l])
        } else {
            project_sample(model, d, x, s0 + l, &mut warm[l])
        };
    }
}

/// The material law of the samples `s0 .. s0 + len` when they are a full block of [`LANES`]
/// samples of one law (what the interleaved kernels take), else `None`.
pub(crate) fn uniform_block(model: &Model, s0: usize, len: usize) -> Option<MaterialModel> {
    let law = |s: usize| model.bodies[model.elem_body[model.samples.elem[s]]].model;
    let mat = law(s0);
    (len == LANES && (1..LANES).all(|l| law(s0 + l) == mat)).then_some(mat)
}

/// The deformation gradients $F_s$ of the [`LANES`] samples from `s0`, side by side.
pub(crate) fn block_gradients(model: &Model, x: &[f64], s0: usize) -> Mat3Lanes {
    let mut f: Mat3Lanes = [[0.0; LANES]; 9];
    for l in 0..LANES {
        let fl = model.deformation_gradient(s0 + l, x);
        for (k, v) in fl.iter().enumerate() {
            f[k][l] = *v;
        }
    }
    f
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
    model.bodies[b].model.project(&usv, &d.w[s], &d.nh[b], warm)
}

/// Scatter $b_p=\sum_sG_s^T\mathrm{vec}Q_s$, as a node-parallel gather in sample order
/// ([`Model::gather_gt`]: the same bits on any thread count).
pub fn scatter(model: &Model, q: &[Matrix3<f64>], bp: &mut [f64]) {
    bp.iter_mut().for_each(|v| *v = 0.0);
    model.gather_gt(|s| q[s], bp);
}
