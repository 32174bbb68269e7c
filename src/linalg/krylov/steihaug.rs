//! Steihaug–Toint truncated CG for a trust-region step on a [`KrylovSpace`]
//! ([`steihaug_in`]; on host closures [`steihaug`]).

use super::{infallible, HostFn, HostSpace, KrylovSpace, KrylovStats, PcgSettings};

/// Outcome of [`steihaug_in`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SteihaugStats {
    pub krylov: KrylovStats,
    /// The step ended on the trust region's boundary (the CG step left it, or negative
    /// curvature was followed to it).
    pub boundary: bool,
    /// Negative curvature ($p^TKp\le0$) was met.
    pub negative_curvature: bool,
    /// The model's decrease $-q(x)=b^Tx-\tfrac12x^TKx=\tfrac12x^T(b+r)$, $r=b-Kx$.
    pub model_decrease: f64,
    /// $\|x\|_M$ (the trust region's norm; $M$ is the preconditioner's matrix).
    pub norm: f64,
}

/// Steihaug–Toint truncated CG on `space` (Nocedal & Wright, *Numerical Optimization*,
/// Alg. 7.2, preconditioned; Conn, Gould & Toint §7.5.1): approximately minimize the model
/// $q(x)=\tfrac12x^TKx-b^Tx$ over $\|x\|_M\le$ `radius` from $x=0$, with $K$ symmetric and
/// possibly indefinite and $M$ the matrix of the preconditioner ($M^{-1}$ applied). CG runs
/// as [`pcg_in`](super::pcg_in) until its residual test, the cap, an iterate outside the
/// region or negative curvature; in the last two cases the step goes along the current
/// direction $p$ to the boundary. The $M$-norms come from scalar recurrences of the CG coefficients
/// ($\|p_{k+1}\|_M^2=r_{k+1}^TM^{-1}r_{k+1}+\beta^2\|p_k\|_M^2$,
/// $x_{k+1}^TMp_{k+1}=\beta(x_k^TMp_k+\alpha\|p_k\|_M^2)$), so the method costs what CG
/// costs. `x` is written (not read). Uploads `b` and zeros, downloads `x`.
pub fn steihaug_in<S: KrylovSpace + ?Sized>(
    space: &mut S,
    b: &[f64],
    x: &mut [f64],
    radius: f64,
    settings: &PcgSettings,
) -> Result<SteihaugStats, S::Error> {
    const B: usize = 0;
    const X: usize = 1;
    const R: usize = 2;
    const W: usize = 3;
    const P: usize = 4;
    const KP: usize = 5;
    space.reserve(6)?;
    space.upload(B, b)?;
    // x = 0 (uploaded: a slot's old contents may be NaN), r = b, w = M⁻¹ r, p = w
    x.iter_mut().for_each(|v| *v = 0.0);
    space.upload(X, x)?;
    space.copy(B, R)?;
    space.precond(R, W)?;
    space.copy(W, P)?;
    let d = space.dots(&[(R, W), (R, R)])?;
    let (mut rw, mut rn) = (d[0], d[1].sqrt());
    let bnorm = rn;
    let thresh = settings.rel_tol * bnorm + settings.abs_tol;
    // ‖x‖²_M, xᵀMp, ‖p‖²_M
    let (mut xx, mut xp, mut pp) = (0.0, 0.0, rw);
    let mut out = SteihaugStats::default();
    let mut it = 0;
    let converged = loop {
        if rn <= thresh {
            break true;
        }
        if it >= settings.max_iter {
            break false;
        }
        space.op(P, KP)?;
        let pkp = space.dot(P, KP)?;
        if pkp.is_nan() {
            break false;
        }
        let a = rw / pkp;
        let xx_next = xx + 2.0 * a * xp + a * a * pp;
        if pkp <= 0.0 || xx_next >= radius * radius {
            // to the boundary along p: ‖x + τp‖_M = radius, τ ≥ 0
            out.negative_curvature = pkp <= 0.0;
            out.boundary = true;
            let disc = (xp * xp + pp * (radius * radius - xx)).max(0.0);
            let tau = (disc.sqrt() - xp) / pp;
            space.axpby(tau, P, 1.0, X)?;
            space.axpby(-tau, KP, 1.0, R)?;
            xx = radius * radius;
            it += 1;
            break false;
        }
        space.axpby(a, P, 1.0, X)?;
        space.axpby(-a, KP, 1.0, R)?;
        space.precond(R, W)?;
        let d = space.dots(&[(R, W), (R, R)])?;
        let rw_new = d[0];
        rn = d[1].sqrt();
        let beta = rw_new / rw;
        rw = rw_new;
        xx = xx_next;
        xp = beta * (xp + a * pp);
        pp = rw_new + beta * beta * pp;
        space.axpby(1.0, W, beta, P)?;
        it += 1;
    };
    let d = space.dots(&[(X, B), (X, R), (R, R)])?;
    space.download(X, x)?;
    out.model_decrease = 0.5 * (d[0] + d[1]);
    out.norm = xx.max(0.0).sqrt();
    out.krylov = KrylovStats {
        iterations: it,
        converged,
        relative_residual: d[2].sqrt() / bnorm,
    };
    Ok(out)
}

