//! DiffPD's penalty contact (`diffpd-notes.md` §1.8: `planar_contact`), the alternative
//! `[contact] model = "penalty"`, generalised from planes to every obstacle shape through its
//! signed distance $\phi$ and normal $n=\nabla\phi$.
//!
//! Per boundary node $i$ and obstacle, at the step start $(x_t,v_t)$ (an explicit state
//! force added to $f_{ext}$, so it enters $y$):
//! $f_n=k_n\,p_-^{\,p-1}\,n$ with the penetration $p_-=\max(0,-\phi(x_{t,i}))$;
//! tangential relative velocity $u_s=(I-nn^T)(v_{t,i}-v_{obs})$;
//! Macklin-style capped viscous friction $f_f=-\min\big(k_f,\ \mu\|f_n\|/(\|u_s\|+\epsilon_u)\big)\,u_s$.
//!
//! Gradients: $d\mathcal L/df_{ext,t}=z$ (spec §7.5), so $d\mathcal L/dx_t\mathrel{+}=(\partial f/\partial x_t)^Tz$,
//! $d\mathcal L/dv_t\mathrel{+}=(\partial f/\partial v_t)^Tz$, $d\mathcal L/d\mu\mathrel{+}=(\partial f/\partial\mu)^Tz$ and, for the
//! obstacle translation $\tau$, $\partial f/\partial\tau=-\partial f/\partial x$. The curvature
//! $H=\partial n/\partial x$ of curved obstacles is taken by central differences of $n$.

use super::obstacle::Obstacle;
use super::StepStart;
use crate::model::Model;
use crate::model::PenaltySettings;
use nalgebra::{Matrix3, Vector3};

fn node(v: &[f64], i: usize) -> Vector3<f64> {
    Vector3::new(v[3 * i], v[3 * i + 1], v[3 * i + 2])
}

/// Velocity of the obstacle's material point closest to `p` at time `t`.
fn obstacle_velocity(o: &Obstacle, p: &Vector3<f64>, t: f64) -> Vector3<f64> {
    let q = o.query(p, t);
    let dt = 1e-6;
    (o.point_at(&q.surface_ref, t + dt) - o.point_at(&q.surface_ref, t - dt)) / (2.0 * dt)
}

/// Force on one node from one obstacle, and its Jacobians
/// $(\partial f/\partial x,\ \partial f/\partial v,\ \partial f/\partial\mu)$.
pub struct NodeForce {
    pub f: Vector3<f64>,
    pub dx: Matrix3<f64>,
    pub dv: Matrix3<f64>,
    pub dmu: Vector3<f64>,
    pub penetration: f64,
}

/// Penalty force of obstacle `o` on a node at `x`, `v` (time `t`).
pub fn node_force(
    o: &Obstacle,
    s: &PenaltySettings,
    x: &Vector3<f64>,
    v: &Vector3<f64>,
    t: f64,
) -> Option<NodeForce> {
    let q = o.query(x, t);
    let pen = -q.dist;
    if pen <= 0.0 {
        return None;
    }
    let n = q.normal;
    // curvature H = dn/dx by central differences (0 for planes)
    let hfd = 1e-7 * (1.0 + x.norm());
    let mut hm = Matrix3::zeros();
    for c in 0..3 {
        let mut e = Vector3::zeros();
        e[c] = hfd;
        let d = (o.query(&(x + e), t).normal - o.query(&(x - e), t).normal) / (2.0 * hfd);
        hm.set_column(c, &d);
    }
    let p = s.power;
    let g = s.stiffness * pen.powf(p - 1.0);
    let dg_dphi = -s.stiffness * (p - 1.0) * pen.powf(p - 2.0);
    let f_n = n * g;
    let dfn_dx = n * n.transpose() * dg_dphi + hm * g;
    let vrel = v - obstacle_velocity(o, x, t);
    let proj = Matrix3::identity() - n * n.transpose();
    let us = proj * vrel;
    // d u_s / dx = -(d n/dx stuff): u_s = v - n (n.v)
    let dus_dx = -(hm * n.dot(&vrel) + n * (hm.transpose() * vrel).transpose());
    let den = us.norm() + s.velocity_epsilon;
    let coulomb = o.friction * g / den;
    let (c, dc_dus, dc_dg, dc_dmu) = if s.friction_viscosity <= coulomb {
        (s.friction_viscosity, Vector3::zeros(), 0.0, 0.0)
    } else {
        let uh = if us.norm() > 0.0 {
            us / us.norm()
        } else {
            Vector3::zeros()
        };
        (
            coulomb,
            -uh * (o.friction * g / (den * den)),
            o.friction / den,
            g / den,
        )
    };
    let m = Matrix3::identity() * c + us * dc_dus.transpose();
    let f = f_n - us * c;
    let dx = dfn_dx - m * dus_dx - us * (n.transpose() * (dc_dg * dg_dphi));
    let dv = -m * proj;
    Some(NodeForce {
        f,
        dx,
        dv,
        dmu: -us * dc_dmu,
        penetration: pen,
    })
}

