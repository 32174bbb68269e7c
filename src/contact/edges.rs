//! Edge–edge contact between boundary edges of two bodies (or of one body, with
//! `[contact] self_contact`): the geometry of two segments $a(s)=(1-s)a_0+sa_1$,
//! $b(t)=(1-t)b_0+tb_1$, $s,t\in\[0,1\]$.
//!
//! [`closest`] gives the parameters $(s,t)$ of the closest points (clamped to the segments,
//! robust for parallel segments), [`distance`] the distance $d=\|a(s)-b(t)\|$ and
//! [`distance_gradient`] its derivative with respect to the four end points. Because
//! $(s,t)$ minimise $\|a(s)-b(t)\|$ over the square, the envelope theorem gives
//! $\partial d/\partial a_0=(1-s)\hat n$, $\partial d/\partial a_1=s\hat n$,
//! $\partial d/\partial b_0=-(1-t)\hat n$, $\partial d/\partial b_1=-t\hat n$ with
//! $\hat n=(a(s)-b(t))/d$, valid also where $(s,t)$ sit on the boundary of the square and
//! for parallel segments (where the closest points are not unique but $d$ is).
//!
//! A contact row uses the frozen frame [`frame`]: interior closest points of the two
//! (non-parallel) lines at the step start, normal $n=\sigma\,(e_a\times e_b)/\|e_a\times e_b\|$
//! (which is $\pm\hat n$ for interior closest points and stays defined when the segments
//! touch), oriented by $\sigma=\pm1$ out of the body of $b$; tangents as for node–triangle
//! contacts. With the weights frozen the rows are linear in the four nodes:
//! $\delta_n(x)=n^T\big((1-s)x_{a_0}+sx_{a_1}-(1-t)x_{b_0}-tx_{b_1}\big)$.

use nalgebra::Vector3;

type V3 = Vector3<f64>;

/// Closest-point parameters $(s,t)\in\[0,1\]^2$ of segments $a_0a_1$ and $b_0b_1$.
/// Degenerate (zero-length) segments are treated as points; parallel segments take the
/// $s$ that is closest to $b_0$'s projection, clamped (any minimiser gives the same distance).
pub fn closest(a0: &V3, a1: &V3, b0: &V3, b1: &V3) -> (f64, f64) {
    let d1 = a1 - a0;
    let d2 = b1 - b0;
    let r = a0 - b0;
    let a = d1.norm_squared();
    let e = d2.norm_squared();
    let f = d2.dot(&r);
    let tiny = 1e-300;
    if a <= tiny && e <= tiny {
        return (0.0, 0.0);
    }
    if a <= tiny {
        return (0.0, (f / e).clamp(0.0, 1.0));
    }
    let c = d1.dot(&r);
    if e <= tiny {
        return ((-c / a).clamp(0.0, 1.0), 0.0);
    }
    let b = d1.dot(&d2);
    let denom = a * e - b * b;
    // parallel (relative to the lengths): pick s from b0, then t
    let mut s = if denom > 1e-14 * a * e {
        ((b * f - c * e) / denom).clamp(0.0, 1.0)
    } else {
        (-c / a).clamp(0.0, 1.0)
    };
    let mut t = (b * s + f) / e;
    if t < 0.0 {
        t = 0.0;
        s = (-c / a).clamp(0.0, 1.0);
    } else if t > 1.0 {
        t = 1.0;
        s = ((b - c) / a).clamp(0.0, 1.0);
    }
    (s, t)
}

/// Distance between segments $a_0a_1$ and $b_0b_1$.
pub fn distance(a0: &V3, a1: &V3, b0: &V3, b1: &V3) -> f64 {
    let (s, t) = closest(a0, a1, b0, b1);
    ((a0 + (a1 - a0) * s) - (b0 + (b1 - b0) * t)).norm()
}

/// $\partial d/\partial(a_0,a_1,b_0,b_1)$ of [`distance`] (see the module doc); zeros where
/// the segments intersect ($d=0$, not differentiable).
pub fn distance_gradient(a0: &V3, a1: &V3, b0: &V3, b1: &V3) -> [V3; 4] {
    let (s, t) = closest(a0, a1, b0, b1);
    let r = (a0 + (a1 - a0) * s) - (b0 + (b1 - b0) * t);
    let d = r.norm();
    if d == 0.0 {
        return [V3::zeros(); 4];
    }
    let n = r / d;
    [n * (1.0 - s), n * s, -n * (1.0 - t), -n * t]
}