/// [`steihaug_in`] on a [`HostSpace`] of closures.
pub fn steihaug(
    op: &mut dyn FnMut(&[f64], &mut [f64]),
    precond: &mut dyn FnMut(&[f64], &mut [f64]),
    b: &[f64],
    x: &mut [f64],
    radius: f64,
    settings: &PcgSettings,
) -> SteihaugStats {
    infallible(try_steihaug(
        lift!(op),
        lift!(precond),
        b,
        x,
        radius,
        settings,
    ))
}

/// [`steihaug`] with fallible closures: the first failure ends the solve and is returned.
pub fn try_steihaug<E>(
    op: HostFn<'_, E>,
    precond: HostFn<'_, E>,
    b: &[f64],
    x: &mut [f64],
    radius: f64,
    settings: &PcgSettings,
) -> Result<SteihaugStats, E> {
    let mut space = HostSpace::new(b.len(), op, precond);
    steihaug_in(&mut space, b, x, radius, settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// $x^TKy$-style helpers of the trust-region tests on a symmetric tridiagonal $K$ with
    /// unit off-diagonals and diagonal `diag`, $M=|\mathrm{diag}|$.
    struct Tri {
        diag: Vec<f64>,
    }

    impl Tri {
        fn op(&self) -> impl FnMut(&[f64], &mut [f64]) + '_ {
            let n = self.diag.len();
            move |x: &[f64], y: &mut [f64]| {
                for i in 0..n {
                    y[i] = self.diag[i] * x[i]
                        - if i > 0 { x[i - 1] } else { 0.0 }
                        - if i + 1 < n { x[i + 1] } else { 0.0 };
                }
            }
        }
        fn pre(&self) -> impl FnMut(&[f64], &mut [f64]) + '_ {
            move |x: &[f64], y: &mut [f64]| {
                for (i, yi) in y.iter_mut().enumerate() {
                    *yi = x[i] / self.diag[i].abs();
                }
            }
        }
        /// $\|x\|_M$.
        fn m_norm(&self, x: &[f64]) -> f64 {
            x.iter()
                .zip(&self.diag)
                .map(|(v, d)| d.abs() * v * v)
                .sum::<f64>()
                .sqrt()
        }
        /// $b^Tx-\tfrac12x^TKx$, evaluated directly.
        fn decrease(&self, b: &[f64], x: &[f64]) -> f64 {
            let mut kx = vec![0.0; x.len()];
            self.op()(x, &mut kx);
            let dot = |a: &[f64], c: &[f64]| a.iter().zip(c).map(|(p, q)| p * q).sum::<f64>();
            dot(b, x) - 0.5 * dot(x, &kx)
        }
        fn steihaug(&self, b: &[f64], radius: f64) -> (Vec<f64>, SteihaugStats) {
            let mut x = vec![f64::NAN; b.len()];
            let settings = PcgSettings {
                rel_tol: 1e-13,
                abs_tol: 0.0,
                max_iter: 500,
            };
            let st = steihaug(
                &mut self.op(),
                &mut self.pre(),
                b,
                &mut x,
                radius,
                &settings,
            );
            (x, st)
        }
    }

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * a.abs().max(b.abs())
    }

    /// With a region that holds the CG solution, Steihaug–Toint CG is CG: the solution of
    /// $Kx=b$ ($K$ positive definite), inside the region, and the reported model decrease
    /// and $M$-norm are the directly evaluated ones.
    #[test]
    fn steihaug_inside_its_region_is_cg() {
        let n = 40;
        let tri = Tri {
            diag: (0..n).map(|i| 3.0 + 0.1 * i as f64).collect(),
        };
        let b: Vec<f64> = (0..n).map(|i| (i as f64 * 0.3).cos()).collect();
        let (x, st) = tri.steihaug(&b, 1e6);
        assert!(
            st.krylov.converged && !st.boundary && !st.negative_curvature,
            "{st:?}"
        );
        let mut kx = vec![0.0; n];
        tri.op()(&x, &mut kx);
        let res = kx
            .iter()
            .zip(&b)
            .map(|(a, c)| (a - c).abs())
            .fold(0.0, f64::max);
        assert!(res < 1e-11, "residual {res}");
        assert!(
            close(st.model_decrease, tri.decrease(&b, &x), 1e-12),
            "{st:?}"
        );
        assert!(close(st.norm, tri.m_norm(&x), 1e-12), "{st:?}");
    }

    /// On an indefinite $K$ the method meets negative curvature and follows it to the
    /// boundary: $\|x\|_M$ is the radius and the model decreases by the reported amount.
    #[test]
    fn steihaug_follows_negative_curvature_to_the_boundary() {
        let n = 60;
        let tri = Tri {
            diag: (0..n)
                .map(|i| {
                    if i % 7 == 3 {
                        -2.0
                    } else {
                        4.0 + 0.1 * i as f64
                    }
                })
                .collect(),
        };
        let b: Vec<f64> = (0..n).map(|i| (i as f64 * 0.7).sin()).collect();
        let radius = 50.0;
        let (x, st) = tri.steihaug(&b, radius);
        assert!(st.negative_curvature && st.boundary, "{st:?}");
        assert!(
            close(tri.m_norm(&x), radius, 1e-10),
            "{} vs {radius}",
            tri.m_norm(&x)
        );
        let dec = tri.decrease(&b, &x);
        assert!(
            dec > 0.0 && close(st.model_decrease, dec, 1e-10),
            "{st:?} vs {dec}"
        );
    }

    /// A small region on a positive definite $K$: the step ends on the boundary and decreases
    /// the model at least as much as the Cauchy point (the model's minimum along the
    /// preconditioned steepest descent direction $M^{-1}b$ within the region).
    #[test]
    fn steihaug_in_a_small_region_beats_the_cauchy_point() {
        let n = 40;
        let tri = Tri {
            // a shifted 1-D Laplacian: CG needs many steps, the first one is short
            diag: vec![2.05; n],
        };
        let b: Vec<f64> = (0..n).map(|i| 1.0 + (i as f64 * 0.3).cos()).collect();
        let (full, _) = tri.steihaug(&b, 1e6);
        let radius = 0.7 * tri.m_norm(&full);
        let (x, st) = tri.steihaug(&b, radius);
        assert!(st.boundary && !st.negative_curvature, "{st:?}");
        assert!(close(tri.m_norm(&x), radius, 1e-10));
        let mut d = vec![0.0; n];
        tri.pre()(&b, &mut d);
        let mut kd = vec![0.0; n];
        tri.op()(&d, &mut kd);
        let dot = |a: &[f64], c: &[f64]| a.iter().zip(c).map(|(p, q)| p * q).sum::<f64>();
        let t = (radius / tri.m_norm(&d)).min(dot(&b, &d) / dot(&d, &kd));
        let cauchy = t * dot(&b, &d) - 0.5 * t * t * dot(&d, &kd);
        assert!(
            st.model_decrease >= cauchy * (1.0 - 1e-12),
            "{st:?} vs Cauchy {cauchy}"
        );
        // past its first step CG does strictly better than the Cauchy point
        assert!(st.krylov.iterations > 1, "{st:?}");
        assert!(
            st.model_decrease > cauchy * (1.0 + 1e-6),
            "{st:?} vs Cauchy {cauchy}"
        );
    }
}