/// Add the penalty forces at the step start `start` to `f` (node-major); returns
/// (pairs in contact, largest penetration).
pub fn add_forces(
    model: &Model,
    nodes: &[usize],
    start: &StepStart,
    f: &mut [f64],
) -> (usize, f64) {
    let (t, x_t, v_t) = (start.t, start.x, start.v);
    let s = &model.contact.penalty;
    let mut count = 0;
    let mut worst: f64 = 0.0;
    for &i in nodes {
        let (x, v) = (node(x_t, i), node(v_t, i));
        for o in &model.obstacles {
            if let Some(nf) = node_force(o, s, &x, &v, t) {
                count += 1;
                worst = worst.max(nf.penetration);
                for d in 0..3 {
                    f[3 * i + d] += nf.f[d];
                }
            }
        }
    }
    (count, worst)
}

/// Gradient contributions of the penalty forces of the step from `start` ($t$) from the
/// adjoint `z`: $(d\mathcal L/dx_t,\ d\mathcal L/dv_t)$ additions, and per obstacle
/// $d\mathcal L/d\mu_o$, $d\mathcal L/d\tau_o$ (added to `dmu`, `dtau`).
pub fn gradients(
    model: &Model,
    nodes: &[usize],
    start: &StepStart,
    z: &[f64],
    dmu: &mut [f64],
    dtau: &mut [[f64; 3]],
) -> (Vec<f64>, Vec<f64>) {
    let (t, x_t, v_t) = (start.t, start.x, start.v);
    let s = &model.contact.penalty;
    let n3 = x_t.len();
    let (mut gx, mut gv) = (vec![0.0; n3], vec![0.0; n3]);
    for &i in nodes {
        let (x, v, zi) = (node(x_t, i), node(v_t, i), node(z, i));
        for (k, o) in model.obstacles.iter().enumerate() {
            if let Some(nf) = node_force(o, s, &x, &v, t) {
                let ax = nf.dx.transpose() * zi;
                let av = nf.dv.transpose() * zi;
                for d in 0..3 {
                    gx[3 * i + d] += ax[d];
                    gv[3 * i + d] += av[d];
                    dtau[k][d] -= ax[d];
                }
                dmu[k] += nf.dmu.dot(&zi);
            }
        }
    }
    (gx, gv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::obstacle::Shape;
    use crate::model::Motion;

    #[test]
    fn node_force_jacobians_match_finite_differences() {
        let plane = Shape::Plane {
            point: Vector3::zeros(),
            normal: Vector3::new(0.2, 0.1, 1.0).normalize(),
        };
        let sphere = Shape::Sphere {
            center: Vector3::zeros(),
            radius: 0.5,
        };
        for ((shape, friction), x, v) in [
            (
                (plane, 0.4),
                Vector3::new(0.1, 0.2, -0.1),
                Vector3::new(0.3, -0.2, -0.5),
            ),
            (
                (sphere, 0.3),
                Vector3::new(0.1, 0.2, 0.44),
                Vector3::new(0.3, -0.2, -0.5),
            ),
        ] {
            let o = Obstacle::new("o".into(), shape, friction, 0.0, Motion::Fixed);
            for kf in [1e9, 0.5] {
                let s = PenaltySettings {
                    stiffness: 1e4,
                    power: 3.0,
                    friction_viscosity: kf,
                    velocity_epsilon: 1e-6,
                };
                let nf = node_force(&o, &s, &x, &v, 0.0).expect("penetrating");
                let h = 1e-7;
                for c in 0..3 {
                    let mut e = Vector3::zeros();
                    e[c] = h;
                    let fd = (node_force(&o, &s, &(x + e), &v, 0.0).unwrap().f
                        - node_force(&o, &s, &(x - e), &v, 0.0).unwrap().f)
                        / (2.0 * h);
                    let err = (fd - nf.dx.column(c)).norm() / (1.0 + fd.norm());
                    assert!(err < 1e-4, "dx col {c}: {fd:?} vs {:?}", nf.dx.column(c));
                    let fd = (node_force(&o, &s, &x, &(v + e), 0.0).unwrap().f
                        - node_force(&o, &s, &x, &(v - e), 0.0).unwrap().f)
                        / (2.0 * h);
                    let err = (fd - nf.dv.column(c)).norm() / (1.0 + fd.norm());
                    assert!(err < 1e-5, "dv col {c}: {fd:?} vs {:?}", nf.dv.column(c));
                }
            }
        }
    }
}
