//! Muscle fibres (DiffPD's actuation model, spec §3.5 and App. A.4).
//!
//! Per actuated sample s with rest unit fibre $\mathsf m$, activation a (target fibre
//! stretch; 1 relaxed, < 1 contraction) and weight $w_m=k_mV_s$:
//! $\Psi_m=\tfrac{k_m}2(\|F\mathsf m\|-a)^2=\min_{\|p\|=a}\tfrac{k_m}2\|F\mathsf m-p\|^2$, projection
//! $p=a\,n$ with $\ell=\|F\mathsf m\|$, $n=F\mathsf m/\ell$.
//!
//! - global matrix: $A\mathrel{+}=w_mG^T(\mathsf m\mathsf m^T\otimes I_3)G$ — per axis the rank-one
//!   term $w_m\,\hat g\hat g^T$ with $\hat g_a=\nabla N_a\cdot\mathsf m$ ([`add_to_matrix`]);
//! - local step: $Q_s\mathrel{+}=w_m\,p\,\mathsf m^T$, so $b\mathrel{+}=w_mG^T\mathrm{vec}(p\,\mathsf m^T)$
//!   ([`add_projections`]);
//! - backward: $\Delta A\,z\mathrel{+}=\sum_s w_mG_s^T\mathrm{vec}\big(\tfrac a\ell(I-nn^T)(Z_s\mathsf m)\,\mathsf m^T\big)$
//!   ([`MuscleLin::apply`]);
//! - activation gradient: $d\mathcal L/da_g=\sum_{s\in g}w_m\,(Z_s\mathsf m)\cdot n_s$ per step
//!   ([`MuscleLin::activation_gradient`], from $\partial b/\partial a=w_mG^T\mathrm{vec}(n\mathsf m^T)$).
//!
//! Fibres are evaluated at the element centroid in the rest configuration: a constant
//! direction, or radial / circumferential about an axis (tori). Muscles are not damped and
//! are not part of the forward trust-region energy statistics.
//!
//! Activations per time knot: a group holds knot values $a_0..a_{K-1}$ at $t_k=k\tau$ and
//! the step producing frame $n$ uses $a(t_n)$, $t_n=nh$ (the end of the step, like the
//! Dirichlet values), linearly interpolated, $a(t)=(1-s)a_k+s\,a_{k+1}$ with
//! $k=\lfloor t/\tau\rfloor$, $s=t/\tau-k$, and $a(t)=a_{K-1}$ for $t\ge t_{K-1}$
//! ([`crate::model::muscle::MuscleGroup::weights`]). The gradient of a knot is the chain rule through these
//! weights: $d\mathcal L/da_k=\sum_n w_k(t_n)\,d\mathcal L/da(t_n)$. The current time
//! reaches the local step through [`crate::model::Derived::muscle_time`].

use crate::linalg::CscMatrix;
use crate::model::Model;
use nalgebra::{Matrix3, Vector3};

/// $(p, \ell, n)$ of a fibre stretch vector $F\mathsf m$ and activation a. For $\ell=0$ the
/// direction is undefined; $n$ is then taken as 0 (no force direction, zero Jacobian).
pub fn project(fm: &Vector3<f64>, a: f64) -> (Vector3<f64>, f64, Vector3<f64>) {
    let l = fm.norm();
    if l <= 1e-300 {
        return (Vector3::zeros(), 0.0, Vector3::zeros());
    }
    let n = fm / l;
    (n * a, l, n)
}

/// $\frac{\partial p}{\partial(F\mathsf m)}\,d=\frac a\ell(I-nn^T)\,d$.
pub fn jacobian_apply(a: f64, l: f64, n: &Vector3<f64>, d: &Vector3<f64>) -> Vector3<f64> {
    if l <= 1e-300 {
        return Vector3::zeros();
    }
    (d - n * n.dot(d)) * (a / l)
}

/// Add $w_m\,p\,\mathsf m^T$ of every actuated sample to the local projections `q`, with
/// the activations at time `t`.
pub fn add_projections(model: &Model, x: &[f64], t: f64, q: &mut [Matrix3<f64>]) {
    for g in &model.muscles {
        let a = g.activation_at(t);
        for (&s, m) in g.samples.iter().zip(&g.fibers) {
            let f = model.deformation_gradient(s, x);
            let (p, _, _) = project(&(f * m), a);
            q[s] += p * m.transpose() * (g.stiffness * model.samples.vol[s]);
        }
    }
}

/// Add $w_m(F_s\mathsf m)\mathsf m^T$ at `x` to `q` for every actuated sample: the part of
/// $Q_s$ whose gather is the muscle matrix of [`add_to_matrix`] times `x`
/// ($\sum_sG_s^T\mathrm{vec}(w_m(F_s\mathsf m)\mathsf m^T)=A_mx$, since $G_sX=I$).
pub fn add_linear_terms(model: &Model, x: &[f64], q: &mut [Matrix3<f64>]) {
    for g in &model.muscles {
        for (&s, m) in g.samples.iter().zip(&g.fibers) {
            let f = model.deformation_gradient(s, x);
            q[s] += (f * m) * m.transpose() * (g.stiffness * model.samples.vol[s]);
        }
    }
}

