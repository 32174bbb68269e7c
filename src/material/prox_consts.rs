//! Constants of the Neo-Hookean proximal stretch solve (spec §3.3), shared by the exact
//! solve (`neohookean::prox`) and the interleaved one (`interleaved`).

/// Start clamp $\sigma_{\min}$ (spec §3.3).
pub const SIGMA_MIN: f64 = 1e-4;
/// Relative gradient tolerance $\epsilon_{\rm prox}$ (spec §3.3).
pub const PROX_TOL: f64 = 1e-12;
