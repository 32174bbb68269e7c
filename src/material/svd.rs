//! Rotation-variant ("signed") SVD, polar rotation and the differential of isotropic spectral
//! maps $p(F)=U\,\mathrm{diag}(\sigma^*(\sigma))\,V^T$ (spec §3.1, App. A.1, Eq. 42).

use nalgebra::{Matrix3, SMatrix, Vector3};

/// Signed SVD $F = U\,\mathrm{diag}(\sigma)\,V^T$ with $U, V \in SO(3)$ (spec §3.1).
///
/// Ordering: $\sigma_0 \ge \sigma_1 \ge |\sigma_2|$; only $\sigma_2$ may be negative, which
/// happens exactly when $\det F < 0$ (inverted element).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Svd3 {
    /// Left rotation, $\det U = +1$.
    pub u: Matrix3<f64>,
    /// Signed singular values, $\sigma_0 \ge \sigma_1 \ge |\sigma_2|$.
    pub sigma: Vector3<f64>,
    /// Right rotation, $\det V = +1$.
    pub v: Matrix3<f64>,
}

impl Svd3 {
    /// $U\,\mathrm{diag}(s)\,V^T$ for a stretch vector `s` (spectral map output).
    pub fn compose(&self, s: &Vector3<f64>) -> Matrix3<f64> {
        self.u * Matrix3::from_diagonal(s) * self.v.transpose()
    }

    /// The reconstruction $U\,\mathrm{diag}(\sigma)\,V^T$.
    pub fn reconstruct(&self) -> Matrix3<f64> {
        self.compose(&self.sigma)
    }
}

/// Signed SVD of a $3\times3$ matrix (spec §3.1: "if $\det U<0$ flip the last column of $U$ and
/// the sign of $\sigma_3$, same for $V$").
///
/// Algorithm: one-sided (Hestenes) Jacobi. The columns of $B=FV$ are orthogonalised by plane
/// rotations accumulated in $V$ until every pair has $|b_p\cdot b_q|\le\varepsilon\|b_p\|\|b_q\|$;
/// then $\sigma_i=\|b_i\|$ (sorted descending), $u_0=b_0/\sigma_0$,
/// $u_1=$ the normalised part of $b_1$ orthogonal to $u_0$ (any unit vector $\perp u_0$ if that is
/// zero), $u_2=u_0\times u_1$ (so $\det U=+1$) and the signed $\sigma_2=u_2\cdot b_2$; finally
/// $\det V<0$ is fixed by negating $v_2$ and $\sigma_2$. One-sided Jacobi is backward stable and
/// keeps small singular values relatively accurate (nalgebra's bidiagonal QR SVD was measured to
/// lose ~$10^{-9}$ relative reconstruction accuracy on $\mathrm{diag}(10^8,1,10^{-8})$, hence not
/// used). The input is scaled by a power of two so that no squared norm over/underflows.
/// Non-finite input yields $U=V=I$ and NaN singular values (no panic, bounded iteration).
pub fn svd3(f: &Matrix3<f64>) -> Svd3 {
    let amax = f.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if !amax.is_finite() || f.iter().any(|x| x.is_nan()) {
        return Svd3 {
            u: Matrix3::identity(),
            sigma: Vector3::repeat(f64::NAN),
            v: Matrix3::identity(),
        };
    }
    if amax == 0.0 {
        return Svd3 {
            u: Matrix3::identity(),
            sigma: Vector3::zeros(),
            v: Matrix3::identity(),
        };
    }
    // Exact power-of-two scaling to [0.5, 1).
    let e = amax.log2().floor() as i32 + 1;
    let scale = 2f64.powi(e);
    let mut b = f / scale;
    let mut v = Matrix3::<f64>::identity();

    for _sweep in 0..64 {
        let mut rotated = false;
        for &(p, q) in &[(0usize, 1usize), (0, 2), (1, 2)] {
            let alpha = b.column(p).norm_squared();
            let beta = b.column(q).norm_squared();
            let gamma = b.column(p).dot(&b.column(q));
            if gamma == 0.0 || gamma.abs() <= f64::EPSILON * (alpha.sqrt() * beta.sqrt()) {
                continue;
            }
            rotated = true;
            let zeta = (beta - alpha) / (2.0 * gamma);
            let t = zeta.signum() / (zeta.abs() + (1.0 + zeta * zeta).sqrt());
            let c = 1.0 / (1.0 + t * t).sqrt();
            let s = c * t;
            for m in [&mut b, &mut v] {
                let cp = m.column(p).into_owned();
                let cq = m.column(q).into_owned();
                m.set_column(p, &(cp * c - cq * s));
                m.set_column(q, &(cp * s + cq * c));
            }
        }
        if !rotated {
            break;
        }
    }

    let mut out = complete(&b, &v);
    out.sigma *= scale;
    out
}

