//! Symmetric 3×3 eigen-decomposition by cyclic Jacobi rotations.
//!
//! Used for the trust-region filter of the prox-map Hessian (spec Eqs. 24–25: "closed-form
//! $3\times3$ Jacobi sweep") and for the $|H_\sigma|$ fallback direction of the stretch-space
//! Newton (spec §3.3). Jacobi is chosen over a characteristic-polynomial closed form because it
//! is backward stable and keeps small eigenvalues (relative to $\|A\|$) accurate, including for
//! repeated eigenvalues.

use nalgebra::{Matrix3, Vector3};

/// Eigen-decomposition $A = Q\,\mathrm{diag}(\lambda)\,Q^T$ of a symmetric $3\times3$ matrix.
///
/// Only the lower triangle of `a` is read (the matrix is symmetrised first). `q` is orthogonal
/// (its columns are the eigenvectors); the eigenvalues are returned unsorted. For non-finite input
/// the result contains non-finite entries but the routine terminates (bounded sweep count).
pub fn sym_eigen3(a: &Matrix3<f64>) -> (Vector3<f64>, Matrix3<f64>) {
    let mut m = Matrix3::from_fn(|i, j| if i >= j { a[(i, j)] } else { a[(j, i)] });
    let mut q = Matrix3::<f64>::identity();
    let scale = m.abs().max();
    if scale == 0.0 || !scale.is_finite() {
        return (m.diagonal(), q);
    }
    // Cyclic sweeps over the pairs (0,1), (0,2), (1,2); quadratic convergence, 3×3 needs ≤ ~6.
    for _sweep in 0..32 {
        let off = m[(0, 1)].abs() + m[(0, 2)].abs() + m[(1, 2)].abs();
        if off <= f64::EPSILON * 1e-3 * scale {
            break;
        }
        for &(p, r) in &[(0usize, 1usize), (0, 2), (1, 2)] {
            let apr = m[(p, r)];
            if apr == 0.0 {
                continue;
            }
            // Rotation angle annihilating m[p][r]: tan(2θ) = 2 a_pr / (a_rr − a_pp).
            let theta = (m[(r, r)] - m[(p, p)]) / (2.0 * apr);
            let t = if theta.is_infinite() {
                0.5 / theta
            } else {
                theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt())
            };
            let c = 1.0 / (t * t + 1.0).sqrt();
            let s = t * c;
            let mut j = Matrix3::<f64>::identity();
            j[(p, p)] = c;
            j[(r, r)] = c;
            j[(p, r)] = s;
            j[(r, p)] = -s;
            m = j.transpose() * m * j;
            m[(p, r)] = 0.0;
            m[(r, p)] = 0.0;
            q *= j;
        }
    }
    (m.diagonal(), q)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(a: &Matrix3<f64>) {
        let (l, q) = sym_eigen3(a);
        let rec = q * Matrix3::from_diagonal(&l) * q.transpose();
        let err = (rec - a).norm() / a.norm().max(1e-300);
        assert!(err < 1e-14, "reconstruction error {err}");
        let orth = (q.transpose() * q - Matrix3::identity()).norm();
        assert!(orth < 1e-14, "orthogonality error {orth}");
    }

    #[test]
    fn eigen_random_and_degenerate() {
        check(&Matrix3::new(
            2.0, 1.0, 0.5, 1.0, 3.0, -0.7, 0.5, -0.7, -1.0,
        ));
        check(&Matrix3::identity());
        check(&Matrix3::new(1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0));
        check(&Matrix3::new(
            1e8, 1.0, 0.0, 1.0, 1e-8, 1e-12, 0.0, 1e-12, -3.0,
        ));
        // Known spectrum: diag(−1, 2, 2) rotated.
        let r = nalgebra::Rotation3::from_euler_angles(0.3, -1.1, 2.0).into_inner();
        let a = r * Matrix3::from_diagonal(&Vector3::new(-1.0, 2.0, 2.0)) * r.transpose();
        let (mut l, _) = sym_eigen3(&a);
        l.as_mut_slice().sort_by(|x, y| x.partial_cmp(y).unwrap());
        assert!((l - Vector3::new(-1.0, 2.0, 2.0)).norm() < 1e-14);
        check(&a);
    }
}
