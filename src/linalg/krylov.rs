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

/// Stopping rule and restart length of [`gmres`].
#[derive(Clone, Copy, Debug)]
pub struct GmresSettings {
    /// Restart length m.
    pub restart: usize,
    pub rel_tol: f64,
    pub abs_tol: f64,
    /// Cap on inner steps.
    pub max_iter: usize,
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

/// Solve `op(x) = b` from `x` (in/out), right-preconditioned by `precond`, restart `m`:
/// [`gmres_in`] on a [`HostSpace`].
pub fn gmres(
    op: &mut dyn FnMut(&[f64], &mut [f64]),
    precond: &mut dyn FnMut(&[f64], &mut [f64]),
    b: &[f64],
    x: &mut [f64],
    settings: &GmresSettings,
) -> GmresStats {
    infallible(try_gmres(lift!(op), lift!(precond), b, x, settings))
}

/// [`gmres`] with fallible closures: the first failure of `op` or `precond` ends the solve
/// and is returned.
pub fn try_gmres<E>(
    op: HostFn<'_, E>,
    precond: HostFn<'_, E>,
    b: &[f64],
    x: &mut [f64],
    settings: &GmresSettings,
) -> Result<GmresStats, E> {
    let mut space = HostSpace::new(b.len(), op, precond);
    gmres_in(&mut space, b, x, settings)
}

/// The slots of [`gmres_in`]: $b$, $x$, $r$, $w$, then the basis $v_0..v_{m-1}$ and the
/// preconditioned directions $z_0..z_{m-1}$.
struct GmresSlots {
    m: usize,
}

impl GmresSlots {
    const B: usize = 0;
    const X: usize = 1;
    const R: usize = 2;
    const W: usize = 3;
    fn v(&self, i: usize) -> usize {
        4 + i
    }
    fn z(&self, i: usize) -> usize {
        4 + self.m + i
    }
    fn count(&self) -> usize {
        4 + 2 * self.m
    }
}

/// Restarted GMRES on `space`: solve $Kx=b$ from `x` (in/out), right-preconditioned by
/// $M^{-1}$ ($x=x_0+M^{-1}V_ky$, the directions $z_j=M^{-1}v_j$ kept), Arnoldi by Gram–Schmidt
/// applied twice ([`KrylovSpace::orthogonalize`]: modified on the host), Givens rotations on the host. Stops when
/// $\|b-Kx\|\le$ `rel_tol`$\|b\|$ + `abs_tol` (the true residual, at each restart) or after
/// `max_iter` inner steps. Uploads `b` and `x`, downloads `x`.
pub fn gmres_in<S: KrylovSpace + ?Sized>(
    space: &mut S,
    b: &[f64],
    x: &mut [f64],
    settings: &GmresSettings,
) -> Result<GmresStats, S::Error> {
    gmres_monitored(space, b, x, settings, &mut |_, _| true)
}

/// [`gmres_in`] with a monitor: after every Arnoldi step `monitor(iterations, estimate)`
/// reads the rotated residual $|g_{j+1}|/\|b\|$ (the relative residual of the cycle's
/// least-squares iterate, exact in exact arithmetic for right preconditioning) and returns
/// whether to go on. `false` ends the solve as the cap does: the cycle's iterate is formed,
/// the true residual recomputed, and `converged` says whether it met the tolerance. Lets a
/// caller run one long cycle under a policy (the device adjoint's continuation,
/// `solver::rollout`) instead of capped solves that each throw the Krylov space away.
pub fn gmres_monitored<S: KrylovSpace + ?Sized>(
    space: &mut S,
    b: &[f64],
    x: &mut [f64],
    settings: &GmresSettings,
    monitor: &mut dyn FnMut(usize, f64) -> bool,
) -> Result<GmresStats, S::Error> {
    let s = GmresSlots {
        m: settings.restart,
    };
    space.reserve(s.count())?;
    space.upload(GmresSlots::B, b)?;
    let bnorm = space.dot(GmresSlots::B, GmresSlots::B)?.sqrt();
    let target = settings.rel_tol * bnorm + settings.abs_tol;
    let mut stats = GmresStats::default();
    if bnorm == 0.0 {
        x.iter_mut().for_each(|v| *v = 0.0);
        stats.converged = true;
        return Ok(stats);
    }
    space.upload(GmresSlots::X, x)?;
    let mut stopped = false;
    loop {
        // r = b - K x
        space.op(GmresSlots::X, GmresSlots::R)?;
        space.axpby(1.0, GmresSlots::B, -1.0, GmresSlots::R)?;
        let beta = space.dot(GmresSlots::R, GmresSlots::R)?.sqrt();
        stats.relative_residual = beta / bnorm;
        if beta <= target {
            stats.converged = true;
            break;
        }
        if stopped || stats.iterations >= settings.max_iter || !beta.is_finite() {
            break;
        }
        space.divide(GmresSlots::R, beta, s.v(0))?;
        let cycle = arnoldi(
            space,
            &s,
            (beta, target, bnorm),
            settings,
            &mut stats,
            monitor,
        )?;
        stopped = cycle.stopped;
        // x += Z y
        for (k, yk) in cycle.solve().iter().enumerate() {
            space.axpby(*yk, s.z(k), 1.0, GmresSlots::X)?;
        }
        if cycle.k == 0 {
            break;
        }
    }
    space.download(GmresSlots::X, x)?;
    Ok(stats)
}

/// One GMRES cycle's least-squares problem: the rotated Hessenberg matrix $R$ (upper
/// triangular in its first `k` columns) and right-hand side $g$.
struct Cycle {
    h: Vec<Vec<f64>>,
    g: Vec<f64>,
    k: usize,
    /// The monitor ended the solve.
    stopped: bool,
}

impl Cycle {
    /// $y=R^{-1}g$ by back substitution.
    fn solve(&self) -> Vec<f64> {
        let (h, g) = (&self.h, &self.g);
        let mut y = vec![0.0; self.k];
        for i in (0..self.k).rev() {
            let mut s = g[i];
            for (k, yk) in y.iter().enumerate().skip(i + 1) {
                s -= h[i][k] * yk;
            }
            y[i] = s / h[i][i];
        }
        y
    }
}

/// The Arnoldi steps of one cycle from $v_0$ (in its slot), with $\|r\|=$ `beta`: each step
/// $z_j=M^{-1}v_j$, $w=Kz_j$, two passes of Gram–Schmidt against $v_0..v_j$, the
/// previous rotations and a new one; stops when the rotated residual reaches half the
/// target, at the cap, at breakdown, after $m$ steps or when `monitor` says stop.
fn arnoldi<S: KrylovSpace + ?Sized>(
    space: &mut S,
    s: &GmresSlots,
    (beta, target, bnorm): (f64, f64, f64),
    settings: &GmresSettings,
    stats: &mut GmresStats,
    monitor: &mut dyn FnMut(usize, f64) -> bool,
) -> Result<Cycle, S::Error> {
    let m = s.m;
    let mut h = vec![vec![0.0; m]; m + 1];
    let (mut cs, mut sn) = (vec![0.0; m], vec![0.0; m]);
    let mut g = vec![0.0; m + 1];
    g[0] = beta;
    let mut k_used = 0;
    let mut stopped = false;
    for j in 0..m {
        space.precond(s.v(j), s.z(j))?;
        space.op(s.z(j), GmresSlots::W)?;
        let basis: Vec<usize> = (0..=j).map(|i| s.v(i)).collect();
        for (i, hij) in space
            .orthogonalize(GmresSlots::W, &basis)?
            .into_iter()
            .enumerate()
        {
            h[i][j] = hij;
        }
        let wn = space.dot(GmresSlots::W, GmresSlots::W)?.sqrt();
        h[j + 1][j] = wn;
        // apply previous rotations
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
        if g[j + 1].abs() <= 0.5 * target || stats.iterations >= settings.max_iter || wn == 0.0 {
            break;
        }
        if !monitor(stats.iterations, g[j + 1].abs() / bnorm) {
            stopped = true;
            break;
        }
        if j + 1 < m {
            space.divide(GmresSlots::W, wn, s.v(j + 1))?;
        }
    }
    Ok(Cycle {
        h,
        g,
        k: k_used,
        stopped,
    })
}

/// Stopping rule of [`pcg`].
#[derive(Clone, Copy, Debug)]
pub struct PcgSettings {
    pub rel_tol: f64,
    pub abs_tol: f64,
    /// Cap on iterations.
    pub max_iter: usize,
}

/// Solve `op(x) = b` from `x` (in/out) by CG preconditioned with `precond`: [`pcg_in`] on a
/// [`HostSpace`].
pub fn pcg(
    op: &mut dyn FnMut(&[f64], &mut [f64]),
    precond: &mut dyn FnMut(&[f64], &mut [f64]),
    b: &[f64],
    x: &mut [f64],
    settings: &PcgSettings,
) -> KrylovStats {
    infallible(try_pcg(lift!(op), lift!(precond), b, x, settings))
}

/// [`pcg`] with fallible closures: the first failure ends the solve and is returned.
pub fn try_pcg<E>(
    op: HostFn<'_, E>,
    precond: HostFn<'_, E>,
    b: &[f64],
    x: &mut [f64],
    settings: &PcgSettings,
) -> Result<KrylovStats, E> {
    let mut space = HostSpace::new(b.len(), op, precond);
    pcg_in(&mut space, b, x, settings)
}

/// Preconditioned CG on `space` ($K$ symmetric, $M^{-1}$ symmetric positive definite): solve
/// $Kx=b$ from `x` (in/out). Stops at $\|r\|\le$ `rel_tol`$\|b\|$ + `abs_tol` (the recurrence's
/// residual), on negative curvature ($p^TKp\le0$ or NaN; `iterations < max_iter` tells it
/// from the cap) or after `max_iter` iterations. Uploads `b` and `x`, downloads `x`.
pub fn pcg_in<S: KrylovSpace + ?Sized>(
    space: &mut S,
    b: &[f64],
    x: &mut [f64],
    settings: &PcgSettings,
) -> Result<KrylovStats, S::Error> {
    const B: usize = 0;
    const X: usize = 1;
    const R: usize = 2;
    const W: usize = 3;
    const P: usize = 4;
    const KP: usize = 5;
    space.reserve(6)?;
    space.upload(B, b)?;
    space.upload(X, x)?;
    let bnorm = space.dot(B, B)?.sqrt();
    // r = b - K x, w = M⁻¹ r, p = w
    space.op(X, R)?;
    space.axpby(1.0, B, -1.0, R)?;
    space.precond(R, W)?;
    space.copy(W, P)?;
    // r·w and ‖r‖ together (one round trip on a device), at the start and after each update
    let d = space.dots(&[(R, W), (R, R)])?;
    let (mut rw, mut rn) = (d[0], d[1].sqrt());
    let thresh = settings.rel_tol * bnorm + settings.abs_tol;
    let mut it = 0;
    let (converged, rn) = loop {
        if rn <= thresh {
            break (true, rn);
        }
        if it >= settings.max_iter {
            break (false, rn);
        }
        space.op(P, KP)?;
        let pkp = space.dot(P, KP)?;
        if pkp.is_nan() || pkp <= 0.0 {
            break (false, rn);
        }
        let a = rw / pkp;
        space.axpby(a, P, 1.0, X)?;
        space.axpby(-a, KP, 1.0, R)?;
        space.precond(R, W)?;
        let d = space.dots(&[(R, W), (R, R)])?;
        let rw_new = d[0];
        rn = d[1].sqrt();
        let beta = rw_new / rw;
        rw = rw_new;
        space.axpby(1.0, W, beta, P)?;
        it += 1;
    };
    space.download(X, x)?;
    Ok(KrylovStats {
        iterations: it,
        converged,
        relative_residual: rn / bnorm,
    })
}

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
/// as [`pcg_in`] until its residual test, the cap, an iterate outside the region or negative
/// curvature; in the last two cases the step goes along the current direction $p$ to the
/// boundary. The $M$-norms come from scalar recurrences of the CG coefficients
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

