// local.cu: the PD local step (spec §6.2 steps 6-7) for corotated + volume and Neo-Hookean
// samples, the backward's local-Jacobian product, and the
// right-hand-side gather b_p = sum_s G_s^T vec Q_s through the node -> sample transpose.
#include "device.h"
#include "material.h"

// Item s: F_s = I + sum_a (x_a - X_a) grad N_a^T over the sample's entries [sptr[s], sptr[s+1])
// (entry k: node nodes[k], gradient grads[3k..3k+3)); signed SVD; then by kind[s]:
//   0 (corotated + volume): Q_s = wa R + wb D, R = U V^T (spec §3.1), D = U diag(sigma*) V^T with
//     prod sigma* = 1 (spec §3.2);
//   1 (Neo-Hookean): Q_s = wa U diag(sigma*) V^T, sigma* the stretch-space prox (spec Eqs. 13-15)
//     with body-mean parameters nh[3s..3s+3) = (mu, lambda, k), warm-started from warm[3s..]
//     when warm[3s] > 0 and updated there.
// q: 9 per sample, row-major.
DPHD_KERNEL(dphd_local_step)(DPHD_ITEM_PARAM long long n, const long long* sptr,
                             const long long* nodes, const double* grads, const double* rest,
                             const double* x, const long long* kind, const double* wa,
                             const double* wb, const double* nh, double* warm, double* q)
{
    const long long s = DPHD_ITEM;
    if (s >= n) return;
    double f[9];
    dphd_sample_f(s, sptr, nodes, grads, rest, x, f);
    double u[9], sig[3], v[9], st[3], dm[9], rot[9];
    dphd_svd3(f, u, sig, v);
    if (kind[s] == 1) {
        double* w = warm + 3 * s;
        dphd_nh_prox_stretch(nh[3 * s], nh[3 * s + 1], nh[3 * s + 2], sig, w, w[0] > 0.0, st);
        w[0] = st[0]; w[1] = st[1]; w[2] = st[2];
        dphd_compose(u, st, v, dm);
        for (int k = 0; k < 9; ++k) q[9 * s + k] = dm[k] * wa[s];
        return;
    }
    const double one[3] = {1.0, 1.0, 1.0};
    dphd_compose(u, one, v, rot);
    dphd_project_stretches(sig, st);
    dphd_compose(u, st, v, dm);
    for (int k = 0; k < 9; ++k) q[9 * s + k] = rot[k] * wa[s] + dm[k] * wb[s];
}