/// The signed SVD from a right factor: given an orthogonal $V$ and $B=FV$ with orthogonal
/// columns (up to round-off), $\sigma_i=\|b_i\|$ sorted descending (columns of $B$ and $V$
/// permuted alike), $u_0=b_0/\sigma_0$, $u_1=$ the normalised part of $b_1$ orthogonal to $u_0$
/// (any unit vector $\perp u_0$ if that is zero), $u_2=u_0\times u_1$ (so $\det U=+1$), the signed
/// $\sigma_2=u_2\cdot b_2$, and $\det V<0$ fixed by negating $v_2$ and $\sigma_2$: the last step of
/// [`svd3`] (one-sided Jacobi) and of the interleaved linearization, whose $V$ comes from the
/// eigenvectors of $F^TF$ (`material::interleaved`). Finite input with $\sigma_0>0$.
pub fn complete(b: &Matrix3<f64>, v: &Matrix3<f64>) -> Svd3 {
    let norms = Vector3::new(b.column(0).norm(), b.column(1).norm(), b.column(2).norm());
    let mut idx = [0usize, 1, 2];
    idx.sort_by(|&x, &y| norms[y].total_cmp(&norms[x]));
    let bs = Matrix3::from_columns(&[b.column(idx[0]), b.column(idx[1]), b.column(idx[2])]);
    let mut v = Matrix3::from_columns(&[v.column(idx[0]), v.column(idx[1]), v.column(idx[2])]);
    let s0 = norms[idx[0]];
    let s1 = norms[idx[1]];

    let u0: Vector3<f64> = bs.column(0) / s0;
    let mut u1: Vector3<f64> = bs.column(1) - u0 * u0.dot(&bs.column(1));
    let n1 = u1.norm();
    if n1 > 0.0 && n1.is_finite() && s1 > 0.0 {
        u1 /= n1;
    } else {
        u1 = any_orthogonal_unit(&u0);
    }
    let u2 = u0.cross(&u1);
    let u2 = u2 / u2.norm();
    let u = Matrix3::from_columns(&[u0, u1, u2]);
    // |u2·b2| ≤ ‖b2‖ ≤ ‖b1‖ in exact arithmetic; the clamp only removes round-off.
    let mut sigma = Vector3::new(s0, s1, u2.dot(&bs.column(2)).clamp(-s1, s1));
    if v.determinant() < 0.0 {
        v.column_mut(2).neg_mut();
        sigma[2] = -sigma[2];
    }
    Svd3 { u, sigma, v }
}

/// A unit vector orthogonal to the unit vector `a`.
fn any_orthogonal_unit(a: &Vector3<f64>) -> Vector3<f64> {
    // Cross with the coordinate axis least aligned with `a`.
    let k = if a[0].abs() <= a[1].abs() && a[0].abs() <= a[2].abs() {
        0
    } else if a[1].abs() <= a[2].abs() {
        1
    } else {
        2
    };
    let mut e = Vector3::zeros();
    e[k] = 1.0;
    let c = a.cross(&e);
    c / c.norm()
}

