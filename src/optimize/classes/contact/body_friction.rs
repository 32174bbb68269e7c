//! `body_friction`: the Coulomb coefficient $\mu_b$ of body–body contact, with
//! $d\mathcal L/d\mu_b$ from the contact solve's adjoint; written to
//! `contact.body_friction`. With `contact.body_static_friction` set it is the dynamic
//! coefficient $\mu_k$ alone (the joint derivative minus $d\mathcal L/d\mu_s$).

use super::friction_step;
use crate::model::Model;
use crate::optimize::classes::api::{table, Owner, Param, ParamClass, SceneText, Walk};
use crate::solver::gradient::Gradients;
use toml::Value;

pub struct BodyFriction;

impl ParamClass for BodyFriction {
    fn key(&self) -> &'static str {
        "body_friction"
    }
    fn owner(&self) -> Owner {
        Owner::Scene("bodies")
    }
    fn positive(&self) -> bool {
        true
    }
    fn value(&self, _: &Param, m: &Model) -> f64 {
        m.contact.body_friction
    }
    fn set(&self, _: &Param, m: &mut Model, v: f64) {
        m.contact.body_friction = v;
    }
    fn gradient(&self, _: &Param, m: &Model, g: &Gradients, _: f64) -> f64 {
        match m.contact.body_static_friction {
            None => g.body_friction,
            Some(_) => g.body_friction - g.body_static_friction,
        }
    }
    fn fd_step(&self, _: &Param, _: &Model, v: f64) -> f64 {
        friction_step(v)
    }
    fn write_back(&self, w: &mut SceneText<'_>, _: &Param, v: f64) -> Walk<()> {
        table(w.root, "", "contact")?.insert("body_friction".into(), Value::Float(v));
        w.sets.push(format!("contact.body_friction={v:e}"));
        Ok(())
    }
}
