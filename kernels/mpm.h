// mpm.h: device functions of the MLS-MPM substep (kernels/mpm.cu), ports of the CPU reference
// in crates/mpm/src/mpm/ with the same formulas and branch structure:
//   dphd_mpm_first_piola <- constitutive::Material::first_piola (fixed-corotated,
//                           Neo-Hookean, StVK-Hencky)
//   dphd_mpm_return_map  <- plasticity::Plasticity::return_map (von Mises, Drucker-Prager with
//                           the optional volume correction)
// The rotation SVD is material.h's dphd_svd3 (det U = det V = +1, the smallest singular value
// signed), shared with the PD local step; the CPU uses nalgebra's SVD with the same sign
// convention, so results agree to round-off (the functions of F used here are isotropic:
// unique whatever U and V the SVD picks). Matrices are row-major double[9]: m[3*r + c].
//
// A material is 8 doubles of the table `mat` (gpu::mpm::material_row):
//   [mu, lambda, elastic (0 fixed-corotated, 1 Neo-Hookean, 2 StVK-Hencky),
//    plastic (0 none, 1 von Mises, 2 Drucker-Prager), yield stress, Drucker-Prager alpha,
//    volume correction (0/1), unused]
#ifndef DPHD_MPM_H
#define DPHD_MPM_H
#include "device.h"
#include "material.h"

#define DPHD_MPM_MAT 8

// det F, as nalgebra's Matrix3::determinant (expansion along the first row).
DPHD_FN double dphd_mpm_det(const double* f)
{
    const double minor12_23 = f[4] * f[8] - f[7] * f[5];
    const double minor11_23 = f[3] * f[8] - f[6] * f[5];
    const double minor11_22 = f[3] * f[7] - f[6] * f[4];
    return f[0] * minor12_23 - f[1] * minor11_23 + f[2] * minor11_22;
}

// cof F = J F^-T: column c is the cross product of the other two columns (constitutive::cofactor).
DPHD_FN void dphd_mpm_cofactor(const double* f, double* out)
{
    double col[3][3];
    for (int c = 0; c < 3; ++c)
        for (int r = 0; r < 3; ++r) col[c][r] = f[3 * r + c];
    for (int c = 0; c < 3; ++c) {
        double x[3];
        dphd_cross(col[(c + 1) % 3], col[(c + 2) % 3], x);
        for (int r = 0; r < 3; ++r) out[3 * r + c] = x[r];
    }
}

// First Piola-Kirchhoff stress P = dpsi/dF of material row m (constitutive.rs).
DPHD_FN void dphd_mpm_first_piola(const double* m, const double* f, double* p)
{
    const double mu = m[0], lambda = m[1];
    const int model = (int)m[2];
    if (model == 0) {
        // fixed-corotated: P = 2 mu (F - R) + lambda (J - 1) cof F, R = U V^T, J = prod sigma
        double u[9], s[3], v[9], r[9], cof[9];
        dphd_svd3(f, u, s, v);
        const double one[3] = {1.0, 1.0, 1.0};
        dphd_compose(u, one, v, r);
        const double j = s[0] * s[1] * s[2];
        dphd_mpm_cofactor(f, cof);
        for (int k = 0; k < 9; ++k) p[k] = 2.0 * mu * (f[k] - r[k]) + lambda * (j - 1.0) * cof[k];
    } else if (model == 1) {
        // Neo-Hookean: P = mu (F - F^-T) + lambda ln J F^-T
        const double j = dphd_mpm_det(f);
        double cof[9];
        dphd_mpm_cofactor(f, cof);
        const double lj = log(j);
        for (int k = 0; k < 9; ++k) {
            const double fit = cof[k] / j;
            p[k] = mu * (f[k] - fit) + lambda * lj * fit;
        }
    } else {
        // StVK-Hencky: P = U diag((2 mu eps_i + lambda tr eps) / sigma_i) V^T, eps = ln sigma
        double u[9], s[3], v[9], e[3], d[3];
        dphd_svd3(f, u, s, v);
        for (int a = 0; a < 3; ++a) e[a] = log(s[a]);
        const double tr = e[0] + e[1] + e[2];
        for (int a = 0; a < 3; ++a) d[a] = (2.0 * mu * e[a] + lambda * tr) / s[a];
        dphd_compose(u, d, v, p);
    }
}

DPHD_FN double dphd_mpm_norm3(const double* a)
{
    return sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]);
}