/// Polar rotation $R = UV^T \in SO(3)$ of $F = RS$ (spec §3.1; corotated local step).
///
/// For inverted $F$ ($\det F<0$) this is the rotation of the signed SVD, so $\det R = +1$ always.
pub fn polar_rotation(f: &Matrix3<f64>) -> Matrix3<f64> {
    let s = svd3(f);
    s.u * s.v.transpose()
}

/// Relative threshold below which $\sigma_i \approx \sigma_j$ is treated as degenerate in the
/// divided difference of [`spectral_jacobian_apply`]. Chosen as $\approx\varepsilon^{1/3}$, which
/// balances the cancellation error $O(\varepsilon/\delta)$ of the divided difference against the
/// $O(\delta^2)$ error of the symmetrised limit used below.
pub const DEGENERATE_REL_TOL: f64 = 1e-5;

/// Guard $|\sigma_i+\sigma_j|\ge\epsilon_{\rm inv}$ (spec Eq. 42, App. A.1) for inverted elements.
pub const SUM_GUARD: f64 = 1e-6;

/// Coefficients $\mathbf M_{ij}$, $\mathbf N_{ij}$ of Eq. (42) for the off-diagonal entries
/// ($\mathbf M_{ii}=\mathbf N_{ii}=0$):
/// $$\mathbf M_{ij}=\tfrac12\Big(\frac{\sigma^*_i-\sigma^*_j}{\sigma_i-\sigma_j}+\frac{\sigma^*_i+\sigma^*_j}{\sigma_i+\sigma_j}\Big),\quad
/// \mathbf N_{ij}=\tfrac12\Big(\frac{\sigma^*_i-\sigma^*_j}{\sigma_i-\sigma_j}-\frac{\sigma^*_i+\sigma^*_j}{\sigma_i+\sigma_j}\Big).$$
///
/// Degenerate $|\sigma_i-\sigma_j|\le 10^{-5}\max(|\sigma_i|,|\sigma_j|)$: the divided difference
/// is replaced by $\tfrac12(W_{ii}+W_{jj}-W_{ij}-W_{ji})$. At exact degeneracy this equals the
/// spec's $W_{ii}-W_{ij}$ (isotropy gives $W_{ii}=W_{jj}$, $W$ symmetric); near degeneracy the
/// symmetrised form is $O(\delta^2)$-accurate because $\sigma^*_i-\sigma^*_j$ is odd in
/// $\delta=\sigma_i-\sigma_j$. The sum is guarded: $|\sigma_i+\sigma_j|\ge10^{-6}$ keeping its sign
/// (a zero sum is treated as $+10^{-6}$).
pub fn spectral_pair_coefficients(
    sigma: &Vector3<f64>,
    sigma_star: &Vector3<f64>,
    w: &Matrix3<f64>,
) -> (Matrix3<f64>, Matrix3<f64>) {
    let mut m = Matrix3::zeros();
    let mut n = Matrix3::zeros();
    for i in 0..3 {
        for j in 0..3 {
            if i == j {
                continue;
            }
            let (si, sj) = (sigma[i], sigma[j]);
            let diff = si - sj;
            let dd = if diff.abs() <= DEGENERATE_REL_TOL * si.abs().max(sj.abs()) {
                0.5 * (w[(i, i)] + w[(j, j)] - w[(i, j)] - w[(j, i)])
            } else {
                (sigma_star[i] - sigma_star[j]) / diff
            };
            let mut sum = si + sj;
            if sum.abs() < SUM_GUARD {
                sum = if sum < 0.0 { -SUM_GUARD } else { SUM_GUARD };
            }
            let avg = (sigma_star[i] + sigma_star[j]) / sum;
            m[(i, j)] = 0.5 * (dd + avg);
            n[(i, j)] = 0.5 * (dd - avg);
        }
    }
    (m, n)
}

