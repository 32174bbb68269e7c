//! `force_scale`: a scale $s_g$ (nominal 1) of force group $g$, $f=s_g\sigma_g(t)f_k$, so
//! $d\mathcal L/ds_g=\sum_t\sigma_g(t)\sum_kf_k\cdot z_{i_k}$ (the adjoint's
//! `force_scale` sums); written back as the group's `force` vector (or `twist.magnitude`)
//! times the scale.

use crate::model::Model;
use crate::optimize::classes::api::{
    body_mut, item, num, scale_num, Param, ParamClass, Refs, SceneText, Walk,
};
use crate::solver::gradient::Gradients;
use toml::Value;

pub struct ForceScale;

impl ParamClass for ForceScale {
    fn key(&self) -> &'static str {
        "force_scale"
    }
    fn refs(&self) -> Refs {
        Refs {
            force: true,
            ..Refs::default()
        }
    }
    fn positive(&self) -> bool {
        true
    }
    fn value(&self, p: &Param, m: &Model) -> f64 {
        m.forces[p.force].scale
    }
    fn set(&self, p: &Param, m: &mut Model, v: f64) {
        m.forces[p.force].scale = v;
    }
    fn gradient(&self, p: &Param, _: &Model, g: &Gradients, _: f64) -> f64 {
        g.force_scale[p.force]
    }
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()> {
        let (b, j) = (p.body, w.spec(p)?.force.unwrap_or(0));
        let ft = item(body_mut(w.root, b)?, &format!("body.{b}"), "force", j)?;
        if let Some(arr) = ft.get_mut("force").and_then(|a| a.as_array_mut()) {
            for x in arr.iter_mut() {
                *x = Value::Float(num(x).unwrap_or(0.0) * v);
            }
            let s: Vec<String> = arr
                .iter()
                .map(|x| format!("{:e}", num(x).unwrap_or(0.0)))
                .collect();
            w.sets
                .push(format!("body.{b}.force.{j}.force=[{}]", s.join(", ")));
        } else if let Some(tw) = ft.get_mut("twist").and_then(|t| t.as_table_mut()) {
            if let Some(m) = scale_num(tw, "magnitude", v) {
                w.sets
                    .push(format!("body.{b}.force.{j}.twist.magnitude={m:e}"));
            }
        }
        Ok(())
    }
}