/// Unclamped closest-point parameters of the two infinite lines, `None` when they are
/// parallel within $|\sin\theta|<$ `min_sin`.
pub fn line_params(a0: &V3, a1: &V3, b0: &V3, b1: &V3, min_sin: f64) -> Option<(f64, f64)> {
    let d1 = a1 - a0;
    let d2 = b1 - b0;
    let r = a0 - b0;
    let a = d1.norm_squared();
    let e = d2.norm_squared();
    let b = d1.dot(&d2);
    let denom = a * e - b * b;
    if denom.partial_cmp(&(min_sin * min_sin * a * e)) != Some(std::cmp::Ordering::Greater)
        || a == 0.0
        || e == 0.0
    {
        return None;
    }
    let c = d1.dot(&r);
    let f = d2.dot(&r);
    Some(((b * f - c * e) / denom, (a * f - b * c) / denom))
}

/// Frozen frame of an edge–edge contact (module doc): stencil coefficients over
/// $(a_0,a_1,b_0,b_1)$, normal, tangents, right-hand sides and signed gap.
#[derive(Clone, Copy, Debug)]
pub struct EdgeFrame {
    pub s: f64,
    pub t: f64,
    /// $\sigma$: $n=\sigma\,(e_a\times e_b)/\|e_a\times e_b\|$.
    pub sign: f64,
    pub normal: V3,
    pub tangent: [V3; 2],
    /// Right-hand sides $d$ of the normal and the two tangent rows.
    pub d: [f64; 3],
    /// Signed gap $n^T(a(s)-b(t))$ at the step start.
    pub gap: f64,
}

impl EdgeFrame {
    /// Coefficients of $(a_0,a_1,b_0,b_1)$ in $a(s)-b(t)$.
    pub fn coefficients(&self) -> [f64; 4] {
        [1.0 - self.s, self.s, -(1.0 - self.t), -self.t]
    }
}