/// Differential of an isotropic spectral map applied to a direction (spec App. A.1, Eq. 42):
/// $$a=U^T\,dF\,V,\quad c_{ii}=\sum_kW_{ik}a_{kk},\quad c_{ij}=\mathbf M_{ij}a_{ij}+\mathbf N_{ij}a_{ji}\ (i\ne j),
/// \quad dp=U\,c\,V^T,$$
/// with $W=\partial\sigma^*/\partial\sigma$ and $\mathbf M,\mathbf N$ from
/// [`spectral_pair_coefficients`] (degenerate and inverted-element guards documented there).
pub fn spectral_jacobian_apply(
    svd: &Svd3,
    sigma_star: &Vector3<f64>,
    w: &Matrix3<f64>,
    df: &Matrix3<f64>,
) -> Matrix3<f64> {
    let (m, n) = spectral_pair_coefficients(&svd.sigma, sigma_star, w);
    spectral_apply_with(svd, w, &m, &n, df)
}

/// [`spectral_jacobian_apply`] with precomputed $\mathbf M,\mathbf N$ (spec App. A.1: "precompute
/// $U,V,\sigma,\sigma^*,W_e,\mathbf M,\mathbf N$ once per backward step").
pub fn spectral_apply_with(
    svd: &Svd3,
    w: &Matrix3<f64>,
    m: &Matrix3<f64>,
    n: &Matrix3<f64>,
    df: &Matrix3<f64>,
) -> Matrix3<f64> {
    let a = svd.u.transpose() * df * svd.v;
    let ad = Vector3::new(a[(0, 0)], a[(1, 1)], a[(2, 2)]);
    let cd = w * ad;
    let mut c = Matrix3::zeros();
    for i in 0..3 {
        for j in 0..3 {
            c[(i, j)] = if i == j {
                cd[i]
            } else {
                m[(i, j)] * a[(i, j)] + n[(i, j)] * a[(j, i)]
            };
        }
    }
    svd.u * c * svd.v.transpose()
}

/// A spectral differential with every per-sample coefficient precomputed (spec App. A.1:
/// "precompute once per backward step"): $dp=U\,c\,V^T$ with $a=U^TdF\,V$,
/// $c_{ii}=\sum_kW_{ik}a_{kk}$, $c_{ij}=M_{ij}a_{ij}+N_{ij}a_{ji}$, where $W,M,N$ may already be
/// weighted sums of several terms sharing $U,V$ (corotated + volume). [`Self::apply`] is
/// [`spectral_apply_with`] without recomputing [`spectral_pair_coefficients`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpectralLinear {
    pub u: Matrix3<f64>,
    pub v: Matrix3<f64>,
    pub w: Matrix3<f64>,
    pub m: Matrix3<f64>,
    pub n: Matrix3<f64>,
}

impl SpectralLinear {
    /// From `[U, V, W, M, N]`.
    pub fn from_coefficients(c: [Matrix3<f64>; 5]) -> Self {
        let [u, v, w, m, n] = c;
        SpectralLinear { u, v, w, m, n }
    }

    /// $dp$ for a direction $dF$.
    #[inline]
    pub fn apply(&self, df: &Matrix3<f64>) -> Matrix3<f64> {
        let a = self.u.transpose() * df * self.v;
        let ad = Vector3::new(a[(0, 0)], a[(1, 1)], a[(2, 2)]);
        let cd = self.w * ad;
        let c = Matrix3::from_fn(|i, j| {
            if i == j {
                cd[i]
            } else {
                self.m[(i, j)] * a[(i, j)] + self.n[(i, j)] * a[(j, i)]
            }
        });
        self.u * c * self.v.transpose()
    }

