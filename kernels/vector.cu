// vector.cu: dense vector kernels of the PD iteration and the adjoint Krylov loop
// (Anderson's residual updates, spec Eqs. 18-21; GMRES/axpy updates of the backward, spec §7).
#include "device.h"

// y[i] += a * x[i]
DPHD_KERNEL(dphd_axpy)(DPHD_ITEM_PARAM long long n, double a, const double* x, double* y)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    y[i] += a * x[i];
}

// y[i] = a * x[i] + b * y[i]
DPHD_KERNEL(dphd_axpby)(DPHD_ITEM_PARAM long long n, double a, const double* x, double b, double* y)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    y[i] = a * x[i] + b * y[i];
}

// out[i] = x[i] / s   (a division, as the host's GMRES normalises its basis vectors; not a
// product with 1/s)
DPHD_KERNEL(dphd_div)(DPHD_ITEM_PARAM long long n, double s, const double* x, double* out)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    out[i] = x[i] / s;
}

// dst[i] = src[map[i]]  (gather permutation: P b, CSC -> CSR value maps)
DPHD_KERNEL(dphd_gather_perm)(DPHD_ITEM_PARAM long long n, const long long* map, const double* src, double* dst)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    dst[i] = src[map[i]];
}

// First pass of the deterministic two-pass dot product: item k of the n items sums
// x[j]*y[j] over j = k, k + n, k + 2n, ... < len in that order (strided: a warp's loads are
// coalesced). The second pass sums the n partials in index order on the host.
DPHD_KERNEL(dphd_dot_partial)(DPHD_ITEM_PARAM long long n, long long len, const double* x,
                              const double* y, double* partial)
{
    const long long k = DPHD_ITEM;
    if (k >= n) return;
    double s = 0.0;
    for (long long j = k; j < len; j += n) s += x[j] * y[j];
    partial[k] = s;
}

// First pass of a deterministic two-pass sum: item k of the n items sums x[j] over
// j = k, k + n, k + 2n, ... < len in that order (strided, as dphd_dot_partial); the host sums
// the n partials in index order.
DPHD_KERNEL(dphd_sum_partial)(DPHD_ITEM_PARAM long long n, long long len, const double* x,
                              double* partial)
{
    const long long k = DPHD_ITEM;
    if (k >= n) return;
    double s = 0.0;
    for (long long j = k; j < len; j += n) s += x[j];
    partial[k] = s;
}

// The second pass of a block of reductions on the device: out[g] = the sum of the `chunks`
// partials partial[g * chunks .. (g + 1) * chunks) in order, the host's in-order sum of the
// same partials bit for bit (chunks >= 1). Only `n` numbers then cross instead of n * chunks.
DPHD_KERNEL(dphd_sum_groups)(DPHD_ITEM_PARAM long long n, long long chunks, const double* partial,
                             double* out)
{
    const long long g = DPHD_ITEM;
    if (g >= n) return;
    const double* p = partial + g * chunks;
    double s = p[0];
    for (long long k = 1; k < chunks; ++k) s += p[k];
    out[g] = s;
}

// dst[to[i]] = src[from[i]]   (a permutation composed with a scatter: the global solve's
// block back to the node-major vector; `to` injective, so no two items write one entry)
DPHD_KERNEL(dphd_permute_into)(DPHD_ITEM_PARAM long long n, const long long* from,
                               const long long* to, const double* src, double* dst)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    dst[to[i]] = src[from[i]];
}
