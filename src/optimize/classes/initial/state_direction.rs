//! `initial_state_direction`: a scalar $s$ along a seeded random direction $(d_x,d_v)$ of
//! all initial positions and velocities ([`crate::model::state_direction`]),
//! $d\mathcal L/ds=d_x\cdot d\mathcal L/dx_0+d_v\cdot d\mathcal L/dv_0$. No scene key holds
//! it: the write-back reports it.

use crate::model::{state_direction, Model};
use crate::optimize::classes::api::{Param, ParamClass, SceneText, Walk};
use crate::solver::gradient::Gradients;

pub struct InitialStateDirection;

impl ParamClass for InitialStateDirection {
    fn key(&self) -> &'static str {
        "initial_state_direction"
    }
    fn value(&self, p: &Param, m: &Model) -> f64 {
        m.state_directions
            .iter()
            .find(|(s, _)| *s == p.seed)
            .map(|d| d.1)
            .unwrap_or(0.0)
    }
    fn set(&self, p: &Param, m: &mut Model, v: f64) {
        m.state_directions.retain(|(s, _)| *s != p.seed);
        m.state_directions.push((p.seed, v));
        m.refresh_initial();
    }
    fn gradient(&self, p: &Param, _: &Model, g: &Gradients, _: f64) -> f64 {
        let (dx, dv) = state_direction(p.seed, g.x0.len());
        dx.iter().zip(&g.x0).map(|(a, b)| a * b).sum::<f64>()
            + dv.iter().zip(&g.v0).map(|(a, b)| a * b).sum::<f64>()
    }
    /// 0.1.
    fn fd_step(&self, _: &Param, _: &Model, _: f64) -> f64 {
        1e-1
    }
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, _: f64) -> Walk<()> {
        w.notes.push(format!(
            "{}: a seeded state direction has no scene key; not written",
            p.name
        ));
        Ok(())
    }
}
