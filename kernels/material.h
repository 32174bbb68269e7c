// material.h: device functions of the PD local step, shared by the kernels that need them.
// Ports of the CPU reference in src/material/ (same algorithms, same branch structure, so the
// emulator and GPU agree with the CPU path to round-off):
//   dphd_svd3              <- material::svd::svd3 (signed one-sided Jacobi SVD, spec §3.1)
//   dphd_project_stretches <- material::volume::project_stretches (spec §3.2, App. A.3)
// Matrices are 3x3 row-major double[9]: m[3*r + c].
#ifndef DPHD_MATERIAL_H
#define DPHD_MATERIAL_H
#include "device.h"

DPHD_FN double dphd_col_dot(const double* m, int p, int q)
{
    return m[p] * m[q] + m[3 + p] * m[3 + q] + m[6 + p] * m[6 + q];
}

DPHD_FN void dphd_cross(const double* a, const double* b, double* c)
{
    c[0] = a[1] * b[2] - a[2] * b[1];
    c[1] = a[2] * b[0] - a[0] * b[2];
    c[2] = a[0] * b[1] - a[1] * b[0];
}

DPHD_FN double dphd_norm3(const double* a)
{
    return sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]);
}

// Signed SVD F = U diag(sigma) V^T with det U = det V = +1, sigma0 >= sigma1 >= |sigma2|.
// Non-finite input gives U = V = I and NaN sigma; zero input gives zero sigma.
DPHD_FN void dphd_svd3(const double* f, double* u, double* sigma, double* v)
{
    double amax = 0.0;
    bool bad = false;
    for (int k = 0; k < 9; ++k) {
        const double a = fabs(f[k]);
        if (a != a) bad = true;
        if (a > amax) amax = a;
    }
    for (int k = 0; k < 9; ++k) { u[k] = (k % 4 == 0) ? 1.0 : 0.0; v[k] = u[k]; }
    if (bad || !isfinite(amax)) { sigma[0] = sigma[1] = sigma[2] = 0.0 / 0.0; return; }
    if (amax == 0.0) { sigma[0] = sigma[1] = sigma[2] = 0.0; return; }
    int ex;
    frexp(amax, &ex); // amax = m 2^ex, m in [0.5, 1): the exact power-of-two scale
    const double scale = ldexp(1.0, ex);
    double b[9];
    for (int k = 0; k < 9; ++k) b[k] = f[k] / scale;
    const int pairs[3][2] = {{0, 1}, {0, 2}, {1, 2}};
    for (int sweep = 0; sweep < 64; ++sweep) {
        bool rotated = false;
        for (int pi = 0; pi < 3; ++pi) {
            const int p = pairs[pi][0], q = pairs[pi][1];
            const double alpha = dphd_col_dot(b, p, p);
            const double beta = dphd_col_dot(b, q, q);
            const double gamma = dphd_col_dot(b, p, q);
            if (gamma == 0.0 || fabs(gamma) <= DPHD_EPS * (sqrt(alpha) * sqrt(beta))) continue;
            rotated = true;
            const double zeta = (beta - alpha) / (2.0 * gamma);
            const double t = copysign(1.0, zeta) / (fabs(zeta) + sqrt(1.0 + zeta * zeta));
            const double c = 1.0 / sqrt(1.0 + t * t);
            const double s = c * t;
            for (int r = 0; r < 3; ++r) {
                const double bp = b[3 * r + p], bq = b[3 * r + q];
                b[3 * r + p] = bp * c - bq * s;
                b[3 * r + q] = bp * s + bq * c;
                const double vp = v[3 * r + p], vq = v[3 * r + q];
                v[3 * r + p] = vp * c - vq * s;
                v[3 * r + q] = vp * s + vq * c;
            }
        }
        if (!rotated) break;
    }
    double norms[3];
    for (int c = 0; c < 3; ++c) norms[c] = sqrt(dphd_col_dot(b, c, c));
    int idx[3] = {0, 1, 2};
    // stable descending sort of three
    for (int a = 1; a < 3; ++a) {
        int k = idx[a];
        int p = a - 1;
        while (p >= 0 && norms[idx[p]] < norms[k]) { idx[p + 1] = idx[p]; --p; }
        idx[p + 1] = k;
    }
    double bs[9], vs[9];
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c) { bs[3 * r + c] = b[3 * r + idx[c]]; vs[3 * r + c] = v[3 * r + idx[c]]; }
    const double s0 = norms[idx[0]], s1 = norms[idx[1]];
    double u0[3], u1[3], u2[3], b1[3], b2[3];
    for (int r = 0; r < 3; ++r) { u0[r] = bs[3 * r] / s0; b1[r] = bs[3 * r + 1]; b2[r] = bs[3 * r + 2]; }
    const double d01 = u0[0] * b1[0] + u0[1] * b1[1] + u0[2] * b1[2];
    for (int r = 0; r < 3; ++r) u1[r] = b1[r] - u0[r] * d01;
    const double n1 = dphd_norm3(u1);
    if (n1 > 0.0 && isfinite(n1) && s1 > 0.0) {
        for (int r = 0; r < 3; ++r) u1[r] /= n1;
    } else {
        // cross with the coordinate axis least aligned with u0
        const double a0 = fabs(u0[0]), a1 = fabs(u0[1]), a2 = fabs(u0[2]);
        const int k = (a0 <= a1 && a0 <= a2) ? 0 : (a1 <= a2 ? 1 : 2);
        double e[3] = {0.0, 0.0, 0.0};
        e[k] = 1.0;
        dphd_cross(u0, e, u1);
        const double nc = dphd_norm3(u1);
        for (int r = 0; r < 3; ++r) u1[r] /= nc;
    }
    dphd_cross(u0, u1, u2);
    const double n2 = dphd_norm3(u2);
    for (int r = 0; r < 3; ++r) u2[r] /= n2;
    double s2 = u2[0] * b2[0] + u2[1] * b2[1] + u2[2] * b2[2];
    s2 = s2 < -s1 ? -s1 : (s2 > s1 ? s1 : s2);
    for (int r = 0; r < 3; ++r) { u[3 * r] = u0[r]; u[3 * r + 1] = u1[r]; u[3 * r + 2] = u2[r]; }
    const double detv = vs[0] * (vs[4] * vs[8] - vs[7] * vs[5]) - vs[1] * (vs[3] * vs[8] - vs[6] * vs[5])
                      + vs[2] * (vs[3] * vs[7] - vs[6] * vs[4]);
    if (detv < 0.0) {
        for (int r = 0; r < 3; ++r) vs[3 * r + 2] = -vs[3 * r + 2];
        s2 = -s2;
    }
    for (int k = 0; k < 9; ++k) v[k] = vs[k];
    sigma[0] = s0 * scale;
    sigma[1] = s1 * scale;
    sigma[2] = s2 * scale;
}

