//! Interleaved (structure-of-arrays) fast path of the PD local step: [`LANES`] samples are
//! processed side by side, each scalar quantity stored as one `[f64; LANES]` array and every
//! step written as a loop over the lanes. The lanes are independent, so the dependent chains
//! of square roots and divisions of one sample overlap with those of the others (the gain is
//! the independence across samples, not wide SIMD: plain stable Rust, no SIMD crate;
//! `docs/DEPENDENCIES.md`). Nothing is allocated.
//!
//! # Algorithm
//! * $C=F^TF$ and its symmetric eigen-decomposition $C=V\Lambda V^T$ by cyclic two-sided Jacobi
//!   rotations (branch-free rotation angle), sweeps until every lane's off-diagonal part is
//!   below $10^{-16}$ of its diagonal; eigenvalues sorted descending (conditional swaps) and
//!   $\sigma_i=\sqrt{\lambda_i}$.
//! * Every output is an isotropic spectral map $p=U\,\mathrm{diag}(g(\sigma))\,V^T$ with
//!   $U=FV\Sigma^{-1}$, evaluated as $p=F\,(V\,\mathrm{diag}(g_i/\sigma_i)\,V^T)$: no $U$ is formed,
//!   and the result does not depend on the choice of $V$ within (nearly) repeated
//!   eigenvalues.
//! * Corotated + volume: $Q=w_{cor}R+w_{vol}D$, i.e. $g_i=w_{cor}+w_{vol}s_i$ with the volume
//!   stretches $s$ of [`super::volume::project_stretches`] on its principal branch
//!   ($s_j(q)=\tfrac12(\sigma_j+\sqrt{\sigma_j^2-\sigma_m^2+q^2})$, $\prod_js_j(q)=1$; $\prod s_j$ is
//!   convex and increasing in $q\ge0$, so Newton converges monotonically to the same root).
//! * Neo-Hookean: the prox stretches by the full-step Newton iteration of
//!   [`super::neohookean::prox_stretch`] (same start, same stopping tests; where the
//!   gradient test stops it, one more Newton step takes $\sigma^*$ from the tolerance
//!   $10^{-12}$ to round-off), $g_i=\sigma^*_i$.
//!
//! * Linearization of the Newton–Krylov phase and the backward ($\Delta A$,
//!   `Material::linearize_lanes`) and the PD energy of its line search
//!   (`Material::pd_energy_lanes`): the same eigen-decomposition, the signed SVD completed
//!   from $V$ and $B=FV$ exactly as [`svd::svd3`] completes its own ([`signed_svds`]: same
//!   ordering, $U,V\in SO(3)$), the volume or prox stretches above, then the laws' exact
//!   formulas for $W$, the residuals and the energy.
//!
//! # When a lane falls back
//! A lane is *not* handled here (its `ok` flag is false and the caller runs the exact code of
//! [`super::svd::svd3`] and the projections) when: any entry of $F$ is non-finite or outside
//! $[2^{-100},2^{100}]$ in magnitude, $\det F\le0$ (inverted or degenerate), the eigenvalue
//! ratio $\lambda_{\min}/\lambda_{\max}<10^{-3}$ (squaring $F$ would cost more than
//! $\approx10^{-13}$ relative accuracy in $\sigma_{\min}$), Jacobi or Newton did not converge,
//! the volume projection needs its second branch (large expansion, see `volume`), or the
//! Neo-Hookean Newton meets a non-SPD Hessian or leaves the positive octant (where the exact
//! code line-searches); for the linearization also when two singular values are within
//! [`MIN_PAIR_GAP`] but not within $10^{-6}$ of each other ([`separated_pairs`]). The results agree with the exact path to round-off (unit tests below:
//! $\le10^{-12}$ relative on random, near-degenerate and large-strain $F$).

pub use super::lanes::{Lanes, Mat3Lanes, LANES};
use super::law::NhParams;
use super::prox_consts::{PROX_TOL, SIGMA_MIN};
use super::svd::{self, Svd3};
use nalgebra::{Matrix3, Vector3};

const MAX_SWEEPS: usize = 10;
/// Lanes whose $\lambda_{\min}/\lambda_{\max}$ is below this fall back to the exact SVD.
pub const MIN_EIGEN_RATIO: f64 = 1e-3;
/// Relative gap of two singular values below which (and above $10^{-6}$) a lane's
/// linearization falls back to the exact path ([`separated_pairs`]).
pub const MIN_PAIR_GAP: f64 = 1e-3;
const MAX_VOLUME_NEWTON: usize = 30;
const MAX_NH_NEWTON: usize = 24;
const SCALE_MIN: f64 = 7.888609052210118e-31; // 2^-100
const SCALE_MAX: f64 = 1.2676506002282294e30; // 2^100

/// Eigen-decomposition of $F^TF$ per lane: $\sigma$ (descending), the eigenvectors $V$
/// (column-major per lane) and whether the lane is eligible for the fast path.
pub struct Spectral {
    pub sigma: [Lanes; 3],
    pub v: Mat3Lanes,
    pub ok: [bool; LANES],
}

