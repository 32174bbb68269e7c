//! Quadratic volume-preservation PD term $\Psi=\frac k2\|F-D(F)\|_F^2$ (spec §3.2, App. A.3):
//! $D=U\,\mathrm{diag}(\sigma+d^*)V^T$ with $d^*=\arg\min\|d\|^2$ s.t. $\prod_i(\sigma_i+d_i)=1$.
//!
//! # Solver
//! With $s=\sigma+d$ the KKT conditions $s_i-\sigma_i+\lambda\prod_{k\ne i}s_k=0$, $\prod s=1$ give
//! $s_i^2-\sigma_is_i+\lambda=0$ for every $i$, i.e. $s_i=\tfrac12(\sigma_i\pm\sqrt{\sigma_i^2-4\lambda})$.
//! Let $m$ be the index of the smallest $|\sigma_i|$ and parametrise the multiplier by
//! $q=\pm\sqrt{\sigma_m^2-4\lambda}$:
//! $$s_m(q)=\tfrac12(\sigma_m+q),\qquad s_j(q)=\tfrac12\Big(\sigma_j+\sqrt{\sigma_j^2-\sigma_m^2+q^2}\Big)\ (j\ne m).$$
//! $q\ge0$ is the principal branch (all "+" roots, containing the uniform-scaling guess of the S1
//! code); $q<0$ puts component $m$ on its "−" root, which is needed when all $\sigma_i>0$ and the
//! expansion is so large that the principal branch has no solution or is not the closest point
//! (e.g. $\sigma=(3,3,3)$: the nearest $\det=1$ stretch is *not* $(1,1,1)$). $h(q)=\sum_i\ln s_i(q)$
//! is increasing for $q\ge0$ and tends to $-\infty$ at the left end of the domain, so
//! $h(q)=0$ is solved by bracketed (safeguarded) Newton to machine precision; on the $q<0$ part
//! all sign changes are found by sampling. The candidate with the smallest $\|s-\sigma\|$ is
//! returned, i.e. the **global** minimiser over the positive sheet $\{s>0,\ \prod s=1\}$.
//! The $q<0$ scan is only run when it can matter: if $\prod\sigma\le1$ the principal point is the
//! unique projection onto the convex set $\{s>0:\prod s\ge1\}$, and any $q<0$ point is at distance
//! $>\sigma_m/2$, so it is skipped when the principal point is closer than that.
//!
//! **Inverted elements** ($\sigma_2<0$): only the positive sheet is considered, so $D$ always has
//! positive stretches (the projection un-inverts; $\det D=1$ with $U,V\in SO(3)$). There
//! $\lambda<0$ and the principal branch has exactly one root. Beyond the medial axis of the
//! constraint surface (huge expansions) the closest point is not unique and the projection is
//! discontinuous; this is inherent to "closest $\det=1$ matrix".

use super::svd::{spectral_jacobian_apply, Svd3};
use nalgebra::{Matrix3, Matrix4, Vector3, Vector4};

/// Stretches $s(q)$ on the KKT curve and $h(q)=\sum\ln s_i$, $h'(q)$.
struct Curve {
    sigma: Vector3<f64>,
    m: usize,
}

impl Curve {
    fn stretches(&self, q: f64) -> Vector3<f64> {
        let sm = self.sigma[self.m];
        let mut s = Vector3::zeros();
        for j in 0..3 {
            let sj = self.sigma[j];
            s[j] = if j == self.m {
                0.5 * (sm + q)
            } else {
                let r = ((sj - sm) * (sj + sm) + q * q).max(0.0).sqrt();
                if sj >= 0.0 {
                    0.5 * (sj + r)
                } else {
                    // (σ_j + r)/2 = (r² − σ_j²)/(2(r − σ_j)) = (q² − σ_m²)/(2(r − σ_j)), no cancellation
                    0.5 * ((q - sm.abs()) * (q + sm.abs())) / (r - sj)
                }
            };
        }
        s
    }

    /// $(h, h')$.
    fn h(&self, q: f64) -> (f64, f64) {
        let s = self.stretches(q);
        let sm = self.sigma[self.m];
        let mut h = 0.0;
        let mut dh = 0.0;
        for j in 0..3 {
            h += s[j].ln();
            let ds = if j == self.m {
                0.5
            } else {
                let sj = self.sigma[j];
                let r = ((sj - sm) * (sj + sm) + q * q).max(0.0).sqrt();
                if r > 0.0 {
                    0.5 * q / r
                } else {
                    0.5
                }
            };
            dh += ds / s[j];
        }
        (h, dh)
    }

