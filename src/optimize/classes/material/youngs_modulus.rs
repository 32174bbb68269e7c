//! `youngs_modulus`: a factor on the base moduli $E_e$ of a region's elements (or the whole
//! body's). Parameters compose as independent factors, $E_e=E_e^{base}\prod_p v_p/v_p^{base}$
//! ([`crate::optimize::params::apply_all`]), so $dE_e/dv_p=E_e/v_p$ and
//! $d\mathcal L/dv_p=\sum_{e\in p}E_e/v_p\,d\mathcal L/dE_e$. The value is the mean of $E_e$
//! over the elements. Written back as the factor $v/v^{base}$ on `material.youngs_modulus`
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
        p.elements.iter().map(|&e| m.params.youngs[e]).sum::<f64>() / p.elements.len() as f64
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