// The KKT curve of the volume projection (see src/material/volume.rs): stretches s(q).
DPHD_FN void dphd_curve_stretches(const double* sigma, int m, double q, double* s)
{
    const double sm = sigma[m];
    for (int j = 0; j < 3; ++j) {
        const double sj = sigma[j];
        if (j == m) { s[j] = 0.5 * (sm + q); continue; }
        double r2 = (sj - sm) * (sj + sm) + q * q;
        const double r = sqrt(r2 > 0.0 ? r2 : 0.0);
        if (sj >= 0.0) s[j] = 0.5 * (sj + r);
        else s[j] = 0.5 * ((q - fabs(sm)) * (q + fabs(sm))) / (r - sj);
    }
}

// h(q) = sum ln s_i(q) and h'(q).
DPHD_FN void dphd_curve_h(const double* sigma, int m, double q, double* h, double* dh)
{
    double s[3];
    dphd_curve_stretches(sigma, m, q, s);
    const double sm = sigma[m];
    *h = 0.0;
    *dh = 0.0;
    for (int j = 0; j < 3; ++j) {
        *h += log(s[j]);
        double ds;
        if (j == m) ds = 0.5;
        else {
            const double sj = sigma[j];
            double r2 = (sj - sm) * (sj + sm) + q * q;
            const double r = sqrt(r2 > 0.0 ? r2 : 0.0);
            ds = r > 0.0 ? 0.5 * q / r : 0.5;
        }
        *dh += ds / s[j];
    }
}

// Root of h in [a, b] with h(a) < 0 < h(b): safeguarded Newton / bisection.
DPHD_FN double dphd_curve_root(const double* sigma, int m, double a, double b)
{
    double q = 0.5 * (a + b);
    for (int it = 0; it < 200; ++it) {
        double h, dh;
        dphd_curve_h(sigma, m, q, &h, &dh);
        if (h == 0.0) return q;
        if (h < 0.0) a = q; else b = q;
        const double newton = q - h / dh;
        const double next = (isfinite(dh) && dh != 0.0 && newton > a && newton < b) ? newton : 0.5 * (a + b);
        const double aq = fabs(q) > 1e-300 ? fabs(q) : 1e-300;
        if (fabs(next - q) <= 2.0 * DPHD_EPS * aq || b - a <= 0.0) return next;
        if (next == a || next == b) return q;
        q = next;
    }
    return q;
}

