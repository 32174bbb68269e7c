//! `poisson_ratio`: $\nu_b$ of body $b$ (the Lamé parameters of every element of the body);
//! written to `body[b].material.poisson_ratio`. On a body with a per-element ν
//! (`material.poisson_ratio_file`) its value is the elements' mean and setting it sets every
//! element; its gradient is the per-body sum, every element moved together.

use super::write_body_scalar;
use crate::model::Model;
use crate::optimize::classes::api::{body_mut, table, Domain, Param, ParamClass, SceneText, Walk};
use crate::solver::gradient::Gradients;

pub struct PoissonRatio;

/// $-1<\nu<\tfrac12$ (also the range of `poisson_ratio_field`).
pub const DOMAIN: Domain = Domain {
    lower: -1.0,
    lower_closed: false,
    upper: 0.5,
};

impl ParamClass for PoissonRatio {
    fn key(&self) -> &'static str {
        "poisson_ratio"
    }
    fn domain(&self) -> Domain {
        DOMAIN
    }
    fn value(&self, p: &Param, m: &Model) -> f64 {
        match &m.params.nu_elem {
            None => m.params.nu[p.body],
            Some(field) => {
                let els = m.bodies[p.body].elements.clone();
                let n = els.len() as f64;
                field[els].iter().sum::<f64>() / n
            }
        }
    }
    fn set(&self, p: &Param, m: &mut Model, v: f64) {
        m.params.nu[p.body] = v;
        let els = m.bodies[p.body].elements.clone();
        if let Some(field) = &mut m.params.nu_elem {
            field[els].fill(v);
        }
    }
    fn gradient(&self, p: &Param, _: &Model, g: &Gradients, _: f64) -> f64 {
        g.nu[p.body]
    }
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()> {
        write_body_scalar(w, p.body, ("material", "poisson_ratio"), v)?;
        // the scalar replaces a per-element file (a field parameter's write-back, which runs
        // after every class, writes its own)
        let b = p.body;
        table(body_mut(w.root, b)?, &format!("body.{b}"), "material")?.remove("poisson_ratio_file");
        Ok(())
    }
}
