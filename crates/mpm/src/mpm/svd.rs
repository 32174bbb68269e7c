//! The rotation-preserving SVD of a 3×3 deformation gradient, shared by the elastic models
//! ([`super::constitutive`]) and the return mappings ([`super::plasticity`]); it sits below both.

use nalgebra::{Matrix3, Vector3};

/// SVD with rotations: F = U diag(σ) Vᵀ with det U = det V = +1. For det F < 0 the smallest
/// singular value carries the sign (Irving et al. 2004, "Invertible finite elements").
pub fn rotation_svd(f: &Matrix3<f64>) -> (Matrix3<f64>, Vector3<f64>, Matrix3<f64>) {
    let svd = f.svd(true, true);
    // With compute_u and compute_v both true, nalgebra always returns both factors.
    let mut u = svd.u.unwrap_or_else(Matrix3::identity);
    let mut vt = svd.v_t.unwrap_or_else(Matrix3::identity);
    let mut s = svd.singular_values;
    let k = s.imin();
    if u.determinant() < 0.0 {
        u.column_mut(k).neg_mut();
        s[k] = -s[k];
    }
    if vt.determinant() < 0.0 {
        vt.row_mut(k).neg_mut();
        s[k] = -s[k];
    }
    (u, s, vt)
}
