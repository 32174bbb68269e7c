//! `obstacle_offset`: a rigid translation $\tau_o$ (m) of obstacle $o$'s whole trajectory,
//! with $d\mathcal L/d\tau_o$ from the contact solve's adjoint. Not written back (reported:
//! an obstacle's shape keys differ per type).

use super::offset_step;
use crate::model::Model;
use crate::optimize::classes::api::{Owner, Param, ParamClass, Refs, SceneText, Shape, Walk};
use crate::solver::gradient::Gradients;

pub struct ObstacleOffset;

impl ParamClass for ObstacleOffset {
    fn key(&self) -> &'static str {
        "obstacle_offset"
    }
    fn shape(&self) -> Shape {
        Shape::Vector3
    }
    fn refs(&self) -> Refs {
        Refs {
            obstacle: true,
            ..Refs::default()
        }
    }
    fn owner(&self) -> Owner {
        Owner::Obstacle
    }
    fn value(&self, p: &Param, m: &Model) -> f64 {
        m.obstacles[p.obstacle].offset[p.component]
    }
    fn set(&self, p: &Param, m: &mut Model, v: f64) {
        m.obstacles[p.obstacle].offset[p.component] = v;
    }
    fn gradient(&self, p: &Param, _: &Model, g: &Gradients, _: f64) -> f64 {
        g.obstacle_offset[p.obstacle][p.component]
    }
    fn fd_step(&self, _: &Param, m: &Model, _: f64) -> f64 {
        offset_step(m)
    }
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()> {
        w.notes.push(format!(
            "{}: obstacle offset {v:e} m (component {}) is not written back; translate obstacle {} by it",
            p.name, p.component, p.obstacle
        ));
        Ok(())
    }
}
