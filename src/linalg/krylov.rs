//! Restarted GMRES with right preconditioning, for the linearized PD systems
//! $K\,z=g$, $K=A-\Delta A$ (adjoint, spec Eq. 38; Newton polish of the forward), with the
//! persistent factor of $A$ as preconditioner ($M^{-1}=A^{-1}$).
//!
//! $K$ is symmetric but may be indefinite (corotated compression, spec §11 item 2), so CG
//! is not safe; GMRES needs neither definiteness nor $\rho(A^{-1}\Delta A)<1$, which the
//! fixed-point iteration $z\leftarrow A^{-1}(g+\Delta Az)$ does.

/// Outcome of a GMRES solve.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct GmresStats {
    pub iterations: usize,
    pub converged: bool,
    /// Final $\|b-Kx\|/\|b\|$ (true residual, recomputed at each restart and at exit).
    pub relative_residual: f64,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
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

/// Solve `op(x) = b` from `x` (in/out), right-preconditioned by `precond`, restart `m`.
/// Stops when $\|b-Kx\|\le$ `rel_tol`$\|b\|$ + `abs_tol` or after `max_iter` inner steps.
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
        // r = b - K x
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
            // modified Gram–Schmidt (twice for stability)
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
            if g[j + 1].abs() <= 0.5 * target || stats.iterations >= max_iter || wn == 0.0 {
                break;
            }
            v.push(w.iter().map(|a| a / wn).collect());
        }
        // back substitution for y, x += Z y
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Symmetric *indefinite* tridiagonal system, preconditioned by its diagonal part:
    /// GMRES must solve it to the requested tolerance.
    #[test]
    fn gmres_solves_an_indefinite_symmetric_system() {
        let n = 60;
        let diag: Vec<f64> = (0..n)
            .map(|i| {
                if i % 7 == 3 {
                    -2.0
                } else {
                    4.0 + i as f64 * 0.1
                }
            })
            .collect();
        let mut op = |x: &[f64], y: &mut [f64]| {
            for i in 0..n {
                y[i] = diag[i] * x[i]
                    - if i > 0 { x[i - 1] } else { 0.0 }
                    - if i + 1 < n { x[i + 1] } else { 0.0 };
            }
        };
        let dabs: Vec<f64> = diag.iter().map(|d| d.abs()).collect();
        let mut pre = |x: &[f64], y: &mut [f64]| {
            for i in 0..n {
                y[i] = x[i] / dabs[i];
            }
        };
        let xs: Vec<f64> = (0..n).map(|i| (i as f64 * 0.7).sin()).collect();
        let mut b = vec![0.0; n];
        op(&xs, &mut b);
        let mut x = vec![0.0; n];
        let st = gmres(
            &mut op,
            &mut pre,
            &b,
            &mut x,
            &GmresSettings {
                restart: 10,
                rel_tol: 1e-12,
                abs_tol: 0.0,
                max_iter: 500,
            },
        );
        assert!(st.converged, "{st:?}");
        let err = xs
            .iter()
            .zip(&x)
            .map(|(a, c)| (a - c).abs())
            .fold(0.0, f64::max);
        assert!(err < 1e-9, "error {err}");
    }
}
