//! Restarted GMRES with right preconditioning and preconditioned CG, for the linearized PD
//! systems $K\,z=g$, $K=A-\Delta A$ (adjoint, spec Eq. 38; the Newton–Krylov phase and the
//! Newton polish of the forward), with the persistent factor of $A$ as preconditioner
//! ($M^{-1}=A^{-1}$).
//!
//! $K$ is symmetric but may be indefinite (corotated compression, spec §11 item 2), so CG
//! is not safe in general (it stops on negative curvature); GMRES needs neither definiteness
//! nor $\rho(A^{-1}\Delta A)<1$, which the fixed-point iteration $z\leftarrow A^{-1}(g+\Delta Az)$
//! does.
//!
//! Plan then execute, as Anderson's [`crate::solver::anderson::AndersonStore`]: each method
//! is written once ([`gmres_in`], [`pcg_in`]) against a [`KrylovSpace`] that owns the vectors
//! in numbered slots and applies $K$ and $M^{-1}$. [`HostSpace`] keeps them in host memory
//! (the CPU path: [`gmres`] and [`pcg`] on closures); an accelerator keeps them in device
//! buffers (`solver::offload::Offload::krylov_space`), so only the right-hand side goes up,
//! the solution comes down and, per iteration, the dot products' scalars cross. The small
//! dense work (Hessenberg matrix, Givens rotations, step lengths) is the algorithm's own, on
//! the host in both cases.

use crate::cancel::{Cancel, Cancelled, Stage};

/// Outcome of a Krylov solve ([`gmres_in`], [`pcg_in`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct KrylovStats {
    pub iterations: usize,
    pub converged: bool,
    /// Final $\|b-Kx\|/\|b\|$ (GMRES: the true residual, recomputed at each restart and at
    /// exit; CG: the recurrence's residual).
    pub relative_residual: f64,
}

/// Outcome of a GMRES solve.
pub type GmresStats = KrylovStats;

/// The vectors of a Krylov method and the two operators it applies, in numbered slots owned
/// by the implementation (host memory, or an accelerator's buffers). Every vector has the
/// system's length. `op` and `precond` overwrite every entry of their output; two slot
/// arguments of one call are distinct unless a method says otherwise.
pub trait KrylovSpace {
    type Error;
    /// Make slots `0..count` available (their contents are unspecified until written).
    fn reserve(&mut self, count: usize) -> Result<(), Self::Error>;
    /// Slot `slot` $\leftarrow$ `v`.
    fn upload(&mut self, slot: usize, v: &[f64]) -> Result<(), Self::Error>;
    /// `out` $\leftarrow$ slot `slot`.
    fn download(&mut self, slot: usize, out: &mut [f64]) -> Result<(), Self::Error>;
    /// $a\cdot b$ (`a` and `b` may be the same slot).
    fn dot(&mut self, a: usize, b: usize) -> Result<f64, Self::Error>;
    /// The dot products of several slot pairs at once (each as [`KrylovSpace::dot`]); a
    /// device returns them in one copy.
    fn dots(&mut self, pairs: &[(usize, usize)]) -> Result<Vec<f64>, Self::Error> {
        pairs.iter().map(|&(a, b)| self.dot(a, b)).collect()
    }
    /// $y\leftarrow\alpha x+\beta y$.
    fn axpby(&mut self, alpha: f64, x: usize, beta: f64, y: usize) -> Result<(), Self::Error>;
    /// `out` $\leftarrow x/s$ (entrywise division, not a product with $1/s$).
    fn divide(&mut self, x: usize, s: f64, out: usize) -> Result<(), Self::Error>;
    /// `dst` $\leftarrow$ `src`.
    fn copy(&mut self, src: usize, dst: usize) -> Result<(), Self::Error>;
    /// `out` $\leftarrow Kx$.
    fn op(&mut self, x: usize, out: usize) -> Result<(), Self::Error>;
    /// `out` $\leftarrow M^{-1}x$.
    fn precond(&mut self, x: usize, out: usize) -> Result<(), Self::Error>;
    /// Orthogonalize slot `w` against the orthonormal slots `basis` twice ("twice is
    /// enough") and return the coefficients $h_i=\sum_{\text{passes}}w\cdot v_i$, the Arnoldi
    /// column above its subdiagonal. The default is modified Gram–Schmidt, one dot product
    /// and one update per basis vector and pass (the CPU path's arithmetic); a device
    /// overrides it with classical Gram–Schmidt, $h=V^Tw$, $w\leftarrow w-Vh$ per pass, whose
    /// dot products are one block reduction: two round trips per Arnoldi step instead of
    /// $2(j+1)$.
    fn orthogonalize(&mut self, w: usize, basis: &[usize]) -> Result<Vec<f64>, Self::Error> {
        let mut h = vec![0.0; basis.len()];
        for _ in 0..2 {
            for (hi, &v) in h.iter_mut().zip(basis) {
                let d = self.dot(w, v)?;
                *hi += d;
                self.axpby(-d, v, 1.0, w)?;
            }
        }
        Ok(h)
    }
}