    /// The same map with its eigenvalues capped at `cap`: $dp\mapsto\min(\lambda,\text{cap})$
    /// on each eigenvector. The map is symmetric in the Frobenius product and splits, in the
    /// frame $a=U^TdF\,V$, into the stretch block $W$ (on $a_{kk}$) and, per pair $i<j$, the
    /// block $\begin{pmatrix}M&N\\N&M\end{pmatrix}$ on $(a_{ij},a_{ji})$ with eigenvalues
    /// $M\pm N$ (eigenvectors $(1,\pm1)$). A PD sample's energy Hessian is $w\,I-\partial p/\partial F$,
    /// so the cap $w$ makes it positive semidefinite (the projected-Newton filter of the
    /// Newton–Krylov phase). Unchanged (bitwise) where every eigenvalue is already below `cap`;
    /// the eigen-decomposition of $W$ is skipped where its Gershgorin bound is (the common case).
    pub fn capped(&self, cap: f64) -> Self {
        let mut out = *self;
        for i in 0..3 {
            for j in (i + 1)..3 {
                let (m, n) = (self.m[(i, j)], self.n[(i, j)]);
                let (sym, anti) = (m + n, m - n);
                if sym > cap || anti > cap {
                    let (sym, anti) = (sym.min(cap), anti.min(cap));
                    for (a, b) in [(i, j), (j, i)] {
                        out.m[(a, b)] = 0.5 * (sym + anti);
                        out.n[(a, b)] = 0.5 * (sym - anti);
                    }
                }
            }
        }
        let w = 0.5 * (self.w + self.w.transpose());
        // Gershgorin: no eigenvalue of W exceeds max_i (W_ii + Σ_{j≠i} |W_ij|)
        let bound = (0..3)
            .map(|i| {
                w[(i, i)]
                    + (0..3)
                        .filter(|&j| j != i)
                        .map(|j| w[(i, j)].abs())
                        .sum::<f64>()
            })
            .fold(f64::NEG_INFINITY, f64::max);
        if bound <= cap {
            return out;
        }
        let eig = w.symmetric_eigen();
        if eig.eigenvalues.iter().any(|&l| l > cap) {
            let l = eig.eigenvalues.map(|l| l.min(cap));
            out.w = eig.eigenvectors * Matrix3::from_diagonal(&l) * eig.eigenvectors.transpose();
        }
        out
    }
}

