//! Contact between the bodies of one scene (`[contact] bodies = true`): a boundary node $i$
//! of one body against a boundary triangle $(t_0,t_1,t_2)$ of another body, treated like an
//! obstacle contact (same Fischer–Burmeister normal residual and Alart–Curnier friction, same
//! Newton solve on the persistent factor).
//!
//! Frozen frame per step (from the positions at the step start, $p=x_{t,i}$, $q_k=x_{t,t_k}$):
//! the closest point $c=\sum_kw_kq_k$ of the triangle's plane to $p$ (barycentric weights,
//! clamped to the triangle and renormalised), the triangle's outward unit normal $n$
//! (boundary triangles are oriented outward), tangents $t_{1,2}$ as for obstacles. Rows:
//! $$\delta_n(x)=n^T\Big(x_i-\sum_kw_kx_{t_k}\Big),\qquad
//! \delta_{f,k}(x)=t_k^T\Big(x_i-\sum_kw_kx_{t_k}\Big)-t_k^T(p-c),$$
//! i.e. the signed distance to the triangle's plane (linearised with the frame frozen) and
//! the relative tangential displacement over the step. The row of $J$ distributes over the
//! node (coefficient 1) and the triangle's nodes ($-w_k$), so $W=JA^{-1}J^T$ takes the
//! Delassus columns of all four nodes from the persistent factor ([`super::Delassus`]).
//!
//! A node is a candidate of a triangle when its projection falls inside the triangle (all
//! unclamped barycentric coordinates $\ge-0.05$: face region; edge-edge contact is not
//! modelled), its distance to the closest point is within the reach
//! margin $+2h(\|v_i\|+\max_k\|v_{t_k}\|)+h^2\|g\|$, and its signed gap is above
//! $-$margin (not a node deep inside); each node takes the nearest triangle of each other
//! body. Both directions are included (nodes of A against triangles of B and the reverse).
//!
//! Backward: the frame depends on $x_t$ of the four nodes; its derivatives (of $d_r$, $a_r$
//! and $w_k$) are taken by central differences of [`frame`] ([`frame_gradient`]).

use super::{ContactSet, Tri, BODY};
use crate::model::Model;
use nalgebra::{Vector2, Vector3};

/// Tolerance on the unclamped barycentric coordinates of the face region.
pub const FACE_TOL: f64 = 0.05;

/// Frozen frame of a node–triangle contact.
#[derive(Clone, Copy, Debug)]
pub struct Frame {
    /// Barycentric weights of the contact point (clamped, sum 1).
    pub w: [f64; 3],
    /// Unclamped barycentric coordinates of the projection (face-region test).
    pub bary: [f64; 3],
    pub normal: Vector3<f64>,
    pub tangent: [Vector3<f64>; 2],
    /// Right-hand sides $d$ of the normal and the two tangent rows.
    pub d: [f64; 3],
    /// Signed gap $n^T(p-c)$ and distance $\|p-c\|$ at the step start.
    pub gap: f64,
    pub dist: f64,
}

fn v3(x: &[f64], i: usize) -> Vector3<f64> {
    Vector3::new(x[3 * i], x[3 * i + 1], x[3 * i + 2])
}

/// Frame of node position `p` against triangle `q` (see the module doc). `None` for a
/// degenerate triangle.
pub fn frame(p: &Vector3<f64>, q: &[Vector3<f64>; 3]) -> Option<Frame> {
    frame_axis(p, q, None)
}

/// [`frame`] with the tangents built from coordinate axis `axis` (default: the axis least
/// parallel to $n$, as for obstacles). The derivatives hold the axis fixed: the choice is
/// piecewise constant, and the friction law is invariant under the tangent basis.
pub fn frame_axis(p: &Vector3<f64>, q: &[Vector3<f64>; 3], axis: Option<usize>) -> Option<Frame> {
    let e1 = q[1] - q[0];
    let e2 = q[2] - q[0];
    let nn = e1.cross(&e2);
    let area2 = nn.norm();
    if area2 <= 0.0 || !area2.is_finite() {
        return None;
    }
    let n = nn / area2;
    // barycentric coordinates of the projection of p onto the plane
    let r = p - q[0];
    let b1 = n.dot(&r.cross(&e2)) / area2;
    let b2 = n.dot(&e1.cross(&r)) / area2;
    let bary = [1.0 - b1 - b2, b1, b2];
    let mut w = bary.map(|b| b.max(0.0));
    let s: f64 = w.iter().sum();
    w.iter_mut().for_each(|x| *x /= s);
    let c = q[0] * w[0] + q[1] * w[1] + q[2] * w[2];
    let k = axis.unwrap_or_else(|| n.iamin());
    let mut e = Vector3::zeros();
    e[k] = 1.0;
    let t1 = (e - n * n.dot(&e)).normalize();
    let tangent = [t1, n.cross(&t1)];
    let pc = p - c;
    Some(Frame {
        w,
        bary,
        normal: n,
        tangent,
        d: [0.0, tangent[0].dot(&pc), tangent[1].dot(&pc)],
        gap: n.dot(&pc),
        dist: pc.norm(),
    })
}

