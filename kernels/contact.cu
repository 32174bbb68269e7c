// contact.cu: the dense contact operator of a PD step on the device (spec §2.9 "Delassus",
// §6.2 steps 3 and 10-18; docs/gpu.md "Contact on the device"). Per step the columns
// X = A^{-1} J^T of the contact rows are solved on the device from unit spikes built here
// (no 3n-long right-hand side crosses), kept there, and W = J X is formed there; per PD
// iteration only delta0 = J x^ - d goes down and the multipliers lambda come up, and
// x^ += X lambda runs here. Every kernel mirrors the host code's arithmetic in its order
// (contact::dense::DenseDelassus::new / add_x, contact::ContactSet::delta), one thread per
// item, no atomics.
//
// Row records (CONTACT_ROW doubles each, built by gpu::contact::RowRecords):
//   [0..3) a_r, the row's direction; [3] d_r; then four terms (node, column, coefficient):
//   [4 + 3t] node, [5 + 3t] column of X (the node's index among the distinct nodes),
//   [6 + 3t] coefficient (0: unused, skipped as the host filters c != 0).
#include "device.h"

#define CONTACT_ROW 16

// Unit spikes of a block of k columns (row-interleaved, entry (j, c) at j k + c): column c has
// a one at row pos[c] (the spiked node's position in the reduced system's free order, or -1
// for a prescribed node: a zero column, as the homogeneous solve's z_D = 0 and q_D unread).
DPHD_KERNEL(dphd_contact_spikes)(DPHD_ITEM_PARAM long long n, long long k, const double* pos,
                                 double* out)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    const long long j = t / k;
    const long long c = t % k;
    out[t] = ((long long)pos[c] == j) ? 1.0 : 0.0;
}

// A solved block (free order, k = q * cols columns; column c = (node column c / q, axis c % q))
// into the node-major columns X (column kc at kc * n3): X[(c0 + c / q) n3 + base[j] + axes[c % q]]
// (base[j] = 3 * free node j). Injective: each target is written by one item.
DPHD_KERNEL(dphd_contact_unblock)(DPHD_ITEM_PARAM long long n, long long k, long long q,
                                  long long n3, long long c0, const double* base,
                                  const double* axes, const double* src, double* x)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    const long long j = t / k;
    const long long c = t % k;
    const long long kc = c0 + c / q;
    x[kc * n3 + (long long)base[j] + (long long)axes[c % q]] = src[t];
}

// W = J X, one item per entry (r, s) of the m x m matrix: the host's value of the pair
// (min, max) in its loop order, so both triangles hold the same bits
// (contact::DenseDelassus::new, axis-decoupled: (A^{-1})_{(i,d),(k,d)} = X[col(k)][3 i + d]).
DPHD_KERNEL(dphd_contact_delassus)(DPHD_ITEM_PARAM long long n, long long m, long long n3,
                                   const double* rows, const double* x, double* w)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    long long r = t / m;
    long long s = t % m;
    if (s < r) {
        const long long tmp = r;
        r = s;
        s = tmp;
    }
    const double* ar = rows + r * CONTACT_ROW;
    const double* as = rows + s * CONTACT_ROW;
    double v = 0.0;
    for (int p = 0; p < 4; ++p) {
        const double cr = ar[6 + 3 * p];
        if (cr == 0.0) continue;
        const long long ir = (long long)ar[4 + 3 * p];
        for (int q = 0; q < 4; ++q) {
            const double cs = as[6 + 3 * q];
            if (cs == 0.0) continue;
            const long long col = (long long)as[5 + 3 * q];
            const double* xc = x + col * n3 + 3 * ir;
            double tt = 0.0;
            for (int d = 0; d < 3; ++d) {
                tt += ar[d] * as[d] * xc[d];
            }
            v += cr * cs * tt;
        }
    }
    w[t] = v;
}

