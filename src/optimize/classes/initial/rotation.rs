//! `initial_rotation`: XYZ Euler angles $\phi$ (rad) of a rigid rotation of body $b$'s
//! initial positions about its bounding-box centre $c$, $x_{0,i}=R(\phi)(X_i-c)+c$, so
//! $d\mathcal L/d\phi_k=\sum_i d\mathcal L/dx_{0,i}\cdot\partial_kR\,(X_i-c)$; written to
//! `body[b].initial.rotation_deg[c]` in degrees.

use super::write_initial;
use crate::model::{euler_rotation, Model};
use crate::optimize::classes::api::{Param, ParamClass, SceneText, Shape, Walk};
use crate::solver::gradient::Gradients;
use nalgebra::Vector3;

pub struct InitialRotation;

impl ParamClass for InitialRotation {
    fn key(&self) -> &'static str {
        "initial_rotation"
    }
    fn shape(&self) -> Shape {
        Shape::Vector3
    }
    fn value(&self, p: &Param, m: &Model) -> f64 {
        m.offsets[p.body].euler[p.component]
    }
    fn set(&self, p: &Param, m: &mut Model, v: f64) {
        m.offsets[p.body].euler[p.component] = v;
        m.refresh_initial();
    }
    fn gradient(&self, p: &Param, m: &Model, g: &Gradients, _: f64) -> f64 {
        let b = p.body;
        let (_, dr) = euler_rotation(m.offsets[b].euler);
        let c = Vector3::from(m.bodies[b].center);
        m.bodies[b]
            .nodes
            .clone()
            .map(|i| {
                let x = Vector3::new(m.base_x0[3 * i], m.base_x0[3 * i + 1], m.base_x0[3 * i + 2]);
                let gi = Vector3::new(g.x0[3 * i], g.x0[3 * i + 1], g.x0[3 * i + 2]);
                gi.dot(&(dr[p.component] * (x - c)))
            })
            .sum()
    }
    /// 1e-3 rad.
    fn fd_step(&self, _: &Param, _: &Model, _: f64) -> f64 {
        1e-3
    }
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()> {
        let d = v.to_degrees();
        write_initial(w, p, "rotation_deg", |_| d)
    }
}
