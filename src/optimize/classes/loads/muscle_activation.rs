//! `muscle_activation`: activation knot $a_{g,k}$ of muscle group $g$ (the fibre target
//! length of the muscle projection, piecewise linear in time between knots), with
//! $d\mathcal L/da_{g,k}$ the adjoint's `muscle_activation` sums; written to
//! `body[b].muscle[j].activation` (entry k of an array of knots).

use crate::model::Model;
use crate::optimize::classes::api::{
    body_mut, item, missing, Param, ParamClass, Refs, SceneText, Shape, Walk,
};
use crate::solver::gradient::Gradients;
use toml::Value;

pub struct MuscleActivation;

impl ParamClass for MuscleActivation {
    fn key(&self) -> &'static str {
        "muscle_activation"
    }
    fn shape(&self) -> Shape {
        Shape::Knots
    }
    fn refs(&self) -> Refs {
        Refs {
            muscle: true,
            ..Refs::default()
        }
    }
    fn positive(&self) -> bool {
        true
    }
    fn value(&self, p: &Param, m: &Model) -> f64 {
        m.muscles[p.muscle].knots[p.knot]
    }
    fn set(&self, p: &Param, m: &mut Model, v: f64) {
        m.muscles[p.muscle].knots[p.knot] = v;
    }
    fn gradient(&self, p: &Param, _: &Model, g: &Gradients, _: f64) -> f64 {
        g.muscle_activation[p.muscle][p.knot]
    }
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()> {
        let (b, j, k) = (p.body, w.spec(p)?.muscle.unwrap_or(0), p.knot);
        let mt = item(body_mut(w.root, b)?, &format!("body.{b}"), "muscle", j)?;
        match mt.get_mut("activation").and_then(|a| a.as_array_mut()) {
            Some(arr) => {
                let knot = arr.get_mut(k).ok_or_else(|| {
                    missing(
                        format!("body.{b}.muscle.{j}.activation.{k}"),
                        "an activation knot",
                    )
                })?;
                *knot = Value::Float(v);
                w.sets
                    .push(format!("body.{b}.muscle.{j}.activation.{k}={v:e}"));
            }
            None => {
                mt.insert("activation".into(), Value::Float(v));
                w.sets.push(format!("body.{b}.muscle.{j}.activation={v:e}"));
            }
        }
        Ok(())
    }
}
