// sparse.cu: sparse matrix kernels of the global solve (spec §5.3, Eqs. 32-33).
// Matrices are CSR (row pointer, column index, value; 64-bit indices, except the inverse
// factor's column indices: 32-bit, a quarter of the bytes its SpMVs read, since session 15).
// Every kernel is a gather over one row, so no two items write the same entry.
#include "device.h"

// The inverse factor's two forms are stored SLICED (since session 14): the rows are cut into
// segments of at most DPHD_SLICE entries (gpu::pipeline::SEGMENT; segment s of a form is
// entries [seg[s], seg[s+1]) of the CSR order, row r's segments are [rseg[r], rseg[r+1])),
// and entry p of segment s is stored at ((s / 32) * 32 + p) * 32 + s % 32: the 32 segments of
// a group side by side, so the 32 threads of a warp that read entry p of 32 consecutive
// segments read 256 contiguous bytes (one thread per CSR segment read addresses 256 bytes
// apart). Padding slots (past a segment's length) are zero and never read. The arithmetic
// and its order per segment are those of the CSR form.
#define DPHD_SLICE 32

// The sliced position of entry p of segment s.
DPHD_FN long long dphd_sliced(long long s, long long p)
{
    return ((s / DPHD_SLICE) * DPHD_SLICE + p) * DPHD_SLICE + s % DPHD_SLICE;
}

// The sliced position of entry `off` of row r (its CSR position minus the row's start).
DPHD_FN long long dphd_sliced_at(const long long* rseg, long long r, long long off)
{
    return dphd_sliced(rseg[r] + off / DPHD_SLICE, off % DPHD_SLICE);
}

// Segmented SpMV, first pass (the explicit inverse factor's rows hold up to n entries: one
// thread per row left the GPU waiting on its longest rows). Every row's entries are cut into
// consecutive segments of at most gpu::pipeline::SEGMENT entries (cut on the host);
// segment s is [seg[s], seg[s+1]) and its item writes partial[s] = sum of val[k] x[col[k]]
// in entry order, val and col sliced (above).
DPHD_KERNEL(dphd_spmv_segments)(DPHD_ITEM_PARAM long long n, const long long* seg,
                                const int* col, const double* val, const double* x,
                                double* partial)
{
    const long long s = DPHD_ITEM;
    if (s >= n) return;
    const long long len = seg[s + 1] - seg[s];
    double acc = 0.0;
    for (long long p = 0; p < len; ++p) {
        const long long k = dphd_sliced(s, p);
        acc += val[k] * x[col[k]];
    }
    partial[s] = acc;
}

// Segmented SpMV, second pass: y[r] = sum of partial[s] for the segments s of row r,
// [rseg[r], rseg[r+1]), in order (0 for a row without entries). Deterministic two-pass sum.
DPHD_KERNEL(dphd_sum_segments)(DPHD_ITEM_PARAM long long n, const long long* rseg,
                               const double* partial, double* y)
{
    const long long r = DPHD_ITEM;
    if (r >= n) return;
    double acc = 0.0;
    for (long long s = rseg[r]; s < rseg[r + 1]; ++s) acc += partial[s];
    y[r] = acc;
}

// Segmented SpMV of a row-interleaved block of k columns (the three axes of the global
// solve at once), first pass: item t = s * k + c sums segment s of column c, partial[t] =
// sum of val[p] x[col[p] * k + c] in entry order (dphd_spmv_segments' arithmetic per column;
// sliced).
DPHD_KERNEL(dphd_spmv_segments_multi)(DPHD_ITEM_PARAM long long n, long long k,
                                      const long long* seg, const int* col,
                                      const double* val, const double* x, double* partial)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    const long long s = t / k;
    const long long c = t - s * k;
    const long long len = seg[s + 1] - seg[s];
    double acc = 0.0;
    for (long long p = 0; p < len; ++p) {
        const long long e = dphd_sliced(s, p);
        acc += val[e] * x[col[e] * k + c];
    }
    partial[t] = acc;
}

// Second pass of the block form: y[r * k + c] = sum of partial[s * k + c] over the segments s
// of row r in order (dphd_sum_segments' arithmetic per column, so every column equals the
// single-column product bitwise).
DPHD_KERNEL(dphd_sum_segments_multi)(DPHD_ITEM_PARAM long long n, long long k,
                                     const long long* rseg, const double* partial, double* y)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    const long long r = t / k;
    const long long c = t - r * k;
    double acc = 0.0;
    for (long long s = rseg[r]; s < rseg[r + 1]; ++s) acc += partial[s * k + c];
    y[t] = acc;
}