/// A [`KrylovSpace`] that polls a [`Cancel`] token before every application of the operator
/// (one per GMRES/CG iteration, plus one per restart): a tripped poll is the space's error
/// (`E: From<Cancelled>`), which ends the method. Every other operation is the inner
/// space's own, so an untripped token leaves the method's arithmetic unchanged.
pub struct Cancellable<'c, S> {
    space: S,
    cancel: &'c Cancel,
    applied: usize,
}

impl<'c, S> Cancellable<'c, S> {
    pub fn new(space: S, cancel: &'c Cancel) -> Self {
        Cancellable {
            space,
            cancel,
            applied: 0,
        }
    }
}

impl<S: KrylovSpace + ?Sized, B: std::ops::DerefMut<Target = S>> KrylovSpace for Cancellable<'_, B>
where
    S::Error: From<Cancelled>,
{
    type Error = S::Error;
    fn reserve(&mut self, count: usize) -> Result<(), Self::Error> {
        self.space.reserve(count)
    }
    fn upload(&mut self, slot: usize, v: &[f64]) -> Result<(), Self::Error> {
        self.space.upload(slot, v)
    }
    fn download(&mut self, slot: usize, out: &mut [f64]) -> Result<(), Self::Error> {
        self.space.download(slot, out)
    }
    fn dot(&mut self, a: usize, b: usize) -> Result<f64, Self::Error> {
        self.space.dot(a, b)
    }
    fn dots(&mut self, pairs: &[(usize, usize)]) -> Result<Vec<f64>, Self::Error> {
        self.space.dots(pairs)
    }
    fn axpby(&mut self, alpha: f64, x: usize, beta: f64, y: usize) -> Result<(), Self::Error> {
        self.space.axpby(alpha, x, beta, y)
    }
    fn divide(&mut self, x: usize, s: f64, out: usize) -> Result<(), Self::Error> {
        self.space.divide(x, s, out)
    }
    fn copy(&mut self, src: usize, dst: usize) -> Result<(), Self::Error> {
        self.space.copy(src, dst)
    }
    fn op(&mut self, x: usize, out: usize) -> Result<(), Self::Error> {
        self.cancel.poll(Stage::Krylov, self.applied)?;
        self.applied += 1;
        self.space.op(x, out)
    }
    fn precond(&mut self, x: usize, out: usize) -> Result<(), Self::Error> {
        self.space.precond(x, out)
    }
    fn orthogonalize(&mut self, w: usize, basis: &[usize]) -> Result<Vec<f64>, Self::Error> {
        self.space.orthogonalize(w, basis)
    }
}