/// One Jacobi rotation in the $(p,q)$ plane of the symmetric matrices `a`
/// (`a[0..3]` diagonal, `a[3]`=(0,1), `a[4]`=(0,2), `a[5]`=(1,2)), accumulated into `v`.
#[inline(always)]
fn rotate(a: &mut [Lanes; 6], v: &mut Mat3Lanes, idx: [usize; 5]) {
    let [p, q, pq, rp, rq] = idx;
    for l in 0..LANES {
        let app = a[p][l];
        let aqq = a[q][l];
        let apq = a[pq][l];
        let d = aqq - app;
        // t = tan θ = sign(d)·2a_pq / (|d| + sqrt(d² + 4a_pq²)); t = 0 when a_pq = 0.
        let t = 2.0 * apq * 1f64.copysign(d)
            / (d.abs() + (d * d + 4.0 * apq * apq).sqrt() + f64::MIN_POSITIVE);
        let c = 1.0 / (1.0 + t * t).sqrt();
        let s = t * c;
        a[p][l] = app - t * apq;
        a[q][l] = aqq + t * apq;
        a[pq][l] = 0.0;
        let arp = a[rp][l];
        let arq = a[rq][l];
        a[rp][l] = c * arp - s * arq;
        a[rq][l] = s * arp + c * arq;
        for row in 0..3 {
            let vp = v[3 * p + row][l];
            let vq = v[3 * q + row][l];
            v[3 * p + row][l] = c * vp - s * vq;
            v[3 * q + row][l] = s * vp + c * vq;
        }
    }
}

/// Swap eigenpairs `i` and `j` in the lanes where $\lambda_i<\lambda_j$.
#[inline(always)]
fn order_pair(lam: &mut [Lanes; 3], v: &mut Mat3Lanes, i: usize, j: usize) {
    for l in 0..LANES {
        let swap = lam[i][l] < lam[j][l];
        let (li, lj) = (lam[i][l], lam[j][l]);
        lam[i][l] = if swap { lj } else { li };
        lam[j][l] = if swap { li } else { lj };
        for row in 0..3 {
            let (a, b) = (v[3 * i + row][l], v[3 * j + row][l]);
            v[3 * i + row][l] = if swap { b } else { a };
            v[3 * j + row][l] = if swap { a } else { b };
        }
    }
}

/// Eigen-decomposition of $C=F^TF$ for every lane (see the module documentation).
pub fn spectral(f: &Mat3Lanes) -> Spectral {
    let mut ok = [true; LANES];
    let mut a = [[0.0; LANES]; 6];
    for l in 0..LANES {
        let mut amax = 0.0f64;
        for fr in f.iter() {
            amax = amax.max(fr[l].abs());
        }
        let det = f[0][l] * (f[4][l] * f[8][l] - f[7][l] * f[5][l])
            - f[3][l] * (f[1][l] * f[8][l] - f[7][l] * f[2][l])
            + f[6][l] * (f[1][l] * f[5][l] - f[4][l] * f[2][l]);
        // NaN compares false: non-finite lanes fail here.
        ok[l] = (SCALE_MIN..=SCALE_MAX).contains(&amax) && det > 0.0;
    }
    let dot = |i: usize, j: usize, l: usize| {
        f[3 * i][l] * f[3 * j][l]
            + f[3 * i + 1][l] * f[3 * j + 1][l]
            + f[3 * i + 2][l] * f[3 * j + 2][l]
    };
    for l in 0..LANES {
        if !ok[l] {
            // a harmless matrix for the lockstep iteration; the lane is discarded
            a[0][l] = 1.0;
            a[1][l] = 1.0;
            a[2][l] = 1.0;
            continue;
        }
        a[0][l] = dot(0, 0, l);
        a[1][l] = dot(1, 1, l);
        a[2][l] = dot(2, 2, l);
        a[3][l] = dot(0, 1, l);
        a[4][l] = dot(0, 2, l);
        a[5][l] = dot(1, 2, l);
    }
    let mut v = [[0.0; LANES]; 9];
    v[0] = [1.0; LANES];
    v[4] = [1.0; LANES];
    v[8] = [1.0; LANES];
    let mut converged = false;
    for _ in 0..MAX_SWEEPS {
        rotate(&mut a, &mut v, [0, 1, 3, 4, 5]);
        rotate(&mut a, &mut v, [0, 2, 4, 3, 5]);
        rotate(&mut a, &mut v, [1, 2, 5, 3, 4]);
        let mut all = true;
        for l in 0..LANES {
            let off = a[3][l] * a[3][l] + a[4][l] * a[4][l] + a[5][l] * a[5][l];
            let diag = a[0][l] * a[0][l] + a[1][l] * a[1][l] + a[2][l] * a[2][l];
            all &= off <= 1e-32 * diag;
        }
        if all {
            converged = true;
            break;
        }
    }
    if !converged {
        for l in 0..LANES {
            let off = a[3][l] * a[3][l] + a[4][l] * a[4][l] + a[5][l] * a[5][l];
            let diag = a[0][l] * a[0][l] + a[1][l] * a[1][l] + a[2][l] * a[2][l];
            ok[l] &= off <= 1e-32 * diag;
        }
    }
    let mut lam = [a[0], a[1], a[2]];
    order_pair(&mut lam, &mut v, 0, 1);
    order_pair(&mut lam, &mut v, 1, 2);
    order_pair(&mut lam, &mut v, 0, 1);
    let mut sigma = [[0.0; LANES]; 3];
    for l in 0..LANES {
        ok[l] &= lam[2][l] >= MIN_EIGEN_RATIO * lam[0][l];
        for i in 0..3 {
            sigma[i][l] = lam[i][l].sqrt();
        }
    }
    Spectral { sigma, v, ok }
}