    /// Root of $h$ in $[a,b]$ with $h(a)<0<h(b)$ (safeguarded Newton / bisection).
    fn root(&self, mut a: f64, mut b: f64) -> f64 {
        let mut q = 0.5 * (a + b);
        for _ in 0..200 {
            let (h, dh) = self.h(q);
            if h == 0.0 {
                return q;
            }
            if h < 0.0 {
                a = q;
            } else {
                b = q;
            }
            let newton = q - h / dh;
            let next = if dh.is_finite() && dh != 0.0 && newton > a && newton < b {
                newton
            } else {
                0.5 * (a + b)
            };
            if (next - q).abs() <= 2.0 * f64::EPSILON * q.abs().max(1e-300) || b - a <= 0.0 {
                return next;
            }
            if next == a || next == b {
                return q;
            }
            q = next;
        }
        q
    }
}

/// Closest stretch vector with unit product, $\sigma^*=\sigma+d^*$,
/// $d^*=\arg\min\|d\|^2$ s.t. $\prod_i(\sigma_i+d_i)=1$ (spec §3.2, App. A.3), over the positive
/// sheet $\sigma^*>0$. Global minimiser; see the module documentation for the algorithm and the
/// treatment of inverted ($\sigma_2<0$) input. Non-finite input gives NaN.
pub fn project_stretches(sigma: &Vector3<f64>) -> Vector3<f64> {
    if !sigma.iter().all(|x| x.is_finite()) {
        return Vector3::repeat(f64::NAN);
    }
    let mut m = 0;
    for j in 1..3 {
        if sigma[j].abs() < sigma[m].abs() {
            m = j;
        }
    }
    let curve = Curve { sigma: *sigma, m };
    let sm = sigma[m];
    let all_positive = sigma.iter().all(|&x| x > 0.0);
    let q_lo = if all_positive { -sm } else { sm.abs() };
    let dist = |s: &Vector3<f64>| (s - sigma).norm();

    // Principal branch q ≥ max(q_lo, 0): h increasing.
    let a0 = q_lo.max(0.0);
    let mut best: Option<Vector3<f64>> = None;
    let h_a0 = if a0 == q_lo {
        f64::NEG_INFINITY
    } else {
        curve.h(a0).0
    };
    if h_a0 <= 0.0 {
        let mut b = 2.0 + 2.0 * sigma.amax();
        while curve.h(b).0 <= 0.0 {
            b *= 2.0;
        }
        let q = if h_a0 == 0.0 { a0 } else { curve.root(a0, b) };
        best = Some(curve.stretches(q));
    }

    // Second branch q ∈ (q_lo, 0) (component m on its "−" root), only if it can be closer.
    let need_scan = all_positive
        && sigma.iter().product::<f64>() > 1.0
        && best.is_none_or(|s| dist(&s) > 0.5 * sm);
    if need_scan {
        const N: usize = 64;
        let mut prev_q = q_lo;
        let mut prev_h = f64::NEG_INFINITY;
        for k in 1..=N {
            let q = q_lo + (0.0 - q_lo) * (k as f64) / (N as f64);
            let h = curve.h(q).0;
            if (prev_h < 0.0) != (h < 0.0) {
                let r = if prev_h < 0.0 {
                    curve.root(prev_q, q)
                } else {
                    // h decreasing through zero: root of −h
                    root_decreasing(&curve, prev_q, q)
                };
                let s = curve.stretches(r);
                if best.is_none_or(|b| dist(&s) < dist(&b)) {
                    best = Some(s);
                }
            }
            prev_q = q;
            prev_h = h;
        }
    }
    best.unwrap_or_else(|| Vector3::repeat(1.0))
}

/// Root of $h$ in $[a,b]$ with $h(a)\ge0>h(b)$, by bisection.
fn root_decreasing(curve: &Curve, mut a: f64, mut b: f64) -> f64 {
    for _ in 0..200 {
        let mid = 0.5 * (a + b);
        if mid <= a || mid >= b {
            break;
        }
        if curve.h(mid).0 >= 0.0 {
            a = mid;
        } else {
            b = mid;
        }
    }
    0.5 * (a + b)
}

