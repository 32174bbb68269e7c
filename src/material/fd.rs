//! Finite-difference helpers for the element-level tests (spec §10.1). Test-only.
//!
//! All derivatives use the fourth-order central stencil
//! $f'(x)\approx\frac{-f(x+2h)+8f(x+h)-8f(x-h)+f(x-2h)}{12h}$ (truncation $O(h^4)$), which with
//! $h\approx10^{-4}$ gives $\sim10^{-12}$ relative accuracy for smooth maps.

use nalgebra::{Matrix3, SMatrix, SVector, Vector3};

/// Column-major $\mathrm{vec}$ of a $3\times3$ matrix.
pub fn vec9(m: &Matrix3<f64>) -> SVector<f64, 9> {
    SVector::<f64, 9>::from_column_slice(m.as_slice())
}

/// Inverse of [`vec9`].
pub fn unvec9(v: &SVector<f64, 9>) -> Matrix3<f64> {
    Matrix3::from_column_slice(v.as_slice())
}

/// Central FD Jacobian of $f:\mathbb R^N\to\mathbb R^M$ at `x` with step `h` (per coordinate).
pub fn jacobian<const N: usize, const M: usize>(
    f: impl Fn(&SVector<f64, N>) -> SVector<f64, M>,
    x: &SVector<f64, N>,
    h: f64,
) -> SMatrix<f64, M, N> {
    let mut out = SMatrix::<f64, M, N>::zeros();
    for k in 0..N {
        let at = |t: f64| {
            let mut y = *x;
            y[k] += t;
            f(&y)
        };
        let d = (at(-2.0 * h) - at(2.0 * h) + (at(h) - at(-h)) * 8.0) / (12.0 * h);
        out.set_column(k, &d);
    }
    out
}

/// Central FD gradient of a scalar function.
pub fn gradient<const N: usize>(
    f: impl Fn(&SVector<f64, N>) -> f64,
    x: &SVector<f64, N>,
    h: f64,
) -> SVector<f64, N> {
    let j = jacobian(|y| SVector::<f64, 1>::new(f(y)), x, h);
    j.transpose()
}

/// Central FD of a matrix map $F\mapsto p(F)$ as a $9\times9$ matrix in column-major vec.
pub fn jacobian_mat3(
    f: impl Fn(&Matrix3<f64>) -> Matrix3<f64>,
    x: &Matrix3<f64>,
    h: f64,
) -> SMatrix<f64, 9, 9> {
    jacobian(|v| vec9(&f(&unvec9(v))), &vec9(x), h)
}

/// Central FD gradient of a scalar function of a matrix (returned as a matrix).
pub fn gradient_mat3(f: impl Fn(&Matrix3<f64>) -> f64, x: &Matrix3<f64>, h: f64) -> Matrix3<f64> {
    unvec9(&gradient(|v| f(&unvec9(v)), &vec9(x), h))
}

/// Central FD Jacobian of a map $\mathbb R^3\to\mathbb R^3$.
pub fn jacobian3(
    f: impl Fn(&Vector3<f64>) -> Vector3<f64>,
    x: &Vector3<f64>,
    h: f64,
) -> Matrix3<f64> {
    jacobian(f, x, h)
}

/// Derivative of a scalar-parameter vector function.
pub fn derivative3(f: impl Fn(f64) -> Vector3<f64>, x: f64, h: f64) -> Vector3<f64> {
    (f(x - 2.0 * h) - f(x + 2.0 * h) + (f(x + h) - f(x - h)) * 8.0) / (12.0 * h)
}

/// Deterministic pseudo-random numbers in $[0,1)$ for tests (SplitMix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next_f64()
    }

    /// Random rotation from random Euler angles.
    pub fn rotation(&mut self) -> Matrix3<f64> {
        let a = self.uniform(-3.1, 3.1);
        let b = self.uniform(-3.1, 3.1);
        let c = self.uniform(-3.1, 3.1);
        nalgebra::Rotation3::from_euler_angles(a, b, c).into_inner()
    }

    /// $R_1\,\mathrm{diag}(s)\,R_2^T$ with random rotations.
    pub fn with_stretches(&mut self, s: &Vector3<f64>) -> Matrix3<f64> {
        self.rotation() * Matrix3::from_diagonal(s) * self.rotation().transpose()
    }
}
