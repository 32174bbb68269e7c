//! Matrix-free contact solve (`[contact] solver = "iterative"`): the Delassus operator
//! $W=JA^{-1}J^T$ is applied through the persistent factor, one solve per product
//! ($Wv=J\,A^{-1}(J^Tv)$, three axes at once), and never formed; the semismooth Newton systems
//! $(DW+E)\Delta\lambda=-\Phi$ are solved by right-preconditioned GMRES.
//!
//! Cost per product: one solve with the factor plus $O(\text{rows})$ for $J$ and $J^T$,
//! independent of how many contacts are coupled; the dense form's $O(\text{rows}^2)$ matrix
//! and $O(\text{coupled}^3)$ LU are gone. Set-up per step: one product (the scale of the
//! preconditioner); the dense form needs one solve per contact node.
//!
//! Preconditioner: block-diagonal per contact, $P_j=s_jD_j+E_j$ with the diagonal block
//! $W_{jj}$ approximated by $s_jI$: $s_j=\rho\,\kappa_j(1+\sum_kw_k^2)$, where $\kappa_j=h^2/m_i$ is
//! the FB scale (the mass-only value of $(A^{-1})_{ii}$, exact when inertia dominates) and
//! $\rho=v^TWv/\sum_j\kappa_j$ for a fixed $\pm1$ vector $v$ on the normal rows (a one-sample
//! trace estimate that corrects for the stiffness). Separated contacts ($D_j=0$) are solved
//! exactly by it. Contacts are rows of 1 (frictionless) or 3 rows with orthonormal directions,
//! so $s_jI$ is the right shape of $W_{jj}$ for obstacle contacts.
//!
//! Answers: the Newton iteration stops on the same exact residual $\|\Phi\|_\infty\le$
//! `tolerance` as the dense form (the gaps $\delta=\delta_0+W\lambda$ are always computed with the
//! exact operator), so both forms meet the same contact conditions; only the path differs.

use super::ncp::Local;
use super::{inf_norm, residual, ContactSet, SolveInfo, SolveSettings, REGULARIZATION};
use crate::linalg::krylov::{try_gmres, GmresSettings};
use crate::linalg::{LinalgError, LinearSolver};
use nalgebra::{Matrix3, Vector3};

/// Relative GMRES tolerance of each Newton step (forcing term): the step solves the Newton
/// system to $10^{-2}\|\Phi\|$, plus a tenth of the contact tolerance absolutely (measured on
/// 40 frames of the 25×25 napkin at 50 % contact: 9640 products at $10^{-2}$, 11692 at
/// $10^{-4}$, 14029 at $10^{-6}$; the Newton iterations barely change).
pub const FORCING: f64 = 1e-2;
/// GMRES restart length of the contact solves.
pub const RESTART: usize = 60;
/// Cap on GMRES iterations per Newton step.
pub const MAX_KRYLOV: usize = 600;

/// The matrix-free Delassus operator of a step: only the preconditioner scales.
#[derive(Clone, Debug)]
pub struct MatrixFree {
    /// $s_j$: the approximation $W_{jj}\approx s_jI$ of every contact's diagonal block.
    pub scale: Vec<f64>,
}