/// Stretch Jacobian $W=\partial\sigma^*/\partial\sigma$ from the KKT differential (spec App. A.3):
/// $$\begin{pmatrix}I+\lambda^*\nabla^2c&\nabla c\\\nabla c^T&0\end{pmatrix}
/// \begin{pmatrix}d\sigma^*\\d\lambda\end{pmatrix}=\begin{pmatrix}d\sigma\\0\end{pmatrix},\quad
/// (\nabla c)_i=\prod_{k\ne i}\sigma^*_k,\ (\nabla^2c)_{ij}=\prod_{k\ne i,j}\sigma^*_k\ (i\ne j),$$
/// (equivalent to the $dd^*$ form of A.3 with $d\sigma^*=d\sigma+dd^*$), with the multiplier
/// recovered by least squares from $d^*+\lambda^*\nabla c=0$: $\lambda^*=-d^{*T}\nabla c/\|\nabla c\|^2$.
/// $W$ is symmetric. If the bordered matrix is singular (only on the bifurcation set of the
/// projection) the tangent projector $I-nn^T$, $n=\nabla c/\|\nabla c\|$, is returned.
pub fn stretch_jacobian(sigma: &Vector3<f64>, sigma_star: &Vector3<f64>) -> Matrix3<f64> {
    let s = sigma_star;
    let gc = Vector3::new(s[1] * s[2], s[0] * s[2], s[0] * s[1]);
    let d = s - sigma;
    let lam = -d.dot(&gc) / gc.norm_squared();
    let mut k = Matrix4::<f64>::zeros();
    for i in 0..3 {
        for j in 0..3 {
            k[(i, j)] = if i == j { 1.0 } else { lam * s[3 - i - j] };
        }
        k[(i, 3)] = gc[i];
        k[(3, i)] = gc[i];
    }
    let lu = k.lu();
    let mut w = Matrix3::zeros();
    for j in 0..3 {
        let mut rhs = Vector4::zeros();
        rhs[j] = 1.0;
        match lu.solve(&rhs) {
            Some(x) if x.iter().all(|v| v.is_finite()) => {
                for i in 0..3 {
                    w[(i, j)] = x[i];
                }
            }
            _ => {
                let n = gc / gc.norm();
                return Matrix3::identity() - n * n.transpose();
            }
        }
    }
    0.5 * (w + w.transpose())
}

/// Local step of the volume term: $(D,\sigma^*)$ with $D=U\,\mathrm{diag}(\sigma^*)V^T$,
/// $\det D=1$ (spec §3.2).
pub fn project(svd: &Svd3) -> (Matrix3<f64>, Vector3<f64>) {
    let s = project_stretches(&svd.sigma);
    (svd.compose(&s), s)
}

