// resident.cu: vector kernels of the device-resident PD iteration (spec §6.2 steps 4-9):
// the iterate, the PD step, Anderson's history (Eqs. 18-21) and the gate's norms (Eq. 22)
// stay on the device; only scalars (chunk partials of the reductions) and the mixing
// coefficients cross to the host. Every kernel: one item per vector entry (or per chunk of a
// reduction), no atomics, deterministic.
#include "device.h"

// dst[i] = src[i]
DPHD_KERNEL(dphd_copy)(DPHD_ITEM_PARAM long long n, const double* src, double* dst)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    dst[i] = src[i];
}

// out[i] = a * x[i] + b * y[i]   (with a = 1, b = +-1 exactly x +- y, as on the host)
DPHD_KERNEL(dphd_lincomb)(DPHD_ITEM_PARAM long long n, double a, const double* x, double b,
                          const double* y, double* out)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    out[i] = a * x[i] + b * y[i];
}

// dst[idx[i]] = src[idx[i]]   (impose the prescribed (Dirichlet) entries of src on dst;
// with a zero src: zero them)
DPHD_KERNEL(dphd_copy_at)(DPHD_ITEM_PARAM long long n, const long long* idx, const double* src,
                          double* dst)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    dst[idx[i]] = src[idx[i]];
}

// ring[off + i] = a[i] - b[i]   (a history difference of Anderson written into its slot)
DPHD_KERNEL(dphd_diff_into)(DPHD_ITEM_PARAM long long n, long long off, const double* a,
                            const double* b, double* ring)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    ring[off + i] = a[i] - b[i];
}

// First pass of ||a - b||^2: item k of the n items sums (a[j] - b[j])^2 over j = k, k + n,
// k + 2n, ... < len in that order into partial[off + k] (strided, so a warp's loads are
// coalesced; the host sums the n partials in order; with b = 0 it is ||a||^2; several norms
// share one buffer at different offsets and come back in one copy).
DPHD_KERNEL(dphd_diff_sq_partial)(DPHD_ITEM_PARAM long long n, long long len, long long off,
                                  const double* a, const double* b, double* partial)
{
    const long long k = DPHD_ITEM;
    if (k >= n) return;
    double s = 0.0;
    for (long long j = k; j < len; j += n) {
        const double d = a[j] - b[j];
        s += d * d;
    }
    partial[off + k] = s;
}

// First pass of q dot products a . B_c (a = A + a_off; B_c = B + c * len, c < q): item
// (c, k) = c * chunks + k sums over j = k, k + chunks, ... < len in that order (strided, as
// dphd_diff_sq_partial) into partial[off + c * chunks + k].
DPHD_KERNEL(dphd_dots_partial)(DPHD_ITEM_PARAM long long n, long long len, long long chunks,
                               long long a_off, long long off, const double* a,
                               const double* b, double* partial)
{
    const long long item = DPHD_ITEM;
    if (item >= n) return;
    const long long c = item / chunks;
    const long long k = item - c * chunks;
    const double* av = a + a_off;
    const double* bv = b + c * len;
    double s = 0.0;
    for (long long j = k; j < len; j += chunks) s += av[j] * bv[j];
    partial[off + item] = s;
}

// Anderson's mixed iterate (spec Eq. 21): out[i] = (x[i] + g[i]) - sum_j gamma_j (dx_j[i] +
// dg_j[i]) for j = 0..m-1 in order (oldest first), terms[2j] = the ring slot of column j,
// terms[2j+1] = gamma_j; the same arithmetic order as the host's `anderson::HostStore`.
DPHD_KERNEL(dphd_anderson_mix)(DPHD_ITEM_PARAM long long n, long long m, const double* terms,
                               const double* dx, const double* dg, const double* x,
                               const double* g, double* out)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    double v = x[i] + g[i];
    for (long long j = 0; j < m; ++j) {
        const long long off = (long long)terms[2 * j] * n;
        v -= terms[2 * j + 1] * (dx[off + i] + dg[off + i]);
    }
    out[i] = v;
}

// Second half of a classical Gram-Schmidt pass (the device GMRES's Arnoldi step,
// gpu::krylov): w[i] -= sum_c h[c] * V[c * n + i] for c = 0..q-1 in order, V the q basis
// vectors stored one after another (the first half is dphd_dots_partial on the same block).
DPHD_KERNEL(dphd_subtract_block)(DPHD_ITEM_PARAM long long n, long long q, const double* h,
                                 const double* v, double* w)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    double s = w[i];
    for (long long c = 0; c < q; ++c) s -= h[c] * v[c * n + i];
    w[i] = s;
}
