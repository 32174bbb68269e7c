//! A test-only class that proves the registry's claim — a host-only parameter class is its
//! file plus one registration line in [`super::CLASSES`] (and its FD line in `fd.rs`): the
//! magnitude $s=\|g\|$ of gravity at a fixed direction $\hat g$, $g=s\hat g$, so
//! $d\mathcal L/ds=\hat g\cdot d\mathcal L/dg$. Written back as the whole
//! `simulation.gravity` vector. The scene format does not name it (no `ParamKind`), so its
//! test expands it from a declaration with [`crate::optimize::params::expand_one`].

use crate::model::Model;
use crate::optimize::classes::api::{table, Domain, Owner, Param, ParamClass, SceneText, Walk};
use crate::solver::gradient::Gradients;
use toml::Value;

pub struct GravityMagnitude;

fn norm(g: [f64; 3]) -> f64 {
    g.iter().map(|x| x * x).sum::<f64>().sqrt()
}

impl ParamClass for GravityMagnitude {
    fn key(&self) -> &'static str {
        "test_gravity_magnitude"
    }
    fn owner(&self) -> Owner {
        Owner::Scene("scene")
    }
    fn positive(&self) -> bool {
        true
    }
    fn domain(&self) -> Domain {
        Domain::POSITIVE
    }
    fn value(&self, _: &Param, m: &Model) -> f64 {
        norm(m.gravity)
    }
    fn set(&self, _: &Param, m: &mut Model, v: f64) {
        let s = v / norm(m.gravity);
        m.gravity = m.gravity.map(|x| x * s);
    }
    fn gradient(&self, _: &Param, m: &Model, g: &Gradients, _: f64) -> f64 {
        let n = norm(m.gravity);
        (0..3).map(|c| g.gravity[c] * m.gravity[c] / n).sum()
    }
    fn write_back(&self, w: &mut SceneText<'_>, _: &Param, v: f64) -> Walk<()> {
        let g = w.scene.simulation.gravity;
        let s = v / norm(g);
        let sim = table(w.root, "", "simulation")?;
        sim.insert(
            "gravity".into(),
            Value::Array(g.iter().map(|&x| Value::Float(x * s)).collect()),
        );
        w.sets.push(format!(
            "simulation.gravity=[{:e}, {:e}, {:e}]",
            g[0] * s,
            g[1] * s,
            g[2] * s
        ));
        Ok(())
    }
}
