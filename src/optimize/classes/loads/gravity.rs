//! `gravity`: the gravitational acceleration $g$ (m/s²), $f_i=m_ig$, so
//! $d\mathcal L/dg=\sum_t\sum_im_iz_i$; written to `simulation.gravity[c]` (the scene's
//! value written out first when the file leaves it at the default).

use crate::model::Model;
use crate::optimize::classes::api::{
    set3, table, vector_set, Param, ParamClass, SceneText, Shape, Walk,
};
use crate::solver::gradient::Gradients;
use toml::Value;

pub struct Gravity;

impl ParamClass for Gravity {
    fn key(&self) -> &'static str {
        "gravity"
    }
    fn shape(&self) -> Shape {
        Shape::Vector3
    }
    fn value(&self, p: &Param, m: &Model) -> f64 {
        m.gravity[p.component]
    }
    fn set(&self, p: &Param, m: &mut Model, v: f64) {
        m.gravity[p.component] = v;
    }
    fn gradient(&self, p: &Param, _: &Model, g: &Gradients, _: f64) -> f64 {
        g.gravity[p.component]
    }
    /// $10^{-3}\max(|g_c|,1)$.
    fn fd_step(&self, _: &Param, _: &Model, v: f64) -> f64 {
        1e-3 * v.max(1.0)
    }
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()> {
        let scene_g = w.scene.simulation.gravity;
        let sim = table(w.root, "", "simulation")?;
        if !sim.contains_key("gravity") {
            sim.insert(
                "gravity".into(),
                Value::Array(scene_g.iter().map(|&x| Value::Float(x)).collect()),
            );
        }
        set3(sim, "simulation", "gravity", p.component, |_| v)?;
        w.sets
            .push(vector_set("simulation.gravity", sim, "gravity")?);
        Ok(())
    }
}