// The linearization of the projections at x (spec §7.2 step 2, App. A.1; the Newton–Krylov
// phase's Jacobian): per sample s, F_s and its signed SVD as in dphd_local_step, then the
// weighted spectral coefficients of Delta A that dphd_spectral_apply reads (row-major, 9 per
// sample each), as material::Material::spectral_coefficients computes them:
//   kind 0 (corotated + volume): sigma* the volume projection, W its stretch Jacobian;
//     [U, V, wb W, wa Mc + wb Mv, wa Nc + wb Nv] (Mc, Nc the rotation's pair coefficients);
//   kind 1 (Neo-Hookean): sigma* the prox stretches (cold start), W the stretch Jacobian
//     filtered with `alpha`; [U, V, wa W, wa M, wa N].
// With cap[s] > 0 (the projected Jacobian) the map's eigenvalues are capped at cap[s]
// (dphd_cap_spectral). flag[s] = 1 where the filter changed an eigenvalue of the NH stretch
// Hessian (material::Linearization::filtered), else 0.
DPHD_KERNEL(dphd_linearize)(DPHD_ITEM_PARAM long long n, const long long* sptr,
                            const long long* nodes, const double* grads, const double* rest,
                            const double* x, const long long* kind, const double* wa,
                            const double* wb, const double* nh, double alpha, const double* cap,
                            double* cu, double* cv, double* cw, double* cm, double* cn,
                            double* flag)
{
    const long long s = DPHD_ITEM;
    if (s >= n) return;
    double f[9], u[9], sig[3], v[9], st[3], w[9], m[9], nn[9];
    dphd_sample_stretches(s, sptr, nodes, grads, rest, x, kind, nh, f, u, sig, v, st);
    flag[s] = 0.0;
    if (kind[s] == 1) {
        const double mu = nh[3 * s], lambda = nh[3 * s + 1], kk = nh[3 * s + 2];
        if (dphd_nh_stretch_jacobian(mu, lambda, kk, st, alpha, w)) flag[s] = 1.0;
        dphd_pair_coefficients(sig, st, w, m, nn);
        for (int k = 0; k < 9; ++k) { w[k] *= wa[s]; m[k] *= wa[s]; nn[k] *= wa[s]; }
    } else {
        const double one[3] = {1.0, 1.0, 1.0}, zero[9] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
        double mc[9], nc[9];
        dphd_volume_stretch_jacobian(sig, st, w);
        dphd_pair_coefficients(sig, one, zero, mc, nc);
        dphd_pair_coefficients(sig, st, w, m, nn);
        for (int k = 0; k < 9; ++k) {
            w[k] *= wb[s];
            m[k] = mc[k] * wa[s] + m[k] * wb[s];
            nn[k] = nc[k] * wa[s] + nn[k] * wb[s];
        }
    }
    if (cap[s] > 0.0) dphd_cap_spectral(cap[s], w, m, nn);
    for (int k = 0; k < 9; ++k) {
        cu[9 * s + k] = u[k];
        cv[9 * s + k] = v[k];
        cw[9 * s + k] = w[k];
        cm[9 * s + k] = m[k];
        cn[9 * s + k] = nn[k];
    }
}

// Item s: the sample's PD energy at x (the bracket of solver::trust_region::pd_energy,
// material::Material::pd_energy), from F_s's signed SVD F = U diag(sigma) V^T, in stretch space
// (F - U diag(t) V^T = U diag(sigma - t) V^T):
//   kind 0 (corotated + volume): wa/2 |sigma - 1|^2 + wb/2 |sigma - sigma*|^2 (R = U V^T,
//     sigma* the volume projection's stretches);
//   kind 1 (Neo-Hookean): wa/2 |sigma - sigma*|^2 + wa/k psi(sigma*), sigma* the cold-started
//     prox, psi(s) = mu/2 (|s|^2 - 3) - mu ln J + lambda/2 (ln J)^2 (infinite unless s > 0).
// e: one per sample (summed by dphd_sum_partial, then in order on the host).
DPHD_KERNEL(dphd_pd_energy)(DPHD_ITEM_PARAM long long n, const long long* sptr,
                            const long long* nodes, const double* grads, const double* rest,
                            const double* x, const long long* kind, const double* wa,
                            const double* wb, const double* nh, double* e)
{
    const long long s = DPHD_ITEM;
    if (s >= n) return;
    double f[9], u[9], sig[3], v[9], st[3];
    dphd_sample_stretches(s, sptr, nodes, grads, rest, x, kind, nh, f, u, sig, v, st);
    if (kind[s] == 1) {
        const double mu = nh[3 * s], lambda = nh[3 * s + 1], kk = nh[3 * s + 2];
        double lj, d2 = 0.0;
        for (int i = 0; i < 3; ++i) d2 += (sig[i] - st[i]) * (sig[i] - st[i]);
        const double psi = dphd_log_j(st, &lj)
            ? 0.5 * mu * (st[0] * st[0] + st[1] * st[1] + st[2] * st[2] - 3.0) - mu * lj
                  + 0.5 * lambda * lj * lj
            : 1.0 / 0.0;
        e[s] = 0.5 * wa[s] * d2 + wa[s] / kk * psi;
        return;
    }
    double r2 = 0.0, d2 = 0.0;
    for (int i = 0; i < 3; ++i) {
        r2 += (sig[i] - 1.0) * (sig[i] - 1.0);
        d2 += (sig[i] - st[i]) * (sig[i] - st[i]);
    }
    e[s] = 0.5 * wa[s] * r2 + 0.5 * wb[s] * d2;
}

