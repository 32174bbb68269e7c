//! `youngs_modulus`: a factor on the base moduli $E_e$ of a region's elements (or the whole
//! body's). Parameters compose as independent factors, $E_e=E_e^{base}\prod_p v_p/v_p^{base}$
//! ([`crate::optimize::params::apply_all`]), so $dE_e/dv_p=E_e/v_p$ and
//! $d\mathcal L/dv_p=\sum_{e\in p}E_e/v_p\,d\mathcal L/dE_e$. The value ([`set_value`]) is
//! the set's modulus $E$ in Pa when its elements share one (a homogeneous body, one region),
//! and otherwise a dimensionless factor on the scene's moduli, $v^{base}=1$ (a whole-body
//! parameter of a body with stiffer regions). Until session 19 it was the mean of $E_e$ in
//! both cases; [`old_meaning_warnings`] flags bounds written for that meaning. Written back as
//! the factor $v/v^{base}$ on `material.youngs_modulus`
//! and every absolute region modulus (whole body), or on region r's `youngs_modulus` /
//! `scale`; where that is not exact, as an appended `[[body.region]]` with `scale`.

use crate::model::Model;
use crate::optimize::classes::api::{
    body_mut, item, missing, scale_num, Domain, Param, ParamClass, Refs, SceneText, Walk,
};
use crate::solver::gradient::Gradients;
use toml::{Table, Value};

pub struct YoungsModulus;

/// Its scene key (the write-back's appended-regions pass looks for it).
pub const KEY: &str = "youngs_modulus";

impl ParamClass for YoungsModulus {
    fn key(&self) -> &'static str {
        KEY
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
        set_value(&p.elements, m)
    }
    /// Nothing: E parameters compose as factors ([`ParamClass::apply`]).
    fn set(&self, _: &Param, _: &mut Model, _: f64) {}
    fn apply(&self, p: &Param, _: &mut Model, v: f64, youngs_factor: &mut [f64]) {
        for &e in &p.elements {
            youngs_factor[e] *= v / p.base_value;
        }
    }
    fn gradient(&self, p: &Param, m: &Model, g: &Gradients, v: f64) -> f64 {
        p.elements
            .iter()
            .map(|&e| m.params.youngs[e] / v * g.youngs[e])
            .sum()
    }
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()> {
        let f = v / p.base_value;
        let region = w.spec(p)?.region;
        let bt = body_mut(w.root, p.body)?;
        if w.append_e {
            append_region(bt, p, region, f, w.notes)
        } else {
            scale_in_place(bt, p.body, region, f, w.sets)
        }
    }
}

/// The modulus the elements share (Pa), `None` when they differ (or there are none).
pub fn common_youngs(elements: &[usize], m: &Model) -> Option<f64> {
    let (&first, rest) = elements.split_first()?;
    let e = m.params.youngs[first];
    rest.iter().all(|&k| m.params.youngs[k] == e).then_some(e)
}

/// A `youngs_modulus` parameter's value on the scene's model: the elements' common modulus,
/// or the factor 1 when their moduli differ (the parameter then scales them all, keeping
/// their ratios).
pub fn set_value(elements: &[usize], m: &Model) -> f64 {
    common_youngs(elements, m).unwrap_or(1.0)
}

/// One line per `youngs_modulus` parameter whose value is a factor (its elements' moduli
/// differ) but which declares `lower`, `upper` or `initial`: bounds and starts written for a
/// modulus (as the old meaning, the set's mean modulus, asked; e.g. an `optimized.toml` from
/// before the change) now bound a factor whose scene value is 1.
pub fn old_meaning_warnings(params: &[Param], base: &Model) -> Vec<String> {
    params
        .iter()
        .filter(|p| p.key() == KEY && common_youngs(&p.elements, base).is_none())
        .filter(|p| p.lower.is_some() || p.upper.is_some() || p.initial.is_some())
        .map(|p| {
            format!(
                "parameter[{}] ({}): its elements' moduli differ, so its value is a factor on them (1 = as in the scene), not a modulus in Pa as before session 19; check its lower/upper/initial",
                p.index, p.name
            )
        })
        .collect()
}

/// Factor `f` as an appended `[[body.region]]` with `scale = f`, selecting what region
/// `region` selects (or the whole body).
fn append_region(
    bt: &mut Table,
    p: &Param,
    region: Option<usize>,
    f: f64,
    notes: &mut Vec<String>,
) -> Walk<()> {
    let select = match region {
        Some(r) => item(bt, &format!("body.{}", p.body), "region", r)?
            .get("select")
            .cloned()
            .ok_or_else(|| missing(format!("body.{}.region.{r}.select", p.body), "a selector"))?,
        None => {
            let mut t = Table::new();
            t.insert("all".into(), Value::Boolean(true));
            Value::Table(t)
        }
    };
    let mut reg = Table::new();
    reg.insert(
        "name".into(),
        Value::String(format!("optimized factor of {}", p.name)),
    );
    reg.insert("select".into(), select);
    reg.insert("scale".into(), Value::Float(f));
    bt.entry("region".to_string())
        .or_insert_with(|| Value::Array(vec![]))
        .as_array_mut()
        .ok_or_else(|| missing(format!("body.{}.region", p.body), "an array of tables"))?
        .push(Value::Table(reg));
    notes.push(format!(
        "{}: written as an appended [[body.region]] with scale = {f:e}",
        p.name
    ));
    Ok(())
}

/// Factor `f` in place: the whole body's `material.youngs_modulus` and every absolute
/// region modulus, or region `r`'s `youngs_modulus` / `scale`, times `f`.
fn scale_in_place(
    bt: &mut Table,
    b: usize,
    region: Option<usize>,
    f: f64,
    sets: &mut Vec<String>,
) -> Walk<()> {
    match region {
        None => {
            let mat = bt
                .get_mut("material")
                .and_then(|m| m.as_table_mut())
                .ok_or_else(|| missing(format!("body.{b}.material"), "a table"))?;
            if let Some(e) = scale_num(mat, "youngs_modulus", f) {
                sets.push(format!("body.{b}.material.youngs_modulus={e:e}"));
            }
            if let Some(regs) = bt.get_mut("region").and_then(|r| r.as_array_mut()) {
                for (r, reg) in regs.iter_mut().enumerate() {
                    let rt = reg
                        .as_table_mut()
                        .ok_or_else(|| missing(format!("body.{b}.region.{r}"), "a table"))?;
                    if let Some(e) = scale_num(rt, "youngs_modulus", f) {
                        sets.push(format!("body.{b}.region.{r}.youngs_modulus={e:e}"));
                    }
                }
            }
        }
        Some(r) => {
            let rt = item(bt, &format!("body.{b}"), "region", r)?;
            for key in ["youngs_modulus", "scale"] {
                if let Some(e) = scale_num(rt, key, f) {
                    sets.push(format!("body.{b}.region.{r}.{key}={e:e}"));
                }
            }
        }
    }
    Ok(())
}
