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


// F_s = I + sum_a (x_a - X_a) grad N_a^T over sample s's entries [sptr[s], sptr[s+1]) (entry k:
// node nodes[k], rest gradient grads[3k..3k+3)), row-major: the deformation gradient every
// per-sample kernel starts from (the local step, the muscle fibres, the linearization).
DPHD_FN void dphd_sample_f(long long s, const long long* sptr, const long long* nodes,
                           const double* grads, const double* rest, const double* x, double* f)
{
    for (int k = 0; k < 9; ++k) f[k] = (k % 4 == 0) ? 1.0 : 0.0;
    for (long long k = sptr[s]; k < sptr[s + 1]; ++k) {
        const long long i = nodes[k];
        for (int r = 0; r < 3; ++r) {
            const double u = x[3 * i + r] - rest[3 * i + r];
            for (int c = 0; c < 3; ++c) f[3 * r + c] += u * grads[3 * k + c];
        }
    }
}

// ---- Neo-Hookean prox in stretch space (port of material::neohookean::prox_stretch, §3.3) ----

// C = A B for row-major 3x3.
DPHD_FN void dphd_mul3(const double* a, const double* b, double* c)
{
    for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 3; ++q)
            c[3 * r + q] = a[3 * r] * b[q] + a[3 * r + 1] * b[3 + q] + a[3 * r + 2] * b[6 + q];
}

// Symmetric eigen-decomposition by cyclic Jacobi (port of material::eigen::sym_eigen3):
// A = Q diag(l) Q^T, lower triangle read, eigenvalues unsorted.
DPHD_FN void dphd_sym_eigen3(const double* a, double* l, double* q)
{
    double m[9];
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) m[3 * i + j] = i >= j ? a[3 * i + j] : a[3 * j + i];
    for (int k = 0; k < 9; ++k) q[k] = (k % 4 == 0) ? 1.0 : 0.0;
    double scale = 0.0;
    bool finite = true;
    for (int k = 0; k < 9; ++k) {
        const double v = fabs(m[k]);
        if (!isfinite(v)) finite = false;
        if (v > scale) scale = v;
    }
    if (scale == 0.0 || !finite) { l[0] = m[0]; l[1] = m[4]; l[2] = m[8]; return; }
    const int pairs[3][2] = {{0, 1}, {0, 2}, {1, 2}};
    for (int sweep = 0; sweep < 32; ++sweep) {
        const double off = fabs(m[1]) + fabs(m[2]) + fabs(m[5]);
        if (off <= DPHD_EPS * 1e-3 * scale) break;
        for (int pi = 0; pi < 3; ++pi) {
            const int p = pairs[pi][0], r = pairs[pi][1];
            const double apr = m[3 * p + r];
            if (apr == 0.0) continue;
            const double theta = (m[3 * r + r] - m[3 * p + p]) / (2.0 * apr);
            const double t = isinf(theta) ? 0.5 / theta
                                          : copysign(1.0, theta) / (fabs(theta) + sqrt(theta * theta + 1.0));
            const double c = 1.0 / sqrt(t * t + 1.0);
            const double s = t * c;
            double j[9] = {1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0}, jt[9], tmp[9];
            j[3 * p + p] = c; j[3 * r + r] = c; j[3 * p + r] = s; j[3 * r + p] = -s;
            for (int u = 0; u < 3; ++u) for (int v = 0; v < 3; ++v) jt[3 * u + v] = j[3 * v + u];
            dphd_mul3(jt, m, tmp);
            dphd_mul3(tmp, j, m);
            m[3 * p + r] = 0.0; m[3 * r + p] = 0.0;
            dphd_mul3(q, j, tmp);
            for (int k = 0; k < 9; ++k) q[k] = tmp[k];
        }
    }
    l[0] = m[0]; l[1] = m[4]; l[2] = m[8];
}