/// $p=F\,V\,\mathrm{diag}(h)\,V^T$ per lane.
#[inline(always)]
fn apply_spectral(f: &Mat3Lanes, v: &Mat3Lanes, h: &[Lanes; 3], out: &mut Mat3Lanes) {
    for l in 0..LANES {
        // M = V diag(h) V^T (symmetric)
        let mut m = [0.0; 9];
        for c in 0..3 {
            for r in c..3 {
                let x = h[0][l] * v[r][l] * v[c][l]
                    + h[1][l] * v[3 + r][l] * v[3 + c][l]
                    + h[2][l] * v[6 + r][l] * v[6 + c][l];
                m[3 * c + r] = x;
                m[3 * r + c] = x;
            }
        }
        for c in 0..3 {
            for r in 0..3 {
                out[3 * c + r][l] =
                    f[r][l] * m[3 * c] + f[3 + r][l] * m[3 * c + 1] + f[6 + r][l] * m[3 * c + 2];
            }
        }
    }
}

/// Volume stretches $s$ (principal branch, see the module documentation) for sorted
/// $\sigma_0\ge\sigma_1\ge\sigma_2>0$; clears `ok` where the lane needs the exact projection.
pub fn volume_stretches(sigma: &[Lanes; 3], ok: &mut [bool; LANES]) -> [Lanes; 3] {
    let mut q = [0.0; LANES];
    let mut c = [[0.0; LANES]; 3];
    for l in 0..LANES {
        let sm = sigma[2][l];
        for j in 0..3 {
            c[j][l] = (sigma[j][l] - sm) * (sigma[j][l] + sm);
        }
        // first-order guess: s ≈ σ(1 − (J−1)/3) on the smallest stretch
        let jm1 = sigma[0][l] * sigma[1][l] * sigma[2][l] - 1.0;
        q[l] = sm * (1.0 - 2.0 / 3.0 * jm1);
        if !ok[l] || q[l].is_nan() {
            q[l] = 1.0;
        }
    }
    let mut done = [false; LANES];
    for _ in 0..MAX_VOLUME_NEWTON {
        let mut all = true;
        for l in 0..LANES {
            if done[l] {
                continue;
            }
            let mut p = 1.0;
            let mut dsum = 0.0;
            for j in 0..3 {
                let r = (c[j][l] + q[l] * q[l]).sqrt();
                let s = 0.5 * (sigma[j][l] + r);
                p *= s;
                dsum += 0.5 * q[l] / (r.max(f64::MIN_POSITIVE) * s);
            }
            let step = (p - 1.0) / (p * dsum);
            let qn = q[l] - step;
            // monotone quadratic convergence: after a step this small, q is at round-off
            done[l] = step.abs() <= 1e-13 * qn.abs();
            all &= done[l] || !ok[l];
            q[l] = if qn.is_finite() { qn } else { 1.0 };
        }
        if all {
            break;
        }
    }
    let mut s = [[0.0; LANES]; 3];
    for l in 0..LANES {
        let sm = sigma[2][l];
        let mut dist2 = 0.0;
        for j in 0..3 {
            let r = (c[j][l] + q[l] * q[l]).max(0.0).sqrt();
            s[j][l] = 0.5 * (sigma[j][l] + r);
            dist2 += (s[j][l] - sigma[j][l]) * (s[j][l] - sigma[j][l]);
        }
        let expanded = sigma[0][l] * sigma[1][l] * sigma[2][l] > 1.0;
        // the exact projection scans the second branch when this is false
        let principal_wins = !expanded || dist2 <= 0.25 * sm * sm;
        ok[l] &= done[l] && q[l] > 0.0 && principal_wins;
    }
    s
}

/// Corotated + volume local step for [`LANES`] samples:
/// $Q=w_{cor}R+w_{vol}D$ (`super::corotated::project`, `super::volume::project`). Returns
/// the lanes computed here; the others must be projected by the exact code.
pub fn corot_vol(f: &Mat3Lanes, w_cor: &Lanes, w_vol: &Lanes, q: &mut Mat3Lanes) -> [bool; LANES] {
    let sp = spectral(f);
    let mut ok = sp.ok;
    let s = volume_stretches(&sp.sigma, &mut ok);
    let mut h = [[0.0; LANES]; 3];
    for l in 0..LANES {
        for i in 0..3 {
            h[i][l] = (w_cor[l] + w_vol[l] * s[i][l]) / sp.sigma[i][l];
        }
    }
    apply_spectral(f, &sp.v, &h, q);
    ok
}