/// Axis-aligned bounding box of a body's nodes in `x`.
fn bbox(x: &[f64], nodes: std::ops::Range<usize>) -> (Vector3<f64>, Vector3<f64>) {
    let mut lo = Vector3::repeat(f64::INFINITY);
    let mut hi = Vector3::repeat(f64::NEG_INFINITY);
    for i in nodes {
        let p = v3(x, i);
        lo = lo.inf(&p);
        hi = hi.sup(&p);
    }
    (lo, hi)
}

/// Add the node–triangle candidates of the step from $t$ (positions `x_t`, velocities
/// `v_t`) to `set` (spec §6.2 step 3 for body pairs). `nodes`: contact candidates (boundary
/// nodes without prescribed DoFs), sorted.
pub fn add_candidates(
    set: &mut ContactSet,
    model: &Model,
    nodes: &[usize],
    kappa: &[f64],
    margin: f64,
    x_t: &[f64],
    v_t: &[f64],
) {
    let h = model.h;
    let g = Vector3::from(model.gravity).norm();
    let mu = model.contact.body_friction;
    let rows = if mu > 0.0 { 3 } else { 1 };
    let nb = model.bodies.len();
    let vmax: Vec<f64> = model
        .bodies
        .iter()
        .map(|b| {
            b.nodes
                .clone()
                .map(|i| v3(v_t, i).norm())
                .fold(0.0, f64::max)
        })
        .collect();
    let boxes: Vec<_> = model
        .bodies
        .iter()
        .map(|b| bbox(x_t, b.nodes.clone()))
        .collect();
    for &i in nodes {
        let bi = model.node_body[i];
        let p = v3(x_t, i);
        let vi = v3(v_t, i).norm();
        for bo in 0..nb {
            if bo == bi {
                continue;
            }
            let reach = margin + 2.0 * h * (vi + vmax[bo]) + h * h * g;
            let (lo, hi) = &boxes[bo];
            if (0..3).any(|d| p[d] < lo[d] - reach || p[d] > hi[d] + reach) {
                continue;
            }
            let mut best: Option<(Tri, Frame)> = None;
            for t in &model.bodies[bo].surface {
                let q = [v3(x_t, t[0]), v3(x_t, t[1]), v3(x_t, t[2])];
                let Some(f) = frame(&p, &q) else { continue };
                if f.bary.iter().any(|&b| b < -FACE_TOL) || f.dist > reach || f.gap < -margin {
                    continue;
                }
                if best.as_ref().map(|(_, b)| f.dist < b.dist).unwrap_or(true) {
                    best = Some((Tri { nodes: *t, w: f.w }, f));
                }
            }
            let Some((tri, f)) = best else { continue };
            let q = tri.nodes.map(|k| v3(x_t, k));
            set.node.push(i);
            set.obstacle.push(BODY);
            set.normal.push(f.normal);
            set.tangent.push(f.tangent);
            set.gap_offset.push(f.d[0]);
            set.anchor.push(Vector2::new(f.d[1], f.d[2]));
            set.kappa.push(kappa[i]);
            set.mu.push(mu);
            set.obstacle_motion.push(Vector3::zeros());
            set.origin.push(p);
            set.hessian.push(nalgebra::Matrix3::zeros());
            set.dtangent
                .push(super::obstacle::tangent_jacobians(&f.normal));
            set.tri.push(Some(tri));
            set.tri_origin.push(q);
            let r0 = *set.offset.last().expect("non-empty");
            set.offset.push(r0 + rows);
            let dirs = [f.normal, f.tangent[0], f.tangent[1]];
            for a in 0..rows {
                set.row_node.push(i);
                set.row_dir.push(dirs[a]);
                set.row_d.push(f.d[a]);
                set.row_tri.push(Some(tri));
            }
        }
    }
}

