//! Corotated PD term $\Psi=\frac k2\|F-R(F)\|_F^2$ (spec §3.1): local step $p=R$ (polar rotation)
//! and its differential (spec App. A.2 / Eq. 42 with $\sigma^*\equiv1$, $W=0$).

use super::svd::{spectral_jacobian_apply, Svd3};
use nalgebra::{Matrix3, Vector3};

/// Local step of the corotated term: $p = R = UV^T$ (spec §2.4 "Local step — corotated", §3.1).
pub fn project(svd: &Svd3) -> Matrix3<f64> {
    svd.u * svd.v.transpose()
}

/// $dR$ for a direction $dF$ (spec App. A.2): the spectral differential with $\sigma^*\equiv1$,
/// $W=0$, i.e. $\mathbf M_{ij}=1/(\sigma_i+\sigma_j)$, $\mathbf N_{ij}=-1/(\sigma_i+\sigma_j)$
/// (Eq. 42). As a $9\times9$ map it has eigenvalue $2/(\sigma_i+\sigma_j)$ on the twist modes
/// $U(e_ie_j^T-e_je_i^T)V^T$ and $0$ on the six symmetric modes. The divided difference is
/// identically zero, so repeated singular values need no special treatment; $\sigma_i+\sigma_j$
/// is guarded at $10^{-6}$ for inverted elements (where $R$ itself is discontinuous).
pub fn jacobian_apply(svd: &Svd3, df: &Matrix3<f64>) -> Matrix3<f64> {
    spectral_jacobian_apply(svd, &Vector3::repeat(1.0), &Matrix3::zeros(), df)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::material::fd::{self, Rng};
    use crate::material::svd::{polar_rotation, spectral_jacobian_matrix, svd3};
    use nalgebra::SMatrix;

    fn dr_matrix(f: &Matrix3<f64>) -> SMatrix<f64, 9, 9> {
        let s = svd3(f);
        spectral_jacobian_matrix(&s, &Vector3::repeat(1.0), &Matrix3::zeros())
    }

    /// Independent closed form of App. A.2: $M=R^TdF$, $w=\mathrm{axial}(M-M^T)$,
    /// $\omega=(\mathrm{tr}S\,I-S)^{-1}w$, $dR=R[\omega]_\times$.
    fn dr_polar_formula(f: &Matrix3<f64>, df: &Matrix3<f64>) -> Matrix3<f64> {
        let r = polar_rotation(f);
        let s = r.transpose() * f;
        let s = 0.5 * (s + s.transpose());
        let m = r.transpose() * df;
        let w = Vector3::new(
            m[(2, 1)] - m[(1, 2)],
            m[(0, 2)] - m[(2, 0)],
            m[(1, 0)] - m[(0, 1)],
        );
        let a = Matrix3::identity() * s.trace() - s;
        let omega = a.lu().solve(&w).unwrap();
        r * omega.cross_matrix()
    }

    /// T2: dR (Eq. 42 / App. A.2) vs central FD of the polar rotation (9 directions), for
    /// generic, compressed, near-degenerate, exactly degenerate and inverted F.
    #[test]
    fn t2_drotation_vs_fd() {
        let mut rng = Rng(7);
        let stretches = [
            Vector3::new(1.4, 1.0, 0.7),
            Vector3::new(0.3, 0.2, 0.1),
            Vector3::new(1.0, 1.0, 1.0),
            Vector3::new(1.0 + 1e-9, 1.0, 1.0 - 1e-9),
            Vector3::new(2.0, 2.0, 0.5),
            Vector3::new(1.2, 0.9, 0.9 + 1e-7),
            Vector3::new(1.5, 1.0, -0.4),
            Vector3::new(3.0, 0.05, 0.01),
        ];
        let mut worst: f64 = 0.0;
        for s in &stretches {
            let f = rng.with_stretches(s);
            let jac = dr_matrix(&f);
            // step η = 1e-4 ‖F‖ with the 4th-order central stencil
            let fdj = fd::jacobian_mat3(polar_rotation, &f, 1e-4 * f.norm());
            let err = (jac - fdj).norm() / fdj.norm();
            worst = worst.max(err);
            assert!(err < 1e-7, "dR FD error {err} at sigma {s}");
            // the two closed forms (A.1 spectral and A.2 polar) agree
            let df = unit_random(&mut rng);
            let a = jacobian_apply(&svd3(&f), &df);
            let b = dr_polar_formula(&f, &df);
            assert!((a - b).norm() < 1e-12 * b.norm().max(1.0), "A.1 vs A.2");
        }
        eprintln!("T2 dR vs FD worst relative error: {worst:.3e}");
    }

    fn unit_random(rng: &mut Rng) -> Matrix3<f64> {
        Matrix3::from_fn(|_, _| rng.uniform(-1.0, 1.0))
    }

    /// §3.1: eigenvalues 2/(σ_i+σ_j) on twist modes, 0 on symmetric modes; symmetric 9×9.
    #[test]
    fn drotation_spectrum() {
        let mut rng = Rng(11);
        let s = Vector3::new(1.6, 0.8, 0.5);
        let f = rng.with_stretches(&s);
        let svd = svd3(&f);
        let jac = dr_matrix(&f);
        assert!((jac - jac.transpose()).norm() < 1e-14 * jac.norm());
        for (i, j) in [(0, 1), (0, 2), (1, 2)] {
            let mut e = Matrix3::zeros();
            e[(i, j)] = 1.0;
            e[(j, i)] = -1.0;
            let twist = svd.u * e * svd.v.transpose();
            let out = jacobian_apply(&svd, &twist);
            let expect = twist * (2.0 / (s[i] + s[j]));
            assert!((out - expect).norm() < 1e-14);
            let sym = svd.u * e.abs() * svd.v.transpose();
            assert!(jacobian_apply(&svd, &sym).norm() < 1e-14);
        }
        for i in 0..3 {
            let mut e = Matrix3::zeros();
            e[(i, i)] = 1.0;
            let m = svd.u * e * svd.v.transpose();
            assert!(jacobian_apply(&svd, &m).norm() < 1e-14);
        }
        assert!((project(&svd) - polar_rotation(&f)).norm() < 1e-15);
    }
}
