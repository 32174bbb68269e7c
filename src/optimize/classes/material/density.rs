//! `density`: $\rho_b$ of body $b$ (its lumped masses $m_i\propto\rho_b$); written to
//! `body[b].material.density`.

use super::write_body_scalar;
use crate::model::Model;
use crate::optimize::classes::api::{Domain, Param, ParamClass, SceneText, Walk};
use crate::solver::gradient::Gradients;

pub struct Density;

impl ParamClass for Density {
    fn key(&self) -> &'static str {
        "density"
    }
    fn positive(&self) -> bool {
        true
    }
    fn domain(&self) -> Domain {
        Domain::POSITIVE
    }
    fn value(&self, p: &Param, m: &Model) -> f64 {
        m.params.density[p.body]
    }
    fn set(&self, p: &Param, m: &mut Model, v: f64) {
        m.params.density[p.body] = v;
    }
    fn gradient(&self, p: &Param, _: &Model, g: &Gradients, _: f64) -> f64 {
        g.density[p.body]
    }
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()> {
        write_body_scalar(w, p.body, ("material", "density"), v)
    }
}
