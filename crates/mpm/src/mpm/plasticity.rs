//! Plastic return mappings on the elastic deformation gradient, applied after the G2P update
//! F ← (I + Δt C) F (multiplicative plasticity F = F_E F_P; only F_E is stored).
//!
//! Both mappings work in the principal Hencky strain of the trial state: with the rotation SVD
//! F_E^tr = U Σ Vᵀ, ε = ln Σ (a 3-vector), its trace tr ε = ln J and its deviator
//! ε̂ = ε − (tr ε / 3)·1. They pair with the St. Venant–Kirchhoff–Hencky energy
//! ψ = μ tr(ε²) + (λ/2)(tr ε)², whose principal Kirchhoff stress is τ = 2μ ε + λ tr(ε)·1,
//! so dev τ = 2μ ε̂. The projected strain ε' gives F_E = U exp(ε') Vᵀ; U and V are kept, hence
//! τ stays symmetric and the transfers keep conserving angular momentum.
//!
//! - **von Mises** (J2 plasticity, "dough"; Gao et al. 2017 "An adaptive generalized
//!   interpolation material point method…", §5; Simo & Hughes 1998 ch. 3): the yield function is
//!   y = ‖dev τ‖ − √(2/3) σ_y = 2μ‖ε̂‖ − √(2/3) σ_y, so that under uniaxial stress the
//!   axial Kirchhoff stress plateaus at σ_y. If y > 0 the return is radial in deviatoric space:
//!   δγ = y / (2μ), ε' = ε − δγ ε̂/‖ε̂‖ (tr ε unchanged: plastic flow is isochoric). The plastic
//!   measure accumulates the equivalent plastic strain √(2/3)·δγ.
//! - **Drucker–Prager sand** (Klár et al. 2016, §7.3, Algorithm 2; cohesion 0): with friction
//!   angle φ, α = √(2/3)·2 sin φ / (3 − sin φ).
//!   Case I (tr ε ≥ 0, tension): project to the cone tip, ε' = 0, δγ = ‖ε‖.
//!   Otherwise δγ = ‖ε̂‖ + ((3λ + 2μ)/(2μ)) tr(ε) α; if δγ ≤ 0 the state is inside the cone
//!   (Case II, no change), else (Case III) ε' = ε − δγ ε̂/‖ε̂‖. The plastic measure accumulates δγ.
//!   Optional volume correction (Tampubolon et al. 2017, "Multi-species simulation of porous
//!   sand and water mixtures", §4.3.2): all three cases act on ε + (v_c/3)·1 (inside the cone
//!   the shifted strain becomes the new elastic strain) and afterwards
//!   v_c ← v_c + tr ε − tr ε', which lets sand that was pulled apart regain its volume when
//!   compressed before it carries stress.

use nalgebra::{Matrix3, Vector3};

use super::svd::rotation_svd;
use super::MpmError;

/// A plastic model (see the module docs for the return mappings).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Plasticity {
    None,
    /// von Mises with uniaxial yield stress σ_y (Pa).
    VonMises {
        yield_stress: f64,
    },
    /// Drucker–Prager sand with friction angle φ (degrees) and cohesion 0.
    DruckerPrager {
        friction_angle_deg: f64,
        volume_correction: bool,
    },
}

/// Per-particle plastic state.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PlasticState {
    /// Accumulated plastic measure (equivalent plastic strain for von Mises, Σ δγ for sand).
    pub plastic_strain: f64,
    /// Drucker–Prager volume correction v_c (log of volume lost by tension projections).
    pub log_volume_correction: f64,
}

impl Plasticity {
    /// Checks the parameters of material `index`; `hencky` says whether its elastic model is
    /// StVK–Hencky, which both return mappings require.
    pub(crate) fn validate(&self, index: usize, hencky: bool) -> Result<(), MpmError> {
        let bad = |key, value, reason| MpmError::InvalidMaterial {
            material: index,
            key,
            value,
            reason,
        };
        let needs_hencky = |key, value| {
            if hencky {
                Ok(())
            } else {
                Err(bad(
                    key,
                    value,
                    "plasticity needs the elastic model stvk_hencky",
                ))
            }
        };
        match *self {
            Plasticity::None => Ok(()),
            Plasticity::VonMises { yield_stress } => {
                if !(yield_stress.is_finite() && yield_stress > 0.0) {
                    return Err(bad("yield_stress", yield_stress, "must be finite and > 0"));
                }
                needs_hencky("yield_stress", yield_stress)
            }
            Plasticity::DruckerPrager {
                friction_angle_deg, ..
            } => {
                if !(friction_angle_deg > 0.0 && friction_angle_deg < 90.0) {
                    return Err(bad(
                        "friction_angle_deg",
                        friction_angle_deg,
                        "must lie in (0, 90)",
                    ));
                }
                needs_hencky("friction_angle_deg", friction_angle_deg)
            }
        }
    }

