//! `poisson_ratio_field`: Poisson's ratio $\nu_e$ of each element $e$ of a body (or of one of
//! its regions) — one scalar parameter per element ([`Shape::Elements`]), named `….e<k>`
//! with $k$ the element's index in its body; the value *is* $\nu_e$ (no factors: ν may be
//! negative). Setting one makes the model's ν per element
//! ([`crate::model::MaterialParams::nu_elem`]).
//!
//! Its gradient is the adjoint's per-element term `Gradients::nu_field`: the element's
//! samples' $\partial\mathcal L/\partial\nu$ through their PD weights (and β term), plus, for
//! laws that read the body means (Neo-Hookean), the body's cotangent of
//! $(\bar\mu,\bar\lambda,\bar k)$ times $\partial(\bar\mu,\bar\lambda,\bar k)/\partial\nu_e$ — the
//! split of the per-body sum the [`super::poisson_ratio`] class reads. Host backward only
//! (the device refuses it, naming the kind).
//!
//! Written back ([`write_fields`]) as a per-element file `poisson_ratio_body<b>.txt` next to
//! `optimized.toml` — the format of `material.poisson_ratio_file` (one value per element of
//! the body, whitespace separated) — holding every element's optimized ν.

use crate::model::Model;
use crate::optimize::classes::api::{
    bodies_with, write_element_file, Domain, ElementFile, Param, ParamClass, Refs, SceneText,
    Shape, Walk,
};
use crate::solver::gradient::Gradients;

pub struct PoissonRatioField;

/// Its scene key.
pub const KEY: &str = "poisson_ratio_field";

impl ParamClass for PoissonRatioField {
    fn key(&self) -> &'static str {
        KEY
    }
    fn shape(&self) -> Shape {
        Shape::Elements
    }
    fn refs(&self) -> Refs {
        Refs {
            region: true,
            ..Refs::default()
        }
    }
    /// $-1<\nu_e<\tfrac12$.
    fn domain(&self) -> Domain {
        super::poisson_ratio::DOMAIN
    }
    fn value(&self, p: &Param, m: &Model) -> f64 {
        m.params.nu_of(p.elements[0], p.body)
    }
    fn set(&self, p: &Param, m: &mut Model, v: f64) {
        m.params.nu_field_mut(&m.elem_body)[p.elements[0]] = v;
    }
    /// `g.nu_field` is filled for every model with a per-element ν, which [`Self::set`]
    /// made when the parameters were applied.
    fn gradient(&self, p: &Param, _: &Model, g: &Gradients, _: f64) -> f64 {
        g.nu_field[p.elements[0]]
    }
    /// Nothing per element: the driver writes each field body's file once, after every
    /// class ([`write_fields`]).
    fn write_back(&self, _: &mut SceneText<'_>, _: &Param, _: f64) -> Walk<()> {
        Ok(())
    }
}

/// The file name of body `b`'s field.
pub fn file_name(b: usize) -> String {
    format!("poisson_ratio_body{b}.txt")
}

/// For every body with a `poisson_ratio_field` parameter: its per-element file of the
/// Poisson ratios of `target` (one line per element, exact shortest round-trip text) and
/// the body's `material.poisson_ratio_file` pointing at it. Returns the files; adds a note
/// per body.
pub fn write_fields(
    root: &mut toml::Table,
    params: &[Param],
    target: &Model,
    notes: &mut Vec<String>,
) -> Walk<Vec<ElementFile>> {
    let mut files = Vec::new();
    for b in bodies_with(params, KEY) {
        let name = file_name(b);
        let ratios = target.bodies[b]
            .elements
            .clone()
            .map(|e| target.params.nu_of(e, b));
        let (file, _) = write_element_file(root, b, name.clone(), "poisson_ratio_file", ratios)?;
        notes.push(format!(
            "body {b}: per-element Poisson ratios written to {name} beside this file \
             (material.poisson_ratio_file)"
        ));
        files.push(file);
    }
    Ok(files)
}
