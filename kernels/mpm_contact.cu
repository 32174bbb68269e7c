// mpm_contact.cu: the convex MPM-rigid contact solve of one substep in the kernel subset (seed
// Algorithm 1; docs/mpm.md "The convex problem and its solvers", docs/gpu.md "MPM contact"),
// the device form of crates/mpm/src/contact/{coupling,grid,model}.rs:
//
//   v = argmin 1/2 sum_k (v_k - v*_k)^T M_k (v_k - v*_k) + sum_c l_c(R_c^T sum_k w_ck v_k - b_c)
//
// with the lagged Hunt-Crossley cost l_c (model.rs), solved by the block-diagonal
// quasi-Newton method with the exact line search. Kernels, in the order the host runs them:
//
//   dphd_mpm_contact_start     per node entry: v* <- damp v* (grid damping), v <- v*
//   dphd_mpm_contact_register  per particle: one contact SLOT per (particle, geometry), active
//                              when the particle is inside (phi < 0) at the frozen rigid pose:
//                              frame R_c, bias b_c = R_c^T v_r(x_p), lever x_p - com, the lagged
//                              model (k, d, mu, dt, f_e0, n_0, eps) with the Delassus estimate
//                              w = sum_k w_k^2 / m_k (coupling.rs, assemble_substep_problem)
//   dphd_mpm_contact_eval      per slot: v_c = R^T sum w v - b, gamma(v_c), G(v_c), and the
//                              world forms R gamma and R G R^T the nodes gather
//   dphd_mpm_contact_node      per node: the GATHER over the particles of the 27 bins i - d
//                              (the P2G bins of the substep) of w R gamma and w^2 R G R^T:
//                              grad = M (v - v*) - J^T gamma, H = M + sum w^2 R G R^T, the
//                              3x3 Cholesky step dv = -H^-1 grad, and the per-node terms of
//                              the stopping test and the line search (column-major, 6 columns:
//                              grad^2/m, m v^2, (J^T gamma)^2/m, grad.dv, dv^T M dv, not-SPD)
//   dphd_mpm_sum_columns       first pass of the deterministic sums of those columns
//   dphd_mpm_contact_direction per slot: dv_c = R^T sum w dv
//   dphd_mpm_contact_line      strided partials of the line search's phi'(alpha) and
//                              phi''(alpha) contact terms (the difference form of grid.rs)
//   (vector.cu dphd_axpy)      v += alpha dv
//   dphd_mpm_contact_wrench    strided partials of the impulses -R gamma and their moments
//                              about each body's centre of mass (per body, 6 numbers)
//
// No atomics: the node side is a gather over the sorted bins, every sum a strided partial
// summed in order on the host. Geometry rows (DPHD_MC_ROW doubles, gpu::mpm_contact):
//   [0] kind (0 half-space, 1 sphere, 2 box, 3 capsule, 4 cylinder), [1] body index (-1 none),
//   [2..5) shape parameters (sphere r; box half extents; capsule/cylinder r, half length) or
//   the half-space's outward normal, [5] the half-space offset, [6..15) R (shape to world,
//   row-major), [15..18) t (shape origin), [18..21) centre of mass, [21..24) v, [24..27) omega,
//   [27..32) k, d, mu, v_s, sigma (the geometry's MPM contact parameters).
// Slot s = p * ng + g: the CPU's contact order (particles, then bodies, then half-spaces).
// Model rows (DPHD_MC_MODEL doubles): k, d, mu, dt, f_e0, n_0, eps, unused.
#include "device.h"
#include "mpm.h"

#define DPHD_MC_ROW 32
#define DPHD_MC_MODEL 8

// Normal impulse n(v_n) = dt (f_e0 - dt k v_n)_+ (1 - d v_n)_+ (model.rs, normal_impulse).
DPHD_FN double dphd_mc_normal(const double* m, double vn)
{
    const double fe = m[4] - m[3] * m[0] * vn;
    const double damping = 1.0 - m[1] * vn;
    if (fe <= 0.0 || damping <= 0.0) return 0.0;
    return m[3] * fe * damping;
}