// ln J = sum ln s_i; false unless all s_i > 0.
DPHD_FN bool dphd_log_j(const double* s, double* lj)
{
    if (!(s[0] > 0.0 && s[1] > 0.0 && s[2] > 0.0)) return false;
    *lj = log(s[0]) + log(s[1]) + log(s[2]);
    return true;
}

// phi = psi(s) + k/2 |s - sigma|^2 and its magnitude scale.
DPHD_FN void dphd_prox_objective(double mu, double lambda, double k, const double* sigma, const double* s,
                                 double* phi, double* scale)
{
    double lj;
    if (!dphd_log_j(s, &lj)) { *phi = 1.0 / 0.0; *scale = 1.0 / 0.0; return; }
    const double n2 = s[0] * s[0] + s[1] * s[1] + s[2] * s[2];
    const double d0 = s[0] - sigma[0], d1 = s[1] - sigma[1], d2 = s[2] - sigma[2];
    const double a = 0.5 * mu * (n2 + 3.0);
    const double b = mu * fabs(lj);
    const double c = 0.5 * lambda * lj * lj;
    const double d = 0.5 * k * (d0 * d0 + d1 * d1 + d2 * d2);
    *phi = 0.5 * mu * (n2 - 3.0) - mu * lj + c + d;
    *scale = a + b + c + d;
}

DPHD_FN void dphd_prox_grad(double mu, double lambda, double k, const double* sigma, const double* s, double* g)
{
    double lj;
    const bool ok = dphd_log_j(s, &lj);
    for (int i = 0; i < 3; ++i)
        g[i] = ok ? (mu * s[i] + (lambda * lj - mu) / s[i]) + (s[i] - sigma[i]) * k : 0.0 / 0.0;
}

DPHD_FN void dphd_stretch_hessian(double mu, double lambda, const double* s, double* h)
{
    double lj;
    if (!dphd_log_j(s, &lj)) { for (int i = 0; i < 9; ++i) h[i] = 0.0 / 0.0; return; }
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            h[3 * i + j] = i == j ? mu + (mu + lambda * (1.0 - lj)) / (s[i] * s[i]) : lambda / (s[i] * s[j]);
}

// Cholesky of SPD 3x3 (row-major lower factor); false if a pivot is not positive.
DPHD_FN bool dphd_chol3(const double* a, double* l)
{
    for (int k = 0; k < 9; ++k) l[k] = 0.0;
    for (int j = 0; j < 3; ++j) {
        double d = a[3 * j + j];
        for (int k = 0; k < j; ++k) d -= l[3 * j + k] * l[3 * j + k];
        if (!(d > 0.0)) return false;
        const double dj = sqrt(d);
        l[3 * j + j] = dj;
        for (int i = j + 1; i < 3; ++i) {
            double v = a[3 * i + j];
            for (int k = 0; k < j; ++k) v -= l[3 * i + k] * l[3 * j + k];
            l[3 * i + j] = v / dj;
        }
    }
    return true;
}

DPHD_FN void dphd_chol3_solve(const double* l, const double* b, double* x)
{
    double y[3];
    for (int i = 0; i < 3; ++i) {
        double v = b[i];
        for (int k = 0; k < i; ++k) v -= l[3 * i + k] * y[k];
        y[i] = v / l[3 * i + i];
    }
    for (int i = 2; i >= 0; --i) {
        double v = y[i];
        for (int k = i + 1; k < 3; ++k) v -= l[3 * k + i] * x[k];
        x[i] = v / l[3 * i + i];
    }
}