/// Derivatives with respect to $x_t$ of the four nodes (node, then triangle nodes; 12
/// entries) of $-\sum_r\mu_r\delta_r(x_{t+1})+\sum_r\lambda_r J_r z$, the frame's
/// contribution to $d\mathcal L/dx_t$ (gap part $-\mu^T\partial\delta/\partial x_t$, force
/// direction part $z^T\partial(J^T\lambda)/\partial x_t$), by central differences of
/// [`frame`] with the end positions `x_end` (node, triangle) held.
pub fn frame_gradient(
    p: &Vector3<f64>,
    q: &[Vector3<f64>; 3],
    x_end: &[Vector3<f64>; 4],
    z: &[Vector3<f64>; 4],
    lambda: &[f64],
    mu: &[f64],
) -> [f64; 12] {
    let nr = lambda.len();
    let axis = frame(p, q).map(|f| f.normal.iamin());
    let value = |pts: &[Vector3<f64>; 4]| -> f64 {
        let Some(f) = frame_axis(&pts[0], &[pts[1], pts[2], pts[3]], axis) else {
            return 0.0;
        };
        let dirs = [f.normal, f.tangent[0], f.tangent[1]];
        let rel = x_end[0] - x_end[1] * f.w[0] - x_end[2] * f.w[1] - x_end[3] * f.w[2];
        let zr = z[0] - z[1] * f.w[0] - z[2] * f.w[1] - z[3] * f.w[2];
        (0..nr)
            .map(|r| -mu[r] * (dirs[r].dot(&rel) - f.d[r]) + lambda[r] * dirs[r].dot(&zr))
            .sum()
    };
    let base = [*p, q[0], q[1], q[2]];
    let scale = (q[1] - q[0]).norm().max((q[2] - q[0]).norm()).max(1e-12);
    let eps = 1e-6 * scale;
    let mut out = [0.0; 12];
    for (k, o) in out.iter_mut().enumerate() {
        let mut a = base;
        let mut b = base;
        a[k / 3][k % 3] += eps;
        b[k / 3][k % 3] -= eps;
        *o = (value(&a) - value(&b)) / (2.0 * eps);
    }
    out
}

/// Largest penetration of a boundary node of one body into another body (m): nodes inside
/// the other body's closed boundary surface (generalised winding number $>\tfrac12$), depth
/// = distance to its nearest boundary triangle. 0 with fewer than two bodies.
pub fn max_penetration(model: &Model, x: &[f64]) -> f64 {
    let nb = model.bodies.len();
    if nb < 2 {
        return 0.0;
    }
    let boxes: Vec<_> = model
        .bodies
        .iter()
        .map(|b| bbox(x, b.nodes.clone()))
        .collect();
    let mut worst: f64 = 0.0;
    for &i in &model.boundary_nodes {
        let bi = model.node_body[i];
        let p = v3(x, i);
        for bo in 0..nb {
            if bo == bi {
                continue;
            }
            let (lo, hi) = &boxes[bo];
            if (0..3).any(|d| p[d] < lo[d] || p[d] > hi[d]) {
                continue;
            }
            let mut omega = 0.0;
            let mut dmin = f64::INFINITY;
            for t in &model.bodies[bo].surface {
                let a = v3(x, t[0]) - p;
                let b = v3(x, t[1]) - p;
                let c = v3(x, t[2]) - p;
                omega += solid_angle(&a, &b, &c);
                dmin = dmin.min(point_triangle_distance(&p, &[a + p, b + p, c + p]));
            }
            if omega / (4.0 * std::f64::consts::PI) > 0.5 {
                worst = worst.max(dmin);
            }
        }
    }
    worst
}

/// Signed solid angle of triangle $(a,b,c)$ seen from the origin (Van Oosterom–Strackee).
fn solid_angle(a: &Vector3<f64>, b: &Vector3<f64>, c: &Vector3<f64>) -> f64 {
    let (la, lb, lc) = (a.norm(), b.norm(), c.norm());
    let num = a.dot(&b.cross(c));
    let den = la * lb * lc + a.dot(b) * lc + a.dot(c) * lb + b.dot(c) * la;
    2.0 * num.atan2(den)
}

