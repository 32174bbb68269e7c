//! `youngs_modulus_field`: Young's modulus $E_e$ of each element $e$ of a body (or of one of
//! its regions) — one scalar parameter per element ([`Shape::Elements`]), named
//! `….e<k>` with $k$ the element's index in its body.
//!
//! Like [`super::youngs_modulus`], a field scalar is a factor on the base modulus,
//! $E_e=E_e^{base}\,v_e/v_e^{base}$ (composing with every other E parameter,
//! [`crate::optimize::params::apply_all`]); with no other E parameter on the element the
//! value *is* $E_e$. Its gradient is the adjoint's per-element term itself,
//! $d\mathcal L/dv_e=(E_e/v_e)\,d\mathcal L/dE_e$ (`Gradients::youngs`, the dense field the
//! region class sums).
//!
//! Written back ([`write_fields`]) as a per-element file `youngs_modulus_body<b>.txt` next to
//! `optimized.toml` — the format of `material.youngs_modulus_file` (one value per element of
//! the body, whitespace separated) — holding the body's optimized moduli, every other E
//! parameter included; the body's `[[body.region]]`s are set to `scale = 1` (their selectors
//! and indices kept), so the file alone gives every element's modulus.

use crate::model::Model;
pub use crate::optimize::classes::api::ElementFile;
use crate::optimize::classes::api::{
    bodies_with, write_element_file, Domain, Param, ParamClass, Refs, SceneText, Shape, Walk,
};
use crate::solver::gradient::Gradients;
use toml::Value;

pub struct YoungsModulusField;

/// Its scene key.
pub const KEY: &str = "youngs_modulus_field";

impl ParamClass for YoungsModulusField {
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
    fn positive(&self) -> bool {
        true
    }
    fn domain(&self) -> Domain {
        Domain::POSITIVE
    }
    fn value(&self, p: &Param, m: &Model) -> f64 {
        m.params.youngs[p.elements[0]]
    }
    /// Nothing: E parameters compose as factors ([`ParamClass::apply`]).
    fn set(&self, _: &Param, _: &mut Model, _: f64) {}
    fn apply(&self, p: &Param, _: &mut Model, v: f64, youngs_factor: &mut [f64]) {
        youngs_factor[p.elements[0]] *= v / p.base_value;
    }
    fn gradient(&self, p: &Param, m: &Model, g: &Gradients, v: f64) -> f64 {
        let e = p.elements[0];
        m.params.youngs[e] / v * g.youngs[e]
    }
    /// Nothing per element: the driver writes each field body's file once, after every
    /// class ([`write_fields`]).
    fn write_back(&self, _: &mut SceneText<'_>, _: &Param, _: f64) -> Walk<()> {
        Ok(())
    }
}

/// The file name of body `b`'s field.
pub fn file_name(b: usize) -> String {
    format!("youngs_modulus_body{b}.txt")
}

/// For every body with a `youngs_modulus_field` parameter: its per-element file of the
/// moduli of `target` (one line per element, exact shortest round-trip text), the body's
/// `material.youngs_modulus_file` pointing at it, and every region of the body set to
/// `scale = 1` (module doc). Returns the files; adds a note per body.
pub fn write_fields(
    root: &mut toml::Table,
    params: &[Param],
    target: &Model,
    notes: &mut Vec<String>,
) -> Walk<Vec<ElementFile>> {
    let mut files = Vec::new();
    for b in bodies_with(params, KEY) {
        let name = file_name(b);
        let moduli = target.bodies[b]
            .elements
            .clone()
            .map(|e| target.params.youngs[e]);
        let (file, bt) = write_element_file(root, b, name.clone(), "youngs_modulus_file", moduli)?;
        if let Some(regs) = bt.get_mut("region").and_then(|r| r.as_array_mut()) {
            for reg in regs.iter_mut().filter_map(|r| r.as_table_mut()) {
                reg.remove("youngs_modulus");
                reg.insert("scale".into(), Value::Float(1.0));
            }
        }
        notes.push(format!(
            "body {b}: per-element Young's moduli written to {name} beside this file \
             (material.youngs_modulus_file); the body's regions set to scale = 1"
        ));
        files.push(file);
    }
    Ok(files)
}