// One level of a level-scheduled lower-triangular solve L x = b, in place in x.
// `rows[offset..offset+n)` are the rows of this level (their dependencies are in earlier levels).
// L is CSR with the diagonal entry LAST in each row (columns ascending).
DPHD_KERNEL(dphd_trisolve_lower_level)(DPHD_ITEM_PARAM long long n, long long offset, const long long* rows,
                                       const long long* ptr, const long long* col,
                                       const double* val, double* x)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    const long long r = rows[offset + t];
    const long long end = ptr[r + 1] - 1;
    double s = x[r];
    for (long long k = ptr[r]; k < end; ++k) s -= val[k] * x[col[k]];
    x[r] = s / val[end];
}

// One level of a level-scheduled upper-triangular solve U x = b, in place in x.
// U (= L^T) is CSR with the diagonal entry FIRST in each row (columns ascending).
DPHD_KERNEL(dphd_trisolve_upper_level)(DPHD_ITEM_PARAM long long n, long long offset, const long long* rows,
                                       const long long* ptr, const long long* col,
                                       const double* val, double* x)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    const long long r = rows[offset + t];
    const long long beg = ptr[r];
    double s = x[r];
    for (long long k = beg + 1; k < ptr[r + 1]; ++k) s -= val[k] * x[col[k]];
    x[r] = s / val[beg];
}

// Sparse inverse factor S = L^{-1} (spec §2.8 Eq. 32, §5.2 step 4), one elimination-tree depth
// per launch from the roots down, one item per (column, path position). From S L = I:
//   S[:, j] = (e_j - sum_{k > j, L_kj != 0} L_kj S[:, k]) / L_jj,
// and every such k is an ancestor of j, so column k is stored on a suffix of j's path: the
// entry at position p of j's path (0 = j itself) is
//   (delta_p0 - sum_k L_kj s_k[p - q_k]) / L_jj,   q_k = depth[j] - depth[k], terms with p >= q_k,
// where s_k[.] are column k's stored values (computed by an earlier launch: k is shallower).
// The columns of this launch are cols[offset .. offset + n / len), all at the depth len - 1,
// so each has len entries: item t is column t / len, position t % len.
// L is CSC with the diagonal entry FIRST in each column; S is CSC with column j's path
// (ascending rows) sliced: position p of column j at dphd_sliced_at(cseg, j, p).
DPHD_KERNEL(dphd_inverse_factor_level)(DPHD_ITEM_PARAM long long n, long long len, long long offset,
                                       const long long* cols, const long long* depth,
                                       const long long* lptr, const long long* lrow,
                                       const double* lval, const long long* cseg, double* sval)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    const long long c = t / len;
    const long long p = t - c * len;
    const long long j = cols[offset + c];
    double acc = p == 0 ? 1.0 : 0.0;
    for (long long q = lptr[j] + 1; q < lptr[j + 1]; ++q) {
        const long long k = lrow[q];
        const long long qk = depth[j] - depth[k];
        if (p >= qk) acc -= lval[q] * sval[dphd_sliced_at(cseg, k, p - qk)];
    }
    sval[dphd_sliced_at(cseg, j, p)] = acc / lval[lptr[j]];
}

// The index pattern of S (CSC), built on the device alongside its values, one depth per launch
// with the same schedule as dphd_inverse_factor_level: column j holds its elimination-tree path
// j, parent(j), ..., root, so position p of j's path is j itself (p = 0) or position p - 1 of
// its parent's path (computed by an earlier launch: the parent is shallower).
DPHD_KERNEL(dphd_inverse_pattern_level)(DPHD_ITEM_PARAM long long n, long long len, long long offset,
                                         const long long* cols, const long long* parent,
                                         const long long* cseg, int* srow)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    const long long c = t / len;
    const long long p = t - c * len;
    const long long j = cols[offset + c];
    srow[dphd_sliced_at(cseg, j, p)] = p == 0 ? (int)j : srow[dphd_sliced_at(cseg, parent[j], p - 1)];
}

// The row form of S (CSR) from its CSC values, one item per stored entry (n = nnz(S)): row i of
// S holds the columns whose path passes i, i.e. i's elimination-tree descendants (i included),
// which a postorder lists contiguously: post[first[i] .. first[i] + rptr[i+1] - rptr[i]).
// Entry (i, j) sits at position depth[j] - depth[i] of column j's path. The row of entry q is
// found by bisection of rptr (every row holds its diagonal, so none is empty). Both forms
// sliced: the row form's entry q at dphd_sliced_at(rseg, i, q - rptr[i]), the column form's
// through cseg.
DPHD_KERNEL(dphd_inverse_rows)(DPHD_ITEM_PARAM long long n, long long rows,
                               const long long* rptr, const long long* rseg,
                               const long long* post, const long long* first,
                               const long long* depth, const long long* cseg,
                               const double* sval, int* rcol, double* rval)
{
    const long long q = DPHD_ITEM;
    if (q >= n) return;
    long long lo = 0, hi = rows;  // invariant: rptr[lo] <= q < rptr[hi]
    while (hi - lo > 1) {
        const long long mid = lo + (hi - lo) / 2;
        if (rptr[mid] <= q) lo = mid; else hi = mid;
    }
    const long long i = lo;
    const long long j = post[first[i] + (q - rptr[i])];
    const long long at = dphd_sliced_at(rseg, i, q - rptr[i]);
    rcol[at] = (int)j;
    rval[at] = sval[dphd_sliced_at(cseg, j, depth[j] - depth[i])];
}

