//! Gradients that carry their own check (issue 37 item 5): `diffphd grad --verify` compares the
//! adjoint gradient with a central finite difference of the loss taken at tight forward
//! tolerances, and [`frozen_e_ref_warnings`] names the parameters whose gradient holds the
//! default damping reference $E_{ref}$ fixed while a re-run scene would move it.
//!
//! **Directions.** With $P\le$ [`PER_PARAMETER_MAX`] parameters each parameter is checked on
//! its own ($d=s_ie_i$); otherwise one seeded random direction $d_i=u_is_i$, $u_i$ uniform in
//! $[-1,1]$ ([`crate::model::seeded_uniform`]), is checked. $s_i$ is the parameter's finite
//! difference step (`fd_step`, or its kind's default, as in `gradcheck`), so every parameter
//! moves by its own natural amount whatever its units.
//!
//! **Finite difference with its error bar.** Along $d$, $\phi(t)=\mathcal L(\theta+td)$ and the
//! adjoint's $\phi'(0)=g^Td$; the central differences
//! $D(t)=\big(\phi(t)-\phi(-t)\big)/2t$ at $t=1$ and $t=\tfrac12$ have truncation errors
//! $\tfrac{t^2}6\phi'''$, so $D(\tfrac12)$ is the reported value and
//! $|D(1)-D(\tfrac12)|$ (three times its truncation error, plus the forward noise of both) its
//! error bar. The four rollouts run with `solver.residual_tol` and `solver.newton_tol` at most
//! [`TIGHT_TOL`] (and the gate `rel_tol` at most [`TIGHT_GATE_TOL`] for the paper's mode and
//! DiffPD's method), so that forward noise stays far below the step's signal.
//!
//! **Verdict** of one check, with the scale $\sigma=\max(|D|,10^{-3}\max_j|D_j|)$ per parameter
//! (the per-parameter target of issue 37, $D_j$ the other parameters' differences) or
//! $\sigma=\max(|D|,10^{-3}\|g\|_2\|d\|_2)$ for a random direction: the error is
//! $|g^Td-D|/\sigma$ and the FD's bar $b/\sigma$. A bar above the threshold makes the check
//! *inconclusive* (the finite difference cannot certify that threshold); otherwise the check
//! *agrees* when the error is at most the threshold and *disagrees* when it is above.
//! A rollout that misses its stopping test makes the check inconclusive too.

use super::problem::{Problem, ProblemError};
use crate::model::{OnNonConvergence, SolverMethod, SolverMode, SolverSettings};

/// Parameters checked one by one up to this count; above it, one random direction.
pub const PER_PARAMETER_MAX: usize = 3;
/// The finite difference rollouts' `solver.residual_tol` and `solver.newton_tol` (at most).
pub const TIGHT_TOL: f64 = 1e-12;
/// The finite difference rollouts' gate `solver.rel_tol` (at most) in the paper's mode and
/// with `method = "diffpd"`, whose only stopping test is the gate.
pub const TIGHT_GATE_TOL: f64 = 1e-10;
/// Default error threshold of `grad --verify` (the per-parameter target of issue 37).
pub const DEFAULT_THRESHOLD: f64 = 1e-3;

/// What [`verify`] checks against.
#[derive(Clone, Debug)]
pub struct Options {
    /// Seed of the random direction (used with more than [`PER_PARAMETER_MAX`] parameters).
    pub seed: u64,
    /// Largest accepted error (relative, see the module docs).
    pub threshold: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            seed: 1,
            threshold: DEFAULT_THRESHOLD,
        }
    }
}

/// The outcome of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Agree,
    Disagree,
    Inconclusive,
}

/// One checked direction (a parameter, or the random direction).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Check {
    /// The parameter's name, or `"random direction (seed S)"`.
    pub direction: String,
    /// The adjoint's derivative along the direction: $g_i$ for a parameter (per unit of θ),
    /// $g^Td$ for the random direction.
    pub adjoint: f64,
    /// The central difference at the smaller step, in the same units.
    pub finite_difference: f64,
    /// $|D(1)-D(\tfrac12)|$ in the same units: the finite difference's own error bar.
    pub fd_error_bar: f64,
    /// The step $t\,s_i$ in θ of the smaller difference (per parameter), or $t=\tfrac12$
    /// along $d$.
    pub step: f64,
    /// $|\text{adjoint}-\text{FD}|/\sigma$ (module docs).
    pub error: f64,
    /// The error bar over the same scale.
    pub relative_error_bar: f64,
    /// Some rollout of this check missed its stopping test.
    pub fd_nonconverged: bool,
    pub verdict: Verdict,
}

/// The result of [`verify`]: every check, the threshold, and the tight settings used.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Verification {
    pub threshold: f64,
    pub seed: u64,
    /// `"per parameter"` or `"random direction"`.
    pub mode: &'static str,
    /// The finite difference rollouts' `solver.residual_tol` / `solver.newton_tol`.
    pub fd_tolerance: f64,
    pub checks: Vec<Check>,
}