    /// An operator or preconditioner of the tests.
    trait Apply: FnMut(&[f64], &mut [f64]) + Clone {}
    impl<F: FnMut(&[f64], &mut [f64]) + Clone> Apply for F {}

    /// A symmetric *indefinite* tridiagonal operator (every 7th diagonal entry negative) and
    /// its |diagonal| preconditioner; with `skew` a non-symmetric part.
    fn system(n: usize, skew: f64) -> (impl Apply, impl Apply) {
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

    /// GMRES must solve an indefinite symmetric system to the requested tolerance.
    #[test]
    fn gmres_solves_an_indefinite_symmetric_system() {
        let n = 60;
        let (mut op, mut pre) = system(n, 0.0);
        let xs: Vec<f64> = (0..n).map(|i| (i as f64 * 0.7).sin()).collect();
        let mut b = vec![0.0; n];
        op(&xs, &mut b);
        let mut x = vec![0.0; n];
        let settings = GmresSettings {
            restart: 10,
            rel_tol: 1e-12,
            abs_tol: 0.0,
            max_iter: 500,
        };
        let st = gmres(&mut op, &mut pre, &b, &mut x, &settings);
        assert!(st.converged, "{st:?}");
        let err = xs
            .iter()
            .zip(&x)
            .map(|(a, c)| (a - c).abs())
            .fold(0.0, f64::max);
        assert!(err < 1e-9, "error {err}");
    }

    /// [`gmres_monitored`]: a monitor that always goes on changes nothing (bitwise); one
    /// that says stop after 25 iterations (restart 10) ends the solve as `max_iter` = 25
    /// does, bitwise; the estimates it reads are the true residuals of runs capped there.
    #[test]
    fn a_monitor_stop_is_the_cap() {
        let n = 60;
        let (mut op, mut pre) = system(n, 0.0);
        let b: Vec<f64> = (0..n).map(|i| (i as f64 * 0.3).cos()).collect();
        let settings = |max_iter| GmresSettings {
            restart: 10,
            rel_tol: 1e-14,
            abs_tol: 0.0,
            max_iter,
        };
        let solve = |max_iter: usize,
                     monitor: &mut dyn FnMut(usize, f64) -> bool,
                     op: &mut dyn FnMut(&[f64], &mut [f64]),
                     pre: &mut dyn FnMut(&[f64], &mut [f64])| {
            let mut x = vec![0.0; n];
            let (op, pre) = (lift!(op), lift!(pre));
            let mut space = HostSpace::new(n, op, pre);
            let st = infallible(gmres_monitored(
                &mut space,
                &b,
                &mut x,
                &settings(max_iter),
                monitor,
            ));
            (x, st)
        };
        let (x_plain, st_plain) = solve(200, &mut |_, _| true, &mut op, &mut pre);
        let mut x = vec![0.0; n];
        let st = gmres(&mut op, &mut pre, &b, &mut x, &settings(200));
        assert_eq!((x, st.iterations), (x_plain, st_plain.iterations));
        assert!(st.iterations > 25, "{st:?}");

        let mut seen = Vec::new();
        let mut stop_at_25 = |it: usize, est: f64| {
            seen.push((it, est));
            it < 25
        };
        let (x_stop, st_stop) = solve(200, &mut stop_at_25, &mut op, &mut pre);
        let (x_cap, st_cap) = solve(25, &mut |_, _| true, &mut op, &mut pre);
        assert_eq!(x_stop, x_cap);
        assert_eq!(st_stop.iterations, 25);
        assert!(!st_stop.converged);
        assert_eq!(st_stop.relative_residual, st_cap.relative_residual);
        assert_eq!(seen.len(), 25);
        assert!(seen.iter().enumerate().all(|(i, &(it, _))| it == i + 1));
        let est = seen[24].1;
        assert!(
            (est - st_cap.relative_residual).abs() <= 1e-8 * st_cap.relative_residual,
            "estimate {est:e} vs true {:e}",
            st_cap.relative_residual
        );
    }

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
