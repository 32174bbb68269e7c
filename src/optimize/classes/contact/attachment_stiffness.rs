//! `attachment_stiffness`: the stiffness $k_g=1/c_g$ (N/m per node) of compliant attachment
//! group $g$ (springs $\tfrac k2\|x_i-t_i(t)\|^2$), with $d\mathcal L/dk_g$ from
//! `crate::contact::attachment::gradients`; written to
//! `body[b].attachment[j].compliance` = 1/value.

use crate::model::Model;
use crate::optimize::classes::api::{body_mut, item, Param, ParamClass, Refs, SceneText, Walk};
use crate::solver::gradient::Gradients;
use toml::Value;

pub struct AttachmentStiffness;

impl ParamClass for AttachmentStiffness {
    fn key(&self) -> &'static str {
        "attachment_stiffness"
    }
    fn refs(&self) -> Refs {
        Refs {
            attachment: true,
            ..Refs::default()
        }
    }
    fn positive(&self) -> bool {
        true
    }
    fn value(&self, p: &Param, m: &Model) -> f64 {
        m.attachments[p.attachment].stiffness
    }
    fn set(&self, p: &Param, m: &mut Model, v: f64) {
        m.attachments[p.attachment].stiffness = v;
    }
    fn gradient(&self, p: &Param, _: &Model, g: &Gradients, _: f64) -> f64 {
        g.attachment_stiffness[p.attachment]
    }
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()> {
        let (b, j) = (p.body, w.spec(p)?.attachment.unwrap_or(0));
        let at = item(body_mut(w.root, b)?, &format!("body.{b}"), "attachment", j)?;
        at.insert("compliance".into(), Value::Float(1.0 / v));
        w.sets
            .push(format!("body.{b}.attachment.{j}.compliance={:e}", 1.0 / v));
        Ok(())
    }
}
