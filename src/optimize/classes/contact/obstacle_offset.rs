//! `obstacle_offset`: a rigid translation $\tau_o$ (m) of obstacle $o$'s whole trajectory,
//! with $d\mathcal L/d\tau_o$ from the contact solve's adjoint. Written back by moving the
//! obstacle's positional keys by $\tau_o$ (the plane's `point`, the sphere's `center`, the
//! box's `min` and `max`, the capsule's and cylinder's `a` and `b`, and a rotation's
//! `motion.center` when given): the world pose $R(t)(p-c)+c+vt+\tau_o$ is then the same with
//! the offset 0. The parameter's `lower`/`upper` move by $-\tau_o$, so the box stays where the
//! scene put it.

use super::offset_step;
use crate::model::Model;
use crate::optimize::classes::api::{
    item, keep_offset_box, set3, vector_set, Owner, Param, ParamClass, Refs, SceneText, Shape, Walk,
};
use crate::solver::gradient::Gradients;

/// The keys of an `[[obstacle]]` table that are positions in the world (the others are
/// directions, lengths or coefficients).
const POSITION_KEYS: [&str; 6] = ["point", "center", "min", "max", "a", "b"];

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
        let (o, c) = (p.obstacle, p.component);
        let path = format!("obstacle.{o}");
        let ot = item(w.root, "", "obstacle", o)?;
        for key in POSITION_KEYS {
            if ot.contains_key(key) {
                set3(ot, &path, key, c, |x| x + v)?;
                w.sets.push(vector_set(&format!("{path}.{key}"), ot, key)?);
            }
        }
        if let Some(motion) = ot.get_mut("motion").and_then(|m| m.as_table_mut()) {
            if motion.contains_key("center") {
                let mpath = format!("{path}.motion");
                set3(motion, &mpath, "center", c, |x| x + v)?;
                w.sets
                    .push(vector_set(&format!("{mpath}.center"), motion, "center")?);
            }
        }
        keep_offset_box(w, p, v)
    }
}