// delta_r = J_r x - d_r (contact::ContactSet::delta: the terms with c != 0 summed in order).
DPHD_KERNEL(dphd_contact_delta)(DPHD_ITEM_PARAM long long n, const double* rows,
                                const double* x, double* delta)
{
    const long long r = DPHD_ITEM;
    if (r >= n) return;
    const double* a = rows + r * CONTACT_ROW;
    double v = 0.0;
    for (int p = 0; p < 4; ++p) {
        const double c = a[6 + 3 * p];
        if (c == 0.0) continue;
        const long long i = (long long)a[4 + 3 * p];
        v += c * (a[0] * x[3 * i] + a[1] * x[3 * i + 1] + a[2] * x[3 * i + 2]);
    }
    delta[r] = v - a[3];
}

// The per-column forces of X lambda: f[3 c + d] = sum over the (row, coefficient) entries of
// column c, in row order, of a_r[d] (coef lambda_r) (contact::DenseDelassus::add_x: a
// gather through the column lists ptr / ent = (row, coefficient) pairs, built on the host).
DPHD_KERNEL(dphd_contact_forces)(DPHD_ITEM_PARAM long long n, const double* ptr,
                                 const double* ent, const double* rows, const double* lambda,
                                 double* f)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    const long long c = t / 3;
    const long long d = t % 3;
    double v = 0.0;
    for (long long e = (long long)ptr[c]; e < (long long)ptr[c + 1]; ++e) {
        const long long r = (long long)ent[2 * e];
        v += rows[r * CONTACT_ROW + d] * (ent[2 * e + 1] * lambda[r]);
    }
    f[t] = v;
}

// x[i] += sum_c f[3 c + i % 3] X[c][i] over the columns in order, skipping columns whose force
// is zero (contact::DenseDelassus::add_x, axis-decoupled).
DPHD_KERNEL(dphd_contact_add_x)(DPHD_ITEM_PARAM long long n, long long cols, const double* f,
                                const double* xcols, double* x)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    const long long d = i % 3;
    double v = x[i];
    for (long long c = 0; c < cols; ++c) {
        const double* fc = f + 3 * c;
        if (fc[0] * fc[0] + fc[1] * fc[1] + fc[2] * fc[2] == 0.0) continue;
        v += fc[d] * xcols[c * n + i];
    }
    x[i] = v;
}

// --- the body-body broad phase on the device (gpu::contact_grid; contact::bodies::Grid) ---
// A uniform grid of cell `cell`: each boundary triangle's box (its nodes' box padded by
// `pad`) covers the cells floor(lo / cell) ..= floor(hi / cell) per axis; the (cell, triangle)
// pairs are sorted by cell key with sort.cu's stable merge sort, and each queried node finds
// its cell's triangles by two binary searches: the lists of contact::bodies::Grid::at.

// Per triangle: the cell ranges [a0, a1, a2, b0, b1, b2] of its padded box (as doubles).
DPHD_KERNEL(dphd_grid_tri_cells)(DPHD_ITEM_PARAM long long n, double cell, double pad,
                                 const double* tris, const double* x, double* out)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    for (int d = 0; d < 3; ++d) {
        double lo = x[3 * (long long)tris[3 * t] + d];
        double hi = lo;
        for (int k = 1; k < 3; ++k) {
            const double p = x[3 * (long long)tris[3 * t + k] + d];
            lo = fmin(lo, p);
            hi = fmax(hi, p);
        }
        out[6 * t + d] = floor((lo - pad) / cell);
        out[6 * t + 3 + d] = floor((hi + pad) / cell);
    }
}

// Per triangle: its (cell key, triangle) pairs from offs[t], cells in x, y, z nesting; key =
// (i - o0) + nx ((j - o1) + ny (k - o2)). Each item writes its own range.
DPHD_KERNEL(dphd_grid_tri_pairs)(DPHD_ITEM_PARAM long long n, long long o0, long long o1,
                                 long long o2, long long nx, long long ny,
                                 const double* ranges, const double* offs, int* keys,
                                 int* vals)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    const double* r = ranges + 6 * t;
    long long p = (long long)offs[t];
    for (long long i = (long long)r[0]; i <= (long long)r[3]; ++i) {
        for (long long j = (long long)r[1]; j <= (long long)r[4]; ++j) {
            for (long long k = (long long)r[2]; k <= (long long)r[5]; ++k) {
                keys[p] = (int)((i - o0) + nx * ((j - o1) + ny * (k - o2)));
                vals[p] = (int)t;
                ++p;
            }
        }
    }
}

