// sort.cu: a stable key/value sort and bin ranges in the kernel subset (one thread per item,
// no shared memory, no atomics), written once for every device re-binning: the MPM particles
// by grid cell every substep (kernels/mpm.cu) and, later, a device contact broad phase.
//
// The sort is a bottom-up merge sort in global memory: pass w merges the sorted runs
// [2kw, 2kw + w) and [2kw + w, 2kw + 2w) of (keys, vals) into the output arrays. Item i knows
// its own run and its rank there, and finds its rank in the partner run by a binary search:
// a left-run item counts the right run's keys < its key, a right-run item the left run's keys
// <= its key. Every output slot is written by exactly one item, so a pass is one launch with
// no synchronisation inside it; ceil(log2 n) passes ping-pong between two pairs of arrays.
// Equal keys keep their input order (stable): with vals = 0..n-1 on entry the result is the
// order of (key, index), the same as a stable counting sort on the host.
#include "device.h"

// out[i] = i (the identity permutation: the values of a stable sort by key).
DPHD_KERNEL(dphd_iota32)(DPHD_ITEM_PARAM long long n, int* out)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    out[i] = (int)i;
}

// One merge pass of width w (see the file comment): (keys_in, vals_in) -> (keys_out, vals_out).
DPHD_KERNEL(dphd_merge_pass)(DPHD_ITEM_PARAM long long n, long long w, const int* keys_in,
                             const int* vals_in, int* keys_out, int* vals_out)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    const long long lo = (i / (2 * w)) * (2 * w);
    const long long mid = lo + w < n ? lo + w : n;
    const long long hi = lo + 2 * w < n ? lo + 2 * w : n;
    const int key = keys_in[i];
    long long pos;
    if (i < mid) {
        // rank among the right run's keys strictly less than key
        long long a = mid, b = hi;
        while (a < b) {
            const long long m = a + (b - a) / 2;
            if (keys_in[m] < key) a = m + 1; else b = m;
        }
        pos = lo + (i - lo) + (a - mid);
    } else {
        // rank among the left run's keys less than or equal to key
        long long a = lo, b = mid;
        while (a < b) {
            const long long m = a + (b - a) / 2;
            if (keys_in[m] <= key) a = m + 1; else b = m;
        }
        pos = lo + (i - mid) + (a - lo);
    }
    keys_out[pos] = key;
    vals_out[pos] = vals_in[i];
}

// Bin ranges of sorted keys: start[c] = the first position p with keys[p] >= c, for the n =
// bins + 1 items c = 0..bins (so bin c holds positions [start[c], start[c+1]) and
// start[bins] = len when every key is below bins). One binary search per bin.
DPHD_KERNEL(dphd_bin_starts)(DPHD_ITEM_PARAM long long n, long long len, const int* keys,
                             int* start)
{
    const long long c = DPHD_ITEM;
    if (c >= n) return;
    long long a = 0, b = len;
    while (a < b) {
        const long long m = a + (b - a) / 2;
        if (keys[m] < c) a = m + 1; else b = m;
    }
    start[c] = (int)a;
}

// Exact conversions between 32-bit indices and doubles (|v| < 2^31 is exact in f64): the
// way 32-bit arrays cross the device seam, which moves only doubles and 64-bit indices.
DPHD_KERNEL(dphd_index32_to_real)(DPHD_ITEM_PARAM long long n, const int* src, double* dst)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    dst[i] = (double)src[i];
}

DPHD_KERNEL(dphd_real_to_index32)(DPHD_ITEM_PARAM long long n, const double* src, int* dst)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    dst[i] = (int)src[i];
}
