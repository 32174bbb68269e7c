// mpm.cu: one MLS-MPM substep (Hu et al. 2018; APIC, Jiang et al. 2015) in the kernel subset,
// the device form of crates/mpm/src/mpm/transfer.rs and grid.rs (docs/mpm.md, docs/gpu.md):
//
//   dphd_mpm_prepare      per particle: base node, B-spline weights, the stress
//                         A_p = m_p C_p - dt (4/h^2) V_p P_p F_p^T, the bin key (base node index)
//   (sort.cu)             particles sorted by key (stable), bin ranges by binary search
//   dphd_mpm_p2g          per node: the GATHER of mass and momentum over the particles of the
//                         27 bins i - d, d in {0,1,2}^3 (z, y, x nesting), each bin in
//                         particle order: the CPU reference's summation order
//   dphd_mpm_grid_update  per node: v = (mv)/m + dt g, then the walls
//   dphd_mpm_g2p          per particle: v_p, C_p, F <- (I + dt C) F, the return mapping,
//                         x <- x + dt v, into the *_out arrays (the host swaps them in only
//                         when no particle failed: a failed substep leaves the state as it was)
//
// Shared arguments: dims = [cells_x, cells_y, cells_z, wall_cells, wall kind of the faces
// x-, x+, y-, y+, z-, z+ (0 sticky, 1 slip, 2 separating)] (nodes per axis = cells + 1; node
// (i, j, k) is i + nx (j + ny k)); geo = [origin_x, origin_y, origin_z, h, g_x, g_y, g_z].
// Particle matrices are row-major 9 doubles; plastic state 2 doubles (plastic strain, log
// volume correction). Failures are codes per particle (0 = fine; value = det or distance):
//   1 outside the grid, 2 no such material, 3 inverted in P2G (models needing J > 0),
//   4 non-finite velocity, 5 moved more than h (CFL), 6 inverted before a return mapping,
//   7 non-finite F.
#include "device.h"
#include "mpm.h"

DPHD_KERNEL(dphd_mpm_prepare)(DPHD_ITEM_PARAM long long n, long long nmat, double dt,
                              const long long* dims, const double* geo, const double* x,
                              const double* c, const double* f, const double* mass,
                              const double* volume, const long long* material, const double* mat,
                              double* frac, double* weights, double* affine, int* key,
                              double* code, double* value)
{
    const long long p = DPHD_ITEM;
    if (p >= n) return;
    code[p] = 0.0;
    value[p] = 0.0;
    key[p] = 0;
    long long b[3];
    double fr[3];
    if (!dphd_mpm_base(dims, geo, x + 3 * p, b, fr)) {
        code[p] = 1.0;
        return;
    }
    const long long mi = material[p];
    if (mi < 0 || mi >= nmat) {
        code[p] = 2.0;
        value[p] = (double)mi;
        return;
    }
    const double* m = mat + DPHD_MPM_MAT * mi;
    const double* fp = f + 9 * p;
    if ((int)m[2] != 0) {
        const double det = dphd_mpm_det(fp);
        if (det <= 0.0) {
            code[p] = 3.0;
            value[p] = det;
            return;
        }
    }
    for (int a = 0; a < 3; ++a) {
        frac[3 * p + a] = fr[a];
        dphd_mpm_weights(fr[a], weights + 9 * p + 3 * a);
    }
    double pk[9];
    dphd_mpm_first_piola(m, fp, pk);
    const double h = geo[3];
    const double scale = dt * 4.0 / (h * h) * volume[p];
    for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 3; ++q) {
            // (P F^T)_rq = sum_k P_rk F_qk
            const double s = pk[3 * r] * fp[3 * q] + pk[3 * r + 1] * fp[3 * q + 1]
                           + pk[3 * r + 2] * fp[3 * q + 2];
            affine[9 * p + 3 * r + q] = mass[p] * c[9 * p + 3 * r + q] - scale * s;
        }
    const long long nx = dims[0] + 1, ny = dims[1] + 1;
    key[p] = (int)(b[0] + nx * (b[1] + ny * b[2]));
}

// P2G gather at node i (n = node count): start = bin ranges of the sorted particle list
// `sorted` (bins = nodes), gm = sum w m, gmv = sum w [m v + A (x_i - x_p)].
DPHD_KERNEL(dphd_mpm_p2g)(DPHD_ITEM_PARAM long long n, const long long* dims, const double* geo,
                          const int* start, const int* sorted, const double* frac,
                          const double* weights, const double* mass, const double* v,
                          const double* affine, double* gm, double* gmv)
{
    const long long idx = DPHD_ITEM;
    if (idx >= n) return;
    const long long nx = dims[0] + 1, ny = dims[1] + 1;
    const long long i = idx % nx, j = (idx / nx) % ny, k = idx / (nx * ny);
    const double h = geo[3];
    double m_i = 0.0, mv[3] = {0.0, 0.0, 0.0};
    for (long long dz = 0; dz < 3 && dz <= k; ++dz)
        for (long long dy = 0; dy < 3 && dy <= j; ++dy)
            for (long long dx = 0; dx < 3 && dx <= i; ++dx) {
                const long long bin = (i - dx) + nx * ((j - dy) + ny * (k - dz));
                const double d[3] = {(double)dx, (double)dy, (double)dz};
                for (int s = start[bin]; s < start[bin + 1]; ++s) {
                    const long long p = sorted[s];
                    const double* w = weights + 9 * p;
                    const double wip = w[dx] * w[3 + dy] * w[6 + dz];
                    double dpos[3];
                    for (int a = 0; a < 3; ++a) dpos[a] = h * (d[a] - frac[3 * p + a]);
                    const double* A = affine + 9 * p;
                    m_i += wip * mass[p];
                    for (int r = 0; r < 3; ++r) {
                        const double ad = A[3 * r] * dpos[0] + A[3 * r + 1] * dpos[1] + A[3 * r + 2] * dpos[2];
                        mv[r] += wip * (mass[p] * v[3 * p + r] + ad);
                    }
                }
            }
    gm[idx] = m_i;
    for (int r = 0; r < 3; ++r) gmv[3 * idx + r] = mv[r];
}