/// $dD$ for a direction $dF$: Eq. (42) with $W$ from [`stretch_jacobian`] (spec App. A.3; the
/// $dU$, $dV$ terms of A.3 are exactly the $\mathbf M,\mathbf N$ terms of Eq. 42).
pub fn jacobian_apply(
    svd: &Svd3,
    sigma_star: &Vector3<f64>,
    w: &Matrix3<f64>,
    df: &Matrix3<f64>,
) -> Matrix3<f64> {
    spectral_jacobian_apply(svd, sigma_star, w, df)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::material::fd::{self, Rng};
    use crate::material::svd::{spectral_jacobian_matrix, svd3};

    /// Brute-force global minimum of ‖s − σ‖ over s > 0, ∏s = 1: grid over (ln s0, ln s1)
    /// followed by a local pattern search. Returns the minimal distance.
    fn brute_force_distance(sigma: &Vector3<f64>) -> f64 {
        let dist = |a: f64, b: f64| {
            let s = Vector3::new(a.exp(), b.exp(), (-a - b).exp());
            (s - sigma).norm()
        };
        let mut best = (f64::INFINITY, 0.0, 0.0);
        let n = 300;
        for i in 0..=n {
            for j in 0..=n {
                let a = -5.0 + 10.0 * i as f64 / n as f64;
                let b = -5.0 + 10.0 * j as f64 / n as f64;
                let d = dist(a, b);
                if d < best.0 {
                    best = (d, a, b);
                }
            }
        }
        let (mut d, mut a, mut b) = best;
        let mut step = 10.0 / n as f64;
        while step > 1e-13 {
            let mut improved = false;
            for (da, db) in [(1.0, 0.0), (-1.0, 0.0), (0.0, 1.0), (0.0, -1.0)] {
                let nd = dist(a + da * step, b + db * step);
                if nd < d {
                    d = nd;
                    a += da * step;
                    b += db * step;
                    improved = true;
                }
            }
            if !improved {
                step *= 0.5;
            }
        }
        d
    }

    fn sample_sigmas() -> Vec<Vector3<f64>> {
        vec![
            Vector3::new(1.0, 1.0, 1.0),
            Vector3::new(1.3, 0.9, 0.6),
            Vector3::new(0.5, 0.4, 0.1),
            Vector3::new(1.5, 1.2, 1.1),
            Vector3::new(2.5, 0.7, 0.6),
            Vector3::new(1.9, 1.9, 1.9),
            Vector3::new(3.0, 3.0, 3.0),
            Vector3::new(2.6, 2.4, 2.2),
            Vector3::new(1.4, 1.0, -0.3),
            Vector3::new(1.0, 1.0, -1.0),
            Vector3::new(2.0, 0.0, 0.0),
            Vector3::new(0.0, 0.0, 0.0),
        ]
    }

    /// T9: det D = 1, KKT stationarity, and global optimality against brute force.
    #[test]
    fn t9_projection_constraint_and_optimality() {
        for sigma in sample_sigmas() {
            let s = project_stretches(&sigma);
            assert!(s.iter().all(|x| *x > 0.0), "positive stretches {s}");
            assert!(
                (s.product() - 1.0).abs() < 1e-14,
                "prod {} for {sigma}",
                s.product()
            );
            // KKT: d* parallel to ∇c
            let gc = Vector3::new(s[1] * s[2], s[0] * s[2], s[0] * s[1]);
            let d = s - sigma;
            assert!(d.cross(&gc).norm() < 1e-13 * (1.0 + d.norm() * gc.norm()));
            let bf = brute_force_distance(&sigma);
            let mine = d.norm();
            assert!(
                mine <= bf + 1e-10,
                "not the closest point for {sigma}: {mine} vs {bf}"
            );
            assert!(mine >= bf - 1e-10, "brute force undercut: {mine} vs {bf}");
        }
        // The (3,3,3) case: the nearest unit-determinant stretch is not the uniform one.
        let s = project_stretches(&Vector3::repeat(3.0));
        assert!((s - Vector3::repeat(1.0)).norm() > 0.5);
        // Full matrices, incl. inverted F
        let mut rng = Rng(5);
        for sigma in sample_sigmas() {
            let f = rng.with_stretches(&sigma);
            let (dm, _) = project(&svd3(&f));
            assert!(
                (dm.determinant() - 1.0).abs() < 1e-13,
                "det D = {}",
                dm.determinant()
            );
        }
    }

    /// T9: KKT stretch Jacobian W vs FD of the projection, and the full 9×9 dD vs FD.
    #[test]
    fn t9_jacobian_vs_fd() {
        let mut rng = Rng(3);
        let sigmas = [
            Vector3::new(1.3, 0.9, 0.6),
            Vector3::new(0.5, 0.4, 0.1),
            Vector3::new(1.5, 1.2, 1.1),
            Vector3::new(2.5, 0.7, 0.6),
            Vector3::new(1.4, 1.0, -0.3),
            Vector3::new(1.2, 1.2, 0.8),
            Vector3::new(1.0, 1.0, 1.0),
            Vector3::new(4.0, 3.0, 2.0),
        ];
        let (mut worst_w, mut worst_full) = (0.0f64, 0.0f64);
        for sigma in sigmas {
            let s = project_stretches(&sigma);
            let w = stretch_jacobian(&sigma, &s);
            let fdw = fd::jacobian3(project_stretches, &sigma, 1e-4);
            let ew = (w - fdw).norm() / fdw.norm().max(1e-3);
            worst_w = worst_w.max(ew);
            assert!(ew < 1e-7, "W error {ew} at {sigma}");
            assert!((w - w.transpose()).norm() < 1e-13);

            let f = rng.with_stretches(&sigma);
            let svd = svd3(&f);
            let (_, ss) = project(&svd);
            let ww = stretch_jacobian(&svd.sigma, &ss);
            let jac = spectral_jacobian_matrix(&svd, &ss, &ww);
            let fdj = fd::jacobian_mat3(|x| project(&svd3(x)).0, &f, 1e-4);
            let e = (jac - fdj).norm() / fdj.norm();
            worst_full = worst_full.max(e);
            assert!(e < 1e-7, "dD error {e} at {sigma}");
            let df = Matrix3::from_fn(|_, _| rng.uniform(-1.0, 1.0));
            let a = jacobian_apply(&svd, &ss, &ww, &df);
            assert!((fd::vec9(&a) - jac * fd::vec9(&df)).norm() < 1e-13 * a.norm().max(1.0));
        }
        eprintln!("T9 W vs FD worst {worst_w:.3e}; 9x9 dD vs FD worst {worst_full:.3e}");
    }
}