// Step along the most negative curvature direction of ht that decreases phi (saddle escape).
DPHD_FN bool dphd_negative_curvature_step(double mu, double lambda, double k, const double* sigma,
                                          const double* x, const double* ht, double* out)
{
    double l[3], q[9];
    dphd_sym_eigen3(ht, l, q);
    int i = 0;
    for (int j = 1; j < 3; ++j) if (l[j] < l[i]) i = j;
    if (!(l[i] < 0.0)) return false;
    const double d[3] = {q[i], q[3 + i], q[6 + i]};
    double phi0, sc;
    dphd_prox_objective(mu, lambda, k, sigma, x, &phi0, &sc);
    double t = 0.25 * fmin(x[0], fmin(x[1], x[2]));
    for (int it = 0; it < 40; ++it) {
        for (int sg = 0; sg < 2; ++sg) {
            const double sgn = sg == 0 ? 1.0 : -1.0;
            double xn[3] = {x[0] + d[0] * (sgn * t), x[1] + d[1] * (sgn * t), x[2] + d[2] * (sgn * t)};
            if (xn[0] > 0.0 && xn[1] > 0.0 && xn[2] > 0.0) {
                double ph, s2;
                dphd_prox_objective(mu, lambda, k, sigma, xn, &ph, &s2);
                if (ph < phi0) { out[0] = xn[0]; out[1] = xn[1]; out[2] = xn[2]; return true; }
            }
        }
        t *= 0.5;
    }
    return false;
}

// sigma* = argmin_{s>0} psi(s) + k/2 |s - sigma|^2 by safeguarded Newton (spec §3.3);
// `warm` (used when all finite and `use_warm`) is the start.
DPHD_FN void dphd_nh_prox_stretch(double mu, double lambda, double k, const double* sigma,
                                  const double* warm, bool use_warm, double* out)
{
    const double SIGMA_MIN = 1e-4;
    double x[3];
    const bool warm_ok = use_warm && isfinite(warm[0]) && isfinite(warm[1]) && isfinite(warm[2]);
    for (int i = 0; i < 3; ++i) {
        const double v = warm_ok ? warm[i] : sigma[i];
        x[i] = v > SIGMA_MIN ? v : SIGMA_MIN;
    }
    const bool params_ok = k > 0.0 && isfinite(k) && isfinite(mu) && isfinite(lambda);
    if (!params_ok || !(isfinite(sigma[0]) && isfinite(sigma[1]) && isfinite(sigma[2]))) {
        out[0] = x[0]; out[1] = x[1]; out[2] = x[2];
        return;
    }
    const double tol = 1e-12 * k * fmax(dphd_norm3(sigma), 1.0);
    double g[3];
    dphd_prox_grad(mu, lambda, k, sigma, x, g);
    unsigned iterations = 0;
    while (iterations < 64) {
        const double gnorm = dphd_norm3(g);
        double h[9], ht[9], lc[9];
        dphd_stretch_hessian(mu, lambda, x, h);
        for (int i = 0; i < 9; ++i) ht[i] = h[i] + ((i % 4 == 0) ? k : 0.0);
        const bool chol = dphd_chol3(ht, lc);
        if (gnorm <= tol) {
            if (chol) break;
            iterations += 1;
            double xn[3];
            if (dphd_negative_curvature_step(mu, lambda, k, sigma, x, ht, xn)) {
                x[0] = xn[0]; x[1] = xn[1]; x[2] = xn[2];
                dphd_prox_grad(mu, lambda, k, sigma, x, g);
                continue;
            }
            break;
        }
        iterations += 1;
        double dir[3];
        if (chol) {
            dphd_chol3_solve(lc, g, dir);
        } else {
            double l[3], q[9], dq[3];
            dphd_sym_eigen3(h, l, q);
            for (int i = 0; i < 3; ++i) dq[i] = (q[i] * g[0] + q[3 + i] * g[1] + q[6 + i] * g[2]) / (k + fabs(l[i]));
            for (int r = 0; r < 3; ++r) dir[r] = q[3 * r] * dq[0] + q[3 * r + 1] * dq[1] + q[3 * r + 2] * dq[2];
        }
        if (!(isfinite(dir[0]) && isfinite(dir[1]) && isfinite(dir[2]))) break;
        double phi0, phi_scale;
        dphd_prox_objective(mu, lambda, k, sigma, x, &phi0, &phi_scale);
        const double slope = g[0] * dir[0] + g[1] * dir[1] + g[2] * dir[2];
        double step = 1.0;
        bool have = false;
        double acc[3];
        for (int hv = 0; hv < 60; ++hv) {
            double xn[3] = {x[0] - dir[0] * step, x[1] - dir[1] * step, x[2] - dir[2] * step};
            if (xn[0] > 0.0 && xn[1] > 0.0 && xn[2] > 0.0) {
                double phin, sc;
                dphd_prox_objective(mu, lambda, k, sigma, xn, &phin, &sc);
                if (phin <= phi0 - 1e-4 * step * slope) {
                    acc[0] = xn[0]; acc[1] = xn[1]; acc[2] = xn[2]; have = true;
                    break;
                }
                if (step * fabs(slope) <= 64.0 * DPHD_EPS * phi_scale) {
                    double gn[3];
                    dphd_prox_grad(mu, lambda, k, sigma, xn, gn);
                    if (dphd_norm3(gn) < gnorm) { acc[0] = xn[0]; acc[1] = xn[1]; acc[2] = xn[2]; have = true; }
                    break;
                }
            }
            step *= 0.5;
        }
        if (!chol) {
            double xc[3];
            if (dphd_negative_curvature_step(mu, lambda, k, sigma, x, ht, xc)) {
                double phic, sc, phia = 0.0;
                dphd_prox_objective(mu, lambda, k, sigma, xc, &phic, &sc);
                bool better = true;
                if (have) { dphd_prox_objective(mu, lambda, k, sigma, acc, &phia, &sc); better = phic < phia; }
                if (better) { acc[0] = xc[0]; acc[1] = xc[1]; acc[2] = xc[2]; have = true; step = 0.0; }
            }
        }
        if (!have) break;
        const double dx0 = acc[0] - x[0], dx1 = acc[1] - x[1], dx2 = acc[2] - x[2];
        const double dxn = sqrt(dx0 * dx0 + dx1 * dx1 + dx2 * dx2);
        x[0] = acc[0]; x[1] = acc[1]; x[2] = acc[2];
        dphd_prox_grad(mu, lambda, k, sigma, x, g);
        if (chol && step == 1.0 && dxn <= 1e-12 * fmax(dphd_norm3(x), 1.0)) break;
    }
    out[0] = x[0]; out[1] = x[1]; out[2] = x[2];
}


