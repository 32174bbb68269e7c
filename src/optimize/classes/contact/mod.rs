//! Classes of the contact and attachment forces: obstacle friction (dynamic and static) and
//! offsets, body–body
//! friction (the contact solve's gradients, [`crate::solver::gradient::accumulate_contact`])
//! and compliant attachments (their penalty springs, `crate::contact::attachment`).

pub mod attachment_offset;
pub mod attachment_stiffness;
pub mod body_friction;
pub mod body_static_friction;
pub mod friction;
pub mod obstacle_offset;
pub mod static_friction;

/// Central-difference step of a translation in contact or attachment: 1e-3 of the median
/// element edge ($2\cdot10^{-3}$ of the contact margin, half an edge).
pub(crate) fn offset_step(m: &crate::model::Model) -> f64 {
    2e-3 * m.contact_margin.max(1e-6)
}

/// Central-difference step of a Coulomb coefficient: $10^{-3}\max(\mu,0.01)$.
pub(crate) fn friction_step(abs_value: f64) -> f64 {
    1e-3 * abs_value.max(0.01)
}

/// Write obstacle `o`'s coefficient `key` (`friction`, `static_friction`) into the scene text
/// and record its `--set` line. An obstacle the text does not hold as a table (one given only
/// by `--set`) is reached through the `--set` line alone.
pub(crate) fn write_obstacle_coefficient(
    w: &mut crate::optimize::classes::api::SceneText<'_>,
    o: usize,
    key: &str,
    v: f64,
) {
    if let Some(t) = w
        .root
        .get_mut("obstacle")
        .and_then(|a| a.as_array_mut())
        .and_then(|a| a.get_mut(o))
        .and_then(|t| t.as_table_mut())
    {
        t.insert(key.into(), toml::Value::Float(v));
    }
    w.sets.push(format!("obstacle.{o}.{key}={v:e}"));
}
