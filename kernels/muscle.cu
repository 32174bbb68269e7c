// muscle.cu: the muscle fibres' part of the PD local step (spec §3.5, App. A.4; the CPU's
// solver::muscle::add_projections), run after dphd_local_step and before dphd_gather_rhs.
#include "device.h"
#include "material.h"

// Item u: actuated sample s = msample[u] (each actuated sample once). F_s as in
// dphd_local_step; then for each of the sample's fibre entries e in [mptr[u], mptr[u+1])
// (ordered by muscle group, as the CPU adds them), with unit rest fibre m = fiber[3e..3e+3),
// weight w = mweight[e] (k_m V_s) and activation a = act[mgroup[e]]:
//   F m = l n (l = |F m|; n = 0 when l <= 1e-300), p = a n, Q_s += w p m^T.
// q: 9 per sample, row-major (written by dphd_local_step, updated here).
DPHD_KERNEL(dphd_muscle_local)(DPHD_ITEM_PARAM long long n, const long long* msample,
                               const long long* mptr, const long long* mgroup,
                               const double* fiber, const double* mweight, const double* act,
                               const long long* sptr, const long long* nodes,
                               const double* grads, const double* rest, const double* x,
                               double* q)
{
    const long long u = DPHD_ITEM;
    if (u >= n) return;
    const long long s = msample[u];
    double f[9];
    dphd_sample_f(s, sptr, nodes, grads, rest, x, f);
    double* qs = q + 9 * s;
    for (long long e = mptr[u]; e < mptr[u + 1]; ++e) {
        const double* m = fiber + 3 * e;
        double fm[3];
        for (int r = 0; r < 3; ++r) fm[r] = f[3 * r] * m[0] + f[3 * r + 1] * m[1] + f[3 * r + 2] * m[2];
        const double l = sqrt(fm[0] * fm[0] + fm[1] * fm[1] + fm[2] * fm[2]);
        double p[3] = {0.0, 0.0, 0.0};
        if (l > 1e-300) {
            const double a = act[mgroup[e]];
            for (int r = 0; r < 3; ++r) p[r] = (fm[r] / l) * a;
        }
        const double w = mweight[e];
        for (int r = 0; r < 3; ++r)
            for (int c = 0; c < 3; ++c) qs[3 * r + c] += (p[r] * m[c]) * w;
    }
}

// The backward's muscle term of DeltaA z (spec §7.2, App. A.4; the CPU's
// solver::muscle::MuscleLin::apply), added to the per-sample matrices dp of
// dphd_spectral_apply before dphd_gather_rhs. Item u: actuated sample s = msample[u];
// dF = sum_a z_a grad N_a^T; for each fibre entry e (as in dphd_muscle_local) with the
// linearization's l = mlen[e] and n = mdir[3e..3e+3) at x_{t+1}:
//   d = dF m, dp_m = (a / l) (d - n (n . d)) (zero when l <= 1e-300), dp_s += w dp_m m^T.
DPHD_KERNEL(dphd_muscle_jacobian_apply)(DPHD_ITEM_PARAM long long n, const long long* msample,
                                        const long long* mptr, const long long* mgroup,
                                        const double* fiber, const double* mweight,
                                        const double* act, const double* mlen,
                                        const double* mdir, const long long* sptr,
                                        const long long* nodes, const double* grads,
                                        const double* z, double* dp)
{
    const long long u = DPHD_ITEM;
    if (u >= n) return;
    const long long s = msample[u];
    double df[9] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    for (long long k = sptr[s]; k < sptr[s + 1]; ++k) {
        const long long i = nodes[k];
        for (int r = 0; r < 3; ++r)
            for (int c = 0; c < 3; ++c) df[3 * r + c] += z[3 * i + r] * grads[3 * k + c];
    }
    double* ds = dp + 9 * s;
    for (long long e = mptr[u]; e < mptr[u + 1]; ++e) {
        const double l = mlen[e];
        if (l <= 1e-300) continue;
        const double* m = fiber + 3 * e;
        const double* nd = mdir + 3 * e;
        double d[3];
        for (int r = 0; r < 3; ++r) d[r] = df[3 * r] * m[0] + df[3 * r + 1] * m[1] + df[3 * r + 2] * m[2];
        const double nd_d = nd[0] * d[0] + nd[1] * d[1] + nd[2] * d[2];
        const double scale = act[mgroup[e]] / l;
        const double w = mweight[e];
        for (int r = 0; r < 3; ++r) {
            const double pr = (d[r] - nd[r] * nd_d) * scale;
            for (int c = 0; c < 3; ++c) ds[3 * r + c] += (pr * m[c]) * w;
        }
    }
}

// The muscle activation gradient of a backward step (spec §7.5, §3.5; the CPU's
// solver::muscle::MuscleLin::activation_gradient): from db/da = w G^T vec(n m^T),
// dL/da_g = sum over the group's fibres of w (Z_s m) . n. Item u: actuated sample
// s = msample[u], Z_s = sum_a z_a grad N_a^T; for each fibre entry e of the sample (n =
// mdir[3e..3e+3) at x_{t+1}, zero where l <= 1e-300):
//   out[e] = w_e ((Z_s m_e) . n_e).
// Per-group sums by dphd_segment_sum over each group's entries in model order (two passes).
DPHD_KERNEL(dphd_muscle_activation_gradient)(DPHD_ITEM_PARAM long long n,
                                             const long long* msample, const long long* mptr,
                                             const double* fiber, const double* mweight,
                                             const double* mdir, const long long* sptr,
                                             const long long* nodes, const double* grads,
                                             const double* z, double* out)
{
    const long long u = DPHD_ITEM;
    if (u >= n) return;
    const long long s = msample[u];
    double zs[9] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    for (long long k = sptr[s]; k < sptr[s + 1]; ++k) {
        const long long i = nodes[k];
        for (int r = 0; r < 3; ++r)
            for (int c = 0; c < 3; ++c) zs[3 * r + c] += z[3 * i + r] * grads[3 * k + c];
    }
    for (long long e = mptr[u]; e < mptr[u + 1]; ++e) {
        const double* m = fiber + 3 * e;
        const double* nd = mdir + 3 * e;
        double d[3];
        for (int r = 0; r < 3; ++r) d[r] = zs[3 * r] * m[0] + zs[3 * r + 1] * m[1] + zs[3 * r + 2] * m[2];
        out[e] = mweight[e] * (d[0] * nd[0] + d[1] * nd[1] + d[2] * nd[2]);
    }
}