/// Muscle energy $\sum_s\tfrac{w_m}2\|F_s\mathsf m-p_s\|^2=\sum_s\tfrac{w_m}2(\ell_s-a)^2$ at `x` with
/// the activations at time `t` (the term the PD objective gains from the fibres; its gradient
/// is $A_mx-b_m(x)$ of [`add_to_matrix`] and [`add_projections`]).
pub fn energy(model: &Model, x: &[f64], t: f64) -> f64 {
    let mut e = 0.0;
    for g in &model.muscles {
        let a = g.activation_at(t);
        for (&s, m) in g.samples.iter().zip(&g.fibers) {
            let fm = model.deformation_gradient(s, x) * m;
            let (p, _, _) = project(&fm, a);
            e += 0.5 * g.stiffness * model.samples.vol[s] * (fm - p).norm_squared();
        }
    }
    e
}

/// Add the muscle terms $w_m\hat g\hat g^T$ to the per-axis matrix `a` (unreduced).
pub fn add_to_matrix(model: &Model, a: &mut CscMatrix) {
    for g in &model.muscles {
        for (&s, m) in g.samples.iter().zip(&g.fibers) {
            let w = g.stiffness * model.samples.vol[s];
            let el = model.element(model.samples.elem[s]);
            let gm: Vec<f64> = model
                .sample_grads(s)
                .iter()
                .map(|gr| Vector3::from(*gr).dot(m))
                .collect();
            for (i_a, &i) in el.iter().enumerate() {
                for (j_a, &j) in el.iter().enumerate() {
                    a.add(i, j, w * gm[i_a] * gm[j_a]);
                }
            }
        }
    }
}

/// One actuated sample at $x_{t+1}$: (sample, $w_m$, fibre $\mathsf m$, $\ell$, $n$).
type SampleState = (usize, f64, Vector3<f64>, f64, Vector3<f64>);

/// Muscle linearization of one step at $x_{t+1}$.
#[derive(Clone, Debug, Default)]
pub struct MuscleLin {
    /// Per group, its actuated samples.
    groups: Vec<Vec<SampleState>>,
    activations: Vec<f64>,
    /// Per group, the knot weights at this step's time.
    weights: Vec<[(usize, f64); 2]>,
}

impl MuscleLin {
    /// Linearize at `x` with the activations at time `t`.
    pub fn new(model: &Model, x: &[f64], t: f64) -> Self {
        let groups = model
            .muscles
            .iter()
            .map(|g| {
                g.samples
                    .iter()
                    .zip(&g.fibers)
                    .map(|(&s, m)| {
                        let fm = model.deformation_gradient(s, x) * m;
                        let (_, l, n) = project(&fm, g.activation_at(t));
                        (s, g.stiffness * model.samples.vol[s], *m, l, n)
                    })
                    .collect()
            })
            .collect();
        MuscleLin {
            groups,
            activations: model.muscles.iter().map(|g| g.activation_at(t)).collect(),
            weights: model.muscles.iter().map(|g| g.weights(t)).collect(),
        }
    }

    /// $\ell$ and $n$ of every fibre, group-major, each group's samples in model order (3
    /// values of $n$ per fibre): the plain numbers of
    /// [`crate::solver::offload::MuscleStep`] for a device copy of [`MuscleLin::apply`].
    pub fn fibre_states(&self) -> (Vec<f64>, Vec<f64>) {
        let fibres = self.groups.iter().flatten();
        let len = fibres.clone().map(|(_, _, _, l, _)| *l).collect();
        let dir = fibres
            .flat_map(|(_, _, _, _, n)| [n[0], n[1], n[2]])
            .collect();
        (len, dir)
    }

    /// The activation of every group at the linearization's time.
    pub fn activations(&self) -> &[f64] {
        &self.activations
    }

    /// Add the muscle part of $\Delta A\,z$ to `out`.
    pub fn apply(&self, model: &Model, z: &[f64], out: &mut [f64]) {
        for (gi, g) in self.groups.iter().enumerate() {
            let a = self.activations[gi];
            for (s, w, m, l, n) in g {
                let dfm = model.gradient_of(*s, z) * m;
                let dp = jacobian_apply(a, *l, n, &dfm);
                model.scatter_gt(*s, &(dp * m.transpose() * *w), out);
            }
        }
    }