/// `(&v[a], &mut v[b])` for distinct `a`, `b` (the in/out pair of a slot operation).
pub fn slot_pair<T>(v: &mut [T], a: usize, b: usize) -> (&T, &mut T) {
    assert_ne!(a, b, "a slot operation's input and output must differ");
    if a < b {
        let (lo, hi) = v.split_at_mut(b);
        (&lo[a], &mut hi[0])
    } else {
        let (lo, hi) = v.split_at_mut(a);
        (&hi[0], &mut lo[b])
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// A host closure `f(x, out)` (the operator or the preconditioner) whose failure is an `E`.
pub type HostFn<'a, E> = &'a mut dyn FnMut(&[f64], &mut [f64]) -> Result<(), E>;

/// A [`KrylovSpace`] in host memory around two closures `op(x, out)` and `precond(x, out)`
/// (each handed a zeroed `out`, as the CPU path's fresh buffers were). Its arithmetic is that
/// of the CPU path before the methods were split from their vectors: dot products summed in
/// index order, $\alpha x+\beta y$ and $x/s$ entrywise. The closures' error `E` is the space's
/// (an $A^{-1}$ preconditioner on a device factor can fail; [`std::convert::Infallible`] for
/// plain closures, see [`gmres`]).
pub struct HostSpace<'a, E = std::convert::Infallible> {
    n: usize,
    slots: Vec<Vec<f64>>,
    op: HostFn<'a, E>,
    precond: HostFn<'a, E>,
}

impl<'a, E> HostSpace<'a, E> {
    /// Vectors of length `n`.
    pub fn new(n: usize, op: HostFn<'a, E>, precond: HostFn<'a, E>) -> Self {
        HostSpace {
            n,
            slots: Vec::new(),
            op,
            precond,
        }
    }

    /// Apply `f` (the operator or the preconditioner) from slot `x` into slot `out`.
    fn apply(slots: &mut [Vec<f64>], f: HostFn<'_, E>, x: usize, out: usize) -> Result<(), E> {
        let (xv, ov) = slot_pair(slots, x, out);
        ov.iter_mut().for_each(|v| *v = 0.0);
        f(xv, ov)
    }
}

impl<E> KrylovSpace for HostSpace<'_, E> {
    type Error = E;

    fn reserve(&mut self, count: usize) -> Result<(), Self::Error> {
        if self.slots.len() < count {
            self.slots.resize(count, vec![0.0; self.n]);
        }
        Ok(())
    }
    fn upload(&mut self, slot: usize, v: &[f64]) -> Result<(), Self::Error> {
        self.slots[slot].copy_from_slice(v);
        Ok(())
    }
    fn download(&mut self, slot: usize, out: &mut [f64]) -> Result<(), Self::Error> {
        out.copy_from_slice(&self.slots[slot]);
        Ok(())
    }
    fn dot(&mut self, a: usize, b: usize) -> Result<f64, Self::Error> {
        Ok(dot(&self.slots[a], &self.slots[b]))
    }
    fn axpby(&mut self, alpha: f64, x: usize, beta: f64, y: usize) -> Result<(), Self::Error> {
        let (xv, yv) = slot_pair(&mut self.slots, x, y);
        for (yi, xi) in yv.iter_mut().zip(xv) {
            *yi = alpha * xi + beta * *yi;
        }
        Ok(())
    }
    fn divide(&mut self, x: usize, s: f64, out: usize) -> Result<(), Self::Error> {
        let (xv, ov) = slot_pair(&mut self.slots, x, out);
        for (o, xi) in ov.iter_mut().zip(xv) {
            *o = xi / s;
        }
        Ok(())
    }
    fn copy(&mut self, src: usize, dst: usize) -> Result<(), Self::Error> {
        let (sv, dv) = slot_pair(&mut self.slots, src, dst);
        dv.copy_from_slice(sv);
        Ok(())
    }
    fn op(&mut self, x: usize, out: usize) -> Result<(), Self::Error> {
        Self::apply(&mut self.slots, self.op, x, out)
    }
    fn precond(&mut self, x: usize, out: usize) -> Result<(), Self::Error> {
        Self::apply(&mut self.slots, self.precond, x, out)
    }
}

