//! Element-level terms of the Newton baseline: per-sample energy, first Piola stress and
//! 9×9 Hessian in $F$-space for the PD and true energies, the muscle fibre term, and the
//! element Hessian projections of the filters (clamp, abs; PPN constants).

use crate::material::{corotated, neohookean, svd, volume, MaterialModel};
use crate::model::NewtonEnergy;
use crate::solver::simulator::Simulator;
use nalgebra::{Matrix3, SMatrix, SymmetricEigen};

/// 9×9 Hessian in $F$-space, index $3r+c$ for $F_{rc}$.
pub type Mat9 = SMatrix<f64, 9, 9>;

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
/// sample `s` at deformation gradient `f`.
pub fn sample_terms(
    sim: &Simulator,
    energy: NewtonEnergy,
    s: usize,
    f: &Matrix3<f64>,
    with_hessian: bool,
) -> (f64, Matrix3<f64>, Mat9) {
    let model = sim.model;
    let d = &sim.derived;
    let b = model.elem_body[model.samples.elem[s]];
    let usv = svd::svd3(f);
    let mut h = Mat9::zeros();
    let unit = |c: usize| {
        let mut e = Matrix3::zeros();
        e[(c / 3, c % 3)] = 1.0;
        e
    };
    let mut fill = |op: &dyn Fn(&Matrix3<f64>) -> Matrix3<f64>| {
        for c in 0..9 {
            let col = op(&unit(c));
            for r in 0..9 {
                h[(r, c)] = col[(r / 3, r % 3)];
            }
        }
    };
    match (model.bodies[b].model, energy) {
        (MaterialModel::Corotated, NewtonEnergy::Pd) => {
            let r = corotated::project(&usv);
            let (dm, vol_star) = volume::project(&usv);
            let (wc, wv) = (d.w_cor[s], d.w_vol[s]);
            let e = 0.5 * wc * (f - r).norm_squared() + 0.5 * wv * (f - dm).norm_squared();
            let p = (f - r) * wc + (f - dm) * wv;
            if with_hessian {
                let vol_w = volume::stretch_jacobian(&usv.sigma, &vol_star);
                fill(&|df| {
                    df * (wc + wv)
                        - corotated::jacobian_apply(&usv, df) * wc
                        - volume::jacobian_apply(&usv, &vol_star, &vol_w, df) * wv
                });
            }
            (e, p, h)
        }
        (MaterialModel::Neohookean, NewtonEnergy::Pd) => {
            let nh = &d.nh[b];
            let w = d.w_nh[s];
            let (p, st) = neohookean::prox(nh, &usv, None);
            let e = 0.5 * w * (f - p).norm_squared()
                + w / nh.k * neohookean::stretch_energy(nh, &st.sigma_star);
            if with_hessian {
                let (jac, _) = neohookean::stretch_jacobian(
                    nh,
                    &st.sigma_star,
                    neohookean::HessianFilter::None,
                );
                fill(&|df| (df - neohookean::jacobian_apply(&usv, &st.sigma_star, &jac, df)) * w);
            }
            (e, (f - p) * w, h)
        }
        (MaterialModel::Neohookean, NewtonEnergy::True) => {
            let nh = &d.nh[b];
            let sc = d.w_nh[s] / (nh.k * model.samples.vol[s]);
            let (mu, la) = (sc * nh.mu, sc * nh.lambda);
            let v = model.samples.vol[s];
            let e = v * neohookean::energy_density(mu, la, f);
            let p = neohookean::pk1(mu, la, f) * v;
            if with_hessian {
                fill(&|df| neohookean::pk1_differential(mu, la, f, df) * v);
            }
            (e, p, h)
        }
        (MaterialModel::Corotated, NewtonEnergy::True) => {
            // w_cor = 2 μ V, w_vol = λ V
            let (two_mu_v, la_v) = (d.w_cor[s], d.w_vol[s]);
            let r = corotated::project(&usv);
            let j = f.determinant();
            let cof = cofactor(f);
            let e = 0.5 * two_mu_v * (f - r).norm_squared() + 0.5 * la_v * (j - 1.0).powi(2);
            let p = (f - r) * two_mu_v + cof * (la_v * (j - 1.0));
            if with_hessian {
                fill(&|df| {
                    (df - corotated::jacobian_apply(&usv, df)) * two_mu_v
                        + cof * (la_v * cof.component_mul(df).sum())
                        + cofactor_differential(f, df) * (la_v * (j - 1.0))
                });
            }
            (e, p, h)
        }
    }
}

/// $\mathrm{cof}(F)=\partial\det F/\partial F$.
pub fn cofactor(f: &Matrix3<f64>) -> Matrix3<f64> {
    let c0 = f.column(0).into_owned();
    let c1 = f.column(1).into_owned();
    let c2 = f.column(2).into_owned();
    Matrix3::from_columns(&[c1.cross(&c2), c2.cross(&c0), c0.cross(&c1)])
}

/// $d\,\mathrm{cof}(F)[dF]$ (cofactor columns are cross products of the other two).
pub fn cofactor_differential(f: &Matrix3<f64>, df: &Matrix3<f64>) -> Matrix3<f64> {
    let c = |m: &Matrix3<f64>, k: usize| m.column(k).into_owned();
    Matrix3::from_columns(&[
        c(df, 1).cross(&c(f, 2)) + c(f, 1).cross(&c(df, 2)),
        c(df, 2).cross(&c(f, 0)) + c(f, 2).cross(&c(df, 0)),
        c(df, 0).cross(&c(f, 1)) + c(f, 0).cross(&c(df, 1)),
    ])
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
