//! `damping_alpha`: the mass-proportional Rayleigh coefficient $\alpha_b$ of body $b$
//! (force $-\alpha m_iv_i$); written to `body[b].damping.alpha`.

use super::write_body_scalar;
use crate::model::Model;
use crate::optimize::classes::api::{Domain, Param, ParamClass, SceneText, Walk};
use crate::solver::gradient::Gradients;

pub struct DampingAlpha;

impl ParamClass for DampingAlpha {
    fn key(&self) -> &'static str {
        "damping_alpha"
    }
    fn positive(&self) -> bool {
        true
    }
    fn domain(&self) -> Domain {
        Domain::NON_NEGATIVE
    }
    fn value(&self, p: &Param, m: &Model) -> f64 {
        m.params.alpha[p.body]
    }
    fn set(&self, p: &Param, m: &mut Model, v: f64) {
        m.params.alpha[p.body] = v;
    }
    fn gradient(&self, p: &Param, _: &Model, g: &Gradients, _: f64) -> f64 {
        g.alpha[p.body]
    }
    /// α enters the step as $\alpha h$: $10^{-3}\max(\alpha,1/h)$.
    fn fd_step(&self, _: &Param, m: &Model, v: f64) -> f64 {
        1e-3 * v.max(1.0 / m.h)
    }
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()> {
        write_body_scalar(w, p.body, ("damping", "alpha"), v)
    }
}
