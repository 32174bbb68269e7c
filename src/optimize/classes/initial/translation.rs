//! `initial_translation`: a rigid translation $\tau$ of body $b$'s initial positions (m),
//! $x_{0,i}=X_i+\tau$, so $d\mathcal L/d\tau_c=\sum_{i\in b}d\mathcal L/dx_{0,i,c}$; written to
//! `body[b].initial.translation[c]`.

use super::write_initial;
use crate::model::Model;
use crate::optimize::classes::api::{Param, ParamClass, SceneText, Shape, Walk};
use crate::solver::gradient::Gradients;

pub struct InitialTranslation;

impl ParamClass for InitialTranslation {
    fn key(&self) -> &'static str {
        "initial_translation"
    }
    fn shape(&self) -> Shape {
        Shape::Vector3
    }
    fn value(&self, p: &Param, m: &Model) -> f64 {
        m.offsets[p.body].translation[p.component]
    }
    fn set(&self, p: &Param, m: &mut Model, v: f64) {
        m.offsets[p.body].translation[p.component] = v;
        m.refresh_initial();
    }
    fn gradient(&self, p: &Param, m: &Model, g: &Gradients, _: f64) -> f64 {
        m.bodies[p.body]
            .nodes
            .clone()
            .map(|i| g.x0[3 * i + p.component])
            .sum()
    }
    /// 1e-3 of the body's largest rest extent.
    fn fd_step(&self, p: &Param, m: &Model, _: f64) -> f64 {
        let b = &m.bodies[p.body];
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for i in b.nodes.clone() {
            for d in 0..3 {
                lo[d] = lo[d].min(m.rest[i][d]);
                hi[d] = hi[d].max(m.rest[i][d]);
            }
        }
        1e-3 * (0..3).map(|d| hi[d] - lo[d]).fold(0.0, f64::max)
    }
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()> {
        write_initial(w, p, "translation", |_| v)
    }
}
