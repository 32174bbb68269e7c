//! Classes of the initial state $(x_0,v_0)$ ([`crate::model::Model::refresh_initial`]: rigid
//! offsets of each body's base state and seeded directions); their gradients read the
//! adjoint's $d\mathcal L/dx_0$, $d\mathcal L/dv_0$, which include the dependence of
//! prescribed (Dirichlet) values on the initial positions.

pub mod rotation;
pub mod state_direction;
pub mod translation;
pub mod velocity;

use crate::optimize::classes::api::{body_mut, set3, table, vector_set, Param, SceneText, Walk};

/// Component `p.component` of the body's `[body.initial] key` vector set to `f(old)`, with
/// the whole vector's `--set` line.
pub(crate) fn write_initial(
    w: &mut SceneText<'_>,
    p: &Param,
    key: &str,
    f: impl Fn(f64) -> f64,
) -> Walk<()> {
    let b = p.body;
    let path = format!("body.{b}.initial");
    let t = table(body_mut(w.root, b)?, &format!("body.{b}"), "initial")?;
    set3(t, &path, key, p.component, f)?;
    w.sets.push(vector_set(&format!("{path}.{key}"), t, key)?);
    Ok(())
}
