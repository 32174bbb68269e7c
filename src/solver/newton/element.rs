//! Element-level terms of the Newton baseline: per-sample energy, first Piola stress and
//! 9×9 Hessian in $F$-space for the PD and true energies, the muscle fibre term, and the
//! element Hessian projections of the filters (clamp, abs; PPN constants).

pub use crate::material::corotated::{cofactor, cofactor_differential};
use crate::material::svd;
pub use crate::material::Mat9;
use crate::model::NewtonEnergy;
use crate::solver::context::StepContext;
use nalgebra::{Matrix3, SymmetricEigen};

/// PPN tightening factor α and release factor β (seed paper defaults).
pub const PPN_ALPHA: f64 = 0.5;
pub const PPN_BETA: f64 = 2.0;
/// PPN fallback threshold ε_δ (below it every element is projected).
pub const PPN_EPS_DELTA: f64 = 1e-12;
/// Eigenvalue floor of the clamp projection, relative to the element's largest |λ|.
pub const CLAMP_EPS: f64 = 1e-8;

/// Muscle fibre term of one actuated sample (spec §3.5): energy
/// $\tfrac{w}2\|F\mathsf m-p\|^2$ with $p=a\,F\mathsf m/\|F\mathsf m\|$, stress $w(F\mathsf m-p)\mathsf m^T$ and
/// the 9×9 Hessian $dF\mapsto w\big(dF\mathsf m-\tfrac a\ell(I-nn^T)dF\mathsf m\big)\mathsf m^T$.
pub fn muscle_terms(
    f: &Matrix3<f64>,
    m: &nalgebra::Vector3<f64>,
    a: f64,
    w: f64,
    with_hessian: bool,
) -> (f64, Matrix3<f64>, Mat9) {
    use crate::solver::muscle;
    let fm = f * m;
    let (p, l, n) = muscle::project(&fm, a);
    let e = 0.5 * w * (fm - p).norm_squared();
    let stress = (fm - p) * m.transpose() * w;
    let mut h = Mat9::zeros();
    if with_hessian {
        for c in 0..9 {
            let mut df = Matrix3::zeros();
            df[(c / 3, c % 3)] = 1.0;
            let dfm = df * m;
            let col = (dfm - muscle::jacobian_apply(a, l, &n, &dfm)) * m.transpose() * w;
            for r in 0..9 {
                h[(r, c)] = col[(r / 3, r % 3)];
            }
        }
    }
    (e, stress, h)
}

/// Energy, first Piola stress $\partial E_s/\partial F$ (weights included) and 9×9 Hessian of
/// sample `s` at deformation gradient `f` ([`crate::material::Material::pd_terms`] /
/// [`crate::material::Material::true_terms`] of the body's law).
pub fn sample_terms(
    sim: &StepContext,
    energy: NewtonEnergy,
    s: usize,
    f: &Matrix3<f64>,
    with_hessian: bool,
) -> (f64, Matrix3<f64>, Mat9) {
    let model = sim.model;
    let d = &sim.derived;
    let b = model.elem_body[model.samples.elem[s]];
    let usv = svd::svd3(f);
    let law = model.bodies[b].model;
    match energy {
        NewtonEnergy::Pd => law.pd_terms(f, &usv, &d.w[s], &d.nh[b], with_hessian),
        NewtonEnergy::True => {
            let vol = model.samples.vol[s];
            law.true_terms(f, &usv, &d.w[s], &d.nh[b], vol, with_hessian)
        }
    }
}

/// Projection of a symmetric 9×9 element Hessian. Returns the projected matrix and whether
/// it changed. `abs_mode`: |λ| (mirror) instead of the clamp $\max(\lambda,\epsilon)$.
pub fn project_pd(h: &Mat9, abs_mode: bool) -> (Mat9, bool) {
    let hs = (h + h.transpose()) * 0.5;
    let eig = SymmetricEigen::new(hs);
    let lmax = eig.eigenvalues.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    let floor = CLAMP_EPS * lmax;
    let mut changed = false;
    let mut lam = eig.eigenvalues;
    for l in lam.iter_mut() {
        if *l < floor {
            let nl = if abs_mode { l.abs().max(floor) } else { floor };
            if *l < 0.0 {
                changed = true;
            }
            *l = nl;
        }
    }
    if !changed {
        return (hs, false);
    }
    (
        eig.eigenvectors * Mat9::from_diagonal(&lam) * eig.eigenvectors.transpose(),
        true,
    )
}