impl Verification {
    /// Every check agrees.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.verdict == Verdict::Agree)
    }

    /// One line per check: direction, adjoint, FD ± bar, error, verdict.
    pub fn table(&self) -> String {
        let mut s = format!(
            "verify ({}, FD at residual_tol {:.0e}, threshold {:.1e}):\n",
            self.mode, self.fd_tolerance, self.threshold
        );
        for c in &self.checks {
            s += &format!(
                "  {:<32} adjoint {:>17.10e}  FD {:>17.10e} ± {:.1e}  error {:.2e} (FD bar {:.1e})  {}\n",
                c.direction,
                c.adjoint,
                c.finite_difference,
                c.fd_error_bar,
                c.error,
                c.relative_error_bar,
                match c.verdict {
                    Verdict::Agree => "AGREE",
                    Verdict::Disagree => "DISAGREE",
                    Verdict::Inconclusive if c.fd_nonconverged =>
                        "INCONCLUSIVE (an FD rollout missed its stopping test)",
                    Verdict::Inconclusive => "INCONCLUSIVE (FD error bar above the threshold)",
                }
            );
        }
        s
    }
}

/// Tighten a scene's forward settings for the finite difference rollouts (module docs);
/// their steps that still miss the test are reported, not raised.
pub fn tighten(s: &mut SolverSettings) {
    s.residual_tol = s.residual_tol.min(TIGHT_TOL);
    s.newton_tol = s.newton_tol.min(TIGHT_TOL);
    if s.mode == SolverMode::Paper || s.method == SolverMethod::Diffpd {
        s.rel_tol = s.rel_tol.min(TIGHT_GATE_TOL);
    }
    s.on_nonconvergence = OnNonConvergence::Warn;
}

/// Check `gradient` (the adjoint's $d\mathcal L/d\theta$ of `problem` at `theta`) against central
/// differences at tight forward tolerances (module docs). Runs on the CPU.
pub fn verify(
    problem: &Problem,
    theta: &[f64],
    gradient: &[f64],
    opts: &Options,
) -> Result<Verification, ProblemError> {
    let mut ls = problem.ls.clone();
    tighten(&mut ls.scene.solver);
    let tight = Problem::new(ls)?;
    tight.pin_method_choice(problem.method_choice());
    let np = problem.params.len();
    let steps: Vec<f64> = problem
        .params
        .iter()
        .map(|p| p.default_fd_step(&problem.base))
        .collect();
    // (name, direction d, unit: d = unit·e_i per parameter, 1 for the random direction)
    let directions: Vec<(String, Vec<f64>, f64)> = if np <= PER_PARAMETER_MAX {
        (0..np)
            .map(|i| {
                let mut d = vec![0.0; np];
                d[i] = steps[i];
                (problem.params[i].name.clone(), d, steps[i])
            })
            .collect()
    } else {
        let u = crate::model::seeded_uniform(opts.seed, np);
        let d = u.iter().zip(&steps).map(|(a, s)| a * s).collect();
        vec![(format!("random direction (seed {})", opts.seed), d, 1.0)]
    };
    let mut raw = Vec::with_capacity(directions.len());
    for (name, d, unit) in &directions {
        let mut nonconverged = false;
        let mut central = |t: f64| -> Result<f64, ProblemError> {
            let mut l = [0.0; 2];
            for (k, sign) in [1.0, -1.0].into_iter().enumerate() {
                let th: Vec<f64> = theta.iter().zip(d).map(|(a, b)| a + sign * t * b).collect();
                let ev = tight.evaluate(&th, false)?;
                nonconverged |= !ev.nonconverged_forward_frames.is_empty();
                l[k] = ev.loss;
            }
            Ok((l[0] - l[1]) / (2.0 * t))
        };
        let coarse = central(1.0)?;
        let fine = central(0.5)?;
        let gtd: f64 = gradient.iter().zip(d).map(|(a, b)| a * b).sum();
        raw.push((
            name.clone(),
            gtd / unit,
            fine / unit,
            coarse / unit,
            0.5 * unit,
            nonconverged,
        ));
    }
    let fd_max = raw.iter().fold(0.0f64, |m, r| m.max(r.2.abs()));
    let per_parameter = np <= PER_PARAMETER_MAX;
    let gnorm = gradient.iter().map(|v| v * v).sum::<f64>().sqrt();
    let checks = raw
        .into_iter()
        .zip(&directions)
        .map(
            |((direction, adjoint, fd, coarse, step, nonconv), (_, d, _))| {
                let scale = if per_parameter {
                    fd.abs().max(1e-3 * fd_max)
                } else {
                    let dn = d.iter().map(|v| v * v).sum::<f64>().sqrt();
                    fd.abs().max(1e-3 * gnorm * dn)
                };
                let bar = (coarse - fd).abs();
                let ratio = |v: f64| {
                    if scale > 0.0 {
                        v / scale
                    } else if v == 0.0 {
                        0.0
                    } else {
                        f64::INFINITY
                    }
                };
                let (error, relative_error_bar) = (ratio((adjoint - fd).abs()), ratio(bar));
                let verdict =
                    if nonconv || relative_error_bar > opts.threshold || !error.is_finite() {
                        Verdict::Inconclusive
                    } else if error <= opts.threshold {
                        Verdict::Agree
                    } else {
                        Verdict::Disagree
                    };
                Check {
                    direction,
                    adjoint,
                    finite_difference: fd,
                    fd_error_bar: bar,
                    step,
                    error,
                    relative_error_bar,
                    fd_nonconverged: nonconv,
                    verdict,
                }
            },
        )
        .collect();
    Ok(Verification {
        threshold: opts.threshold,
        seed: opts.seed,
        mode: if per_parameter {
            "per parameter"
        } else {
            "random direction"
        },
        fd_tolerance: TIGHT_TOL,
        checks,
    })
}

