//! Physics diagnostics of one frame: energies, centre of mass, momenta, principal strains and
//! inverted elements of a state $(x, v)$, for `log.json` (`diffphd simulate`), the library's
//! [`crate::session::simulate`] and the Python package.
//!
//! With lumped nodal masses $m_i$ ([`crate::model::Derived::mass`]), gravity $g$ and the
//! rest positions $X_i$:
//!
//! - elastic energy $E_\mathrm{el}=\sum_s V_s\,\psi(F_s;\mu_e,\lambda_e)$ over the quadrature
//!   samples $s$ (rest volume $V_s$, element $e$), with the body's material law's energy
//!   density [`crate::material::Material::density_and_pk1`] — the law's own energy, not the
//!   PD surrogate of the local step. Corotated: $\psi=\mu\|F-R\|^2+\tfrac\lambda2\|F-D(F)\|^2$;
//!   Neo-Hookean: spec Eq. 5, $+\infty$ for an inverted sample ($J\le0$);
//! - kinetic energy $E_\mathrm{kin}=\tfrac12\sum_i m_i\|v_i\|^2$;
//! - gravitational energy $E_\mathrm{grav}=-\sum_i m_i\,g\cdot x_i$ (zero at the origin);
//! - total $E=E_\mathrm{el}+E_\mathrm{kin}+E_\mathrm{grav}$ (attachments, external loads,
//!   contact and muscles' active stress are not in it);
//! - centre of mass $\sum_i m_ix_i/\sum_i m_i$, linear momentum $p=\sum_i m_iv_i$ and angular
//!   momentum about the origin $L=\sum_i m_i\,x_i\times v_i$;
//! - principal strains: the principal stretches $\lambda_k=\sqrt{\mathrm{eig}_k(F^TF)}$ minus one
//!   (Biot strain), computed from the Green strain $E=\tfrac12(\nabla u+\nabla u^T+\nabla
//!   u^T\nabla u)$, $\nabla u=F-I$, as $\lambda-1=2e/(1+\sqrt{1+2e})$ (no cancellation at
//!   small strain); the largest over all samples and the smallest (compression);
//! - inverted elements: those with a sample whose $\det F\le0$.
//!
//! Implicit Euler (spec §3) dissipates: for a conservative, undamped system the total energy
//! does not grow from step to step, and a linear mode of frequency $\omega$ keeps the factor
//! $1/(1+\omega^2h^2)$ of its energy per step; internal forces sum to zero, so the linear
//! momentum of a free body without gravity is conserved (see the tests).

use crate::material::{self, eigen::sym_eigen3};
use crate::model::Model;
use crate::solver::rollout::FrameEvent;
use nalgebra::{Matrix3, Vector3};
use rayon::prelude::*;
use serde::Serialize;

/// The diagnostics of one frame (SI units). Non-finite numbers serialize as `"inf"`,
/// `"-inf"` or `"nan"` ([`finite_or_name`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Diagnostics {
    /// $\sum_sV_s\psi(F_s)$ (J): the material law's energy; `"inf"` with an inverted
    /// Neo-Hookean element.
    #[serde(serialize_with = "finite_or_name")]
    pub elastic_energy: f64,
    /// $\tfrac12\sum_im_i\|v_i\|^2$ (J).
    pub kinetic_energy: f64,
    /// $-\sum_im_i\,g\cdot x_i$ (J), zero at the origin.
    pub gravitational_energy: f64,
    /// The sum of the three (J).
    #[serde(serialize_with = "finite_or_name")]
    pub total_energy: f64,
    /// $\sum_im_ix_i/\sum_im_i$ (m).
    pub center_of_mass: [f64; 3],
    /// $\sum_im_iv_i$ (kg·m/s).
    pub linear_momentum: [f64; 3],
    /// $\sum_im_i\,x_i\times v_i$ about the origin (kg·m²/s).
    pub angular_momentum: [f64; 3],
    /// Largest principal stretch minus one over all samples (tension > 0).
    pub max_principal_strain: f64,
    /// Smallest principal stretch minus one over all samples (compression < 0).
    pub min_principal_strain: f64,
    /// Elements with a sample whose $\det F\le0$.
    pub inverted_elements: usize,
}