// n'(v_n) <= 0 (model.rs, normal_impulse_derivative).
DPHD_FN double dphd_mc_normal_derivative(const double* m, double vn)
{
    const double fe = m[4] - m[3] * m[0] * vn;
    const double damping = 1.0 - m[1] * vn;
    if (fe <= 0.0 || damping <= 0.0) return 0.0;
    return -m[3] * (m[3] * m[0] * damping + m[1] * fe);
}

// gamma = (-mu n0 v_t / S, n(v_n)), S = sqrt(|v_t|^2 + eps^2) (model.rs, impulse).
DPHD_FN void dphd_mc_impulse(const double* m, const double* vc, double* g)
{
    const double s = sqrt(vc[0] * vc[0] + vc[1] * vc[1] + m[6] * m[6]);
    const double f = -m[2] * m[5] / s;
    g[0] = vc[0] * f;
    g[1] = vc[1] * f;
    g[2] = dphd_mc_normal(m, vc[2]);
}

// G = diag(mu n0 (I - v_t v_t^T / S^2) / S, -n'(v_n)), row-major (model.rs, hessian).
DPHD_FN void dphd_mc_hessian(const double* m, const double* vc, double* h)
{
    const double s = sqrt(vc[0] * vc[0] + vc[1] * vc[1] + m[6] * m[6]);
    const double f = m[2] * m[5] / s;
    const double s2 = s * s;
    for (int r = 0; r < 2; ++r)
        for (int c = 0; c < 2; ++c)
            h[3 * r + c] = ((r == c ? 1.0 : 0.0) - vc[r] * vc[c] / s2) * f;
    h[2] = h[5] = h[6] = h[7] = 0.0;
    h[8] = -dphd_mc_normal_derivative(m, vc[2]);
}

// The contact frame R = [t1 t2 n] (columns; row-major out) of a normal (model.rs,
// contact_frame): t1 from the world axis least aligned with n.
DPHD_FN void dphd_mc_frame(const double* normal, double* r)
{
    const double len = sqrt(normal[0] * normal[0] + normal[1] * normal[1] + normal[2] * normal[2]);
    const double n[3] = {normal[0] / len, normal[1] / len, normal[2] / len};
    double a[3] = {0.0, 0.0, 0.0};
    if (fabs(n[0]) < 0.57) a[0] = 1.0;
    else if (fabs(n[1]) < 0.57) a[1] = 1.0;
    else a[2] = 1.0;
    const double na = n[0] * a[0] + n[1] * a[1] + n[2] * a[2];
    double t1[3];
    for (int k = 0; k < 3; ++k) t1[k] = a[k] - n[k] * na;
    const double tl = sqrt(t1[0] * t1[0] + t1[1] * t1[1] + t1[2] * t1[2]);
    for (int k = 0; k < 3; ++k) t1[k] = t1[k] / tl;
    double t2[3];
    dphd_cross(n, t1, t2);
    for (int k = 0; k < 3; ++k) {
        r[3 * k] = t1[k];
        r[3 * k + 1] = t2[k];
        r[3 * k + 2] = n[k];
    }
}