/// Frame of segments `p = [a0, a1, b0, b1]`. `sign`: held orientation ($\pm1$), or `None`
/// to orient $n$ along `outward` (the outward normal of $b$'s body at the edge). `axis`:
/// held tangent reference axis (default: the axis least parallel to $n$). `None` for
/// (near-)parallel edges ($|\sin\theta|<10^{-3}$).
pub fn frame(
    p: &[V3; 4],
    outward: &V3,
    sign: Option<f64>,
    axis: Option<usize>,
) -> Option<EdgeFrame> {
    let (s, t) = line_params(&p[0], &p[1], &p[2], &p[3], 1e-3)?;
    let (s, t) = (s.clamp(0.0, 1.0), t.clamp(0.0, 1.0));
    let c = (p[1] - p[0]).cross(&(p[3] - p[2]));
    let cn = c.norm();
    if !(cn > 0.0 && cn.is_finite()) {
        return None;
    }
    let sign = sign.unwrap_or(if c.dot(outward) >= 0.0 { 1.0 } else { -1.0 });
    let n = c * (sign / cn);
    let k = axis.unwrap_or_else(|| n.iamin());
    let mut e = V3::zeros();
    e[k] = 1.0;
    let t1 = (e - n * n.dot(&e)).normalize();
    let tangent = [t1, n.cross(&t1)];
    let r = (p[0] + (p[1] - p[0]) * s) - (p[2] + (p[3] - p[2]) * t);
    Some(EdgeFrame {
        s,
        t,
        sign,
        normal: n,
        tangent,
        d: [0.0, tangent[0].dot(&r), tangent[1].dot(&r)],
        gap: n.dot(&r),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fd_check(p: [V3; 4], rtol: f64) {
        let g = distance_gradient(&p[0], &p[1], &p[2], &p[3]);
        let d = |q: &[V3; 4]| distance(&q[0], &q[1], &q[2], &q[3]);
        let eps = 1e-7;
        for k in 0..4 {
            for c in 0..3 {
                let mut a = p;
                let mut b = p;
                a[k][c] += eps;
                b[k][c] -= eps;
                let fd = (d(&a) - d(&b)) / (2.0 * eps);
                assert!(
                    (fd - g[k][c]).abs() <= rtol * (1.0 + fd.abs()),
                    "node {k} axis {c}: fd {fd} analytic {}",
                    g[k][c]
                );
            }
        }
    }

    #[test]
    fn crossing_segments_distance_and_params() {
        let p = [
            V3::new(-1.0, 0.2, 0.5),
            V3::new(1.0, 0.2, 0.5),
            V3::new(0.3, -1.0, 0.0),
            V3::new(0.3, 1.0, 0.0),
        ];
        let (s, t) = closest(&p[0], &p[1], &p[2], &p[3]);
        assert!(
            (s - 0.65).abs() < 1e-14 && (t - 0.6).abs() < 1e-14,
            "{s} {t}"
        );
        assert!((distance(&p[0], &p[1], &p[2], &p[3]) - 0.5).abs() < 1e-14);
        fd_check(p, 1e-7);
    }

    #[test]
    fn distance_gradient_matches_fd_generic_and_clamped() {
        // generic skew segments, interior closest points
        fd_check(
            [
                V3::new(0.1, -0.3, 0.2),
                V3::new(0.9, 0.4, 0.35),
                V3::new(0.2, 0.5, -0.4),
                V3::new(0.6, -0.2, -0.1),
            ],
            1e-6,
        );
        // closest point at an end of one segment (clamped s)
        fd_check(
            [
                V3::new(2.0, 0.0, 0.3),
                V3::new(3.0, 0.1, 0.2),
                V3::new(0.0, -1.0, 0.0),
                V3::new(0.1, 1.0, 0.05),
            ],
            1e-6,
        );
    }

    #[test]
    fn near_parallel_and_parallel_segments() {
        // near-parallel overlapping segments (1e-4 rad): d is smooth, gradient matches FD
        let th: f64 = 1e-4;
        let p = [
            V3::new(0.0, 0.0, 0.0),
            V3::new(1.0, 0.0, 0.0),
            V3::new(0.2, 0.1, 0.05),
            V3::new(0.2 + th.cos(), 0.1 + th.sin(), 0.05),
        ];
        let d = distance(&p[0], &p[1], &p[2], &p[3]);
        // exact: the distance at the end where the lines are closest (b0, y = 0.1)
        assert!(
            (d - (0.1f64.powi(2) + 0.05f64.powi(2)).sqrt()).abs() < 1e-9,
            "{d}"
        );
        fd_check(p, 1e-5);
        // exactly parallel, overlapping: distance of the lines, no NaN
        let q = [
            V3::new(0.0, 0.0, 0.0),
            V3::new(1.0, 0.0, 0.0),
            V3::new(0.5, 0.0, 0.3),
            V3::new(1.5, 0.0, 0.3),
        ];
        let dq = distance(&q[0], &q[1], &q[2], &q[3]);
        assert!((dq - 0.3).abs() < 1e-15);
        let g = distance_gradient(&q[0], &q[1], &q[2], &q[3]);
        assert!(g.iter().all(|v| v.iter().all(|c| c.is_finite())));
        // the normal components are exact for parallel segments (translation along z)
        let gz: f64 = g[0][2] + g[1][2];
        assert!((gz + 1.0).abs() < 1e-12, "{gz}");
        // the frame refuses (near-)parallel edges
        assert!(frame(&q, &V3::z(), None, None).is_none());
        assert!(line_params(&p[0], &p[1], &p[2], &p[3], 1e-3).is_none());
    }

    #[test]
    fn frame_gap_and_orientation() {
        let p = [
            V3::new(-1.0, 0.2, 0.5),
            V3::new(1.0, 0.2, 0.5),
            V3::new(0.3, -1.0, 0.0),
            V3::new(0.3, 1.0, 0.0),
        ];
        let f = frame(&p, &V3::z(), None, None).unwrap();
        assert!((f.normal - V3::z()).norm() < 1e-15);
        assert!((f.gap - 0.5).abs() < 1e-14);
        let c = f.coefficients();
        let r: V3 = p.iter().zip(c).map(|(x, w)| x * w).sum();
        assert!((f.normal.dot(&r) - f.gap).abs() < 1e-14);
        // outward normal of b pointing down: a is on the inside, negative gap
        let g = frame(&p, &-V3::z(), None, None).unwrap();
        assert!((g.gap + 0.5).abs() < 1e-14 && g.sign == -f.sign);
    }
}