/// Neo-Hookean prox step for [`LANES`] samples: $Q=w\,U\,\mathrm{diag}(\sigma^*)V^T$
/// (`super::neohookean::prox`). `warm` holds, per lane, the previous $\sigma^*$ (descending
/// order of $\sigma$, as the exact path stores it; used when its first entry is $>0$) and is
/// updated on the lanes computed here. Returns those lanes.
pub fn nh_prox(
    f: &Mat3Lanes,
    params: &[NhParams; LANES],
    w: &Lanes,
    warm: &mut [[f64; 3]; LANES],
    q: &mut Mat3Lanes,
) -> [bool; LANES] {
    let sp = spectral(f);
    let mut ok = sp.ok;
    let x = nh_stretches(&sp.sigma, params, warm, &mut ok);
    let mut h = [[0.0; LANES]; 3];
    for l in 0..LANES {
        if ok[l] {
            for i in 0..3 {
                h[i][l] = w[l] * x[l][i] / sp.sigma[i][l];
            }
        }
    }
    apply_spectral(f, &sp.v, &h, q);
    ok
}

/// Neo-Hookean prox stretches $\sigma^*$ (`super::neohookean::prox_stretch`, see the module
/// documentation) of [`LANES`] samples with singular values `sigma`. `warm` as in
/// [`nh_prox`] (all zero: cold starts from $\max(\sigma,\sigma_{\min})$, as the exact
/// linearization and energy start), updated on the lanes computed here; clears `ok` where
/// the exact solver is needed.
pub fn nh_stretches(
    sigma: &[Lanes; 3],
    params: &[NhParams; LANES],
    warm: &mut [[f64; 3]; LANES],
    ok: &mut [bool; LANES],
) -> [[f64; 3]; LANES] {
    let mut st: [NhLane; LANES] = std::array::from_fn(|l| {
        let s = [sigma[0][l], sigma[1][l], sigma[2][l]];
        NhLane::new(&params[l], s, &warm[l], ok[l])
    });
    // lockstep Newton: one step of every active lane per round (independent chains overlap)
    for _ in 0..MAX_NH_NEWTON {
        let mut active = false;
        for (l, lane) in st.iter_mut().enumerate() {
            if lane.state == NhState::Active {
                lane.step(&params[l]);
                active |= lane.state == NhState::Active;
            }
        }
        if !active {
            break;
        }
    }
    for l in 0..LANES {
        ok[l] &= st[l].state == NhState::Done;
        if ok[l] {
            warm[l] = st[l].x;
        }
    }
    std::array::from_fn(|l| st[l].x)
}

/// Signed SVDs $F=U\,\mathrm{diag}(\sigma)V^T$ ($U,V\in SO(3)$) of the lanes from [`spectral`]:
/// $V$ the eigenvectors of $F^TF$, $B=FV$, completed by [`svd::complete`] (the last step of
/// [`svd::svd3`]: $\sigma_i=\|b_i\|$, $U$ by Gram–Schmidt and a cross product, the same
/// ordering and sign conventions). Returns the SVDs, their $\sigma$ as lanes and the lanes
/// eligible for the fast path ([`spectral`]'s tests); the other lanes hold the identity.
pub fn signed_svds(f: &Mat3Lanes) -> ([Svd3; LANES], [Lanes; 3], [bool; LANES]) {
    let sp = spectral(f);
    let mut sigma = [[1.0; LANES]; 3];
    let svd = std::array::from_fn(|l| {
        if !sp.ok[l] {
            return Svd3 {
                u: Matrix3::identity(),
                sigma: Vector3::repeat(1.0),
                v: Matrix3::identity(),
            };
        }
        let v = lane(&sp.v, l);
        let out = svd::complete(&(lane(f, l) * v), &v);
        for (i, s) in sigma.iter_mut().enumerate() {
            s[l] = out.sigma[i];
        }
        out
    });
    (svd, sigma, sp.ok)
}

/// The $3\times3$ matrix of lane `l`.
#[inline]
pub fn lane(m: &Mat3Lanes, l: usize) -> Matrix3<f64> {
    Matrix3::from_fn(|r, c| m[3 * c + r][l])
}