// ---- Linearization of the projections (the backward's and the Newton–Krylov phase's
// Delta A, spec §7.2 step 2, App. A.1): ports of material::volume::stretch_jacobian,
// material::neohookean::stretch_jacobian, material::svd::spectral_pair_coefficients and
// svd::SpectralLinear::capped (the eigen-decomposition there by dphd_sym_eigen3, Jacobi,
// where the host takes nalgebra's: equal to round-off). Matrices row-major. ----

// d sigma*/d sigma of the volume projection (implicit function theorem on the KKT system
// of min |s - sigma|^2 s.t. prod s = 1): the 4x4 bordered system solved by Gaussian
// elimination with partial pivoting; a singular system gives the tangent projector
// I - n n^T (n = grad prod s / |grad prod s|), as on the host.
DPHD_FN void dphd_volume_stretch_jacobian(const double* sigma, const double* s, double* w)
{
    const double gc[3] = {s[1] * s[2], s[0] * s[2], s[0] * s[1]};
    const double gn2 = gc[0] * gc[0] + gc[1] * gc[1] + gc[2] * gc[2];
    const double lam = -((s[0] - sigma[0]) * gc[0] + (s[1] - sigma[1]) * gc[1] + (s[2] - sigma[2]) * gc[2]) / gn2;
    double k[16];
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) k[4 * i + j] = i == j ? 1.0 : lam * s[3 - i - j];
        k[4 * i + 3] = gc[i];
        k[12 + i] = gc[i];
    }
    k[15] = 0.0;
    // LU with partial pivoting: perm[r] = original row of row r
    int perm[4] = {0, 1, 2, 3};
    bool ok = true;
    for (int c = 0; c < 4 && ok; ++c) {
        int p = c;
        for (int r = c + 1; r < 4; ++r)
            if (fabs(k[4 * r + c]) > fabs(k[4 * p + c])) p = r;
        if (k[4 * p + c] == 0.0) { ok = false; break; }
        if (p != c) {
            for (int j = 0; j < 4; ++j) { const double t = k[4 * c + j]; k[4 * c + j] = k[4 * p + j]; k[4 * p + j] = t; }
            const int t = perm[c]; perm[c] = perm[p]; perm[p] = t;
        }
        for (int r = c + 1; r < 4; ++r) {
            const double f = k[4 * r + c] / k[4 * c + c];
            k[4 * r + c] = f;
            for (int j = c + 1; j < 4; ++j) k[4 * r + j] -= f * k[4 * c + j];
        }
    }
    double cols[3][4];
    for (int j = 0; j < 3 && ok; ++j) {
        double y[4];
        for (int r = 0; r < 4; ++r) {
            double v = perm[r] == j ? 1.0 : 0.0;
            for (int q = 0; q < r; ++q) v -= k[4 * r + q] * y[q];
            y[r] = v;
        }
        for (int r = 3; r >= 0; --r) {
            double v = y[r];
            for (int q = r + 1; q < 4; ++q) v -= k[4 * r + q] * y[q];
            y[r] = v / k[4 * r + r];
        }
        for (int r = 0; r < 4; ++r) {
            if (!isfinite(y[r])) ok = false;
            cols[j][r] = y[r];
        }
    }
    if (!ok) {
        const double gn = sqrt(gn2);
        const double n[3] = {gc[0] / gn, gc[1] / gn, gc[2] / gn};
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) w[3 * i + j] = (i == j ? 1.0 : 0.0) - n[i] * n[j];
        return;
    }
    // w[i][j] = column j's entry i, symmetrized
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) w[3 * i + j] = 0.5 * (cols[j][i] + cols[i][j]);
}

