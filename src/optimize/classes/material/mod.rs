//! Classes of the material map $(E_e,\nu_b\text{ or }\nu_e,\rho_b,\alpha_b,\beta_{0,b})\mapsto$ PD weights
//! $w_s$, masses $m_i$ and Rayleigh damping ([`crate::model::Model::derive`]); their
//! gradients are the adjoint's per-element and per-body sums
//! ([`crate::solver::gradient::accumulate_step`]).

pub mod damping_alpha;
pub mod damping_beta;
pub mod density;
pub mod poisson_ratio;
pub mod poisson_ratio_field;
pub mod youngs_modulus;
pub mod youngs_modulus_field;

use crate::optimize::classes::api::{body_mut, table, SceneText, Walk};
use toml::Value;

/// `body[b].{group}.{key} = v` (the table created where absent), with its `--set` line.
pub(crate) fn write_body_scalar(
    w: &mut SceneText<'_>,
    b: usize,
    (group, key): (&str, &str),
    v: f64,
) -> Walk<()> {
    table(body_mut(w.root, b)?, &format!("body.{b}"), group)?.insert(key.into(), Value::Float(v));
    w.sets.push(format!("body.{b}.{group}.{key}={v:e}"));
    Ok(())
}