// The plastic return mapping of material row m on the trial elastic F (det F > 0, checked by
// the caller), updating the plastic state ps = [plastic strain, log volume correction] and
// writing the projected F_E to out (plasticity.rs; out = f when nothing projects).
DPHD_FN void dphd_mpm_return_map(const double* m, const double* f, double* ps, double* out)
{
    for (int k = 0; k < 9; ++k) out[k] = f[k];
    const int kind = (int)m[3];
    if (kind == 0) return;
    const double mu = m[0], lambda = m[1];
    double u[9], s[3], v[9];
    dphd_svd3(f, u, s, v);
    double projected[3];
    if (kind == 1) {
        // von Mises: radial return of the Hencky deviator onto 2 mu |dev eps| = sqrt(2/3) sigma_y
        double eps[3], dev[3];
        for (int a = 0; a < 3; ++a) eps[a] = log(s[a]);
        const double mean = (eps[0] + eps[1] + eps[2]) / 3.0;
        for (int a = 0; a < 3; ++a) dev[a] = eps[a] - mean;
        const double norm = dphd_mpm_norm3(dev);
        const double y = 2.0 * mu * norm - sqrt(2.0 / 3.0) * m[4];
        if (y <= 0.0 || norm == 0.0) return;
        const double dgamma = y / (2.0 * mu);
        ps[0] += sqrt(2.0 / 3.0) * dgamma;
        for (int a = 0; a < 3; ++a) projected[a] = eps[a] - dev[a] * (dgamma / norm);
    } else {
        // Drucker-Prager sand (Klar et al. 2016, Alg. 2), optional volume correction
        const bool vc = m[6] != 0.0;
        double eps_trial[3], eps[3], dev[3];
        for (int a = 0; a < 3; ++a) eps_trial[a] = log(s[a]);
        const double shift = vc ? ps[1] / 3.0 : 0.0;
        for (int a = 0; a < 3; ++a) eps[a] = eps_trial[a] + shift;
        const double tr = eps[0] + eps[1] + eps[2];
        for (int a = 0; a < 3; ++a) dev[a] = eps[a] - tr / 3.0;
        const double norm = dphd_mpm_norm3(dev);
        if (tr >= 0.0) {
            ps[0] += dphd_mpm_norm3(eps);
            projected[0] = projected[1] = projected[2] = 0.0;
        } else {
            const double dgamma = norm + (3.0 * lambda + 2.0 * mu) / (2.0 * mu) * tr * m[5];
            if (dgamma <= 0.0) {
                if (!vc || shift == 0.0) return;
                for (int a = 0; a < 3; ++a) projected[a] = eps[a];
            } else {
                ps[0] += dgamma;
                for (int a = 0; a < 3; ++a) projected[a] = eps[a] - dev[a] * (dgamma / norm);
            }
        }
        if (vc) {
            ps[1] += (eps_trial[0] + eps_trial[1] + eps_trial[2])
                   - (projected[0] + projected[1] + projected[2]);
        }
    }
    double e[3];
    for (int a = 0; a < 3; ++a) e[a] = exp(projected[a]);
    dphd_compose(u, e, v, out);
}

// Quadratic B-spline weights of one axis at fractional offset f (bspline.rs); shared by
// mpm.cu and mpm_contact.cu.
DPHD_FN void dphd_mpm_weights(double f, double* w)
{
    const double a = 1.5 - f;
    const double c = f - 0.5;
    const double d = f - 1.0;
    w[0] = 0.5 * a * a;
    w[1] = 0.75 - d * d;
    w[2] = 0.5 * c * c;
}

// Base node per axis and fractional offset (bspline::base_and_fraction); false when the
// particle's 3x3x3 stencil leaves the grid or the position is not finite.
DPHD_FN bool dphd_mpm_base(const long long* dims, const double* geo, const double* x, long long* b,
                           double* frac)
{
    const double inv_h = 1.0 / geo[3];
    for (int a = 0; a < 3; ++a) {
        const double xi = (x[a] - geo[a]) * inv_h;
        if (!isfinite(xi)) return false;
        const double fb = floor(xi - 0.5);
        if (!(fb >= 0.0 && fb + 2.0 <= (double)dims[a])) return false;
        b[a] = (long long)fb;
        frac[a] = xi - fb;
        if (!isfinite(frac[a])) return false;
    }
    return true;
}

#endif
