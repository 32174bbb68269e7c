// gradient.cu: the per-sample material parameter gradients of one backward step (spec §7.5,
// Eq. 38: dL/dtheta = -z^T dR/dtheta) and their deterministic reductions.
#include "device.h"
#include "material.h"

// Item s: the law's parameter gradient of the sample as a linear map of Zh
// (material::Material::param_gradient_linear, spec §7.5), at positions x (the step's end):
// F_s and its signed SVD as in dphd_linearize, then with pc[6s..6s+6) = (1/E_e, dwa/dnu,
// dwb/dnu, dmu/dnu, dlambda/dnu, dk/dnu) (the PD weights' and the NH body means'
// nu-derivatives, constant over a rollout):
//   kind 0 (corotated + volume), R = U V^T, D = U diag(sigma*) V^T (volume projection):
//     GE = -(wa (F - R) + wb (F - D)) / E,   Gnu = -(dwa (F - R) + dwb (F - D));
//   kind 1 (Neo-Hookean), P = U diag(sigma*) V^T (cold-started prox), W its stretch Jacobian
//     filtered with alpha (the backward's filter), dsigma*/dtheta = -(W / k) dg/dtheta with
//     dg_i/dmu = s_i - 1/s_i, dg_i/dlambda = ln J* / s_i, dg_i/dk = s_i - sigma_i (s = sigma*):
//     GE = -wa (F - P) / E,   Gnu = wa U diag(ds) V^T - dwa (F - P),
//     ds = dsigma*/dmu dmu/dnu + dsigma*/dlambda dlambda/dnu + dsigma*/dk dk/dnu.
// ge, gnu: 9 per sample, row-major (what dphd_param_gradient_samples contracts with Zh).
DPHD_KERNEL(dphd_param_maps)(DPHD_ITEM_PARAM long long n, const long long* sptr,
                             const long long* nodes, const double* grads, const double* rest,
                             const double* x, const long long* kind, const double* wa,
                             const double* wb, const double* nh, const double* pc, double alpha,
                             double* ge, double* gnu)
{
    const long long s = DPHD_ITEM;
    if (s >= n) return;
    double f[9], u[9], sig[3], v[9], st[3];
    dphd_sample_stretches(s, sptr, nodes, grads, rest, x, kind, nh, f, u, sig, v, st);
    const double* c = pc + 6 * s;
    if (kind[s] == 1) {
        const double mu = nh[3 * s], lambda = nh[3 * s + 1], kk = nh[3 * s + 2];
        double w[9], p[9], dp[9], g[3], ds[3];
        dphd_nh_stretch_jacobian(mu, lambda, kk, st, alpha, w);
        dphd_compose(u, st, v, p);
        const double lj = log(st[0]) + log(st[1]) + log(st[2]);
        for (int i = 0; i < 3; ++i)
            g[i] = (st[i] - 1.0 / st[i]) * c[3] + (lj / st[i]) * c[4] + (st[i] - sig[i]) * c[5];
        for (int i = 0; i < 3; ++i)
            ds[i] = -(w[3 * i] * g[0] + w[3 * i + 1] * g[1] + w[3 * i + 2] * g[2]) / kk;
        dphd_compose(u, ds, v, dp);
        for (int k = 0; k < 9; ++k) {
            const double r = f[k] - p[k];
            ge[9 * s + k] = -(r * (wa[s] * c[0]));
            gnu[9 * s + k] = dp[k] * wa[s] - r * c[1];
        }
        return;
    }
    const double one[3] = {1.0, 1.0, 1.0};
    double rot[9], dm[9];
    dphd_compose(u, one, v, rot);
    dphd_compose(u, st, v, dm);
    for (int k = 0; k < 9; ++k) {
        const double r0 = f[k] - rot[k], r1 = f[k] - dm[k];
        ge[9 * s + k] = -(r0 * (wa[s] * c[0]) + r1 * (wb[s] * c[0]));
        gnu[9 * s + k] = -(r0 * c[1] + r1 * c[2]);
    }
}

