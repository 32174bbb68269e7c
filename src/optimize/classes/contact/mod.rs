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