// Signed distance (negative inside) and outward unit normal (shape frame) of the shapes of
// crates/mpm/src/rigid/shape.rs (Shape::sdf), parameters q.
DPHD_FN double dphd_mc_shape_sdf(int kind, const double* q, const double* p, double* n)
{
    if (kind == 1) {
        const double d = sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]);
        if (d > 0.0) {
            for (int a = 0; a < 3; ++a) n[a] = p[a] / d;
        } else {
            n[0] = 0.0; n[1] = 0.0; n[2] = 1.0;
        }
        return d - q[0];
    }
    if (kind == 2) {
        double e[3], sgn[3];
        for (int a = 0; a < 3; ++a) {
            e[a] = fabs(p[a]) - q[a];
            sgn[a] = p[a] < 0.0 ? -1.0 : 1.0;
        }
        int axis = 0;
        for (int a = 1; a < 3; ++a)
            if (e[a] > e[axis]) axis = a;
        if (e[axis] > 0.0) {
            double out[3];
            for (int a = 0; a < 3; ++a) out[a] = e[a] > 0.0 ? e[a] : 0.0;
            const double d = sqrt(out[0] * out[0] + out[1] * out[1] + out[2] * out[2]);
            for (int a = 0; a < 3; ++a) n[a] = out[a] * sgn[a] / d;
            return d;
        }
        for (int a = 0; a < 3; ++a) n[a] = 0.0;
        n[axis] = sgn[axis];
        return e[axis];
    }
    if (kind == 3) {
        const double hl = q[1];
        const double cz = p[2] < -hl ? -hl : (p[2] > hl ? hl : p[2]);
        const double d[3] = {p[0], p[1], p[2] - cz};
        const double len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
        if (len > 0.0) {
            for (int a = 0; a < 3; ++a) n[a] = d[a] / len;
        } else {
            n[0] = 1.0; n[1] = 0.0; n[2] = 0.0;
        }
        return len - q[0];
    }
    // cylinder along z
    const double rho = sqrt(p[0] * p[0] + p[1] * p[1]);
    double u[3] = {1.0, 0.0, 0.0};
    if (rho > 0.0) {
        u[0] = p[0] / rho;
        u[1] = p[1] / rho;
    }
    const double sz = p[2] < 0.0 ? -1.0 : 1.0;
    const double dr = rho - q[0], dz = fabs(p[2]) - q[1];
    if (dr > 0.0 || dz > 0.0) {
        const double a = dr > 0.0 ? dr : 0.0, b = dz > 0.0 ? dz : 0.0;
        const double d = sqrt(a * a + b * b);
        n[0] = u[0] * a / d;
        n[1] = u[1] * a / d;
        n[2] = sz * b / d;
        return d;
    }
    if (dr > dz) {
        for (int a = 0; a < 3; ++a) n[a] = u[a];
        return dr;
    }
    n[0] = 0.0; n[1] = 0.0; n[2] = sz;
    return dz;
}

// Signed distance and outward unit normal (world) of geometry row g at world point x.
DPHD_FN double dphd_mc_sdf(const double* g, const double* x, double* nw)
{
    const int kind = (int)g[0];
    if (kind == 0) {
        for (int a = 0; a < 3; ++a) nw[a] = g[2 + a];
        return g[2] * x[0] + g[3] * x[1] + g[4] * x[2] - g[5];
    }
    const double* r = g + 6;
    const double* t = g + 15;
    double p[3], ns[3];
    for (int a = 0; a < 3; ++a)
        p[a] = r[a] * (x[0] - t[0]) + r[3 + a] * (x[1] - t[1]) + r[6 + a] * (x[2] - t[2]);
    const double phi = dphd_mc_shape_sdf(kind, g + 2, p, ns);
    for (int a = 0; a < 3; ++a) nw[a] = r[3 * a] * ns[0] + r[3 * a + 1] * ns[1] + r[3 * a + 2] * ns[2];
    return phi;
}

// Node index and weight of stencil entry ni = dx + 3 dy + 9 dz of a particle with base b.
DPHD_FN long long dphd_mc_stencil(const long long* dims, const long long* b, const double* w, int ni,
                                  double* wip)
{
    const int dx = ni % 3, dy = (ni / 3) % 3, dz = ni / 9;
    const long long nx = dims[0] + 1, ny = dims[1] + 1;
    *wip = w[dx] * w[3 + dy] * w[6 + dz];
    return (b[0] + dx) + nx * ((b[1] + dy) + ny * (b[2] + dz));
}

// v* <- damp v* (the grid damping of the substep), v <- v*: n = 3 nodes entries.
DPHD_KERNEL(dphd_mpm_contact_start)(DPHD_ITEM_PARAM long long n, double damp, double* gv,
                                    double* vstar)
{
    const long long i = DPHD_ITEM;
    if (i >= n) return;
    if (damp != 1.0) gv[i] = gv[i] * damp;
    vstar[i] = gv[i];
}