// Item s: Zh = sum_k z_{n_k} g_k^T and Vs = sum_k vel_{n_k} g_k^T over the sample's entries
// [sptr[s], sptr[s+1]) (node nodes[k], rest gradient grads[3k..3k+3)), l = -Zh:Vs; then
//   out[3s]     = Zh:GE_s  + a[3s] l      (dL/dE_e part of the sample)
//   out[3s + 1] = Zh:Gnu_s + a[3s + 1] l  (dL/dnu part)
//   out[3s + 2] = a[3s + 2] l             (dL/dbeta0 part)
// with GE_s, Gnu_s (9 each, row-major) the law's parameter gradient as a linear map of Zh
// (material::Material::param_gradient_linear) and a the coefficients of l.
DPHD_KERNEL(dphd_param_gradient_samples)(DPHD_ITEM_PARAM long long n, const long long* sptr,
                                         const long long* nodes, const double* grads,
                                         const double* z, const double* vel, const double* ge,
                                         const double* gnu, const double* a, double* out)
{
    const long long s = DPHD_ITEM;
    if (s >= n) return;
    double zh[9] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    double vs[9] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    for (long long k = sptr[s]; k < sptr[s + 1]; ++k) {
        const long long i = nodes[k];
        for (int r = 0; r < 3; ++r)
            for (int c = 0; c < 3; ++c) {
                zh[3 * r + c] += z[3 * i + r] * grads[3 * k + c];
                vs[3 * r + c] += vel[3 * i + r] * grads[3 * k + c];
            }
    }
    double l = 0.0, e = 0.0, nu = 0.0;
    for (int k = 0; k < 9; ++k) {
        l -= zh[k] * vs[k];
        e += zh[k] * ge[9 * s + k];
        nu += zh[k] * gnu[9 * s + k];
    }
    out[3 * s] = e + a[3 * s] * l;
    out[3 * s + 1] = nu + a[3 * s + 1] * l;
    out[3 * s + 2] = a[3 * s + 2] * l;
}

// Item k: dst[k] = sum over t in [ptr[k], ptr[k+1]) of src[stride * idx[t] + comp], in t order.
// A gather over a segment list: per-element sums of the sample values (segments = the
// element's samples), and the first pass of the per-body two-pass reduction (segments =
// chunks of a body's samples; the host sums each body's chunk partials in order).
DPHD_KERNEL(dphd_segment_sum)(DPHD_ITEM_PARAM long long n, long long stride, long long comp,
                              const long long* ptr, const long long* idx, const double* src,
                              double* dst)
{
    const long long k = DPHD_ITEM;
    if (k >= n) return;
    double acc = 0.0;
    for (long long t = ptr[k]; t < ptr[k + 1]; ++t) acc += src[stride * idx[t] + comp];
    dst[k] = acc;
}

// The nodal terms of a backward step (spec §7.5; the CPU's solver::gradient::accumulate_step
// without an accelerator). Item i (node of body b): per component k, j = 3i + k,
//   v_j = (x1_j - x0_j) / h,  r_j = (x1_j - x0_j - h v0_j) / h^2 + alpha_i v_j - g_k;
//   out[5i]     = -(sum_k z_j r_j) m_i / rho_i   (dL/drho_b part; rho_i = rho_b)
//   out[5i + 1] = -sum_k z_j m_i v_j             (dL/dalpha_b part)
//   out[5i + 2 + k] = m_i z_j                    (dL/dg part)
// Per-body and total sums by dphd_segment_sum over chunks (two passes).
DPHD_KERNEL(dphd_nodal_gradient)(DPHD_ITEM_PARAM long long n, double h, double g0, double g1,
                                 double g2, const double* mass, const double* alpha,
                                 const double* rho, const double* z, const double* x0,
                                 const double* x1, const double* v0, double* out)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    const double g[3] = {g0, g1, g2};
    double dm = 0.0, da = 0.0;
    for (int k = 0; k < 3; ++k) {
        const long long j = 3 * i + k;
        const double v = (x1[j] - x0[j]) / h;
        const double r = (x1[j] - x0[j] - h * v0[j]) / (h * h) + alpha[i] * v - g[k];
        dm -= z[j] * r;
        da -= z[j] * mass[i] * v;
        out[5 * i + 2 + k] = mass[i] * z[j];
    }
    out[5 * i] = dm * mass[i] / rho[i];
    out[5 * i + 1] = da;
}

// The force-group terms of a backward step (spec §7.5): item t, the t-th loaded node of the
// groups (group fgroup[t], node fnode[t], nominal force force[3t..3t+3)):
//   out[t] = sum_c s_g f_c z_{3 i + c}   with s_g = scale[fgroup[t]] the group's profile value.
// Per-group sums by dphd_segment_sum over chunks (two passes).
DPHD_KERNEL(dphd_force_gradient)(DPHD_ITEM_PARAM long long n, const long long* fnode,
                                 const long long* fgroup, const double* force,
                                 const double* scale, const double* z, double* out)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    const long long i = fnode[t];
    const double s = scale[fgroup[t]];
    double acc = 0.0;
    for (int c = 0; c < 3; ++c) acc += s * force[3 * t + c] * z[3 * i + c];
    out[t] = acc;
}