/// A number, or the string `"inf"`, `"-inf"` or `"nan"` where JSON has no number (serde_json
/// would write `null`, which reads as "missing"). Used by the run log too.
pub fn finite_or_name<S: serde::Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    if x.is_finite() {
        s.serialize_f64(*x)
    } else if x.is_nan() {
        s.serialize_str("nan")
    } else if *x > 0.0 {
        s.serialize_str("inf")
    } else {
        s.serialize_str("-inf")
    }
}

/// What one quadrature sample contributes: $V_s\psi$, the extreme principal strains and
/// whether $\det F\le0$.
struct SampleTerms {
    energy: f64,
    strain_max: f64,
    strain_min: f64,
    inverted: bool,
}

/// Biot strain $\lambda-1=\sqrt{1+2e}-1=2e/(1+\sqrt{1+2e})$ of a principal Green strain $e$.
fn biot_from_green(e: f64) -> f64 {
    2.0 * e / (1.0 + (1.0 + 2.0 * e).max(0.0).sqrt())
}

/// The terms of sample `s` of `model` at positions `x`.
fn sample_terms(model: &Model, s: usize, x: &[f64]) -> SampleTerms {
    let e = model.samples.elem[s];
    let body = model.elem_body[e];
    let f = model.deformation_gradient(s, x);
    let gu = f - Matrix3::identity();
    let green = (gu + gu.transpose() + gu.transpose() * gu) * 0.5;
    let (eig, _) = sym_eigen3(&green);
    let (mu, lambda) = material::lame(model.params.youngs[e], model.params.nu_of(e, body));
    let (psi, _) = model.bodies[body].model.density_and_pk1(mu, lambda, &f);
    let inverted = f.determinant() <= 0.0;
    // The laws give NaN where the energy is undefined (Neo-Hookean at J ≤ 0): infinite.
    let psi = if psi.is_nan() && inverted {
        f64::INFINITY
    } else {
        psi
    };
    SampleTerms {
        energy: model.samples.vol[s] * psi,
        strain_max: biot_from_green(eig.max()),
        strain_min: biot_from_green(eig.min()),
        inverted,
    }
}

/// The diagnostics of state `(x, v)` (node-major, `3·node + axis`) of `model` with the lumped
/// nodal masses `mass`. The per-sample terms are computed in parallel and summed in sample
/// order, so the result does not depend on the thread count.
pub fn diagnostics(model: &Model, mass: &[f64], x: &[f64], v: &[f64]) -> Diagnostics {
    let terms: Vec<SampleTerms> = (0..model.num_samples())
        .into_par_iter()
        .map(|s| sample_terms(model, s, x))
        .collect();
    let mut d = Diagnostics {
        max_principal_strain: f64::NEG_INFINITY,
        min_principal_strain: f64::INFINITY,
        ..Diagnostics::default()
    };
    let mut last_inverted = usize::MAX;
    for (s, t) in terms.iter().enumerate() {
        d.elastic_energy += t.energy;
        d.max_principal_strain = d.max_principal_strain.max(t.strain_max);
        d.min_principal_strain = d.min_principal_strain.min(t.strain_min);
        let e = model.samples.elem[s];
        if t.inverted && e != last_inverted {
            d.inverted_elements += 1;
            last_inverted = e;
        }
    }
    if terms.is_empty() {
        (d.max_principal_strain, d.min_principal_strain) = (0.0, 0.0);
    }
    let g = Vector3::from(model.gravity);
    let (mut m_total, mut mx, mut p, mut l) =
        (0.0, Vector3::zeros(), Vector3::zeros(), Vector3::zeros());
    for (i, &m) in mass.iter().enumerate() {
        let xi = Vector3::new(x[3 * i], x[3 * i + 1], x[3 * i + 2]);
        let vi = Vector3::new(v[3 * i], v[3 * i + 1], v[3 * i + 2]);
        d.kinetic_energy += 0.5 * m * vi.norm_squared();
        d.gravitational_energy -= m * g.dot(&xi);
        m_total += m;
        mx += xi * m;
        p += vi * m;
        l += xi.cross(&vi) * m;
    }
    d.total_energy = d.elastic_energy + d.kinetic_energy + d.gravitational_energy;
    if m_total > 0.0 {
        d.center_of_mass = (mx / m_total).into();
    }
    d.linear_momentum = p.into();
    d.angular_momentum = l.into();
    d
}