// Contact registration, one item per particle p (n particles, ng geometries): slot p ng + g
// is active when the particle (fine after P2G: code 0) is inside geometry g.
DPHD_KERNEL(dphd_mpm_contact_register)(DPHD_ITEM_PARAM long long n, long long ng, double dt,
                                       const long long* dims, const double* geo,
                                       const double* rig, const double* x, const double* v,
                                       const double* weights, const double* gm,
                                       const double* code, double* frame, double* bias,
                                       double* model, double* lever, double* active)
{
    const long long p = DPHD_ITEM;
    if (p >= n) return;
    bool fine = code[p] == 0.0;
    long long b[3];
    double fr[3];
    if (fine) fine = dphd_mpm_base(dims, geo, x + 3 * p, b, fr);
    bool delassus_known = false;
    double delassus = 0.0;
    const double* xp = x + 3 * p;
    const double* vp = v + 3 * p;
    for (long long g = 0; g < ng; ++g) {
        const long long s = p * ng + g;
        active[s] = 0.0;
        if (!fine) continue;
        const double* row = rig + DPHD_MC_ROW * g;
        double nw[3];
        const double phi = dphd_mc_sdf(row, xp, nw);
        if (!(phi < 0.0)) continue;
        if (!delassus_known) {
            for (int ni = 0; ni < 27; ++ni) {
                double w;
                const long long node = dphd_mc_stencil(dims, b, weights + 9 * p, ni, &w);
                if (w != 0.0) delassus += w * w / gm[node];
            }
            delassus_known = true;
        }
        double vr[3] = {0.0, 0.0, 0.0}, lv[3] = {0.0, 0.0, 0.0};
        if ((int)row[0] != 0) {
            for (int a = 0; a < 3; ++a) lv[a] = xp[a] - row[18 + a];
            double wx[3];
            dphd_cross(row + 24, lv, wx);
            for (int a = 0; a < 3; ++a) vr[a] = row[21 + a] + wx[a];
        }
        double* r = frame + 9 * s;
        dphd_mc_frame(nw, r);
        for (int c = 0; c < 3; ++c) bias[3 * s + c] = r[c] * vr[0] + r[3 + c] * vr[1] + r[6 + c] * vr[2];
        for (int a = 0; a < 3; ++a) lever[3 * s + a] = lv[a];
        const double vn0 = nw[0] * (vp[0] - vr[0]) + nw[1] * (vp[1] - vr[1]) + nw[2] * (vp[2] - vr[2]);
        const double k = row[27], d = row[28], mu = row[29], vs = row[30], sigma = row[31];
        const double fe0 = -k * phi;
        const double a0 = dt * fe0 > 0.0 ? dt * fe0 : 0.0;
        const double a1 = 1.0 - d * vn0 > 0.0 ? 1.0 - d * vn0 : 0.0;
        const double n0 = a0 * a1;
        const double reg = mu * sigma * (delassus > 0.0 ? delassus : 0.0) * n0;
        double* m = model + DPHD_MC_MODEL * s;
        m[0] = k;
        m[1] = d;
        m[2] = mu;
        m[3] = dt;
        m[4] = fe0;
        m[5] = n0;
        m[6] = vs > reg ? vs : reg;
        m[7] = 0.0;
        active[s] = 1.0;
    }
}