// Root of h in [a, b] with h(a) >= 0 > h(b), by bisection.
DPHD_FN double dphd_curve_root_decreasing(const double* sigma, int m, double a, double b)
{
    for (int it = 0; it < 200; ++it) {
        const double mid = 0.5 * (a + b);
        if (mid <= a || mid >= b) break;
        double h, dh;
        dphd_curve_h(sigma, m, mid, &h, &dh);
        if (h >= 0.0) a = mid; else b = mid;
    }
    return 0.5 * (a + b);
}

DPHD_FN double dphd_dist3(const double* s, const double* sigma)
{
    const double d0 = s[0] - sigma[0], d1 = s[1] - sigma[1], d2 = s[2] - sigma[2];
    return sqrt(d0 * d0 + d1 * d1 + d2 * d2);
}

// Closest stretch vector with unit product over the positive sheet (spec §3.2, App. A.3).
DPHD_FN void dphd_project_stretches(const double* sigma, double* out)
{
    if (!(isfinite(sigma[0]) && isfinite(sigma[1]) && isfinite(sigma[2]))) {
        out[0] = out[1] = out[2] = 0.0 / 0.0;
        return;
    }
    int m = 0;
    for (int j = 1; j < 3; ++j) if (fabs(sigma[j]) < fabs(sigma[m])) m = j;
    const double sm = sigma[m];
    const bool all_positive = sigma[0] > 0.0 && sigma[1] > 0.0 && sigma[2] > 0.0;
    const double q_lo = all_positive ? -sm : fabs(sm);
    const double a0 = q_lo > 0.0 ? q_lo : 0.0;
    bool have = false;
    double best[3] = {1.0, 1.0, 1.0};
    double h_a0 = -1.0 / 0.0;
    if (a0 != q_lo) { double dh; dphd_curve_h(sigma, m, a0, &h_a0, &dh); }
    if (h_a0 <= 0.0) {
        const double amx = fmax(fabs(sigma[0]), fmax(fabs(sigma[1]), fabs(sigma[2])));
        double b = 2.0 + 2.0 * amx;
        for (;;) {
            double h, dh;
            dphd_curve_h(sigma, m, b, &h, &dh);
            if (h > 0.0) break;
            b *= 2.0;
        }
        const double q = h_a0 == 0.0 ? a0 : dphd_curve_root(sigma, m, a0, b);
        dphd_curve_stretches(sigma, m, q, best);
        have = true;
    }
    const double prod = sigma[0] * sigma[1] * sigma[2];
    const bool need_scan = all_positive && prod > 1.0 && (!have || dphd_dist3(best, sigma) > 0.5 * sm);
    if (need_scan) {
        const int N = 64;
        double prev_q = q_lo;
        double prev_h = -1.0 / 0.0;
        for (int k = 1; k <= N; ++k) {
            const double q = q_lo + (0.0 - q_lo) * (double)k / (double)N;
            double h, dh;
            dphd_curve_h(sigma, m, q, &h, &dh);
            if ((prev_h < 0.0) != (h < 0.0)) {
                const double r = prev_h < 0.0 ? dphd_curve_root(sigma, m, prev_q, q)
                                              : dphd_curve_root_decreasing(sigma, m, prev_q, q);
                double s[3];
                dphd_curve_stretches(sigma, m, r, s);
                if (!have || dphd_dist3(s, sigma) < dphd_dist3(best, sigma)) {
                    best[0] = s[0]; best[1] = s[1]; best[2] = s[2];
                    have = true;
                }
            }
            prev_q = q;
            prev_h = h;
        }
    }
    out[0] = best[0]; out[1] = best[1]; out[2] = best[2];
}

// U diag(s) V^T, row-major.
DPHD_FN void dphd_compose(const double* u, const double* s, const double* v, double* out)
{
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c)
            out[3 * r + c] = u[3 * r] * s[0] * v[3 * c] + u[3 * r + 1] * s[1] * v[3 * c + 1]
                           + u[3 * r + 2] * s[2] * v[3 * c + 2];
}

#endif