/// The result of a method on a [`HostSpace`] of infallible closures.
pub(crate) fn infallible<T>(r: Result<T, std::convert::Infallible>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => match e {},
    }
}

/// An infallible closure as a [`HostFn`].
macro_rules! lift {
    ($f:ident) => {
        &mut |x: &[f64], out: &mut [f64]| -> Result<(), std::convert::Infallible> {
            $f(x, out);
            Ok(())
        }
    };
}

mod gmres;
mod pcg;
mod steihaug;

pub use gmres::{gmres, gmres_in, gmres_monitored, try_gmres, GmresSettings};
pub use pcg::{pcg, pcg_in, try_pcg, PcgSettings};
pub use steihaug::{steihaug, steihaug_in, try_steihaug, SteihaugStats};

#[cfg(test)]
mod tests {
    use super::*;

    /// An operator or preconditioner of the tests.
    pub(super) trait Apply: FnMut(&[f64], &mut [f64]) + Clone {}
    impl<F: FnMut(&[f64], &mut [f64]) + Clone> Apply for F {}

    /// A symmetric *indefinite* tridiagonal operator (every 7th diagonal entry negative) and
    /// its |diagonal| preconditioner; with `skew` a non-symmetric part.
    pub(super) fn system(n: usize, skew: f64) -> (impl Apply, impl Apply) {
        let diag: Vec<f64> = (0..n)
            .map(|i| {
                if i % 7 == 3 {
                    -2.0
                } else {
                    4.0 + i as f64 * 0.1
                }
            })
            .collect();
        let dabs: Vec<f64> = diag.iter().map(|d| d.abs()).collect();
        let op = move |x: &[f64], y: &mut [f64]| {
            for i in 0..n {
                y[i] = diag[i] * x[i]
                    - (1.0 + skew) * if i > 0 { x[i - 1] } else { 0.0 }
                    - (1.0 - skew) * if i + 1 < n { x[i + 1] } else { 0.0 };
            }
        };
        let pre = move |x: &[f64], y: &mut [f64]| {
            for i in 0..n {
                y[i] = x[i] / dabs[i];
            }
        };
        (op, pre)
    }

    /// Statistics and solution as bit patterns (NaN and signed zeros compared exactly).
    fn bits(st: KrylovStats, x: &[f64]) -> (usize, bool, u64, Vec<u64>) {
        let x = x.iter().map(|v| v.to_bits()).collect();
        (
            st.iterations,
            st.converged,
            st.relative_residual.to_bits(),
            x,
        )
    }