    /// Add this step's $d\mathcal L/da_k=w_k(t)\,d\mathcal L/da_g(t)$ (adjoint `z`) to
    /// `grad[g][k]` (per group, per knot).
    pub fn activation_gradient(&self, model: &Model, z: &[f64], grad: &mut [Vec<f64>]) {
        let da: Vec<f64> = self
            .groups
            .iter()
            .map(|g| {
                g.iter()
                    .map(|(s, w, m, _, n)| w * (model.gradient_of(*s, z) * m).dot(n))
                    .sum()
            })
            .collect();
        self.add_knot_gradient(&da, grad);
    }

    /// Add $d\mathcal L/da_k=w_k(t)\,da_g$ to `grad[g][k]` for this step's per-group
    /// $da_g=d\mathcal L/da_g(t)$ (the knot chain rule of the module doc).
    pub fn add_knot_gradient(&self, da: &[f64], grad: &mut [Vec<f64>]) {
        for (gi, d) in da.iter().enumerate() {
            for &(k, wk) in &self.weights[gi] {
                grad[gi][k] += wk * d;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::muscle::MuscleGroup;

    /// $\partial p/\partial(F\mathsf m)$ and $\partial p/\partial a$ against central differences.
    #[test]
    fn projection_jacobian_matches_finite_differences() {
        let fm = Vector3::new(0.7, -0.4, 1.3);
        let a = 0.8;
        let (p, l, n) = project(&fm, a);
        assert!((p.norm() - a).abs() < 1e-15 && (l - fm.norm()).abs() < 1e-15);
        let e = 1e-6;
        for k in 0..3 {
            let mut d = Vector3::zeros();
            d[k] = 1.0;
            let fd = (project(&(fm + d * e), a).0 - project(&(fm - d * e), a).0) / (2.0 * e);
            let an = jacobian_apply(a, l, &n, &d);
            assert!((fd - an).norm() < 1e-8, "column {k}: {fd:?} vs {an:?}");
        }
        let fd_a = (project(&fm, a + e).0 - project(&fm, a - e).0) / (2.0 * e);
        assert!((fd_a - n).norm() < 1e-9);
        // The energy gradient dΨ/dF = k (1 - a/ℓ) F m mᵀ = k (F m - p) mᵀ (App. A.4).
        let f = Matrix3::new(1.1, 0.2, -0.1, 0.05, 0.9, 0.3, -0.2, 0.1, 1.2);
        let m = Vector3::new(0.3, -0.5, 0.8).normalize();
        let psi = |f: &Matrix3<f64>| 0.5 * ((f * m).norm() - a).powi(2);
        let grad = (f * m - project(&(f * m), a).0) * m.transpose();
        for r in 0..3 {
            for c in 0..3 {
                let mut df = Matrix3::zeros();
                df[(r, c)] = e;
                let fd = (psi(&(f + df)) - psi(&(f - df))) / (2.0 * e);
                assert!((fd - grad[(r, c)]).abs() < 1e-8);
            }
        }
    }

    /// Knot weights: interpolation, partition of unity, clamping after the last knot, and
    /// $a(t)$ against the weights' derivative by central differences in each knot.
    #[test]
    fn knot_interpolation() {
        let mut g = MuscleGroup {
            body: 0,
            name: "m".into(),
            stiffness: 1.0,
            knots: vec![1.0, 0.8, 1.2],
            knot_interval: 0.1,
            samples: vec![],
            fibers: vec![],
        };
        assert!((g.activation_at(0.0) - 1.0).abs() < 1e-15);
        assert!((g.activation_at(0.05) - 0.9).abs() < 1e-12);
        assert!((g.activation_at(0.1) - 0.8).abs() < 1e-12);
        assert!((g.activation_at(0.175) - 1.1).abs() < 1e-12);
        assert!((g.activation_at(0.2) - 1.2).abs() < 1e-12);
        assert!((g.activation_at(5.0) - 1.2).abs() < 1e-12);
        // n h with round-off lands on the knot
        let t = 0.1 - 1e-17;
        assert!(t < 0.1);
        assert_eq!(g.weights(t), [(1, 1.0), (2, 0.0)]);
        for t in [0.0, 0.03, 0.1, 0.13, 0.2, 0.31] {
            let w = g.weights(t);
            assert!((w[0].1 + w[1].1 - 1.0).abs() < 1e-12);
            for k in 0..3 {
                let e = 1e-6;
                let base = g.knots[k];
                g.knots[k] = base + e;
                let up = g.activation_at(t);
                g.knots[k] = base - e;
                let dn = g.activation_at(t);
                g.knots[k] = base;
                let fd = (up - dn) / (2.0 * e);
                let an: f64 = w.iter().filter(|p| p.0 == k).map(|p| p.1).sum();
                assert!((fd - an).abs() < 1e-8, "t {t} knot {k}: {fd} vs {an}");
            }
        }
        g.knots = vec![0.7];
        assert_eq!(g.activation_at(3.0), 0.7);
    }
}