// Filtered stretch Jacobian of the Neo-Hookean prox (spec Eqs. 23-25):
// W = k Q diag(1 / max(k + l_i', 1e-12 k)) Q^T, l_i' = l_i or (1 - 2 alpha) l_i for l_i < 0,
// H = Q diag(l) Q^T the stretch Hessian at s; symmetrized. Returns whether the filter changed
// an eigenvalue.
DPHD_FN bool dphd_nh_stretch_jacobian(double mu, double lambda, double k, const double* s,
                                      double alpha, double* w)
{
    double h[9], l[3], q[9], d[3];
    dphd_stretch_hessian(mu, lambda, s, h);
    dphd_sym_eigen3(h, l, q);
    bool changed = false;
    for (int i = 0; i < 3; ++i) {
        double li = l[i];
        if (!(li >= 0.0)) {
            if (alpha != 0.0) changed = true;
            li = (1.0 - 2.0 * alpha) * l[i];
        }
        d[i] = k / fmax(k + li, 1e-12 * k);
    }
    double full[9];
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            full[3 * i + j] = q[3 * i] * d[0] * q[3 * j] + q[3 * i + 1] * d[1] * q[3 * j + 1] + q[3 * i + 2] * d[2] * q[3 * j + 2];
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) w[3 * i + j] = 0.5 * (full[3 * i + j] + full[3 * j + i]);
    return changed;
}

