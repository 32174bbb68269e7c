//! Rigid obstacles: signed distance, outward normal and closest point of analytic shapes in
//! their reference pose, moved by a prescribed rigid motion
//! $p_{world}=R(t)\,(p_{ref}-c)+c+vt+o$ (rotation about the centre $c$, translation at
//! velocity $v$, and the differentiable offset $o$ — the `obstacle_offset` parameter).

pub use crate::model::obstacle::{Obstacle, Shape};
use crate::model::Motion;
use nalgebra::{Matrix3, Rotation3, Unit, Vector3};

/// Result of a distance query.
#[derive(Clone, Copy, Debug)]
pub struct Query {
    /// Signed distance (negative inside the obstacle).
    pub dist: f64,
    /// Outward unit normal $\nabla\phi$ in world coordinates.
    pub normal: Vector3<f64>,
    /// Closest surface point in the reference pose.
    pub surface_ref: Vector3<f64>,
}

fn v3(a: [f64; 3]) -> Vector3<f64> {
    Vector3::from(a)
}

/// Any unit vector orthogonal to `n` (stable choice).
fn any_normal(n: &Vector3<f64>) -> Vector3<f64> {
    let i = n.iamin();
    let mut e = Vector3::zeros();
    e[i] = 1.0;
    (e - n * n.dot(&e)).normalize()
}

impl Obstacle {
    /// Pose at time `t`: $(R, \tau)$ with $p_{world}=R(p_{ref}-c)+c+\tau$.
    pub fn pose(&self, t: f64) -> (Matrix3<f64>, Vector3<f64>) {
        match &self.motion {
            Motion::Fixed => (Matrix3::identity(), self.offset),
            Motion::Translate { velocity } => {
                (Matrix3::identity(), v3(*velocity) * t + self.offset)
            }
            Motion::Rotate { axis, rate, .. } => {
                let r = Rotation3::from_axis_angle(&Unit::new_normalize(v3(*axis)), rate * t)
                    .into_inner();
                (r, self.offset)
            }
        }
    }

    /// World position at time `t` of the obstacle's reference point `p_ref`.
    pub fn point_at(&self, p_ref: &Vector3<f64>, t: f64) -> Vector3<f64> {
        let (r, tau) = self.pose(t);
        r * (p_ref - self.center) + self.center + tau
    }

    /// Signed distance, outward normal and closest point of the world point `p` at time `t`.
    pub fn query(&self, p: &Vector3<f64>, t: f64) -> Query {
        let (r, tau) = self.pose(t);
        let q = r.transpose() * (p - self.center - tau) + self.center;
        let (dist, n_ref) = sdf(&self.shape, &q);
        Query {
            dist,
            normal: r * n_ref,
            surface_ref: q - n_ref * dist,
        }
    }
}

/// Signed distance and outward unit normal (gradient) of a shape at the reference point `q`.
pub fn sdf(shape: &Shape, q: &Vector3<f64>) -> (f64, Vector3<f64>) {
    match shape {
        Shape::Plane { point, normal } => (normal.dot(&(q - point)), *normal),
        Shape::Sphere { center, radius } => {
            let d = q - center;
            let l = d.norm();
            let n = if l > 0.0 {
                d / l
            } else {
                Vector3::new(0.0, 0.0, 1.0)
            };
            (l - radius, n)
        }
        Shape::Box { min, max } => {
            let c = (min + max) / 2.0;
            let half = (max - min) / 2.0;
            let rel = q - c;
            let d = rel.abs() - half;
            let outside = d.map(|v| v.max(0.0));
            let lo = outside.norm();
            let sign = rel.map(|v| if v < 0.0 { -1.0 } else { 1.0 });
            if lo > 0.0 {
                (lo, outside.component_mul(&sign) / lo)
            } else {
                let k = d.imax();
                let mut n = Vector3::zeros();
                n[k] = sign[k];
                (d[k], n)
            }
        }
        Shape::Capsule { a, b, radius } => {
            let ab = b - a;
            let t = ((q - a).dot(&ab) / ab.norm_squared()).clamp(0.0, 1.0);
            let d = q - (a + ab * t);
            let l = d.norm();
            let n = if l > 0.0 { d / l } else { any_normal(&ab) };
            (l - radius, n)
        }
        Shape::Cylinder { a, b, radius } => {
            let ab = b - a;
            let len = ab.norm();
            let axis = ab / len;
            let w = q - a;
            let t = w.dot(&axis);
            let radial = w - axis * t;
            let rho = radial.norm();
            let rhat = if rho > 0.0 {
                radial / rho
            } else {
                any_normal(&axis)
            };
            let d_rad = rho - radius;
            let (d_ax, s) = if t < len - t {
                (-t, -1.0)
            } else {
                (t - len, 1.0)
            };
            if d_rad > 0.0 && d_ax > 0.0 {
                let l = (d_rad * d_rad + d_ax * d_ax).sqrt();
                (l, (rhat * d_rad + axis * (s * d_ax)) / l)
            } else if d_rad > d_ax {
                (d_rad, rhat)
            } else {
                (d_ax, axis * s)
            }
        }
    }
}

