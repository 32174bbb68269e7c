//! `attachment_offset`: a rigid translation $\tau_g$ (m) of compliant attachment group $g$'s
//! target trajectory, with $d\mathcal L/d\tau_g$ from `crate::contact::attachment::gradients`;
//! added to `body[b].attachment[j].target[c]` (a target point that does not rotate; else
//! reported); a one-component parameter's `lower`/`upper` move by $-\tau_g$, so its box stays
//! where the scene put it.

use super::offset_step;
use crate::model::Model;
use crate::optimize::classes::api::{
    body_mut, item, keep_offset_box, set3, vector_set, Param, ParamClass, Refs, SceneText, Shape,
    Walk,
};
use crate::solver::gradient::Gradients;

pub struct AttachmentOffset;

impl ParamClass for AttachmentOffset {
    fn key(&self) -> &'static str {
        "attachment_offset"
    }
    fn shape(&self) -> Shape {
        Shape::Vector3
    }
    fn refs(&self) -> Refs {
        Refs {
            attachment: true,
            ..Refs::default()
        }
    }
    fn value(&self, p: &Param, m: &Model) -> f64 {
        m.attachments[p.attachment].offset[p.component]
    }
    fn set(&self, p: &Param, m: &mut Model, v: f64) {
        m.attachments[p.attachment].offset[p.component] = v;
    }
    fn gradient(&self, p: &Param, _: &Model, g: &Gradients, _: f64) -> f64 {
        g.attachment_offset[p.attachment][p.component]
    }
    fn fd_step(&self, _: &Param, m: &Model, _: f64) -> f64 {
        offset_step(m)
    }
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()> {
        let (b, c, j) = (p.body, p.component, w.spec(p)?.attachment.unwrap_or(0));
        let path = format!("body.{b}.attachment.{j}");
        let at = item(body_mut(w.root, b)?, &format!("body.{b}"), "attachment", j)?;
        let rotates = at
            .get("motion")
            .and_then(|m| m.get("type"))
            .and_then(|t| t.as_str())
            == Some("rotate");
        if at.contains_key("target") && !rotates {
            set3(at, &path, "target", c, |o| o + v)?;
            w.sets
                .push(vector_set(&format!("{path}.target"), at, "target")?);
            keep_offset_box(w, p, v)?;
        } else {
            w.notes.push(format!(
                "{}: attachment offset {v:e} m (component {c}) is not written back (the attachment has no target point, or it rotates)",
                p.name
            ));
        }
        Ok(())
    }
}