    /// The slot-space methods on the host give today's (before the split) iterates and
    /// statistics bit for bit: GMRES through restarts, the cap, a warm start, a non-symmetric
    /// operator and a zero right-hand side; CG to convergence, at the cap and on negative
    /// curvature (the indefinite system).
    #[test]
    fn host_space_methods_equal_the_closure_methods_bit_for_bit() {
        let n = 60;
        let xs: Vec<f64> = (0..n).map(|i| (i as f64 * 0.7).sin()).collect();
        let x0: Vec<f64> = (0..n).map(|i| 0.1 * (i as f64 * 1.3).cos()).collect();
        for (skew, restart, rel_tol, max_iter, warm) in [
            (0.0, 10, 1e-12, 500, false),
            (0.0, 3, 1e-14, 40, true),
            (0.3, 7, 1e-10, 500, true),
            (0.3, 50, 0.0, 25, false),
        ] {
            let (mut op, mut pre) = system(n, skew);
            let mut b = vec![0.0; n];
            op(&xs, &mut b);
            let settings = GmresSettings {
                restart,
                rel_tol,
                abs_tol: 1e-300,
                max_iter,
            };
            let start = if warm { x0.clone() } else { vec![0.0; n] };
            let (mut x, mut xr) = (start.clone(), start.clone());
            let st = gmres(&mut op.clone(), &mut pre.clone(), &b, &mut x, &settings);
            let sr = reference::gmres(&mut op, &mut pre, &b, &mut xr, &settings);
            assert_eq!(
                bits(st, &x),
                bits(sr, &xr),
                "GMRES skew {skew}, restart {restart}"
            );
        }
        let (mut op, mut pre) = system(n, 0.0);
        let mut x = x0.clone();
        let st = gmres(&mut op, &mut pre, &vec![0.0; n], &mut x, &{
            GmresSettings {
                restart: 5,
                rel_tol: 1e-8,
                abs_tol: 0.0,
                max_iter: 10,
            }
        });
        assert!(st.converged && x.iter().all(|v| *v == 0.0));
        // CG: an SPD system (shifted), the indefinite one (negative curvature), the cap
        for (shift, max_iter) in [(3.0, 500), (0.0, 500), (3.0, 4)] {
            let (mut op0, mut pre) = system(n, 0.0);
            let mut op = move |x: &[f64], y: &mut [f64]| {
                op0(x, y);
                y.iter_mut().zip(x).for_each(|(yi, xi)| *yi += shift * xi);
            };
            let mut b = vec![0.0; n];
            op(&xs, &mut b);
            let settings = PcgSettings {
                rel_tol: 1e-12,
                abs_tol: 0.0,
                max_iter,
            };
            let (mut x, mut xr) = (x0.clone(), x0.clone());
            let st = pcg(&mut op, &mut pre, &b, &mut x, &settings);
            let sr = reference::pcg(&mut op, &mut pre, &b, &mut xr, &settings);
            assert_eq!(
                bits(st, &x),
                bits(sr, &xr),
                "CG shift {shift}, cap {max_iter}"
            );
            eprintln!("CG shift {shift}, cap {max_iter}: {st:?}");
        }
    }

    /// The CPU path's GMRES and CG as they were before the methods were written against
    /// [`KrylovSpace`] (GMRES: `linalg::krylov::gmres`; CG: `solver::backward::solve_pcg`
    /// with its operator and preconditioner as closures), kept to prove the split bitwise.
    mod reference {
        use super::super::{dot, GmresSettings, GmresStats, KrylovStats, PcgSettings};

