//! Preconditioned CG on a [`KrylovSpace`] ([`pcg_in`]; on host closures [`pcg`]).

use super::{infallible, HostFn, HostSpace, KrylovSpace, KrylovStats};

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