// ---------------------------------------------------------------------------------------------
// Multi-RHS forms (k right-hand sides per launch; the contact Delassus columns, spec §2.9 and
// issue 15 "Delassus columns by multi-RHS solves"). A block of k vectors of length n is stored
// row-interleaved: entry (r, c) at r * k + c, so neighbouring items share a matrix row and read
// neighbouring entries. One item per (row, rhs) pair: item t is row t / k, rhs t % k. Each item
// does exactly the arithmetic of the single-RHS kernel on its column, in the same order, so the
// results equal k single solves bitwise.

// dst[r * k + c] = src[map[r] * k + c]: the permutation of a block (n = rows * k items).
DPHD_KERNEL(dphd_gather_perm_multi)(DPHD_ITEM_PARAM long long n, long long k, const long long* map,
                                    const double* src, double* dst)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    const long long r = t / k;
    const long long c = t - r * k;
    dst[t] = src[map[r] * k + c];
}

// Y = M X for a CSR matrix M and a block X of k columns (n = rows * k items).
DPHD_KERNEL(dphd_spmv_csr_multi)(DPHD_ITEM_PARAM long long n, long long k, const long long* ptr,
                                 const long long* col, const double* val, const double* x,
                                 double* y)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    const long long r = t / k;
    const long long c = t - r * k;
    double s = 0.0;
    for (long long p = ptr[r]; p < ptr[r + 1]; ++p) s += val[p] * x[col[p] * k + c];
    y[t] = s;
}

// Y = M X for a block of k columns with M's segments (n = rows * k items): item t sums row
// t / k of column t % k segment by segment, exactly the arithmetic of dphd_spmv_segments and
// dphd_sum_segments on that column, so each column equals the single-RHS product bitwise.
DPHD_KERNEL(dphd_spmv_segmented_multi)(DPHD_ITEM_PARAM long long n, long long k,
                                       const long long* rseg, const long long* seg,
                                       const int* col, const double* val,
                                       const double* x, double* y)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    const long long r = t / k;
    const long long c = t - r * k;
    double acc = 0.0;
    for (long long s = rseg[r]; s < rseg[r + 1]; ++s) {
        double part = 0.0;
        const long long len = seg[s + 1] - seg[s];
        for (long long p = 0; p < len; ++p) {
            const long long e = dphd_sliced(s, p);
            part += val[e] * x[col[e] * k + c];
        }
        acc += part;
    }
    y[t] = acc;
}

// One level of L X = B for a block of k columns, in place in x (n = level size * k items):
// as dphd_trisolve_lower_level on column t % k of row rows[offset + t / k].
DPHD_KERNEL(dphd_trisolve_lower_level_multi)(DPHD_ITEM_PARAM long long n, long long k,
                                             long long offset, const long long* rows,
                                             const long long* ptr, const long long* col,
                                             const double* val, double* x)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    const long long l = t / k;
    const long long c = t - l * k;
    const long long r = rows[offset + l];
    const long long end = ptr[r + 1] - 1;
    double s = x[r * k + c];
    for (long long p = ptr[r]; p < end; ++p) s -= val[p] * x[col[p] * k + c];
    x[r * k + c] = s / val[end];
}

// One level of L^T X = B for a block of k columns, in place in x: as
// dphd_trisolve_upper_level on column t % k of row rows[offset + t / k].
DPHD_KERNEL(dphd_trisolve_upper_level_multi)(DPHD_ITEM_PARAM long long n, long long k,
                                             long long offset, const long long* rows,
                                             const long long* ptr, const long long* col,
                                             const double* val, double* x)
{
    const long long t = DPHD_ITEM;
    if (t >= n) return;
    const long long l = t / k;
    const long long c = t - l * k;
    const long long r = rows[offset + l];
    const long long beg = ptr[r];
    double s = x[r * k + c];
    for (long long p = beg + 1; p < ptr[r + 1]; ++p) s -= val[p] * x[col[p] * k + c];
    x[r * k + c] = s / val[beg];
}