/// Deterministic ±1 of index `j` (a fixed probe vector).
fn sign(j: usize) -> f64 {
    let mut x = (j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    if x & 1 == 0 {
        1.0
    } else {
        -1.0
    }
}

impl MatrixFree {
    /// Preconditioner scales of `set` (one product with $W$); fails where the solver does.
    pub fn new(set: &ContactSet, solver: &dyn LinearSolver) -> Result<MatrixFree, LinalgError> {
        let base: Vec<f64> = (0..set.len())
            .map(|j| {
                let w2: f64 = set.tri[j]
                    .map(|t| t.w.iter().map(|w| w * w).sum())
                    .unwrap_or(0.0);
                set.kappa[j] * (1.0 + w2)
            })
            .collect();
        let mut v = vec![0.0; set.nrows()];
        for j in 0..set.len() {
            v[set.offset[j]] = sign(j);
        }
        let wv = apply_w(set, solver, &v)?;
        let vwv: f64 = v.iter().zip(&wv).map(|(a, b)| a * b).sum();
        let tr: f64 = base.iter().sum();
        let rho = if vwv.is_finite() && vwv > 0.0 && tr > 0.0 {
            (vwv / tr).clamp(1e-12, 1e3)
        } else {
            1.0
        };
        Ok(MatrixFree {
            scale: base.iter().map(|b| b * rho).collect(),
        })
    }
}

/// $Wv=J\,A^{-1}J^Tv$ (all rows; one solve).
pub fn apply_w(
    set: &ContactSet,
    solver: &dyn LinearSolver,
    v: &[f64],
) -> Result<Vec<f64>, LinalgError> {
    let n3 = 3 * solver.num_nodes();
    let mut q = vec![0.0; n3];
    set.add_jt(v, &mut q);
    let mut z = vec![0.0; n3];
    solver.solve_homogeneous(&q, &mut z)?;
    Ok(set.apply_j(&z))
}

/// `out += X lambda` $=A^{-1}J^T\lambda$ (one solve).
pub fn add_x(
    set: &ContactSet,
    solver: &dyn LinearSolver,
    lambda: &[f64],
    out: &mut [f64],
) -> Result<(), LinalgError> {
    if lambda.iter().all(|l| *l == 0.0) {
        return Ok(());
    }
    let n3 = 3 * solver.num_nodes();
    let mut q = vec![0.0; n3];
    set.add_jt(lambda, &mut q);
    let mut z = vec![0.0; n3];
    solver.solve_homogeneous(&q, &mut z)?;
    for (o, v) in out.iter_mut().zip(&z) {
        *o += v;
    }
    Ok(())
}

/// Inverse of the leading `nr`×`nr` block of `p` (the diagonal's reciprocals, 1 where zero,
/// if singular).
pub(crate) fn block_inverse(p: &Matrix3<f64>, nr: usize) -> Matrix3<f64> {
    let mut out = Matrix3::zeros();
    let inv = match nr {
        1 => (p[(0, 0)] != 0.0).then(|| {
            let mut m = Matrix3::zeros();
            m[(0, 0)] = 1.0 / p[(0, 0)];
            m
        }),
        _ => p.try_inverse().filter(|m| m.iter().all(|v| v.is_finite())),
    };
    match inv {
        Some(m) => out = m,
        None => {
            for a in 0..nr {
                let d = p[(a, a)];
                out[(a, a)] = if d != 0.0 { 1.0 / d } else { 1.0 };
            }
        }
    }
    out
}

/// Pad a `nr`×`nr` block to 3×3 with the identity (so that frictionless blocks invert).
fn padded(p: Matrix3<f64>, nr: usize) -> Matrix3<f64> {
    let mut q = p;
    for a in nr..3 {
        for b in 0..3 {
            q[(a, b)] = 0.0;
            q[(b, a)] = 0.0;
        }
        q[(a, a)] = 1.0;
    }
    q
}

/// A Newton trial: (‖Φ‖², λ, δ, Φ).
type Trial = (f64, Vec<f64>, Vec<f64>, Vec<f64>);

/// Solve $\Phi(\delta_0+W\lambda,\lambda)=0$ for $\lambda$ (in/out, warm start) as
/// [`super::solve`] does, with the matrix-free $W$: each semismooth Newton step solves
/// $(DW+E+\sigma I)\Delta\lambda=-\Phi$ by GMRES (block preconditioner $P_j=s_jD_j+E_j$, forcing
/// term [`FORCING`]); $W\Delta\lambda$ is formed once per step, so the Armijo trials are free.
/// $\sigma$ is the dense form's relative shift ([`REGULARIZATION`]) for redundant rows.
/// Fails where a solve with `solver` does.
pub fn solve(
    set: &ContactSet,
    mf: &MatrixFree,
    solver: &dyn LinearSolver,
    u: &[f64],
    lambda: &mut [f64],
    s: &SolveSettings,
    tol: f64,
) -> Result<SolveInfo, LinalgError> {
    let t0 = std::time::Instant::now();
    let m = set.nrows();
    let d0 = set.delta(u);
    let mut lam = lambda.to_vec();
    let mut info = SolveInfo::default();
    let mut delta = d0.clone();
    if lam.iter().any(|l| *l != 0.0) {
        let wl = apply_w(set, solver, &lam)?;
        info.products += 1;
        for (d, w) in delta.iter_mut().zip(&wl) {
            *d += w;
        }
    }
    let mut f = residual(set, &delta, &lam, &s.fb);
    let mut fn2: f64 = f.iter().map(|v| v * v).sum();
    while info.iterations < s.max_newton
        && (inf_norm(&f) > tol || (info.iterations == 0 && inf_norm(&f) > s.tolerance))
    {
        if let Err(c) = s
            .cancel
            .poll(crate::cancel::Stage::Contact, info.iterations)
        {
            info.cancelled = Some(c);
            break;
        }
        if s.out_of_time(t0) {
            info.timed_out = true;
            break;
        }
        let locals = set.locals(&delta, &lam, &s.fb);
        let blocks: Vec<Matrix3<f64>> = locals
            .iter()
            .enumerate()
            .map(|(j, l)| l.d * mf.scale[j] + l.e)
            .collect();
        let dmax = blocks
            .iter()
            .enumerate()
            .flat_map(|(j, b)| (0..set.rows(j).len()).map(move |a| b[(a, a)].abs()))
            .fold(0.0f64, f64::max);
        let shift = REGULARIZATION * dmax;
        let pinv: Vec<Matrix3<f64>> = blocks
            .iter()
            .enumerate()
            .map(|(j, b)| {
                let nr = set.rows(j).len();
                block_inverse(&padded(b + Matrix3::identity() * shift, nr), nr)
            })
            .collect();
        let mut products = 0;
        let mut op = |v: &[f64], out: &mut [f64]| {
            let wv = apply_w(set, solver, v)?;
            products += 1;
            newton_rows(set, &locals, shift, v, &wv, out);
            Ok(())
        };
        let mut pre = |v: &[f64], out: &mut [f64]| {
            apply_blocks(set, &pinv, false, v, out);
            Ok(())
        };
        let rhs: Vec<f64> = f.iter().map(|v| -v).collect();
        let mut step = vec![0.0; m];
        try_gmres::<LinalgError>(
            &mut op,
            &mut pre,
            &rhs,
            &mut step,
            &GmresSettings {
                restart: RESTART,
                rel_tol: FORCING,
                abs_tol: 0.1 * tol,
                max_iter: MAX_KRYLOV,
            },
        )?;
        info.products += products;
        if !step.iter().all(|v| v.is_finite()) {
            break;
        }
        let ws = apply_w(set, solver, &step)?;
        info.products += 1;
        // Armijo backtracking on 1/2 |Phi|^2; W(lam + a step) = W lam + a W step
        let mut alpha = 1.0;
        let mut best: Option<Trial> = None;
        for _ in 0..30 {
            let trial: Vec<f64> = lam.iter().zip(&step).map(|(l, d)| l + alpha * d).collect();
            let dt: Vec<f64> = delta.iter().zip(&ws).map(|(d, w)| d + alpha * w).collect();
            let ft = residual(set, &dt, &trial, &s.fb);
            let n2: f64 = ft.iter().map(|v| v * v).sum();
            if best.as_ref().map(|b| n2 < b.0).unwrap_or(true) {
                best = Some((n2, trial, dt, ft));
            }
            if n2 <= (1.0 - 2e-4 * alpha) * fn2 {
                break;
            }
            alpha *= 0.5;
        }
        let (n2, trial, dt, ft) =
            best.expect("the Armijo loop runs at least one trial, which sets best");
        info.iterations += 1;
        if n2.partial_cmp(&fn2) != Some(std::cmp::Ordering::Less) {
            break;
        }
        lam = trial;
        delta = dt;
        f = ft;
        fn2 = n2;
    }
    info.residual = inf_norm(&f);
    lambda.copy_from_slice(&lam);
    Ok(info)
}

/// Rows of the Newton operator: `out_j = D_j (Wv)_j + E_j v_j + shift v_j`.
fn newton_rows(
    set: &ContactSet,
    locals: &[Local],
    shift: f64,
    v: &[f64],
    wv: &[f64],
    out: &mut [f64],
) {
    for (j, l) in locals.iter().enumerate() {
        let rows = set.rows(j);
        let o = rows.start;
        let nr = rows.len();
        for a in 0..nr {
            let mut t = shift * v[o + a];
            for b in 0..nr {
                t += l.d[(a, b)] * wv[o + b] + l.e[(a, b)] * v[o + b];
            }
            out[o + a] = t;
        }
    }
}

/// `out_j = B_j v_j` (or $B_j^T$) per contact block.
pub(crate) fn apply_blocks(
    set: &ContactSet,
    b: &[Matrix3<f64>],
    transpose: bool,
    v: &[f64],
    out: &mut [f64],
) {
    for (j, bj) in b.iter().enumerate() {
        let rows = set.rows(j);
        let o = rows.start;
        let nr = rows.len();
        let mut x = Vector3::zeros();
        x.as_mut_slice()[..nr].copy_from_slice(&v[o..o + nr]);
        let y = if transpose {
            bj.transpose() * x
        } else {
            bj * x
        };
        out[o..o + nr].copy_from_slice(&y.as_slice()[..nr]);
    }
}
