//! `friction`: the Coulomb coefficient $\mu_o$ of obstacle $o$, with $d\mathcal L/d\mu_o$
//! from the contact solve's adjoint (NCP: $\zeta,\mu$ recomputed from $z$; penalty: the chain
//! rule through the explicit force); written to `obstacle[o].friction`. Without
//! `static_friction` it is the one coefficient ($\mu_s=\mu_k=\mu_o$ move together); with it,
//! the dynamic coefficient $\mu_k$ alone ($d\mathcal L/d\mu_k=$ the joint sum minus
//! $d\mathcal L/d\mu_s$; the `static_friction` class is the other one).

use super::{friction_step, write_obstacle_coefficient};
use crate::model::Model;
use crate::optimize::classes::api::{Owner, Param, ParamClass, Refs, SceneText, Walk};
use crate::solver::gradient::Gradients;

pub struct Friction;

impl ParamClass for Friction {
    fn key(&self) -> &'static str {
        "friction"
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
        m.obstacles[p.obstacle].friction
    }
    fn set(&self, p: &Param, m: &mut Model, v: f64) {
        m.obstacles[p.obstacle].friction = v;
    }
    fn gradient(&self, p: &Param, m: &Model, g: &Gradients, _: f64) -> f64 {
        match m.obstacles[p.obstacle].static_friction {
            None => g.friction[p.obstacle],
            Some(_) => g.friction[p.obstacle] - g.static_friction[p.obstacle],
        }
    }
    fn fd_step(&self, _: &Param, _: &Model, v: f64) -> f64 {
        friction_step(v)
    }
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()> {
        write_obstacle_coefficient(w, p.obstacle, "friction", v);
        Ok(())
    }
}
