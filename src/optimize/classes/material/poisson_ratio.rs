//! `poisson_ratio`: $\nu_b$ of body $b$ (the Lamé parameters of every element of the body);
//! written to `body[b].material.poisson_ratio`.

use super::write_body_scalar;
use crate::model::Model;
use crate::optimize::classes::api::{Domain, Param, ParamClass, SceneText, Walk};
use crate::solver::gradient::Gradients;

pub struct PoissonRatio;

impl ParamClass for PoissonRatio {
    fn key(&self) -> &'static str {
        "poisson_ratio"
    }
    /// $-1<\nu<\tfrac12$.
    fn domain(&self) -> Domain {
        Domain {
            lower: -1.0,
            lower_closed: false,
            upper: 0.5,
        }
    }
    fn value(&self, p: &Param, m: &Model) -> f64 {
        m.params.nu[p.body]
    }
    fn set(&self, p: &Param, m: &mut Model, v: f64) {
        m.params.nu[p.body] = v;
    }
    fn gradient(&self, p: &Param, _: &Model, g: &Gradients, _: f64) -> f64 {
        g.nu[p.body]
    }
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()> {
        write_body_scalar(w, p.body, ("material", "poisson_ratio"), v)
    }
}