// The off-diagonal pair coefficients M, N of Eq. 42 (diagonal zero): divided differences of
// sigma* (from W in the near-degenerate limit), the averages guarded near sigma_i + sigma_j = 0.
DPHD_FN void dphd_pair_coefficients(const double* sigma, const double* star, const double* w,
                                    double* m, double* n)
{
    const double DEGENERATE_REL_TOL = 1e-5, SUM_GUARD = 1e-6;
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) {
            if (i == j) { m[3 * i + j] = 0.0; n[3 * i + j] = 0.0; continue; }
            const double si = sigma[i], sj = sigma[j];
            const double diff = si - sj;
            const double dd = fabs(diff) <= DEGENERATE_REL_TOL * fmax(fabs(si), fabs(sj))
                ? 0.5 * (w[3 * i + i] + w[3 * j + j] - w[3 * i + j] - w[3 * j + i])
                : (star[i] - star[j]) / diff;
            double sum = si + sj;
            if (fabs(sum) < SUM_GUARD) sum = sum < 0.0 ? -SUM_GUARD : SUM_GUARD;
            const double avg = (star[i] + star[j]) / sum;
            m[3 * i + j] = 0.5 * (dd + avg);
            n[3 * i + j] = 0.5 * (dd - avg);
        }
    }
}

// Cap the spectral map's eigenvalues at `cap` (svd::SpectralLinear::capped): each pair's
// symmetric and antisymmetric modes m +- n, and W's eigenvalues when Gershgorin's bound on
// sym(W) exceeds the cap.
DPHD_FN void dphd_cap_spectral(double cap, double* w, double* m, double* n)
{
    for (int i = 0; i < 3; ++i) {
        for (int j = i + 1; j < 3; ++j) {
            double sym = m[3 * i + j] + n[3 * i + j], anti = m[3 * i + j] - n[3 * i + j];
            if (sym > cap || anti > cap) {
                sym = fmin(sym, cap);
                anti = fmin(anti, cap);
                m[3 * i + j] = m[3 * j + i] = 0.5 * (sym + anti);
                n[3 * i + j] = n[3 * j + i] = 0.5 * (sym - anti);
            }
        }
    }
    double ws[9];
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) ws[3 * i + j] = 0.5 * (w[3 * i + j] + w[3 * j + i]);
    double bound = -1.0 / 0.0;
    for (int i = 0; i < 3; ++i) {
        double b = ws[3 * i + i];
        for (int j = 0; j < 3; ++j)
            if (j != i) b += fabs(ws[3 * i + j]);
        bound = fmax(bound, b);
    }
    if (bound <= cap) return;
    double l[3], q[9];
    dphd_sym_eigen3(ws, l, q);
    if (!(l[0] > cap || l[1] > cap || l[2] > cap)) return;
    for (int i = 0; i < 3; ++i) l[i] = fmin(l[i], cap);
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            w[3 * i + j] = q[3 * i] * l[0] * q[3 * j] + q[3 * i + 1] * l[1] * q[3 * j + 1] + q[3 * i + 2] * l[2] * q[3 * j + 2];
}

// The common start of the per-sample kernels of the laws (dphd_linearize, dphd_pd_energy,
// dphd_param_maps): F_s (dphd_sample_f), its signed SVD F = U diag(sig) V^T, and the
// sample's projected stretches st: for kind 1 (Neo-Hookean) the prox stretches with body
// means nh[3s..3s+3) = (mu, lambda, k), cold-started; for kind 0 the volume projection's.
DPHD_FN void dphd_sample_stretches(long long s, const long long* sptr, const long long* nodes,
                                   const double* grads, const double* rest, const double* x,
                                   const long long* kind, const double* nh, double* f,
                                   double* u, double* sig, double* v, double* st)
{
    dphd_sample_f(s, sptr, nodes, grads, rest, x, f);
    dphd_svd3(f, u, sig, v);
    if (kind[s] == 1)
        dphd_nh_prox_stretch(nh[3 * s], nh[3 * s + 1], nh[3 * s + 2], sig, sig, false, st);
    else
        dphd_project_stretches(sig, st);
}

#endif