// Per slot s (n = particles x geometries): v_c = R^T sum_k w_k v_k - b, the impulse gamma
// (contact frame, gamma_c) and, for the node gather, R gamma (gamma_w) and R G R^T (hess_w,
// row-major 9). Inactive slots write zeros into gamma_w and hess_w.
DPHD_KERNEL(dphd_mpm_contact_eval)(DPHD_ITEM_PARAM long long n, long long ng,
                                   const long long* dims, const double* geo, const double* x,
                                   const double* weights, const double* gv, const double* frame,
                                   const double* bias, const double* model,
                                   const double* active, double* vc, double* gamma_c,
                                   double* gamma_w, double* hess_w)
{
    const long long s = DPHD_ITEM;
    if (s >= n) return;
    if (active[s] == 0.0) {
        for (int k = 0; k < 3; ++k) gamma_w[3 * s + k] = 0.0;
        for (int k = 0; k < 9; ++k) hess_w[9 * s + k] = 0.0;
        return;
    }
    const long long p = s / ng;
    long long b[3];
    double fr[3];
    dphd_mpm_base(dims, geo, x + 3 * p, b, fr);
    double u[3] = {0.0, 0.0, 0.0};
    for (int ni = 0; ni < 27; ++ni) {
        double w;
        const long long node = dphd_mc_stencil(dims, b, weights + 9 * p, ni, &w);
        if (w == 0.0) continue;
        for (int a = 0; a < 3; ++a) u[a] = u[a] + gv[3 * node + a] * w;
    }
    const double* r = frame + 9 * s;
    const double* m = model + DPHD_MC_MODEL * s;
    double xc[3];
    for (int c = 0; c < 3; ++c)
        xc[c] = r[c] * u[0] + r[3 + c] * u[1] + r[6 + c] * u[2] - bias[3 * s + c];
    double g[3], h[9];
    dphd_mc_impulse(m, xc, g);
    dphd_mc_hessian(m, xc, h);
    for (int c = 0; c < 3; ++c) {
        vc[3 * s + c] = xc[c];
        gamma_c[3 * s + c] = g[c];
    }
    for (int a = 0; a < 3; ++a) gamma_w[3 * s + a] = r[3 * a] * g[0] + r[3 * a + 1] * g[1] + r[3 * a + 2] * g[2];
    // (R G) R^T, as the CPU's frame * G * frame^T
    double rg[9];
    for (int a = 0; a < 3; ++a)
        for (int c = 0; c < 3; ++c)
            rg[3 * a + c] = r[3 * a] * h[c] + r[3 * a + 1] * h[3 + c] + r[3 * a + 2] * h[6 + c];
    for (int a = 0; a < 3; ++a)
        for (int c = 0; c < 3; ++c)
            hess_w[9 * s + 3 * a + c] = rg[3 * a] * r[3 * c] + rg[3 * a + 1] * r[3 * c + 1] + rg[3 * a + 2] * r[3 * c + 2];
}