/// Contact frame of a normal: tangents $t_1,t_2$ by Gram–Schmidt from the coordinate axis
/// least parallel to $n$ (spec §6.2 step 3).
pub fn tangents(n: &Vector3<f64>) -> [Vector3<f64>; 2] {
    let t1 = any_normal(n);
    let t2 = n.cross(&t1);
    [t1, t2]
}

/// $\partial t_k/\partial n$ of [`tangents`] (the reference axis $e$ is piecewise constant):
/// $w=e-n(n\cdot e)$, $t_1=w/\|w\|$, $t_2=n\times t_1$.
pub fn tangent_jacobians(n: &Vector3<f64>) -> [Matrix3<f64>; 2] {
    let i = n.iamin();
    let mut e = Vector3::zeros();
    e[i] = 1.0;
    let w = e - n * n.dot(&e);
    let wn = w.norm();
    let t1 = w / wn;
    let dw = -(n * e.transpose() + Matrix3::identity() * n.dot(&e));
    let dt1 = (Matrix3::identity() - t1 * t1.transpose()) / wn * dw;
    let dt2 = -t1.cross_matrix() + n.cross_matrix() * dt1;
    [dt1, dt2]
}

impl Obstacle {
    /// Hessian $H=\partial n/\partial p$ of the signed distance at the world point `p`, time
    /// `t`, by central differences of the normal (exactly 0 for planes).
    pub fn hessian(&self, p: &Vector3<f64>, t: f64) -> Matrix3<f64> {
        if matches!(self.shape, Shape::Plane { .. }) {
            return Matrix3::zeros();
        }
        let h = 1e-6 * (1.0 + p.norm());
        let mut m = Matrix3::zeros();
        for c in 0..3 {
            let mut e = Vector3::zeros();
            e[c] = h;
            let d = (self.query(&(p + e), t).normal - self.query(&(p - e), t).normal) / (2.0 * h);
            m.set_column(c, &d);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fd_normal(shape: &Shape, q: Vector3<f64>) -> Vector3<f64> {
        let h = 1e-7;
        Vector3::from_fn(|i, _| {
            let mut e = Vector3::zeros();
            e[i] = h;
            (sdf(shape, &(q + e)).0 - sdf(shape, &(q - e)).0) / (2.0 * h)
        })
    }

    #[test]
    fn normals_are_distance_gradients() {
        let shapes = [
            Shape::Plane {
                point: Vector3::new(0.1, 0.2, 0.3),
                normal: Vector3::new(1.0, -2.0, 0.5).normalize(),
            },
            Shape::Sphere {
                center: Vector3::new(0.0, 0.1, 0.0),
                radius: 0.3,
            },
            Shape::Box {
                min: Vector3::new(-0.1, -0.2, -0.3),
                max: Vector3::new(0.2, 0.1, 0.0),
            },
            Shape::Capsule {
                a: Vector3::new(0.0, 0.0, 0.0),
                b: Vector3::new(0.3, 0.1, 0.0),
                radius: 0.05,
            },
            Shape::Cylinder {
                a: Vector3::new(0.0, 0.0, 0.0),
                b: Vector3::new(0.0, 0.0, 0.4),
                radius: 0.1,
            },
        ];
        let pts = [
            Vector3::new(0.41, 0.33, 0.27),
            Vector3::new(-0.37, 0.05, 0.52),
            Vector3::new(0.02, -0.03, 0.21),
            Vector3::new(0.15, 0.31, -0.44),
            Vector3::new(0.01, 0.02, -0.05),
        ];
        for s in &shapes {
            for q in &pts {
                let (d, n) = sdf(s, q);
                assert!((n.norm() - 1.0).abs() < 1e-12);
                let g = fd_normal(s, *q);
                assert!((g - n).norm() < 1e-5, "{s:?} at {q:?}: {n:?} vs {g:?}");
                // closest point lies on the surface
                let c = q - n * d;
                assert!(sdf(s, &c).0.abs() < 1e-12, "{s:?}");
            }
        }
    }

    #[test]
    fn moving_obstacle_query() {
        let sphere = Shape::Sphere {
            center: Vector3::zeros(),
            radius: 1.0,
        };
        let motion = Motion::Translate {
            velocity: [1.0, 0.0, 0.0],
        };
        let o = Obstacle::new("o".into(), sphere, 0.0, 0.0, motion);
        let q = o.query(&Vector3::new(3.0, 0.0, 0.0), 1.0);
        assert!((q.dist - 1.0).abs() < 1e-14);
        assert!((q.normal - Vector3::x()).norm() < 1e-14);
        let p = o.point_at(&q.surface_ref, 1.0);
        assert!((p - Vector3::new(2.0, 0.0, 0.0)).norm() < 1e-14);
    }

    #[test]
    fn tangent_frame_is_orthonormal() {
        for n in [
            Vector3::z(),
            Vector3::new(1.0, 2.0, -3.0).normalize(),
            Vector3::new(-0.3, 0.0, 0.1).normalize(),
        ] {
            let [t1, t2] = tangents(&n);
            assert!(t1.dot(&n).abs() < 1e-15 && t2.dot(&n).abs() < 1e-15);
            assert!(t1.dot(&t2).abs() < 1e-15);
            assert!((t1.norm() - 1.0).abs() < 1e-15 && (t2.norm() - 1.0).abs() < 1e-15);
            assert!((t1.cross(&t2) - n).norm() < 1e-14);
        }
    }

    #[test]
    fn tangent_jacobians_match_finite_differences() {
        let n = Vector3::new(0.3, -0.2, 0.9).normalize();
        let [d1, d2] = tangent_jacobians(&n);
        let h = 1e-7;
        for c in 0..3 {
            let mut e = Vector3::zeros();
            e[c] = h;
            let (p, m) = (tangents(&(n + e)), tangents(&(n - e)));
            // tangents() normalises nothing about n: compare the unnormalised derivative
            let fd1 = (p[0] - m[0]) / (2.0 * h);
            let fd2 = (p[1] - m[1]) / (2.0 * h);
            assert!((fd1 - d1.column(c)).norm() < 1e-6, "t1 col {c}");
            assert!((fd2 - d2.column(c)).norm() < 1e-6, "t2 col {c}");
        }
    }

    #[test]
    fn sphere_hessian() {
        let sphere = Shape::Sphere {
            center: Vector3::zeros(),
            radius: 0.5,
        };
        let o = Obstacle::new("o".into(), sphere, 0.0, 0.0, Motion::Fixed);
        let p = Vector3::new(0.1, 0.2, 0.6);
        let n = p.normalize();
        let exact = (Matrix3::identity() - n * n.transpose()) / p.norm();
        assert!((o.hessian(&p, 0.0) - exact).norm() < 1e-8);
    }
}
