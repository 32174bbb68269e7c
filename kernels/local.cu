// local.cu: the PD local step (spec §6.2 steps 6-7) for corotated + volume samples, and the
// right-hand-side gather b_p = sum_s G_s^T vec Q_s through the node -> sample transpose.
#include "device.h"
#include "material.h"

// Item s: F_s = I + sum_a (x_a - X_a) grad N_a^T over the sample's entries [sptr[s], sptr[s+1])
// (entry k: node nodes[k], gradient grads[3k..3k+3)); signed SVD; Q_s = w_cor R + w_vol D with
// R = U V^T (spec §3.1) and D = U diag(sigma*) V^T, prod sigma* = 1 (spec §3.2). q: 9 per
// sample, row-major.
DPHD_KERNEL(dphd_local_corotated_volume)(DPHD_ITEM_PARAM long long n, const long long* sptr,
                                         const long long* nodes, const double* grads,
                                         const double* rest, const double* x,
                                         const double* w_cor, const double* w_vol, double* q)
{
    const long long s = DPHD_ITEM;
    if (s >= n) return;
    double f[9] = {1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0};
    for (long long k = sptr[s]; k < sptr[s + 1]; ++k) {
        const long long i = nodes[k];
        for (int r = 0; r < 3; ++r) {
            const double u = x[3 * i + r] - rest[3 * i + r];
            for (int c = 0; c < 3; ++c) f[3 * r + c] += u * grads[3 * k + c];
        }
    }
    double u[9], sig[3], v[9], st[3], dm[9], rot[9];
    dphd_svd3(f, u, sig, v);
    const double one[3] = {1.0, 1.0, 1.0};
    dphd_compose(u, one, v, rot);
    dphd_project_stretches(sig, st);
    dphd_compose(u, st, v, dm);
    for (int k = 0; k < 9; ++k) q[9 * s + k] = rot[k] * w_cor[s] + dm[k] * w_vol[s];
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