    /// Drucker–Prager cone coefficient α = √(2/3)·2 sin φ / (3 − sin φ) (Klár et al. 2016).
    pub fn drucker_prager_alpha(friction_angle_deg: f64) -> f64 {
        let s = friction_angle_deg.to_radians().sin();
        (2.0f64 / 3.0).sqrt() * 2.0 * s / (3.0 - s)
    }

    /// Drucker–Prager sand whose **angle of repose is φ** (`repose_angle_deg`, in (0°, 90°)).
    ///
    /// In steady simple shear the non-associated return (flow along dev τ) aligns dev τ with
    /// the shear rate, so the normal stresses are equal (−p) and the cone ‖dev τ‖ ≤ 3αp gives
    /// the friction coefficient τ_shear/p = 3α/√2 on the shear planes; a surface avalanche
    /// stops at that slope. Klár et al.'s α (fitted to Mohr–Coulomb in triaxial compression)
    /// makes it atan(√6 sin φ/(3 − sin φ)): 29.6° for φ = 25°, 39.3° for φ = 35°. This
    /// constructor instead takes α = √2 tan φ / 3, i.e. μ = τ̄/p = tan φ with τ̄ = ‖dev τ‖/√2
    /// (the √J₂ friction law of Dunatunga & Kamrin 2015, "Continuum modelling and simulation
    /// of granular flows through their many phases", J. Fluid Mech. 779), expressed as the
    /// Klár angle φ' with α(φ') = √2 tan φ / 3: sin φ' = √3 tan φ / (2 + tan φ/√3).
    pub fn drucker_prager_repose(repose_angle_deg: f64, volume_correction: bool) -> Self {
        let t = repose_angle_deg.to_radians().tan();
        let s = 3f64.sqrt() * t / (2.0 + t / 3f64.sqrt());
        Plasticity::DruckerPrager {
            friction_angle_deg: s.clamp(-1.0, 1.0).asin().to_degrees(),
            volume_correction,
        }
    }

    /// Applies the return mapping to the trial elastic gradient `f` with Lamé parameters
    /// (μ, λ), updating `state`; returns the projected F_E. The identity for `Plasticity::None`.
    /// Needs det f > 0 for the plastic models (the caller checks).
    pub fn return_map(
        &self,
        mu: f64,
        lambda: f64,
        f: &Matrix3<f64>,
        state: &mut PlasticState,
    ) -> Matrix3<f64> {
        match *self {
            Plasticity::None => *f,
            Plasticity::VonMises { yield_stress } => {
                let (u, s, vt) = rotation_svd(f);
                let eps = s.map(f64::ln);
                let dev = eps - Vector3::repeat(eps.sum() / 3.0);
                let norm = dev.norm();
                let y = 2.0 * mu * norm - (2.0f64 / 3.0).sqrt() * yield_stress;
                if y <= 0.0 || norm == 0.0 {
                    return *f;
                }
                let dgamma = y / (2.0 * mu);
                state.plastic_strain += (2.0f64 / 3.0).sqrt() * dgamma;
                let new_eps = eps - dev * (dgamma / norm);
                u * Matrix3::from_diagonal(&new_eps.map(f64::exp)) * vt
            }
            Plasticity::DruckerPrager {
                friction_angle_deg,
                volume_correction,
            } => {
                let (u, s, vt) = rotation_svd(f);
                let eps_trial = s.map(f64::ln);
                let shift = if volume_correction {
                    state.log_volume_correction / 3.0
                } else {
                    0.0
                };
                let eps = eps_trial + Vector3::repeat(shift);
                let tr = eps.sum();
                let dev = eps - Vector3::repeat(tr / 3.0);
                let norm = dev.norm();
                let projected = if tr >= 0.0 {
                    state.plastic_strain += eps.norm();
                    Vector3::zeros()
                } else {
                    let alpha = Self::drucker_prager_alpha(friction_angle_deg);
                    let dgamma = norm + (3.0 * lambda + 2.0 * mu) / (2.0 * mu) * tr * alpha;
                    if dgamma <= 0.0 {
                        if !volume_correction || shift == 0.0 {
                            return *f;
                        }
                        // Inside the cone: the shifted strain is the new elastic state (the
                        // correction is used up), as in Tampubolon et al. 2017.
                        eps
                    } else {
                        state.plastic_strain += dgamma;
                        eps - dev * (dgamma / norm)
                    }
                };
                if volume_correction {
                    state.log_volume_correction += eps_trial.sum() - projected.sum();
                }
                u * Matrix3::from_diagonal(&projected.map(f64::exp)) * vt
            }
        }
    }
}