// Per node idx (n = nodes): the gradient, the block H, the quasi-Newton step dv and the
// node's terms (column c at terms[c n + idx]; see the file comment). Nodes without mass are
// not unknowns of the problem: dv = 0 and zero terms.
DPHD_KERNEL(dphd_mpm_contact_node)(DPHD_ITEM_PARAM long long n, long long ng,
                                   const long long* dims, const int* start, const int* sorted,
                                   const double* weights, const double* gm, const double* vstar,
                                   const double* gv, const double* active,
                                   const double* gamma_w, const double* hess_w, double* dv,
                                   double* terms)
{
    const long long idx = DPHD_ITEM;
    if (idx >= n) return;
    const double m = gm[idx];
    for (int c = 0; c < 6; ++c) terms[c * n + idx] = 0.0;
    for (int a = 0; a < 3; ++a) dv[3 * idx + a] = 0.0;
    if (!(m > 0.0)) return;
    const long long nx = dims[0] + 1, ny = dims[1] + 1;
    const long long i = idx % nx, j = (idx / nx) % ny, k = idx / (nx * ny);
    double jt[3] = {0.0, 0.0, 0.0}, hc[9];
    for (int q = 0; q < 9; ++q) hc[q] = 0.0;
    for (long long dz = 0; dz < 3 && dz <= k; ++dz)
        for (long long dy = 0; dy < 3 && dy <= j; ++dy)
            for (long long dx = 0; dx < 3 && dx <= i; ++dx) {
                const long long bin = (i - dx) + nx * ((j - dy) + ny * (k - dz));
                for (int e = start[bin]; e < start[bin + 1]; ++e) {
                    const long long p = sorted[e];
                    const double* w = weights + 9 * p;
                    const double wip = w[dx] * w[3 + dy] * w[6 + dz];
                    if (wip == 0.0) continue;
                    for (long long g = 0; g < ng; ++g) {
                        const long long s = p * ng + g;
                        if (active[s] == 0.0) continue;
                        for (int a = 0; a < 3; ++a) jt[a] = jt[a] + gamma_w[3 * s + a] * wip;
                        const double w2 = wip * wip;
                        for (int q = 0; q < 9; ++q) hc[q] = hc[q] + hess_w[9 * s + q] * w2;
                    }
                }
            }
    double grad[3], hb[9];
    const double* v = gv + 3 * idx;
    const double* vs = vstar + 3 * idx;
    for (int a = 0; a < 3; ++a) grad[a] = (v[a] - vs[a]) * m - jt[a];
    for (int q = 0; q < 9; ++q) hb[q] = (q % 4 == 0 ? m : 0.0) + hc[q];
    // 3x3 Cholesky H = L L^T (lower triangle of hb), then dv = -L^-T L^-1 grad
    const double l00sq = hb[0];
    bool spd = l00sq > 0.0;
    double l00 = 0.0, l10 = 0.0, l20 = 0.0, l11 = 0.0, l21 = 0.0, l22 = 0.0;
    if (spd) {
        l00 = sqrt(l00sq);
        l10 = hb[3] / l00;
        l20 = hb[6] / l00;
        const double l11sq = hb[4] - l10 * l10;
        spd = l11sq > 0.0;
        if (spd) {
            l11 = sqrt(l11sq);
            l21 = (hb[7] - l20 * l10) / l11;
            const double l22sq = hb[8] - l20 * l20 - l21 * l21;
            spd = l22sq > 0.0;
            if (spd) l22 = sqrt(l22sq);
        }
    }
    if (!spd) {
        terms[5 * n + idx] = 1.0;
        return;
    }
    const double y0 = grad[0] / l00;
    const double y1 = (grad[1] - l10 * y0) / l11;
    const double y2 = (grad[2] - l20 * y0 - l21 * y1) / l22;
    const double x2 = y2 / l22;
    const double x1 = (y1 - l21 * x2) / l11;
    const double x0 = (y0 - l10 * x1 - l20 * x2) / l00;
    const double d[3] = {-x0, -x1, -x2};
    double r2 = 0.0, p2 = 0.0, j2 = 0.0, gd = 0.0, qa = 0.0;
    for (int a = 0; a < 3; ++a) {
        dv[3 * idx + a] = d[a];
        r2 += grad[a] * grad[a] / m;
        p2 += m * v[a] * v[a];
        j2 += jt[a] * jt[a] / m;
        gd += grad[a] * d[a];
        qa += d[a] * m * d[a];
    }
    terms[idx] = r2;
    terms[n + idx] = p2;
    terms[2 * n + idx] = j2;
    terms[3 * n + idx] = gd;
    terms[4 * n + idx] = qa;
}

// First pass of `cols` deterministic sums over column-major x (len rows): item j (n = P
// items) writes partial[c P + j] = sum of x[c len + i] over i = j, j + P, ... in order.
DPHD_KERNEL(dphd_mpm_sum_columns)(DPHD_ITEM_PARAM long long n, long long len, long long cols,
                                  const double* x, double* partial)
{
    const long long j = DPHD_ITEM;
    if (j >= n) return;
    for (long long c = 0; c < cols; ++c) {
        double s = 0.0;
        for (long long i = j; i < len; i += n) s += x[c * len + i];
        partial[c * n + j] = s;
    }
}