// Per queried node: the range [start, end) of its cell's pairs in the sorted keys (empty
// outside the grid).
DPHD_KERNEL(dphd_grid_node_ranges)(DPHD_ITEM_PARAM long long n, double cell, long long o0,
                                   long long o1, long long o2, long long nx, long long ny,
                                   long long nz, long long len, const double* nodes,
                                   const double* x, const int* keys, double* out)
{
    const long long q = DPHD_ITEM;
    if (q >= n) return;
    const long long i = (long long)nodes[q];
    const long long c0 = (long long)floor(x[3 * i] / cell) - o0;
    const long long c1 = (long long)floor(x[3 * i + 1] / cell) - o1;
    const long long c2 = (long long)floor(x[3 * i + 2] / cell) - o2;
    out[2 * q] = 0.0;
    out[2 * q + 1] = 0.0;
    if (c0 < 0 || c1 < 0 || c2 < 0 || c0 >= nx || c1 >= ny || c2 >= nz) return;
    const long long key = c0 + nx * (c1 + ny * c2);
    long long a = 0, b = len;
    while (a < b) {
        const long long m = a + (b - a) / 2;
        if ((long long)keys[m] < key) a = m + 1; else b = m;
    }
    long long e = a, f = len;
    while (e < f) {
        const long long m = e + (f - e) / 2;
        if ((long long)keys[m] <= key) e = m + 1; else f = m;
    }
    out[2 * q] = (double)a;
    out[2 * q + 1] = (double)e;
}

// --- the wide block solve of the Delassus columns (docs/gpu.md "Next" 1) ---
// The sliced layout of S (sparse.cu dphd_sliced: entry p of segment s at
// (32 floor(s / 32) + p) 32 + s % 32) serves one and three columns; a wide block's warp is 32
// columns of one row sharing each entry, for which the segments' entries are best contiguous.
// dphd_contact_unslice copies a form into that flat (CSR) order once, and
// dphd_contact_spmv_wide is dphd_spmv_segmented_multi on it: the same segments, the same
// sums in the same order, so the same bits.

// One item per entry e of the flat order: its segment s (seg[s] <= e < seg[s + 1], by
// bisection over the nseg segments) and position p = e - seg[s].
DPHD_KERNEL(dphd_contact_unslice)(DPHD_ITEM_PARAM long long n, long long nseg,
                                  const long long* seg, const int* col, const double* val,
                                  int* fcol, double* fval)
{
    const long long e = DPHD_ITEM;
    if (e >= n) return;
    long long a = 0, b = nseg;
    while (b - a > 1) {
        const long long m = a + (b - a) / 2;
        if (seg[m] <= e) a = m; else b = m;
    }
    const long long p = e - seg[a];
    const long long slot = (32 * (a / 32) + p) * 32 + a % 32;
    fcol[e] = col[slot];
    fval[e] = val[slot];
}

// Y = M X for k columns on the flat copy, one item per (row, column): each segment's partial
// in order, then the row's partials in order (dphd_spmv_segmented_multi's arithmetic).
DPHD_KERNEL(dphd_contact_spmv_wide)(DPHD_ITEM_PARAM long long n, long long k,
                                    const long long* rseg, const long long* seg,
                                    const int* col, const double* val, const double* x,
                                    double* y)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    const long long r = t / k;
    const long long c = t - r * k;
    double acc = 0.0;
    for (long long s = rseg[r]; s < rseg[r + 1]; ++s) {
        double part = 0.0;
        for (long long e = seg[s]; e < seg[s + 1]; ++e) {
            part += val[e] * x[(long long)col[e] * k + c];
        }
        acc += part;
    }
    y[t] = acc;
}