/// Clears `ok` on the lanes where a pair of singular values is close but not equal,
/// $10^{-6}<|\sigma_i-\sigma_j|/\max(\sigma_i,\sigma_j)<$ [`MIN_PAIR_GAP`]: there the divided
/// differences $(\sigma^*_i-\sigma^*_j)/(\sigma_i-\sigma_j)$ of the linearization amplify the
/// round-off of $\sigma$ (which differs between the two SVD algorithms) by the inverse gap, and
/// near `svd::DEGENERATE_REL_TOL` the two paths may take different branches of
/// `svd::spectral_pair_coefficients`. Below $10^{-6}$ both take its degenerate branch.
pub fn separated_pairs(sigma: &[Lanes; 3], ok: &mut [bool; LANES]) {
    for l in 0..LANES {
        for (i, j) in [(0, 1), (0, 2), (1, 2)] {
            let (a, b) = (sigma[i][l], sigma[j][l]);
            let gap = (a - b).abs() / a.abs().max(b.abs());
            ok[l] &= !(gap > 1e-6 && gap < MIN_PAIR_GAP);
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum NhState {
    Active,
    Done,
    Failed,
}

/// Newton state of one lane of the prox-stretch solve: full Newton steps, the exact
/// solver's iteration when its line search accepts every full step (same start, same
/// stopping tests, plus one Newton step after the gradient test is met); `Failed` where
/// the exact solver is needed.
struct NhLane {
    sigma: [f64; 3],
    x: [f64; 3],
    lj: f64,
    tol: f64,
    state: NhState,
}

impl NhLane {
    fn new(p: &NhParams, sigma: [f64; 3], warm: &[f64; 3], ok: bool) -> Self {
        let clamp = |v: f64| if v > SIGMA_MIN { v } else { SIGMA_MIN };
        let from = if warm[0] > 0.0 && warm.iter().all(|v| v.is_finite()) {
            warm
        } else {
            &sigma
        };
        let x = [clamp(from[0]), clamp(from[1]), clamp(from[2])];
        let params_ok = p.k > 0.0 && p.k.is_finite() && p.mu.is_finite() && p.lambda.is_finite();
        let snorm = (sigma[0] * sigma[0] + sigma[1] * sigma[1] + sigma[2] * sigma[2]).sqrt();
        NhLane {
            sigma,
            x,
            lj: (x[0] * x[1] * x[2]).ln(),
            tol: PROX_TOL * p.k * snorm.max(1.0),
            state: if ok && params_ok {
                NhState::Active
            } else {
                NhState::Failed
            },
        }
    }

    #[inline(always)]
    fn step(&mut self, p: &NhParams) {
        let (mu, lambda, k) = (p.mu, p.lambda, p.k);
        let (x, lj, sigma) = (self.x, self.lj, &self.sigma);
        let inv = [1.0 / x[0], 1.0 / x[1], 1.0 / x[2]];
        let mut g = [0.0; 3];
        for i in 0..3 {
            g[i] = mu * x[i] + (lambda * lj - mu) * inv[i] + k * (x[i] - sigma[i]);
        }
        let gnorm = (g[0] * g[0] + g[1] * g[1] + g[2] * g[2]).sqrt();
        // H̃ = diag(μ + k + (μ − λ ln J)/x_i²) + λ u uᵀ, u = 1/x; its Cholesky factor
        let dd = mu - lambda * lj;
        let h00 = mu + k + (dd + lambda) * inv[0] * inv[0];
        let h11 = mu + k + (dd + lambda) * inv[1] * inv[1];
        let h22 = mu + k + (dd + lambda) * inv[2] * inv[2];
        let h10 = lambda * inv[1] * inv[0];
        let h20 = lambda * inv[2] * inv[0];
        let h21 = lambda * inv[2] * inv[1];
        self.state = NhState::Failed;
        if h00 <= 0.0 {
            return;
        }
        let l00 = h00.sqrt();
        let r00 = 1.0 / l00;
        let l10 = h10 * r00;
        let l20 = h20 * r00;
        let p11 = h11 - l10 * l10;
        if p11 <= 0.0 {
            return;
        }
        let l11 = p11.sqrt();
        let r11 = 1.0 / l11;
        let l21 = (h21 - l20 * l10) * r11;
        let p22 = h22 - l20 * l20 - l21 * l21;
        if !(p22 > 0.0 && p22.is_finite()) {
            return;
        }
        let converged = gnorm <= self.tol;
        let r22 = 1.0 / p22.sqrt();
        let y0 = g[0] * r00;
        let y1 = (g[1] - l10 * y0) * r11;
        let y2 = (g[2] - l20 * y0 - l21 * y1) * r22;
        let z2 = y2 * r22;
        let z1 = (y1 - l21 * z2) * r11;
        let z0 = (y0 - l10 * z1 - l20 * z2) * r00;
        let xn = [x[0] - z0, x[1] - z1, x[2] - z2];
        if converged {
            // The exact solver stops here; one more Newton step (quadratic convergence) puts
            // σ* at round-off instead of at the tolerance, so the local step is smooth in F to
            // round-off (finite differences of the forward see less noise).
            if xn[0] > 0.0 && xn[1] > 0.0 && xn[2] > 0.0 {
                self.x = xn;
            }
            self.state = NhState::Done;
            return;
        }
        if !(xn[0] > 0.0 && xn[1] > 0.0 && xn[2] > 0.0) {
            return;
        }
        // the exact solver's Armijo test (c₁ = 1e-4) on the full step; where it fails the
        // exact solver backtracks, so the lane falls back
        let slope = g[0] * z0 + g[1] * z1 + g[2] * z2;
        let phi0 = phi(p, sigma, &x, lj);
        let ljn = (xn[0] * xn[1] * xn[2]).ln();
        let phin = phi(p, sigma, &xn, ljn);
        let armijo = phin <= phi0 - 1e-4 * slope;
        if !armijo {
            // below round-off the exact solver accepts on a decrease of ‖g‖ instead
            let scale = 0.5 * mu * (x[0] * x[0] + x[1] * x[1] + x[2] * x[2] + 3.0)
                + mu * lj.abs()
                + 0.5 * lambda * lj * lj;
            if slope.abs() > 64.0 * f64::EPSILON * (scale + (phi0 - scale).abs()) {
                return;
            }
        }
        let dx = (z0 * z0 + z1 * z1 + z2 * z2).sqrt();
        self.x = xn;
        self.lj = ljn;
        let xnorm = (xn[0] * xn[0] + xn[1] * xn[1] + xn[2] * xn[2]).sqrt();
        self.state = if dx <= 1e-12 * xnorm.max(1.0) {
            NhState::Done
        } else {
            NhState::Active
        };
    }
}

/// $\varphi(x)=\bar\psi(x)+\frac{\bar k}2\|x-\sigma\|^2$ with $\ln J$ given.
#[inline(always)]
fn phi(p: &NhParams, sigma: &[f64; 3], x: &[f64; 3], lj: f64) -> f64 {
    let mut n2 = 0.0;
    let mut d2 = 0.0;
    for i in 0..3 {
        n2 += x[i] * x[i];
        d2 += (x[i] - sigma[i]) * (x[i] - sigma[i]);
    }
    0.5 * p.mu * (n2 - 3.0) - p.mu * lj + 0.5 * p.lambda * lj * lj + 0.5 * p.k * d2
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::material::corotated::Corotated;
    use crate::material::fd::Rng;
    use crate::material::law::{mat9_of, HessianFilter, Linearization, Mat9, Material, PdWeights};
    use crate::material::neohookean::Neohookean;
    use crate::material::svd::{svd3, SpectralLinear};
    use crate::material::{corotated, neohookean, volume};

    fn to_lanes(fs: &[Matrix3<f64>]) -> Mat3Lanes {
        let mut out = [[0.0; LANES]; 9];
        for (l, f) in fs.iter().enumerate() {
            for (k, v) in f.iter().enumerate() {
                out[k][l] = *v;
            }
        }
        out
    }

    /// Random F: rotations times stretches from a mix of regimes (small strain, large
    /// strain, near-repeated, exactly repeated, near-degenerate, inverted, zero).
    fn random_fs(rng: &mut Rng, n: usize) -> Vec<Matrix3<f64>> {
        (0..n)
            .map(|i| {
                let s = match i % 10 {
                    0 => Vector3::new(
                        1.0 + rng.uniform(-0.05, 0.05),
                        1.0 + rng.uniform(-0.05, 0.05),
                        1.0 + rng.uniform(-0.05, 0.05),
                    ),
                    1 => Vector3::new(
                        rng.uniform(0.3, 2.5),
                        rng.uniform(0.3, 2.5),
                        rng.uniform(0.3, 2.5),
                    ),
                    2 => Vector3::new(1.1, 1.1 + 1e-9, 0.95),
                    3 => Vector3::new(1.0, 1.0, 1.0),
                    4 => Vector3::new(1.0 + 1e-12, 1.0, 1.0 - 1e-12),
                    5 => Vector3::new(rng.uniform(0.5, 1.5), 1.0, -rng.uniform(0.1, 0.9)),
                    6 => Vector3::new(3.0, 0.05, 0.01),
                    7 => Vector3::new(2.5, 2.4, 2.3),
                    8 => Vector3::new(rng.uniform(0.9, 1.1), 0.06, 0.05),
                    _ => Vector3::new(1.4, 1.0, 0.7),
                };
                let mut f = rng.with_stretches(&s);
                if i % 37 == 36 {
                    f = Matrix3::zeros();
                }
                if i % 41 == 40 {
                    f[(1, 2)] = f64::NAN;
                }
                f
            })
            .collect()
    }

    /// The fast corotated + volume step equals the exact one to ≤ 1e-12 relative on every
    /// lane it accepts; it accepts every well-conditioned uninverted sample and refuses the
    /// inverted, degenerate and non-finite ones.
    #[test]
    fn corot_vol_matches_exact_path() {
        let mut rng = Rng(2024);
        let fs = random_fs(&mut rng, 8000);
        let (mut worst, mut accepted) = (0.0f64, 0);
        for chunk in fs.chunks(LANES) {
            let w_cor: Lanes = std::array::from_fn(|l| 1.0 + 0.1 * l as f64);
            let w_vol: Lanes = std::array::from_fn(|l| 3.0 - 0.2 * l as f64);
            let mut q = [[0.0; LANES]; 9];
            let ok = corot_vol(&to_lanes(chunk), &w_cor, &w_vol, &mut q);
            for (l, f) in chunk.iter().enumerate() {
                let usv = svd3(f);
                let well = usv.sigma[2] > 0.0
                    && usv.sigma[2] * usv.sigma[2]
                        >= 1.01 * MIN_EIGEN_RATIO * usv.sigma[0] * usv.sigma[0]
                    && usv.sigma.product() < 1.5;
                if !ok[l] {
                    assert!(!well, "well-conditioned F refused: {f}");
                    continue;
                }
                accepted += 1;
                assert!(usv.sigma[2] > 0.0, "inverted F accepted");
                let exact =
                    corotated::project(&usv) * w_cor[l] + volume::project(&usv).0 * w_vol[l];
                let err = (lane(&q, l) - exact).norm() / exact.norm();
                worst = worst.max(err);
                assert!(err <= 1e-12, "lane differs by {err:e} at {f}");
            }
        }
        eprintln!(
            "corot+vol fast vs exact: {accepted} of {} accepted, worst {worst:.2e}",
            fs.len()
        );
        assert!(accepted > fs.len() / 2);
    }

    /// The fast Neo-Hookean prox step equals the exact one to ≤ 1e-12 relative (cold and
    /// warm starts), and writes the same warm start.
    #[test]
    fn nh_prox_matches_exact_path() {
        let mut rng = Rng(99);
        let fs = random_fs(&mut rng, 4000);
        let base = NhParams::new(1.3e5, 4.1e5);
        let (mut worst, mut accepted) = (0.0f64, 0);
        for (c, chunk) in fs.chunks(LANES).enumerate() {
            let params: [NhParams; LANES] =
                std::array::from_fn(|l| base.scaled(1.0 + 0.3 * l as f64));
            let w: Lanes = std::array::from_fn(|l| 0.5 + l as f64);
            // half the blocks warm-started from a perturbed solution, half cold
            let mut warm = [[0.0; 3]; LANES];
            for (l, f) in chunk.iter().enumerate() {
                if c % 2 == 1 {
                    let s = neohookean::prox(&params[l], &svd3(f), None).1.sigma_star;
                    warm[l] = [s[0] * 1.01, s[1] * 0.99, s[2]];
                }
            }
            let warm0 = warm;
            let mut q = [[0.0; LANES]; 9];
            let ok = nh_prox(&to_lanes(chunk), &params, &w, &mut warm, &mut q);
            for (l, f) in chunk.iter().enumerate() {
                if !ok[l] {
                    assert_eq!(warm[l], warm0[l], "refused lane's warm start changed");
                    continue;
                }
                accepted += 1;
                let usv = svd3(f);
                let start = Vector3::from(warm0[l]);
                let start = if start[0] > 0.0 { Some(start) } else { None };
                let (p, st) = neohookean::prox(&params[l], &usv, start.as_ref());
                let exact = p * w[l];
                let err = (lane(&q, l) - exact).norm() / exact.norm();
                worst = worst.max(err);
                assert!(err <= 1e-12, "lane differs by {err:e} at {f}");
                let werr = (Vector3::from(warm[l]) - st.sigma_star).norm() / st.sigma_star.norm();
                assert!(werr <= 1e-12, "warm start differs by {werr:e}");
            }
        }
        eprintln!(
            "NH fast vs exact: {accepted} of {} accepted, worst {worst:.2e}",
            fs.len()
        );
        assert!(accepted > fs.len() / 2);
    }

    /// F with a nearly repeated pair of singular values (relative gaps log-uniform in
    /// $[10^{-11},10^{-1}]$, so across `svd::DEGENERATE_REL_TOL` and [`MIN_PAIR_GAP`]) and with
    /// large strains ($\sigma$ up to 4, eigenvalue ratio down to the fast path's limit).
    fn degenerate_and_large_fs(rng: &mut Rng, n: usize) -> Vec<Matrix3<f64>> {
        (0..n)
            .map(|i| {
                let a = rng.uniform(0.4, 2.0);
                let gap = 10f64.powf(rng.uniform(-11.0, -1.0));
                let s = match i % 4 {
                    0 => Vector3::new(a * (1.0 + gap), a, rng.uniform(0.3, 0.39)),
                    1 => Vector3::new(2.1, a * (1.0 + gap), a),
                    2 => Vector3::new(rng.uniform(2.0, 4.0), rng.uniform(1.0, 3.0), 0.15),
                    _ => Vector3::new(rng.uniform(0.2, 0.5), rng.uniform(0.2, 0.5), 0.2),
                };
                rng.with_stretches(&s)
            })
            .collect()
    }

    /// The exact prox stretches (`neohookean::prox_stretch`, cold start) taken from its
    /// stopping test ($\|g\|\le10^{-12}\bar k\max(1,\|\sigma\|)$, which leaves $\sigma^*$ up to
    /// $\approx10^{-12}$ off) to round-off by two more Newton steps on
    /// $g=\nabla\bar\psi+\bar k(\hat\sigma-\sigma)$: the reference of the Neo-Hookean lanes, whose
    /// Newton takes one step past that test.
    fn polished_prox_stretches(p: &NhParams, sigma: &Vector3<f64>) -> Vector3<f64> {
        let mut x = neohookean::prox_stretch(p, sigma, None).sigma_star;
        for _ in 0..2 {
            let g = neohookean::stretch_gradient(p, &x) + (x - sigma) * p.k;
            let h = neohookean::stretch_hessian(p, &x) + Matrix3::identity() * p.k;
            if let Some(dx) = h.lu().solve(&g) {
                x -= dx;
            }
        }
        x
    }

    /// The 9×9 map $dQ/dF$ of a linearization, plain and capped at `cap` (the projected
    /// Jacobian of the Newton–Krylov phase).
    fn maps<M: Material>(lin: &Linearization, cap: f64) -> (Mat9, Mat9) {
        let sl = SpectralLinear::from_coefficients(M::spectral_coefficients(lin));
        let capped = sl.capped(cap);
        (mat9_of(|df| sl.apply(df)), mat9_of(|df| capped.apply(df)))
    }

    /// Worst relative differences of [`Material::linearize_lanes`] (map, capped map, residuals,
    /// stretches, stretch Jacobian) and [`Material::pd_energy_lanes`] from the exact path, and
    /// the number of lanes each accepted; asserts the signed-SVD conventions on every
    /// accepted lane.
    fn compare_lanes<M: Material>(
        fs: &[Matrix3<f64>],
        weights: impl Fn(usize) -> PdWeights,
        body: impl Fn(usize) -> NhParams,
        filter: HessianFilter,
        reference: impl Fn(&Matrix3<f64>, &PdWeights, &NhParams) -> Linearization,
    ) -> ([f64; 2], [usize; 2]) {
        let (mut worst, mut accepted) = ([0.0f64; 2], [0usize; 2]);
        for chunk in fs.chunks_exact(LANES) {
            let f = to_lanes(chunk);
            let w: Vec<PdWeights> = (0..LANES).map(&weights).collect();
            let lins = M::linearize_lanes(&f, &w, &body, filter);
            let energies = M::pd_energy_lanes(&f, &w, &body);
            for (l, fl) in chunk.iter().enumerate() {
                let usv = svd3(fl);
                let exact = reference(fl, &w[l], &body(l));
                let cap = 0.8 * (w[l][0] + w[l][1]);
                if let Some(lin) = lins[l] {
                    accepted[0] += 1;
                    let (u, v, sg) = (lin.svd.u, lin.svd.v, lin.svd.sigma);
                    assert!((u.determinant() - 1.0).abs() < 1e-13, "det U");
                    assert!((v.determinant() - 1.0).abs() < 1e-13, "det V");
                    assert!(
                        sg[0] >= sg[1] && sg[1] >= sg[2] && sg[2] > 0.0,
                        "order {sg}"
                    );
                    let (jm, jc) = maps::<M>(&lin, cap);
                    let (em, ec) = maps::<M>(&exact, cap);
                    let fnorm = fl.norm();
                    let errs = [
                        (jm - em).norm() / em.norm(),
                        (jc - ec).norm() / ec.norm(),
                        (lin.residual[0] - exact.residual[0]).norm() / fnorm,
                        (lin.residual[1] - exact.residual[1]).norm() / fnorm,
                        (lin.star - exact.star).norm() / exact.star.norm(),
                        (lin.jac - exact.jac).norm() / exact.jac.norm().max(1e-300),
                    ];
                    let e = errs.iter().fold(0.0f64, |a, &b| a.max(b));
                    assert!(e <= 1e-12, "linearization differs by {errs:?} at {fl}");
                    assert_eq!(lin.filtered, exact.filtered);
                    worst[0] = worst[0].max(e);
                }
                if let Some(e) = energies[l] {
                    accepted[1] += 1;
                    let ex = M::pd_energy(fl, &usv, &w[l], &body(l));
                    // absolute round-off of ‖F − p‖² in either path: ε w ‖F‖ ‖F − p‖
                    let scale = (w[l][0] + w[l][1]) * fl.norm_squared();
                    let err = (e - ex).abs() / (ex.abs() + 1e-4 * scale);
                    assert!(err <= 1e-12, "energy differs by {err:e} at {fl}");
                    worst[1] = worst[1].max(err);
                }
            }
        }
        (worst, accepted)
    }

    /// The interleaved linearization and PD energy of both laws equal the exact path to
    /// ≤ 1e-12 relative (the 9×9 map $dQ/dF$ plain and capped, the residuals, $\sigma^*$ and $W$;
    /// the energy), with the signed-SVD conventions, on random, nearly repeated and
    /// large-strain F; the refused lanes are the inverted, degenerate, non-finite and nearly
    /// repeated ones.
    #[test]
    fn linearization_and_energy_match_exact_path() {
        let mut rng = Rng(31);
        let mut fs = random_fs(&mut rng, 4000);
        fs.extend(degenerate_and_large_fs(&mut rng, 4000));
        let n = fs.len();
        let cor = |l: usize| [2.0 * (1.0 + 0.1 * l as f64), 3.0 - 0.2 * l as f64];
        let body = |_| NhParams::new(1.0, 1.0);
        let filter = HessianFilter::None;
        let exact = |f: &Matrix3<f64>, w: &PdWeights, b: &NhParams| {
            Corotated::linearize(f, svd3(f), w, b, filter)
        };
        let (worst, acc) = compare_lanes::<Corotated>(&fs, cor, body, filter, exact);
        eprintln!(
            "corotated lanes: linearization {} / energy {} of {n} accepted, worst {:.2e} / {:.2e}",
            acc[0], acc[1], worst[0], worst[1]
        );
        assert!(acc[0] > n / 2 && acc[1] > n / 2);
        let base = NhParams::new(1.3e5, 4.1e5);
        let nh = |l: usize| [0.5 + l as f64, 0.0];
        for filter in [HessianFilter::None, HessianFilter::Blend(0.5)] {
            let body = |l: usize| base.scaled(1.0 + 0.3 * l as f64);
            let exact = |f: &Matrix3<f64>, w: &PdWeights, b: &NhParams| {
                let usv = svd3(f);
                let star = polished_prox_stretches(b, &usv.sigma);
                neohookean::linearization(f, usv, star, w, b, filter)
            };
            let (worst, acc) = compare_lanes::<Neohookean>(&fs, nh, body, filter, exact);
            eprintln!("NH lanes ({filter:?}): linearization {} / energy {} of {n} accepted, worst {:.2e} / {:.2e}", acc[0], acc[1], worst[0], worst[1]);
            assert!(acc[0] > n / 2 && acc[1] > n / 2);
        }
    }
}