// Per slot s: dv_c = R^T sum_k w_k dv_k (the line search's direction in the contact frame).
DPHD_KERNEL(dphd_mpm_contact_direction)(DPHD_ITEM_PARAM long long n, long long ng,
                                        const long long* dims, const double* geo,
                                        const double* x, const double* weights,
                                        const double* dv, const double* frame,
                                        const double* active, double* dvc)
{
    const long long s = DPHD_ITEM;
    if (s >= n) return;
    if (active[s] == 0.0) return;
    const long long p = s / ng;
    long long b[3];
    double fr[3];
    dphd_mpm_base(dims, geo, x + 3 * p, b, fr);
    double u[3] = {0.0, 0.0, 0.0};
    for (int ni = 0; ni < 27; ++ni) {
        double w;
        const long long node = dphd_mc_stencil(dims, b, weights + 9 * p, ni, &w);
        if (w == 0.0) continue;
        for (int a = 0; a < 3; ++a) u[a] = u[a] + dv[3 * node + a] * w;
    }
    const double* r = frame + 9 * s;
    for (int c = 0; c < 3; ++c) dvc[3 * s + c] = r[c] * u[0] + r[3 + c] * u[1] + r[6 + c] * u[2];
}

// Line search terms at step alpha, item j of n = P over the slots j, j + P, ... (ns slots):
// partial[j] = sum (gamma(v_c + alpha dv_c) - gamma(v_c)) . dv_c and
// partial[P + j] = sum dv_c^T G(v_c + alpha dv_c) dv_c; the host forms
// phi'(alpha) = phi'(0) + alpha dv^T M dv - partial sum and phi'' = dv^T M dv + partial sum.
DPHD_KERNEL(dphd_mpm_contact_line)(DPHD_ITEM_PARAM long long n, long long ns, double alpha,
                                   const double* model, const double* active, const double* vc,
                                   const double* gamma_c, const double* dvc, double* partial)
{
    const long long j = DPHD_ITEM;
    if (j >= n) return;
    double d1 = 0.0, d2 = 0.0;
    for (long long s = j; s < ns; s += n) {
        if (active[s] == 0.0) continue;
        const double* m = model + DPHD_MC_MODEL * s;
        const double* dc = dvc + 3 * s;
        double xa[3], g[3], h[9];
        for (int c = 0; c < 3; ++c) xa[c] = vc[3 * s + c] + dc[c] * alpha;
        dphd_mc_impulse(m, xa, g);
        dphd_mc_hessian(m, xa, h);
        double dot = 0.0, quad = 0.0;
        for (int c = 0; c < 3; ++c) {
            dot += (g[c] - gamma_c[3 * s + c]) * dc[c];
            quad += dc[c] * (h[3 * c] * dc[0] + h[3 * c + 1] * dc[1] + h[3 * c + 2] * dc[2]);
        }
        d1 += dot;
        d2 += quad;
    }
    partial[j] = d1;
    partial[n + j] = d2;
}

// Impulse accumulation onto the rigid bodies, item j of n = P over the slots j, j + P, ...:
// partial[(6 b + q) P + j], q = force x y z then moment x y z about the body's centre of mass,
// of the impulses -R gamma that the grid's contacts put on body b (nb bodies; half-spaces,
// body index -1, are skipped).
DPHD_KERNEL(dphd_mpm_contact_wrench)(DPHD_ITEM_PARAM long long n, long long ns, long long ng,
                                     long long nb, const double* rig, const double* active,
                                     const double* gamma_w, const double* lever,
                                     double* partial)
{
    const long long j = DPHD_ITEM;
    if (j >= n) return;
    for (long long q = 0; q < 6 * nb; ++q) partial[q * n + j] = 0.0;
    for (long long s = j; s < ns; s += n) {
        if (active[s] == 0.0) continue;
        const long long b = (long long)rig[DPHD_MC_ROW * (s % ng) + 1];
        if (b < 0 || b >= nb) continue;
        double f[3], t[3];
        for (int a = 0; a < 3; ++a) f[a] = -gamma_w[3 * s + a];
        dphd_cross(lever + 3 * s, f, t);
        for (int a = 0; a < 3; ++a) {
            partial[(6 * b + a) * n + j] += f[a];
            partial[(6 * b + 3 + a) * n + j] += t[a];
        }
    }
}