/// Warnings for `youngs_modulus`-like parameters that move the element setting a body's
/// default damping reference: with `stiffness_scaling = "amplified"` and $\beta_0>0$,
/// $\beta_e=\beta_0E_e/E_{ref}$ (spec Eq. 30) where $E_{ref}$ defaults to the body's smallest
/// $E_e$, frozen when the model is built. The gradient holds $E_{ref}$ fixed (the optimizer's
/// parametrization), while re-running the scene with a changed $E$ (`simulate --set`, a
/// sweep) moves it with that element, so the two differ (16 % on a soft region, issue 37).
/// A parameter covers the element when changing it changes that element's $E$ (the
/// parameter's own forward map, [`Problem::model_at`]). One warning per (parameter, body);
/// none where `e_ref` is set in the scene.
pub fn frozen_e_ref_warnings(problem: &Problem) -> Vec<String> {
    let base = &problem.base;
    let theta = problem.theta0();
    let m0 = problem.model_at(&theta);
    // bodies whose damping reference is the frozen default and matters, with the elements
    // that set it (on the base model: θ₀ = ln E round-trips E only to a few ulps)
    let bodies: Vec<(usize, Vec<usize>)> = base
        .bodies
        .iter()
        .enumerate()
        .filter(|(b, info)| {
            let spec = problem.ls.scene.bodies.get(*b);
            spec.is_some_and(|s| s.damping.e_ref.is_none())
                && info.stiffness_scaling == crate::model::StiffnessScaling::Amplified
                && m0.params.beta0[*b] > 0.0
        })
        .map(|(b, info)| {
            let setters = info
                .elements
                .clone()
                .filter(|&e| base.params.youngs[e] <= info.e_ref)
                .collect();
            (b, setters)
        })
        .collect();
    if bodies
        .iter()
        .all(|(_, s): &(usize, Vec<usize>)| s.is_empty())
    {
        return vec![];
    }
    let moved = |th: &[f64], setters: &[usize]| -> Option<usize> {
        let m = problem.model_at(th);
        setters
            .iter()
            .copied()
            .find(|&e| m.params.youngs[e] != m0.params.youngs[e])
    };
    let mut warnings = Vec::new();
    for (i, p) in problem.params.iter().enumerate() {
        let mut th = theta.clone();
        th[i] += p.default_fd_step(base).max(1e-6);
        for (b, setters) in &bodies {
            if let Some(e) = moved(&th, setters) {
                warnings.push(format!(
                    "parameter '{}' changes the Young's modulus of element {e}, which sets body {b}'s default damping reference e_ref = {:.6e} Pa (its smallest E, frozen at model build): the gradient holds e_ref fixed, while a re-run with a changed E moves it. Set body.{b}.damping.e_ref to make both the same",
                    p.name, base.bodies[*b].e_ref
                ));
            }
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(sets: &[&str]) -> Problem {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/e_ref_soft_region.toml");
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        Problem::new(crate::scene::load(&path, &sets).expect("fixture loads")).expect("problem")
    }

    /// The soft region sets e_ref = 1e4 Pa (its E, the body's smallest): its parameter warns,
    /// an explicit e_ref or no β does not.
    #[test]
    fn frozen_e_ref_warning_names_the_parameter_and_the_element() {
        let p = problem(&[]);
        let b = &p.base.bodies[0];
        assert!((b.e_ref - 1e4).abs() <= 1e-6, "e_ref {}", b.e_ref);
        let w = frozen_e_ref_warnings(&p);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("region0") && w[0].contains("body.0.damping.e_ref"),
            "{w:?}"
        );
        assert!(frozen_e_ref_warnings(&problem(&["body.0.damping.e_ref=1e4"])).is_empty());
        assert!(frozen_e_ref_warnings(&problem(&["body.0.damping.beta=0.0"])).is_empty());
    }
}
