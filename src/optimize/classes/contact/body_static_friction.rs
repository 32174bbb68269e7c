//! `body_static_friction`: the static Coulomb coefficient $\mu_s$ of body–body contact
//! (`contact.body_friction` = $\mu_k$ held), with $d\mathcal L/d\mu_s$ from the contact
//! solve's adjoint (docs/contact.md §2a); written to `contact.body_static_friction`.

use super::friction_step;
use crate::model::Model;
use crate::optimize::classes::api::{table, Owner, Param, ParamClass, SceneText, Walk};
use crate::solver::gradient::Gradients;
use toml::Value;

pub struct BodyStaticFriction;

impl ParamClass for BodyStaticFriction {
    fn key(&self) -> &'static str {
        "body_static_friction"
    }
    fn owner(&self) -> Owner {
        Owner::Scene("bodies")
    }
    fn positive(&self) -> bool {
        true
    }
    fn value(&self, _: &Param, m: &Model) -> f64 {
        m.contact
            .body_static_friction
            .unwrap_or(m.contact.body_friction)
    }
    fn set(&self, _: &Param, m: &mut Model, v: f64) {
        m.contact.body_static_friction = Some(v);
    }
    fn gradient(&self, _: &Param, _: &Model, g: &Gradients, _: f64) -> f64 {
        g.body_static_friction
    }
    fn fd_step(&self, _: &Param, _: &Model, v: f64) -> f64 {
        friction_step(v)
    }
    fn write_back(&self, w: &mut SceneText<'_>, _: &Param, v: f64) -> Walk<()> {
        table(w.root, "", "contact")?.insert("body_static_friction".into(), Value::Float(v));
        w.sets.push(format!("contact.body_static_friction={v:e}"));
        Ok(())
    }
}
