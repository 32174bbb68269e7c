//! `initial_velocity`: a uniform velocity $u$ (m/s) added to body $b$'s initial velocities,
//! so $d\mathcal L/du_c=\sum_{i\in b}d\mathcal L/dv_{0,i,c}$; added to
//! `body[b].initial.velocity[c]`.

use super::write_initial;
use crate::model::Model;
use crate::optimize::classes::api::{Param, ParamClass, SceneText, Shape, Walk};
use crate::solver::gradient::Gradients;

pub struct InitialVelocity;

impl ParamClass for InitialVelocity {
    fn key(&self) -> &'static str {
        "initial_velocity"
    }
    fn shape(&self) -> Shape {
        Shape::Vector3
    }
    fn value(&self, p: &Param, m: &Model) -> f64 {
        m.offsets[p.body].velocity[p.component]
    }
    fn set(&self, p: &Param, m: &mut Model, v: f64) {
        m.offsets[p.body].velocity[p.component] = v;
        m.refresh_initial();
    }
    fn gradient(&self, p: &Param, m: &Model, g: &Gradients, _: f64) -> f64 {
        m.bodies[p.body]
            .nodes
            .clone()
            .map(|i| g.v0[3 * i + p.component])
            .sum()
    }
    /// 1e-3 m/s.
    fn fd_step(&self, _: &Param, _: &Model, _: f64) -> f64 {
        1e-3
    }
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()> {
        write_initial(w, p, "velocity", |o| o + v)
    }
}