/// The $9\times9$ matrix $\partial\,\mathrm{vec}\,p/\partial\,\mathrm{vec}\,F$ of Eq. (42)
/// (column-major vec: entry $3c+r$ of $\mathrm{vec}X$ is $X_{rc}$), assembled column by column
/// from [`spectral_jacobian_apply`]. For tests and debugging; the solver uses the matrix-free form.
pub fn spectral_jacobian_matrix(
    svd: &Svd3,
    sigma_star: &Vector3<f64>,
    w: &Matrix3<f64>,
) -> SMatrix<f64, 9, 9> {
    let (m, n) = spectral_pair_coefficients(&svd.sigma, sigma_star, w);
    let mut out = SMatrix::<f64, 9, 9>::zeros();
    for k in 0..9 {
        let mut e = Matrix3::zeros();
        e[(k % 3, k / 3)] = 1.0;
        let d = spectral_apply_with(svd, w, &m, &n, &e);
        for (l, val) in d.iter().enumerate() {
            out[(l, k)] = *val;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::material::fd;
    use proptest::prelude::*;

    fn rot(a: f64, b: f64, c: f64) -> Matrix3<f64> {
        nalgebra::Rotation3::from_euler_angles(a, b, c).into_inner()
    }

    /// Checks every property of the signed SVD; returns the relative reconstruction error.
    fn check_svd(f: &Matrix3<f64>) -> f64 {
        let s = svd3(f);
        let scale = f.norm().max(1e-300);
        let rec = (s.reconstruct() - f).norm() / scale;
        assert!(rec < 1e-13, "reconstruction {rec} for {f}");
        for q in [&s.u, &s.v] {
            let orth = (q.transpose() * q - Matrix3::identity()).norm();
            assert!(orth < 1e-14, "orthogonality {orth}");
            assert!((q.determinant() - 1.0).abs() < 1e-14);
        }
        assert!(s.sigma[0] >= s.sigma[1] && s.sigma[1] >= s.sigma[2].abs());
        let det = f.determinant();
        if det.abs() > 1e-12 * scale.powi(3) {
            assert_eq!(det < 0.0, s.sigma[2] < 0.0, "sign of sigma_2 vs det F");
        }
        let r = polar_rotation(f);
        assert!((r.determinant() - 1.0).abs() < 1e-13);
        assert!((r.transpose() * r - Matrix3::identity()).norm() < 1e-13);
        // R^T F = V diag(σ) V^T is symmetric.
        let sym = r.transpose() * f;
        assert!((sym - sym.transpose()).norm() < 1e-13 * scale);
        rec
    }

    /// T1: reconstruction, U, V ∈ SO(3), ordering, inverted / degenerate / rank-deficient F.
    #[test]
    fn t1_signed_svd_cases() {
        let r1 = rot(0.3, -0.4, 1.2);
        let r2 = rot(-2.0, 0.7, 0.1);
        let d = |a: f64, b: f64, c: f64| Matrix3::from_diagonal(&Vector3::new(a, b, c));
        let cases = [
            Matrix3::identity(),
            -Matrix3::identity(),
            Matrix3::zeros(),
            d(2.0, 2.0, 2.0),
            r1 * d(2.0, 2.0, 0.5) * r2.transpose(),
            r1 * d(1.0, 1.0 + 1e-12, 1.0 - 1e-12) * r2.transpose(),
            r1 * d(3.0, 1.0, 0.0) * r2.transpose(),
            r1 * d(3.0, 0.0, 0.0) * r2.transpose(),
            r1 * d(1.5, 0.8, -0.3) * r2.transpose(),
            r1 * d(1.0, 1.0, -1.0) * r2.transpose(),
            d(1.0, 1.0, -1.0),
            d(-1.0, 2.0, 3.0),
            r1 * d(1e8, 1.0, 1e-8) * r2.transpose(),
            r1 * d(1e-200, 1e-201, 1e-202) * r2.transpose(),
            Matrix3::new(1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0),
        ];
        let mut worst: f64 = 0.0;
        for f in &cases {
            worst = worst.max(check_svd(f));
        }
        eprintln!("T1 worst relative reconstruction error: {worst:.3e}");
        // Inverted: σ2 < 0 and the polar rotation is the proper rotation r1 r2ᵀ.
        let f = r1 * d(1.5, 0.8, -0.3) * r2.transpose();
        let s = svd3(&f);
        assert!((s.sigma - Vector3::new(1.5, 0.8, -0.3)).norm() < 1e-14);
        assert!((polar_rotation(&f) - r1 * r2.transpose()).norm() < 1e-14);
    }

    /// The $9\times9$ matrix of a [`SpectralLinear`] map (column-major vec).
    fn matrix_of(map: &SpectralLinear) -> SMatrix<f64, 9, 9> {
        SMatrix::<f64, 9, 9>::from_fn(|r, c| {
            let mut df = Matrix3::zeros();
            df[(c % 3, c / 3)] = 1.0;
            map.apply(&df)[(r % 3, r / 3)]
        })
    }

    fn sorted_eigenvalues(a: &SMatrix<f64, 9, 9>) -> Vec<f64> {
        let mut l: Vec<f64> = a.symmetric_eigen().eigenvalues.iter().copied().collect();
        l.sort_by(|x, y| x.partial_cmp(y).unwrap());
        l
    }

    /// `capped`: the map of a corotated + volume sample under strong compression (pair
    /// eigenvalues $2/(\sigma_i+\sigma_j)>1$) is symmetric; capping replaces exactly its
    /// eigenvalues above the cap by the cap, and leaves a map below the cap bitwise unchanged.
    #[test]
    fn capped_map_clamps_the_eigenvalues_above_the_cap() {
        let f = rot(0.3, -0.4, 1.2)
            * Matrix3::from_diagonal(&Vector3::new(1.59, 0.7, 0.08))
            * rot(-2.0, 0.7, 0.1).transpose();
        let usv = svd3(&f);
        let star = crate::material::volume::project_stretches(&usv.sigma);
        let jac = crate::material::volume::stretch_jacobian(&usv.sigma, &star);
        let (wc, wv) = (2.0, 3.0);
        let (mc, nc) =
            spectral_pair_coefficients(&usv.sigma, &Vector3::repeat(1.0), &Matrix3::zeros());
        let (mv, nv) = spectral_pair_coefficients(&usv.sigma, &star, &jac);
        let map = SpectralLinear::from_coefficients([
            usv.u,
            usv.v,
            jac * wv,
            mc * wc + mv * wv,
            nc * wc + nv * wv,
        ]);
        let a = matrix_of(&map);
        assert!(
            (a - a.transpose()).norm() < 1e-12 * a.norm(),
            "not symmetric"
        );
        let before = sorted_eigenvalues(&a);
        let cap = wc + wv;
        assert!(
            before[8] > cap,
            "the test needs eigenvalues above the cap: {before:?}"
        );
        let after = sorted_eigenvalues(&matrix_of(&map.capped(cap)));
        for (b, a) in before.iter().zip(&after) {
            assert!(
                (b.min(cap) - a).abs() < 1e-12 * cap,
                "{before:?} -> {after:?}"
            );
        }
        assert_eq!(map.capped(before[8] * 1.01), map);
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            failure_persistence: None,
            ..ProptestConfig::with_cases(256)
        })]
        /// T1 (property): random F with entries in [−10, 10].
        #[test]
        fn t1_svd_random(e in proptest::collection::vec(-10.0f64..10.0, 9)) {
            let f = Matrix3::from_column_slice(&e);
            check_svd(&f);
        }

        /// T1 (property): random rotations and (possibly repeated / inverted) stretches.
        #[test]
        fn t1_svd_random_structured(
            a in proptest::collection::vec(-3.2f64..3.2, 6),
            s in proptest::collection::vec(0.0f64..3.0, 3),
            rep in 0usize..3, neg in proptest::bool::ANY,
        ) {
            let mut sv = Vector3::new(s[0], s[1], s[2]);
            if rep == 1 { sv[1] = sv[0]; }
            if rep == 2 { sv[2] = sv[1]; }
            if neg { sv[2] = -sv[2]; }
            let f = rot(a[0], a[1], a[2]) * Matrix3::from_diagonal(&sv) * rot(a[3], a[4], a[5]).transpose();
            check_svd(&f);
            let got = svd3(&f).sigma;
            let mut abs_sorted = [sv[0].abs(), sv[1].abs(), sv[2].abs()];
            abs_sorted.sort_by(|x, y| y.total_cmp(x));
            for i in 0..3 {
                prop_assert!((got[i].abs() - abs_sorted[i]).abs() < 1e-13 * 3.0);
            }
        }
    }

    /// The precomputed form gives the product of `spectral_jacobian_apply` (to round-off),
    /// also for a weighted sum of two maps sharing U, V (corotated + volume).
    #[test]
    fn precomputed_spectral_linear_matches() {
        let r1 = rot(0.3, -0.4, 1.2);
        let r2 = rot(-2.0, 0.7, 0.1);
        for s in [
            Vector3::new(1.7, 1.1, 0.6),
            Vector3::new(1.3, 1.3 - 1e-9, 0.7),
            Vector3::new(1.3, 0.9, -0.4),
        ] {
            let f = r1 * Matrix3::from_diagonal(&s) * r2.transpose();
            let svd = svd3(&f);
            let (ss, w) = cubic(&svd.sigma);
            let one = Vector3::repeat(1.0);
            let (m1, n1) = spectral_pair_coefficients(&svd.sigma, &one, &Matrix3::zeros());
            let (m2, n2) = spectral_pair_coefficients(&svd.sigma, &ss, &w);
            let lin = SpectralLinear::from_coefficients([
                svd.u,
                svd.v,
                w * 3.0,
                m1 * 2.0 + m2 * 3.0,
                n1 * 2.0 + n2 * 3.0,
            ]);
            let df = Matrix3::new(0.3, -1.0, 0.2, 0.5, 0.1, -0.7, 0.9, 0.4, -0.2);
            let expect = spectral_jacobian_apply(&svd, &one, &Matrix3::zeros(), &df) * 2.0
                + spectral_jacobian_apply(&svd, &ss, &w, &df) * 3.0;
            let got = lin.apply(&df);
            assert!(
                (got - expect).norm() <= 1e-14 * expect.norm(),
                "{got} vs {expect}"
            );
        }
    }

    /// Isotropic test map p(F) = det(F) F = U diag(J σ) Vᵀ: σ*_i = J σ_i,
    /// W_ij = J δ_ij + J σ_i / σ_j (analytic; smooth even for repeated σ).
    fn det_scaled(s: &Vector3<f64>) -> (Vector3<f64>, Matrix3<f64>) {
        let j = s[0] * s[1] * s[2];
        let cof = Vector3::new(s[1] * s[2], s[0] * s[2], s[0] * s[1]);
        let w = Matrix3::from_fn(|a, b| if a == b { j } else { 0.0 } + s[a] * cof[b]);
        (s * j, w)
    }

    /// Isotropic test map p(F) = F Fᵀ F: σ* = σ³, W = diag(3σ²).
    fn cubic(s: &Vector3<f64>) -> (Vector3<f64>, Matrix3<f64>) {
        (
            s.map(|x| x * x * x),
            Matrix3::from_diagonal(&s.map(|x| 3.0 * x * x)),
        )
    }

    type StretchMap = fn(&Vector3<f64>) -> (Vector3<f64>, Matrix3<f64>);
    type MatrixMap = fn(&Matrix3<f64>) -> Matrix3<f64>;

    /// Eq. 42 against central FD of two analytic isotropic maps, incl. repeated, near-repeated
    /// and inverted stretches (exercises the degenerate limit and signed σ).
    #[test]
    fn spectral_jacobian_vs_fd() {
        let maps: [(StretchMap, MatrixMap); 2] = [
            (det_scaled, |f| f * f.determinant()),
            (cubic, |f| f * f.transpose() * f),
        ];
        let r1 = rot(0.3, -0.4, 1.2);
        let r2 = rot(-2.0, 0.7, 0.1);
        let stretches = [
            Vector3::new(1.7, 1.1, 0.6),
            Vector3::new(1.0, 1.0, 1.0),
            Vector3::new(1.3, 1.3, 0.7),
            Vector3::new(1.3, 1.3 - 1e-9, 0.7),
            Vector3::new(1.3, 1.3 - 3e-6, 0.7),
            Vector3::new(1.3, 0.9, -0.4),
            Vector3::new(2.0, 0.5, 0.5 - 1e-7),
        ];
        let mut worst: f64 = 0.0;
        for (spec, full) in maps.iter() {
            for s in &stretches {
                let f = r1 * Matrix3::from_diagonal(s) * r2.transpose();
                let svd = svd3(&f);
                let (ss, w) = spec(&svd.sigma);
                // the analytic stretch map must reproduce the full map
                assert!((svd.compose(&ss) - full(&f)).norm() < 1e-12 * full(&f).norm());
                let jac = spectral_jacobian_matrix(&svd, &ss, &w);
                let fdj = fd::jacobian_mat3(full, &f, 1e-4);
                let err = (jac - fdj).norm() / fdj.norm();
                worst = worst.max(err);
                assert!(err < 1e-8, "spectral Jacobian error {err} at sigma {s}");
                // matrix-free apply agrees with the assembled matrix
                let df = Matrix3::new(0.3, -1.0, 0.2, 0.5, 0.1, -0.7, 0.9, 0.4, -0.2);
                let ap = spectral_jacobian_apply(&svd, &ss, &w, &df);
                let mv = jac * fd::vec9(&df);
                assert!((fd::vec9(&ap) - mv).norm() < 1e-13 * mv.norm());
            }
        }
        eprintln!("spectral Jacobian vs FD, worst relative error: {worst:.3e}");
    }
}