/// Euclidean distance of `p` to the (closed) triangle `q`.
pub fn point_triangle_distance(p: &Vector3<f64>, q: &[Vector3<f64>; 3]) -> f64 {
    let Some(f) = frame(p, q) else {
        return (p - q[0]).norm();
    };
    if f.bary.iter().all(|&b| b >= 0.0) {
        return f.gap.abs();
    }
    // outside the face region: nearest point on the three edges
    (0..3)
        .map(|k| {
            let (a, b) = (q[k], q[(k + 1) % 3]);
            let e = b - a;
            let s = ((p - a).dot(&e) / e.norm_squared()).clamp(0.0, 1.0);
            (p - (a + e * s)).norm()
        })
        .fold(f64::INFINITY, f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_of_point_above_triangle() {
        let q = [
            Vector3::new(0.0, 0.0, 0.0),
            Vector3::new(1.0, 0.0, 0.0),
            Vector3::new(0.0, 1.0, 0.0),
        ];
        let p = Vector3::new(0.25, 0.25, 0.1);
        let f = frame(&p, &q).unwrap();
        assert!((f.normal - Vector3::z()).norm() < 1e-15);
        assert!((f.gap - 0.1).abs() < 1e-15);
        assert!((f.w[0] - 0.5).abs() < 1e-15 && (f.w[1] - 0.25).abs() < 1e-15);
        // contact point reproduces the projection
        let c = q[0] * f.w[0] + q[1] * f.w[1] + q[2] * f.w[2];
        assert!((c - Vector3::new(0.25, 0.25, 0.0)).norm() < 1e-15);
        // distance outside the face region: to the nearest edge
        let d = point_triangle_distance(&Vector3::new(-1.0, 0.5, 0.0), &q);
        assert!((d - 1.0).abs() < 1e-15);
    }

    #[test]
    fn winding_number_of_a_tetrahedron() {
        // outward-oriented unit tetrahedron
        let v = [
            Vector3::new(0.0, 0.0, 0.0),
            Vector3::new(1.0, 0.0, 0.0),
            Vector3::new(0.0, 1.0, 0.0),
            Vector3::new(0.0, 0.0, 1.0),
        ];
        let faces = [[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]];
        let wn = |p: Vector3<f64>| -> f64 {
            faces
                .iter()
                .map(|f| solid_angle(&(v[f[0]] - p), &(v[f[1]] - p), &(v[f[2]] - p)))
                .sum::<f64>()
                / (4.0 * std::f64::consts::PI)
        };
        assert!((wn(Vector3::new(0.1, 0.1, 0.1)) - 1.0).abs() < 1e-12);
        assert!(wn(Vector3::new(1.0, 1.0, 1.0)).abs() < 1e-12);
    }

    #[test]
    fn frame_gradient_matches_finite_differences_of_the_value() {
        // consistency of the central differences with a coarser independent difference
        let p = Vector3::new(0.3, 0.2, 0.05);
        let q = [
            Vector3::new(0.0, 0.0, 0.0),
            Vector3::new(1.0, 0.1, 0.02),
            Vector3::new(0.1, 1.0, -0.03),
        ];
        let xe = [
            p + Vector3::new(0.01, 0.0, -0.02),
            q[0] + Vector3::new(0.0, 0.01, 0.0),
            q[1],
            q[2] + Vector3::new(0.0, 0.0, 0.01),
        ];
        let z = [
            Vector3::new(0.3, -0.2, 0.5),
            Vector3::new(0.1, 0.0, 0.2),
            Vector3::new(-0.4, 0.1, 0.0),
            Vector3::new(0.0, 0.3, 0.1),
        ];
        let lam = [2.0, 0.3, -0.1];
        let mu = [0.7, -0.2, 0.4];
        let g = frame_gradient(&p, &q, &xe, &z, &lam, &mu);
        assert!(g.iter().all(|v| v.is_finite()));
        assert!(g.iter().any(|v| v.abs() > 1e-3));
        // step-size independence of the central differences (smooth inside the face)
        let mut p2 = p;
        p2[2] += 1e-4;
        let g2 = frame_gradient(&p2, &q, &xe, &z, &lam, &mu);
        for k in 0..12 {
            assert!((g[k] - g2[k]).abs() < 1e-2 * (1.0 + g[k].abs()), "{k}");
        }
    }
}