// Item = node i: bp[3i + r] = sum over incidences t in [iptr[i], iptr[i+1]) of
// sum_c Q_{s_t}[r][c] g_{k_t}[c], with (s_t, k_t) = (inc_sample[t], inc_entry[t]) sorted by
// sample. A gather: deterministic, no atomics.
DPHD_KERNEL(dphd_gather_rhs)(DPHD_ITEM_PARAM long long n, const long long* iptr,
                             const long long* inc_sample, const long long* inc_entry,
                             const double* grads, const double* q, double* bp)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    double acc[3] = {0.0, 0.0, 0.0};
    for (long long t = iptr[i]; t < iptr[i + 1]; ++t) {
        const double* qs = q + 9 * inc_sample[t];
        const double* g = grads + 3 * inc_entry[t];
        for (int r = 0; r < 3; ++r)
            acc[r] += qs[3 * r] * g[0] + qs[3 * r + 1] * g[1] + qs[3 * r + 2] * g[2];
    }
    bp[3 * i] = acc[0];
    bp[3 * i + 1] = acc[1];
    bp[3 * i + 2] = acc[2];
}

// The backward's local-Jacobian product (spec App. A.1, Eq. 42; DeltaA z of spec §7.2), per
// sample s: dF = sum_a z_a grad N_a^T, a = U^T dF V, c_ii = sum_k W_ik a_kk,
// c_ij = M_ij a_ij + N_ij a_ji, dp_s = U c V^T. The coefficients (9 each per sample, row-major)
// carry the PD weights, so one kernel serves every material. dp: 9 per sample; b = DeltaA z
// follows by dphd_gather_rhs.
DPHD_KERNEL(dphd_spectral_apply)(DPHD_ITEM_PARAM long long n, const long long* sptr,
                                 const long long* nodes, const double* grads, const double* cu,
                                 const double* cv, const double* cw, const double* cm,
                                 const double* cn, const double* z, double* dp)
{
    const long long s = DPHD_ITEM;
    if (s >= n) return;
    double df[9] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    for (long long k = sptr[s]; k < sptr[s + 1]; ++k) {
        const long long i = nodes[k];
        for (int r = 0; r < 3; ++r)
            for (int c = 0; c < 3; ++c) df[3 * r + c] += z[3 * i + r] * grads[3 * k + c];
    }
    const double* u = cu + 9 * s;
    const double* v = cv + 9 * s;
    const double* w = cw + 9 * s;
    const double* m = cm + 9 * s;
    const double* nn = cn + 9 * s;
    double t[9], a[9], c[9], uc[9];
    // t = dF V, a = U^T t
    for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 3; ++q)
            t[3 * r + q] = df[3 * r] * v[q] + df[3 * r + 1] * v[3 + q] + df[3 * r + 2] * v[6 + q];
    for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 3; ++q)
            a[3 * r + q] = u[r] * t[q] + u[3 + r] * t[3 + q] + u[6 + r] * t[6 + q];
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            c[3 * i + j] = (i == j) ? w[3 * i] * a[0] + w[3 * i + 1] * a[4] + w[3 * i + 2] * a[8]
                                    : m[3 * i + j] * a[3 * i + j] + nn[3 * i + j] * a[3 * j + i];
    // dp = U c V^T
    for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 3; ++q)
            uc[3 * r + q] = u[3 * r] * c[q] + u[3 * r + 1] * c[3 + q] + u[3 * r + 2] * c[6 + q];
    for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 3; ++q)
            dp[9 * s + 3 * r + q] = uc[3 * r] * v[3 * q] + uc[3 * r + 1] * v[3 * q + 1] + uc[3 * r + 2] * v[3 * q + 2];
}
