//! `static_friction`: the static Coulomb coefficient $\mu_{s,o}$ of obstacle $o$ (its
//! dynamic coefficient $\mu_k$ = `friction` held), with
//! $d\mathcal L/d\mu_s=-\zeta^T\partial\Phi/\partial\mu_s$ from the NCP contact adjoint
//! ($\partial\mu/\partial\mu_s=e^{-(\|v_t\|/v_s)^2}$, `contact::ncp::Coulomb`); written to
//! `obstacle[o].static_friction`. NCP contact only (scene validation refuses it with the
//! penalty model).

use super::{friction_step, write_obstacle_coefficient};
use crate::model::Model;
use crate::optimize::classes::api::{Owner, Param, ParamClass, Refs, SceneText, Walk};
use crate::solver::gradient::Gradients;

pub struct StaticFriction;

impl ParamClass for StaticFriction {
    fn key(&self) -> &'static str {
        "static_friction"
    }
    fn refs(&self) -> Refs {
        Refs {
            obstacle: true,
            ..Refs::default()
        }
    }
    fn owner(&self) -> Owner {
        Owner::Obstacle
    }
    fn positive(&self) -> bool {
        true
    }
    fn value(&self, p: &Param, m: &Model) -> f64 {
        let o = &m.obstacles[p.obstacle];
        o.static_friction.unwrap_or(o.friction)
    }
    fn set(&self, p: &Param, m: &mut Model, v: f64) {
        m.obstacles[p.obstacle].static_friction = Some(v);
    }
    fn gradient(&self, p: &Param, _: &Model, g: &Gradients, _: f64) -> f64 {
        g.static_friction[p.obstacle]
    }
    fn fd_step(&self, _: &Param, _: &Model, v: f64) -> f64 {
        friction_step(v)
    }
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()> {
        write_obstacle_coefficient(w, p.obstacle, "static_friction", v);
        Ok(())
    }
}