        pub fn gmres(
            op: &mut dyn FnMut(&[f64], &mut [f64]),
            precond: &mut dyn FnMut(&[f64], &mut [f64]),
            b: &[f64],
            x: &mut [f64],
            settings: &GmresSettings,
        ) -> GmresStats {
            let GmresSettings {
                restart: m,
                rel_tol,
                abs_tol,
                max_iter,
            } = *settings;
            let n = b.len();
            let bnorm = dot(b, b).sqrt();
            let target = rel_tol * bnorm + abs_tol;
            let mut stats = GmresStats::default();
            let mut tmp = vec![0.0; n];
            if bnorm == 0.0 {
                x.iter_mut().for_each(|v| *v = 0.0);
                stats.converged = true;
                return stats;
            }
            loop {
                op(x, &mut tmp);
                let r: Vec<f64> = b.iter().zip(&tmp).map(|(a, c)| a - c).collect();
                let beta = dot(&r, &r).sqrt();
                stats.relative_residual = beta / bnorm;
                if beta <= target {
                    stats.converged = true;
                    return stats;
                }
                if stats.iterations >= max_iter || !beta.is_finite() {
                    return stats;
                }
                let mut v: Vec<Vec<f64>> = vec![r.iter().map(|a| a / beta).collect()];
                let mut z: Vec<Vec<f64>> = Vec::with_capacity(m);
                let mut h = vec![vec![0.0; m]; m + 1];
                let (mut cs, mut sn) = (vec![0.0; m], vec![0.0; m]);
                let mut g = vec![0.0; m + 1];
                g[0] = beta;
                let mut k_used = 0;
                for j in 0..m {
                    let mut zj = vec![0.0; n];
                    precond(&v[j], &mut zj);
                    let mut w = vec![0.0; n];
                    op(&zj, &mut w);
                    z.push(zj);
                    for _ in 0..2 {
                        for (i, vi) in v.iter().enumerate() {
                            let hij = dot(&w, vi);
                            h[i][j] += hij;
                            for (wk, vk) in w.iter_mut().zip(vi) {
                                *wk -= hij * vk;
                            }
                        }
                    }
                    let wn = dot(&w, &w).sqrt();
                    h[j + 1][j] = wn;
                    for i in 0..j {
                        let t = cs[i] * h[i][j] + sn[i] * h[i + 1][j];
                        h[i + 1][j] = -sn[i] * h[i][j] + cs[i] * h[i + 1][j];
                        h[i][j] = t;
                    }
                    let den = (h[j][j] * h[j][j] + h[j + 1][j] * h[j + 1][j]).sqrt();
                    if den == 0.0 {
                        k_used = j;
                        break;
                    }
                    cs[j] = h[j][j] / den;
                    sn[j] = h[j + 1][j] / den;
                    h[j][j] = den;
                    h[j + 1][j] = 0.0;
                    g[j + 1] = -sn[j] * g[j];
                    g[j] *= cs[j];
                    stats.iterations += 1;
                    k_used = j + 1;
                    if g[j + 1].abs() <= 0.5 * target || stats.iterations >= max_iter || wn == 0.0 {
                        break;
                    }
                    v.push(w.iter().map(|a| a / wn).collect());
                }
                let mut y = vec![0.0; k_used];
                for i in (0..k_used).rev() {
                    let mut s = g[i];
                    for (k, yk) in y.iter().enumerate().skip(i + 1) {
                        s -= h[i][k] * yk;
                    }
                    y[i] = s / h[i][i];
                }
                for (k, yk) in y.iter().enumerate() {
                    for (xi, zi) in x.iter_mut().zip(&z[k]) {
                        *xi += yk * zi;
                    }
                }
                if k_used == 0 {
                    return stats;
                }
            }
        }

        pub fn pcg(
            op: &mut dyn FnMut(&[f64], &mut [f64]),
            precond: &mut dyn FnMut(&[f64], &mut [f64]),
            gf: &[f64],
            z: &mut [f64],
            cfg: &PcgSettings,
        ) -> KrylovStats {
            let n3 = gf.len();
            let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
            let gnorm = norm(gf);
            let dotp = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
            let mut kz = vec![0.0; n3];
            op(z, &mut kz);
            let mut r: Vec<f64> = gf.iter().zip(&kz).map(|(a, b)| a - b).collect();
            let mut w = vec![0.0; n3];
            precond(&r, &mut w);
            let mut p = w.clone();
            let mut rw = dotp(&r, &w);
            let mut kp = vec![0.0; n3];
            let thresh = cfg.rel_tol * gnorm + cfg.abs_tol;
            let mut it = 0;
            let done = |iterations, converged, rn: f64| KrylovStats {
                iterations,
                converged,
                relative_residual: rn / gnorm,
            };
            loop {
                let rn = norm(&r);
                if rn <= thresh {
                    return done(it, true, rn);
                }
                if it >= cfg.max_iter {
                    return done(it, false, rn);
                }
                op(&p, &mut kp);
                let pkp = dotp(&p, &kp);
                if pkp.is_nan() || pkp <= 0.0 {
                    return done(it, false, rn);
                }
                let a = rw / pkp;
                for k in 0..n3 {
                    z[k] += a * p[k];
                    r[k] -= a * kp[k];
                }
                precond(&r, &mut w);
                let rw_new = dotp(&r, &w);
                let beta = rw_new / rw;
                rw = rw_new;
                for k in 0..n3 {
                    p[k] = w[k] + beta * p[k];
                }
                it += 1;
            }
        }
    }
}
