//! Restarted GMRES with right preconditioning on a [`KrylovSpace`] ([`gmres_in`]; on host
//! closures [`gmres`]).

use super::{infallible, GmresStats, HostFn, HostSpace, KrylovSpace};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linalg::krylov::tests::system;

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
}