// Grid update at node idx: v = (mv)/m + dt g on nodes with mass (else 0), then the walls of
// the `wall_cells` outer layers (grid.rs, Grid::update). gv holds the momentum on entry.
DPHD_KERNEL(dphd_mpm_grid_update)(DPHD_ITEM_PARAM long long n, double dt, const long long* dims,
                                  const double* geo, const double* gm, double* gv)
{
    const long long idx = DPHD_ITEM;
    if (idx >= n) return;
    const double m = gm[idx];
    double* v = gv + 3 * idx;
    if (m <= 0.0) {
        v[0] = v[1] = v[2] = 0.0;
        return;
    }
    for (int a = 0; a < 3; ++a) v[a] = v[a] / m + dt * geo[4 + a];
    const long long nx = dims[0] + 1, ny = dims[1] + 1;
    const long long c[3] = {idx % nx, (idx / nx) % ny, idx / (nx * ny)};
    const long long t = dims[3];
    for (int a = 0; a < 3; ++a) {
        for (int side = 0; side < 2; ++side) {
            const bool on = side == 0 ? c[a] < t : c[a] > dims[a] - t;
            if (!on) continue;
            const long long kind = dims[4 + 2 * a + side];
            const double outward = side == 0 ? -1.0 : 1.0;
            if (kind == 0) {
                v[0] = v[1] = v[2] = 0.0;
            } else if (kind == 1) {
                v[a] = 0.0;
            } else if (v[a] * outward > 0.0) {
                v[a] = 0.0;
            }
        }
    }
}

// G2P, the F update and the return mapping for particle p (transfer.rs, grid_to_particle).
// A particle whose P2G failed (code != 0 from dphd_mpm_prepare) is left alone.
DPHD_KERNEL(dphd_mpm_g2p)(DPHD_ITEM_PARAM long long n, double dt, const long long* dims,
                          const double* geo, const double* gv, const double* frac,
                          const double* weights, const double* x, const double* f,
                          const double* plastic, const long long* material, const double* mat,
                          double* x_out, double* v_out, double* c_out, double* f_out,
                          double* plastic_out, double* code, double* value)
{
    const long long p = DPHD_ITEM;
    if (p >= n) return;
    if (code[p] != 0.0) return;
    const double h = geo[3];
    long long b[3];
    double fr[3];
    dphd_mpm_base(dims, geo, x + 3 * p, b, fr);
    const long long nx = dims[0] + 1, ny = dims[1] + 1;
    const double* w = weights + 9 * p;
    double vp[3] = {0.0, 0.0, 0.0}, bm[9];
    for (int k = 0; k < 9; ++k) bm[k] = 0.0;
    for (int ni = 0; ni < 27; ++ni) {
        const int dx = ni % 3, dy = (ni / 3) % 3, dz = ni / 9;
        const double wip = w[dx] * w[3 + dy] * w[6 + dz];
        const long long node = (b[0] + dx) + nx * ((b[1] + dy) + ny * (b[2] + dz));
        const double d[3] = {(double)dx, (double)dy, (double)dz};
        double dpos[3];
        for (int a = 0; a < 3; ++a) dpos[a] = h * (d[a] - frac[3 * p + a]);
        for (int r = 0; r < 3; ++r) {
            const double wv = wip * gv[3 * node + r];
            vp[r] += wv;
            for (int q = 0; q < 3; ++q) bm[3 * r + q] += wv * dpos[q];
        }
    }
    const double c_scale = 4.0 / (h * h);
    double cp[9];
    bool finite = isfinite(vp[0]) && isfinite(vp[1]) && isfinite(vp[2]);
    for (int k = 0; k < 9; ++k) {
        cp[k] = c_scale * bm[k];
        finite = finite && isfinite(cp[k]);
    }
    if (!finite) {
        code[p] = 4.0;
        return;
    }
    const double distance = dt * dphd_mpm_norm3(vp);
    if (distance > h) {
        code[p] = 5.0;
        value[p] = distance;
        return;
    }
    const double* m = mat + DPHD_MPM_MAT * material[p];
    // F_trial = (I + dt C) F
    double g[9], ft[9];
    for (int k = 0; k < 9; ++k) g[k] = (k % 4 == 0 ? 1.0 : 0.0) + dt * cp[k];
    dphd_mul3(g, f + 9 * p, ft);
    double ps[2] = {plastic[2 * p], plastic[2 * p + 1]};
    double fn[9];
    if ((int)m[3] == 0) {
        for (int k = 0; k < 9; ++k) fn[k] = ft[k];
    } else {
        const double det = dphd_mpm_det(ft);
        if (det <= 0.0) {
            code[p] = 6.0;
            value[p] = det;
            return;
        }
        dphd_mpm_return_map(m, ft, ps, fn);
    }
    for (int k = 0; k < 9; ++k)
        if (!isfinite(fn[k])) {
            code[p] = 7.0;
            return;
        }
    for (int a = 0; a < 3; ++a) {
        x_out[3 * p + a] = x[3 * p + a] + dt * vp[a];
        v_out[3 * p + a] = vp[a];
    }
    for (int k = 0; k < 9; ++k) {
        c_out[9 * p + k] = cp[k];
        f_out[9 * p + k] = fn[k];
    }
    plastic_out[2 * p] = ps[0];
    plastic_out[2 * p + 1] = ps[1];
}