/// The law's elastic energy of each element, $U_e=\sum_{s\in e}V_s\,\psi(F_s;\mu_e,\lambda_e)$
/// (J), at positions `x`: the per-element terms of [`Diagnostics::elastic_energy`], which is
/// their sum (e.g. the weights of a per-element field fit's error, issue 39).
pub fn element_energies(model: &Model, x: &[f64]) -> Vec<f64> {
    let terms: Vec<f64> = (0..model.num_samples())
        .into_par_iter()
        .map(|s| sample_terms(model, s, x).energy)
        .collect();
    let mut out = vec![0.0; model.num_elements()];
    for (s, u) in terms.iter().enumerate() {
        out[model.samples.elem[s]] += u;
    }
    out
}

impl Diagnostics {
    /// The diagnostics of a rollout frame (the sink's per-frame function): the event's
    /// state with its simulator's model and lumped masses.
    pub fn of_event(e: &FrameEvent<'_, '_>) -> Diagnostics {
        diagnostics(e.sim.model, &e.sim.derived.mass, e.x, e.v)
    }
}

/// Plausible ranges of the material constants in SI units, for [`implausible_units`]:
/// Young's modulus from soft gels (~1 kPa) to diamond (~1.2 TPa) with a decade of slack, and
/// density from aerogels (~1 kg/m³) to osmium (22,590 kg/m³).
const YOUNGS_RANGE: (f64, f64) = (100.0, 1e13);
const DENSITY_RANGE: (f64, f64) = (1.0, 3e4);

/// One warning per body whose Young's modulus or density lies outside any solid's range in SI
/// units, naming the body, the value and why (a slip of units, e.g. E = 1 meant as 1 MPa, or
/// ρ = 1 meant as 1 g/cm³). Such a run can "complete" while simulating something else.
pub fn implausible_units(model: &Model) -> Vec<String> {
    let mut out = vec![];
    for (b, body) in model.bodies.iter().enumerate() {
        let youngs = &model.params.youngs[body.elements.clone()];
        let (lo, hi) = youngs
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(l, h), &e| (l.min(e), h.max(e)));
        if lo < YOUNGS_RANGE.0 {
            out.push(format!(
                "body {b} ({}): youngs_modulus = {lo:e} Pa is softer than any solid (soft gels are about 1e3 Pa); Young's modulus is in Pa, so 1 MPa is 1e6",
                body.name
            ));
        }
        if hi > YOUNGS_RANGE.1 {
            out.push(format!(
                "body {b} ({}): youngs_modulus = {hi:e} Pa is stiffer than any solid (diamond is about 1.2e12 Pa); Young's modulus is in Pa",
                body.name
            ));
        }
        let rho = model.params.density[b];
        if !(DENSITY_RANGE.0..=DENSITY_RANGE.1).contains(&rho) {
            out.push(format!(
                "body {b} ({}): density = {rho:e} kg/m³ is outside the range of solids (1 to 3e4 kg/m³; water is 1000); density is in kg/m³, so 1 g/cm³ is 1000",
                body.name
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests;
