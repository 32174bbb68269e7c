//! `damping_beta`: the stiffness-proportional Rayleigh coefficient $\beta_{0,b}$ of body
//! $b$, scaled per element by [`crate::model::StiffnessScaling::beta`] (the one home of the
//! rule $\beta_e=\beta_0E_e/E_{ref}$ or $\beta_0$); written to `body[b].damping.beta`.

use super::write_body_scalar;
use crate::model::Model;
use crate::optimize::classes::api::{Domain, Param, ParamClass, SceneText, Walk};
use crate::solver::gradient::Gradients;

pub struct DampingBeta;

/// Its scene key (the write-back pins `damping.e_ref` of bodies that declare it).
pub const KEY: &str = "damping_beta";

impl ParamClass for DampingBeta {
    fn key(&self) -> &'static str {
        KEY
    }
    fn positive(&self) -> bool {
        true
    }
    fn domain(&self) -> Domain {
        Domain::NON_NEGATIVE
    }
    fn value(&self, p: &Param, m: &Model) -> f64 {
        m.params.beta0[p.body]
    }
    fn set(&self, p: &Param, m: &mut Model, v: f64) {
        m.params.beta0[p.body] = v;
    }
    fn gradient(&self, p: &Param, _: &Model, g: &Gradients, _: f64) -> f64 {
        g.beta0[p.body]
    }
    /// β₀ enters the step as $\beta_0/h$: $10^{-3}\max(\beta_0,h)$.
    fn fd_step(&self, _: &Param, m: &Model, v: f64) -> f64 {
        1e-3 * v.max(m.h)
    }
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()> {
        write_body_scalar(w, p.body, ("damping", "beta"), v)
    }
}
