//! Newton baseline (issue 7, spec §8; DiffPD notes §1.2): Newton's method on the
//! implicit-Euler objective with the same Rayleigh damping the PD path folds into $A$:
//! $$g(x)=\tfrac1{2h^2}\|x-y\|_M^2+\tfrac1{2h}\|x-x_t\|_{\mathcal D}^2+\textstyle\sum_sE_s(F_s(x)),
//! \qquad \mathcal D=\alpha M+\hat K_\beta,$$
//! $y=x_t+hv_t+h^2M^{-1}f_{ext}$, Dirichlet DoFs fixed at their prescribed values.
//!
//! Per-sample energies $E_s$ (`[solver] newton_energy`):
//! - `pd`: the PD energy the prox defines (spec U1, §10.3): corotated+volume
//!   $\tfrac{w^{cor}_s}2\|F-R\|^2+\tfrac{w^{vol}_s}2\|F-D\|^2$; Neo-Hookean the Moreau envelope
//!   $\tfrac{w_s}2\|F-p_s\|^2+\tfrac{w_s}{\bar k}\bar\psi(\sigma^*_s)$. Its gradient is $w_s(F-p_s)$ and
//!   its Hessian $w_s(I-\partial p_s/\partial F)$ (envelope theorem), so $\nabla^2g=A-\Delta A$ and the
//!   Newton solution is the PD fixed point.
//! - `true`: the hyperelastic energy itself: Neo-Hookean $V_s\,\Psi_{NH}(\mu_s,\lambda_s;F)$ (Eq. 5)
//!   with $(\mu_s,\lambda_s)=\tfrac{w_s}{\bar kV_s}(\bar\mu,\bar\lambda)$ (Lemma 1 scaling); corotated
//!   $V_s[\mu\|F-R\|^2+\tfrac\lambda2(J-1)^2]$ (Stomakhin et al. 2012).
//!
//! Each iteration assembles the $3n\times3n$ Hessian on the element pattern (free DoFs only),
//! factors it with the sparse $LL^T$ whose symbolic analysis (METIS ordering, elimination
//! tree) is computed once per simulator and reused, solves $H\delta=-\nabla g$ and backtracks
//! (Armijo, $c=10^{-4}$, halving) until $\|\nabla g\|\le$ `newton_tol`$\cdot s$ ($s$: the norm of the
//! inertia+damping part plus that of the elastic part of $\nabla g$).
//!
//! Round-off stop (issue 37; `method = "newton"` without contact): evaluated at a floating-point
//! $x$, $\nabla g$ cannot be resolved below the change that rounding $x$ causes, to first order
//! $|\delta\nabla g|\le\epsilon\,|K|\,|x|$ ($K=\nabla^2g$, $\epsilon$ = `f64::EPSILON`; Higham 2002 §3
//! style bound). A stiff, slowly loaded body can put that floor above `newton_tol`: measured on a
//! 100×-contrast twisted tet bar, $\|\nabla g\|$ drops quadratically to $0.10$–$0.15\,\epsilon\||K||x|\|$
//! and then wanders there (Newton steps of 30–270 ulps of $\|x\|_\infty$, the Armijo test passing or
//! failing on round-off) until the iteration cap. So an iteration that does not halve the
//! smallest $\|\nabla g\|$ so far while $\|\nabla g\|\le c\,\epsilon\||K||x|\|_2$ ($c$ = [`ROUNDOFF_C`])
//! is a stall, and [`ROUNDOFF_K`] stalls in a row (or a line search that finds no decrease down to
//! trial steps below $\epsilon\|x\|_\infty$ at the floor) end the step as converged, logged as
//! [`ROUNDOFF_STOP`] (`NewtonStats::stop`, `log.json`). A step that stalls above the floor
//! still misses its stopping test (exit 3).
//!
//! Local steps (issue 37): a Newton step no larger than [`LOCAL_STEP`] times the step's motion
//! $\|x-x_t\|_\infty$ is taken whole, without the Armijo test. There the quadratic model is exact
//! to $O(\|\delta\|^3)$, while the energy's evaluation has a rounding error (of order
//! $\epsilon\sum_sw_s\|F_s\|^2$ for the PD energy of a stiff body) far above the decrease the
//! test asks for. Measured on a free-falling E = 1e9 hex box (3×2×2 cells of 5 cm, h = 5 ms):
//! the line search halved the steps that correct the rigid translation's last $10^{-14}$ m, so
//! it converged linearly (×0.75 per iteration) and the centre of mass was 8.9e-15 m off after 8
//! frames; with whole steps 1.1e-16 m. The rotation's error, the larger one, was the stress's
//! rounding torque (`torque_free_stress`): both together take Newton's step error on that box from
//! 1.1e-11 (hex) / 1.2e-11 (tet) of the step's displacement to 2.4e-14 / 4.2e-14
//! (`tests/physics/physics.rs`, `stiff_and_distant_bodies_fall_to_round_off`). The direct fallback of the PD method
//! ([`solve_from`]) tests its own target and does not use this stop. Element (per quadrature sample) Hessian filters: `none`,
//! `clamp` ($\max(\lambda,\epsilon)$, $\epsilon=10^{-8}$ relative), `abs`, `trust_region` (clamp
//! when the last step's ratio $\rho$ satisfied $|\rho-1|<\eta$, abs otherwise; Chen et al. 2024)
//! and `ppn` (Fernández-Fernández et al. 2026: unprojected first; on a failed factorization,
//! project the elements whose assembled residual $\|S^eg\|_\infty$ exceeds $\delta$,
//! $\delta\leftarrow\alpha\delta$ per failure, $\delta\leftarrow\beta\delta$ per success, $\alpha=0.5$,
//! $\beta=2$, PN fallback below $\epsilon_\delta=10^{-12}$). With `none`, an indefinite matrix is
//! regularised by $H+\tau I$ (τ from $10^{-8}\max_i H_{ii}$, ×10 until the factor exists), counted
//! in the statistics.
//!
//! Muscle fibres (spec §3.5) add $\tfrac{w_m}2\|F\mathsf m-p_m\|^2$ per actuated sample (gradient
//! $w_m(F\mathsf m-p_m)\mathsf m^T$, Hessian $w_m\,(I-\partial p_m/\partial(F\mathsf m))\otimes\mathsf m\mathsf m^T$ by
//! the envelope theorem, the muscle term of spec Eq. 39); compliant attachments add
//! $\tfrac k2\|x_i\|^2$ (their $-k\,p_i^Tx_i$ is in $f_{ext}$, hence in $y$).
//!
//! Contact (NCP, the same Signorini–Coulomb/Fischer–Burmeister model and frozen frames as
//! the PD path, `StepContext::contact_begin`): each Newton iteration minimises the quadratic
//! model subject to the contact conditions. With $H$ the factored (filtered/regularised)
//! Hessian at $x_k$: $u=x_k-H^{-1}\nabla g(x_k)$, $X=H^{-1}J^T$, $\hat\lambda$ solves
//! $\Phi(J(u+X\lambda)-d,\lambda)=0$ (`contact::solve` with the Delassus operator of $H$,
//! [`NewtonFactor`]), $\hat x=u+X\hat\lambda$. The step $(\hat x-x_k,\hat\lambda-\lambda_k)$ is
//! backtracked on the merit $\big(\|\nabla g-J^T\lambda\|_F/(\epsilon_N s)\big)^2+
//! \big(\|\Phi\|_2/\epsilon_c\big)^2$ ($s$: force scale at $x_k$, $\epsilon_N$ = `newton_tol`,
//! $\epsilon_c$ = `contact.tolerance`); the step has converged when
//! $\|\nabla g-J^T\lambda\|_F\le\epsilon_N(s+\|J^T\lambda\|)$ and $\|\Phi\|_\infty\le\epsilon_c$.
//!
//! Backward (spec §7): the adjoint of a step is the direct solve $\nabla^2g(x_{t+1})\,z=\partial
//! \mathcal L/\partial x_{t+1}$ on the free DoFs with the same assembled Hessian (exact, or
//! filtered when `[backward] filter` is not `none`); $z$ feeds the same gradient routing as the PD
//! path (`solver::gradient`), which is exact for the `pd` energy. If the exact Hessian is
//! indefinite, GMRES on the unshifted $H$ (preconditioned by the PD factor $A^{-1}$, started
//! from the solve with the shifted factor of $H+\tau I$) replaces an LDLᵀ/LU, so $z$ still
//! solves the exact system. With contact the adjoint is the KKT system
//! $\begin{bmatrix}K&J^TD^T\\-J&E^T\end{bmatrix}\begin{bmatrix}z\\\zeta\end{bmatrix}=\begin{bmatrix}g\\0\end{bmatrix}$
//! with $K=\nabla^2g(x_{t+1})$, solved directly: $w=K^{-1}g$, $\zeta=(WD^T+E^T)^{-1}Jw$ with
//! $X=K^{-1}J^T$, $W=JX$, and $z=w-XD^T\zeta$ ([`ContactAdjoint::project`] built on the Newton
//! factor). An indefinite $K$ with contact falls back to the PD-side contact adjoint
//! (same $K$, fixed point + GMRES).

pub mod adjoint;
pub mod element;
mod step;
pub mod stepper;

use super::adjoint::backward::StepLinearization;
use super::context::{norm, StepContext};
use super::records::config::BackwardConfig;
use super::records::error::SolverError;
use super::records::stats::{AdjointStats, NewtonStats};
use crate::contact::adjoint::ContactAdjoint;
use crate::contact::ncp::FbParams;
use crate::contact::ContactSet;
use crate::linalg::{CscMatrix, LinalgError};
use crate::model::HessianFilterMode;
use crate::model::{NewtonEnergy, NewtonFilter};
use crate::solver::hessian::{NewtonFactor, NewtonSystem};
pub use element::{
    cofactor, cofactor_differential, muscle_terms, project_pd, sample_terms, Mat9, CLAMP_EPS,
    PPN_ALPHA, PPN_BETA, PPN_EPS_DELTA,
};
use nalgebra::Matrix3;
use rayon::prelude::*;
use std::time::Instant;
pub use step::{solve_from, step};

/// The round-off stop's factor $c$ on the floor $\epsilon\||K||x|\|_2$ (module docs): the measured
/// stall level is $0.10$–$0.15$, so an iterate still converging (quadratically, from
/// $10^3$–$10^5$ times the floor) does not meet it.
pub const ROUNDOFF_C: f64 = 1.0;
/// Stalls in a row at the floor that end a step (module docs).
pub const ROUNDOFF_K: usize = 3;
/// A Newton step (contact-free) whose largest entry is at most this fraction of the step's
/// motion $\|x-x_t\|_\infty$ is taken whole, without the line search (module docs, "local
/// steps").
pub const LOCAL_STEP: f64 = 1e-6;
/// `NewtonStats::stop` (and `log.json`'s `newton.stop`) of a step ended by the round-off stop.
pub const ROUNDOFF_STOP: &str = "converged to round-off";

/// $\||K|\,|x|\|_2$ on the free DoFs, $K$ the Hessian assembled from the per-sample `hess`:
/// the first-order bound $\epsilon\,|K|\,|x|$ of the change of $\nabla g$ when $x$ is rounded to
/// floating point ($|\delta x_j|\le\epsilon|x_j|$), the scale of the round-off stop.
fn roundoff_scale(sim: &StepContext, sys: &NewtonSystem, hess: &[Mat9], x: &[f64]) -> f64 {
    let k = assemble(sim, sys, hess);
    let mut y = vec![0.0; x.len()];
    for (j, xj) in x.iter().enumerate().take(k.n) {
        for p in k.col_ptr[j]..k.col_ptr[j + 1] {
            y[k.row_idx[p]] += k.values[p].abs() * xj.abs();
        }
    }
    for &q in &sim.prescribed {
        y[q] = 0.0;
    }
    norm(&y)
}

/// The stress `p` of a rotation-invariant energy at `f` without the torque its rounding
/// carries: such a stress satisfies $PF^T=FP^T$ (balance of angular momentum; the sample's
/// forces $G_s^TP$ then exert no net torque), which the SVD's rotation breaks by
/// $\sim\epsilon w_s$. Newton's Hessian has only the inertia $M/h^2$ against rigid rotations,
/// so that rounding turned the step's rotation by $\epsilon s$ of its displacement ($s$ the
/// stiffness number): measured on a free-falling E = 1e9 box, 1.3e-11 of the step. Removes
/// $\mathrm{skew}(PF^T)F^{-T}$ (no change where $F$ is not invertible).
fn torque_free_stress(p: Matrix3<f64>, f: &Matrix3<f64>) -> Matrix3<f64> {
    let pf = p * f.transpose();
    let skew = (pf - pf.transpose()) * 0.5;
    match f.try_inverse() {
        Some(inv) if f.determinant() > 0.0 => p - skew * inv.transpose(),
        _ => p,
    }
}

/// The objective, its gradient and the per-sample Hessians at `x`.
struct Eval {
    energy: f64,
    grad: Vec<f64>,
    /// Norm of the two parts (inertia+damping, elastic) on the free DoFs: the scale of the
    /// stopping test.
    scale: f64,
    hess: Vec<Mat9>,
    finite: bool,
}

/// `torque_free`: the per-sample stresses without their rounding torque ([`torque_free_stress`];
/// `method = "newton"`, not the PD method's direct fallback, whose results stay the PD
/// method's own).
fn evaluate(
    sim: &StepContext,
    energy: NewtonEnergy,
    x: &[f64],
    y: &[f64],
    x_t: &[f64],
    (with_hessian, torque_free): (bool, bool),
) -> Eval {
    let model = sim.model;
    let d = &sim.derived;
    let h = model.h;
    let n = model.num_nodes();
    let n3 = 3 * n;
    let dx: Vec<f64> = x.iter().zip(x_t).map(|(a, b)| a - b).collect();
    let mut e_in = 0.0;
    let mut g_in = vec![0.0; n3];
    for i in 0..n {
        for k in 0..3 {
            let j = 3 * i + k;
            e_in += d.mass[i]
                * ((x[j] - y[j]).powi(2) / (2.0 * h * h)
                    + d.node_alpha[i] * dx[j].powi(2) / (2.0 * h));
            g_in[j] = d.mass[i] * ((x[j] - y[j]) / (h * h) + d.node_alpha[i] * dx[j] / h);
        }
    }
    let mut t = vec![0.0; n];
    for k in 0..3 {
        sim.kbeta.matvec_axis(&dx, k, &mut t);
        for i in 0..n {
            e_in += dx[3 * i + k] * t[i] / (2.0 * h);
            g_in[3 * i + k] += t[i] / h;
        }
    }
    let mut per: Vec<(f64, Matrix3<f64>, Mat9)> = (0..model.num_samples())
        .into_par_iter()
        .map(|s| {
            let f = model.deformation_gradient(s, x);
            let (e, p, hs) = sample_terms(sim, energy, s, &f, with_hessian);
            (
                e,
                if torque_free {
                    torque_free_stress(p, &f)
                } else {
                    p
                },
                hs,
            )
        })
        .collect();
    // muscle fibres (the same energy for `pd` and `true`: Ψ_m is already a projection energy)
    for g in &model.muscles {
        let a = g.activation_at(d.muscle_time);
        for (&s, m) in g.samples.iter().zip(&g.fibers) {
            let f = model.deformation_gradient(s, x);
            let w = g.stiffness * model.samples.vol[s];
            let (e, p, hm) = muscle_terms(&f, m, a, w, with_hessian);
            per[s].0 += e;
            per[s].1 += p;
            if with_hessian {
                per[s].2 += hm;
            }
        }
    }
    let mut g_el = vec![0.0; n3];
    let mut e_el = 0.0;
    // compliant attachments: k/2 |x_i|^2 (the linear part -k p_i^T x_i is in y)
    for g in &model.attachments {
        for &i in &g.nodes {
            for c in 0..3 {
                e_el += 0.5 * g.stiffness * x[3 * i + c].powi(2);
                g_el[3 * i + c] += g.stiffness * x[3 * i + c];
            }
        }
    }
    for (e, _, _) in &per {
        e_el += e;
    }
    // G_sᵀ vec P_s in sample order onto the attachments' part, gathered per node in parallel
    model.gather_gt(|s| per[s].1, &mut g_el);
    let hess = if with_hessian {
        per.into_iter().map(|(_, _, hs)| hs).collect()
    } else {
        Vec::new()
    };
    let mut grad: Vec<f64> = g_in.iter().zip(&g_el).map(|(a, b)| a + b).collect();
    for &k in &sim.prescribed {
        grad[k] = 0.0;
        g_in[k] = 0.0;
        g_el[k] = 0.0;
    }
    let energy_total = e_in + e_el;
    Eval {
        energy: energy_total,
        finite: energy_total.is_finite() && grad.iter().all(|v| v.is_finite()),
        scale: norm(&g_in) + norm(&g_el),
        grad,
        hess,
    }
}

/// Assemble $\nabla^2g$ with the given per-sample Hessians (3n×3n, unreduced).
fn assemble(sim: &StepContext, sys: &NewtonSystem, hess: &[Mat9]) -> CscMatrix {
    let model = sim.model;
    let d = &sim.derived;
    let h = model.h;
    let mut vals = vec![0.0; sys.pattern.values.len()];
    let n = model.num_nodes();
    for i in 0..n {
        let v = d.mass[i] * (1.0 / (h * h) + d.node_alpha[i] / h);
        for c in 0..3 {
            vals[sys.diag[3 * i + c] as usize] += v;
        }
    }
    for g in &model.attachments {
        for &i in &g.nodes {
            for c in 0..3 {
                vals[sys.diag[3 * i + c] as usize] += g.stiffness;
            }
        }
    }
    // the sample blocks, gathered per stored value in sample order (parallel, the same
    // bits on any thread count)
    sys.gather.add_samples(
        model,
        hess,
        |s| d.beta[model.samples.elem[s]] * d.w_total(s) / h,
        &mut vals,
    );
    CscMatrix {
        values: vals,
        ..sys.pattern.clone()
    }
}

/// Filter the per-sample Hessians of a set of elements; returns (projected, modified)
/// element counts.
fn project_elements(
    sim: &StepContext,
    hess: &mut [Mat9],
    select: &[bool],
    done: &mut [bool],
    abs_mode: bool,
) -> (usize, usize) {
    let model = sim.model;
    let elem = &model.samples.elem;
    let res: Vec<Option<(Mat9, bool)>> = hess
        .par_iter()
        .enumerate()
        .map(|(s, hs)| {
            let e = elem[s];
            (select[e] && !done[e]).then(|| project_pd(hs, abs_mode))
        })
        .collect();
    let mut modified = vec![false; model.num_elements()];
    for (s, r) in res.into_iter().enumerate() {
        if let Some((m, ch)) = r {
            hess[s] = m;
            if ch {
                modified[elem[s]] = true;
            }
        }
    }
    let mut proj = 0;
    for e in 0..model.num_elements() {
        if select[e] && !done[e] {
            done[e] = true;
            proj += 1;
        }
    }
    (proj, modified.iter().filter(|&&m| m).count())
}

/// Factor with the regularisation fallback: `H + τI`, τ from $10^{-8}\max H_{ii}$, ×10.
fn factor_regularized(
    sys: &mut NewtonSystem,
    k: &CscMatrix,
    stats: &mut NewtonStats,
) -> Result<(), SolverError> {
    stats.factorizations += 1;
    match sys.factor(k, 0.0) {
        Ok(()) => return Ok(()),
        Err(SolverError::Linalg(LinalgError::NotPositiveDefinite { .. })) => {
            stats.indefinite_factorizations += 1;
        }
        Err(e) => return Err(e),
    }
    let dmax = (0..k.n)
        .filter_map(|j| k.position(j, j).map(|p| k.values[p].abs()))
        .fold(0.0, f64::max);
    let mut tau = 1e-8 * dmax;
    for _ in 0..20 {
        stats.regularizations += 1;
        stats.factorizations += 1;
        match sys.factor(k, tau) {
            Ok(()) => return Ok(()),
            Err(SolverError::Linalg(LinalgError::NotPositiveDefinite { .. })) => tau *= 10.0,
            Err(e) => return Err(e),
        }
    }
    Err(SolverError::Linalg(LinalgError::StillIndefinite {
        shifts: 20,
    }))
}

/// The element Hessian filter of one factorization.
struct FilterPolicy<'a> {
    filter: NewtonFilter,
    /// The trust-region filter's choice (clamp vs abs).
    tr_clamp: bool,
    /// PPN's progressive threshold δ (updated by the factorization).
    ppn_delta: &'a mut f64,
}

/// Build the (filtered) Hessian at the current per-sample Hessians and factor it, applying
/// the filter policy.
fn factor_filtered(
    sim: &StepContext,
    sys: &mut NewtonSystem,
    policy: FilterPolicy,
    (hess, grad): (&mut [Mat9], &[f64]),
    stats: &mut NewtonStats,
) -> Result<(), SolverError> {
    let FilterPolicy {
        filter,
        tr_clamp,
        ppn_delta,
    } = policy;
    let model = sim.model;
    let ne = model.num_elements();
    let mut done = vec![false; ne];
    let all = vec![true; ne];
    match filter {
        NewtonFilter::None => {
            let k = assemble(sim, sys, hess);
            factor_regularized(sys, &k, stats)
        }
        NewtonFilter::Clamp | NewtonFilter::Abs | NewtonFilter::TrustRegion => {
            let abs_mode = match filter {
                NewtonFilter::Clamp => false,
                NewtonFilter::Abs => true,
                _ => !tr_clamp,
            };
            let (p, m) = project_elements(sim, hess, &all, &mut done, abs_mode);
            stats.projected_elements += p;
            stats.modified_elements += m;
            let k = assemble(sim, sys, hess);
            factor_regularized(sys, &k, stats)
        }
        NewtonFilter::Ppn => {
            // assembled residual per element: ‖S^e g‖_∞
            let res: Vec<f64> = (0..ne)
                .map(|e| {
                    model
                        .element(e)
                        .iter()
                        .flat_map(|&i| (0..3).map(move |c| grad[3 * i + c].abs()))
                        .fold(0.0, f64::max)
                })
                .collect();
            let gmax = grad.iter().fold(0.0f64, |a, v| a.max(v.abs()));
            loop {
                let k = assemble(sim, sys, hess);
                stats.factorizations += 1;
                match sys.factor(&k, 0.0) {
                    Ok(()) => {
                        *ppn_delta *= PPN_BETA;
                        return Ok(());
                    }
                    Err(SolverError::Linalg(LinalgError::NotPositiveDefinite { .. })) => {
                        stats.indefinite_factorizations += 1;
                    }
                    Err(e) => return Err(e),
                }
                if done.iter().all(|&d| d) {
                    // fully projected and still indefinite (clamp floor too small): shift
                    return factor_regularized(sys, &k, stats);
                }
                if !ppn_delta.is_finite() {
                    *ppn_delta = PPN_ALPHA * gmax;
                }
                let pn = *ppn_delta <= PPN_EPS_DELTA;
                let select: Vec<bool> = res.iter().map(|&r| pn || r > *ppn_delta).collect();
                let (p, m) = project_elements(sim, hess, &select, &mut done, false);
                stats.projected_elements += p;
                stats.modified_elements += m;
                *ppn_delta *= PPN_ALPHA;
            }
        }
    }
}

/// KKT residuals of the contact-constrained step at $(x,\lambda)$: $\|\nabla g-J^T\lambda\|_F$,
/// $\|J^T\lambda\|_F$, $\|\Phi\|_\infty$, $\|\Phi\|_2$ (Φ of [`crate::contact::ncp`]).
struct Kkt {
    residual: f64,
    force: f64,
    phi_inf: f64,
    phi_2: f64,
}

fn kkt(
    sim: &StepContext,
    grad: &[f64],
    set: &ContactSet,
    lambda: &[f64],
    x: &[f64],
    fb: &FbParams,
) -> Kkt {
    let mut jtl = vec![0.0; grad.len()];
    set.add_jt(lambda, &mut jtl);
    sim.zero_prescribed(&mut jtl);
    let r: Vec<f64> = grad.iter().zip(&jtl).map(|(a, b)| a - b).collect();
    let delta = set.delta(x);
    let (mut phi_inf, mut phi_2) = (0.0f64, 0.0);
    for (j, l) in set.locals(&delta, lambda, fb).iter().enumerate() {
        for a in 0..set.rows(j).len() {
            phi_inf = phi_inf.max(l.phi[a].abs());
            phi_2 += l.phi[a] * l.phi[a];
        }
    }
    Kkt {
        residual: norm(&r),
        force: norm(&jtl),
        phi_inf,
        phi_2: phi_2.sqrt(),
    }
}

#[cfg(test)]
mod tests {
    use super::adjoint::solve_adjoint;
    use super::*;
    use crate::contact;
    use crate::linalg::LinearSolver;
    use crate::material::MaterialModel;
    use crate::model::{Model, ModelBuilder, SolverSettings};
    use crate::solver::Simulator;
    use nalgebra::SymmetricEigen;

    /// A 2-element box of `material` ("corotated" or "neohookean") and `element` ("tet4"
    /// or "hex8"), E = 1e5 Pa, nu = 0.4.
    fn sim_model(material: &str, element: &str) -> Model {
        let mesh = match element {
            "tet4" => crate::mesh::generate::box_tet([2, 1, 1], 0.1, [0.0; 3]),
            _ => crate::mesh::generate::box_hex([2, 1, 1], 0.1, [0.0; 3]),
        };
        let material = match material {
            "corotated" => MaterialModel::Corotated,
            _ => MaterialModel::Neohookean,
        };
        ModelBuilder::new(mesh)
            .material(material)
            .poisson_ratio(0.4)
            .build()
            .unwrap()
    }

    /// Element energy gradient and Hessian against central differences, for every
    /// material/energy pair, at a random large deformation.
    #[test]
    fn sample_gradient_and_hessian_match_finite_differences() {
        for (mat, el) in [
            ("corotated", "hex8"),
            ("neohookean", "tet4"),
            ("corotated", "tet4"),
        ] {
            let model = sim_model(mat, el);
            let sim = Simulator::new(&model, &SolverSettings::default()).unwrap();
            let u = crate::solver::adjoint::loss::seeded_uniform(11, 9);
            let f0 = Matrix3::from_fn(|r, c| (if r == c { 1.0 } else { 0.0 }) + 0.3 * u[3 * r + c]);
            for energy in [NewtonEnergy::Pd, NewtonEnergy::True] {
                let (_, p, h) = sample_terms(&sim, energy, 0, &f0, true);
                let eps = 1e-6;
                for c in 0..9 {
                    let mut fp = f0;
                    fp[(c / 3, c % 3)] += eps;
                    let mut fm = f0;
                    fm[(c / 3, c % 3)] -= eps;
                    let (ep, pp, _) = sample_terms(&sim, energy, 0, &fp, false);
                    let (em, pm, _) = sample_terms(&sim, energy, 0, &fm, false);
                    let fd_g = (ep - em) / (2.0 * eps);
                    let scale_p = p.norm() + 1.0;
                    assert!(
                        (fd_g - p[(c / 3, c % 3)]).abs() <= 1e-6 * scale_p,
                        "{mat} {energy:?} grad {c}: fd {fd_g} vs {}",
                        p[(c / 3, c % 3)]
                    );
                    let scale_h = h.norm() + 1.0;
                    for r in 0..9 {
                        let fd_h = (pp[(r / 3, r % 3)] - pm[(r / 3, r % 3)]) / (2.0 * eps);
                        assert!(
                            (fd_h - h[(r, c)]).abs() <= 1e-6 * scale_h,
                            "{mat} {energy:?} hess ({r},{c}): fd {fd_h} vs {}",
                            h[(r, c)]
                        );
                    }
                }
            }
        }
    }

    /// The assembled Hessian is the derivative of the assembled gradient (FD, damped scene).
    #[test]
    fn assembled_hessian_matches_finite_differences() {
        let model = sim_model("neohookean", "tet4");
        let sim = Simulator::new(&model, &SolverSettings::default()).unwrap();
        let n3 = model.x0.len();
        let u = crate::solver::adjoint::loss::seeded_uniform(3, 2 * n3);
        let x_t: Vec<f64> = (0..n3).map(|j| model.x0[j] + 0.01 * u[j]).collect();
        let x: Vec<f64> = (0..n3).map(|j| x_t[j] + 0.02 * u[n3 + j]).collect();
        let y = x_t.clone();
        let sys = NewtonSystem::new(sim.model, &sim.prescribed);
        for energy in [NewtonEnergy::Pd, NewtonEnergy::True] {
            let ev = evaluate(&sim, energy, &x, &y, &x_t, (true, true));
            let k = assemble(&sim, &sys, &ev.hess);
            let eps = 1e-6;
            for j in 0..n3 {
                let mut xp = x.clone();
                xp[j] += eps;
                let mut xm = x.clone();
                xm[j] -= eps;
                let gp = evaluate(&sim, energy, &xp, &y, &x_t, (false, true)).grad;
                let gm = evaluate(&sim, energy, &xm, &y, &x_t, (false, true)).grad;
                let fd_e = (evaluate(&sim, energy, &xp, &y, &x_t, (false, true)).energy
                    - evaluate(&sim, energy, &xm, &y, &x_t, (false, true)).energy)
                    / (2.0 * eps);
                assert!((fd_e - ev.grad[j]).abs() <= 1e-5 * (1.0 + ev.grad[j].abs()));
                for i in 0..n3 {
                    let fd = (gp[i] - gm[i]) / (2.0 * eps);
                    let kij = k.position(i, j).map(|p| k.values[p]).unwrap_or(0.0);
                    assert!(
                        (fd - kij).abs() <= 1e-5 * (1.0 + kij.abs()),
                        "{energy:?} ({i},{j}): fd {fd} vs {kij}"
                    );
                }
            }
        }
    }

    /// The muscle fibre term: stress = ∂E/∂F and Hessian = ∂stress/∂F against central
    /// differences, stretched (ℓ > a) and compressed (ℓ < a, indefinite) fibres.
    #[test]
    fn muscle_terms_match_finite_differences() {
        let u = crate::solver::adjoint::loss::seeded_uniform(5, 9);
        let m = nalgebra::Vector3::new(0.3, -0.5, 0.8).normalize();
        for (scale, a) in [(1.0, 0.8), (0.7, 1.1)] {
            let f0 = Matrix3::from_fn(|r, c| {
                scale * ((if r == c { 1.0 } else { 0.0 }) + 0.2 * u[3 * r + c])
            });
            let w = 3.0;
            let (_, p, h) = muscle_terms(&f0, &m, a, w, true);
            let eps = 1e-6;
            for c in 0..9 {
                let mut fp = f0;
                fp[(c / 3, c % 3)] += eps;
                let mut fm = f0;
                fm[(c / 3, c % 3)] -= eps;
                let (ep, pp, _) = muscle_terms(&fp, &m, a, w, false);
                let (em, pm, _) = muscle_terms(&fm, &m, a, w, false);
                let fd = (ep - em) / (2.0 * eps);
                assert!((fd - p[(c / 3, c % 3)]).abs() <= 1e-8 * (1.0 + p.norm()));
                for r in 0..9 {
                    let fd_h = (pp[(r / 3, r % 3)] - pm[(r / 3, r % 3)]) / (2.0 * eps);
                    assert!(
                        (fd_h - h[(r, c)]).abs() <= 1e-7 * (1.0 + h.norm()),
                        "({r},{c}): fd {fd_h} vs {}",
                        h[(r, c)]
                    );
                }
            }
        }
    }

    /// Objective, gradient and assembled Hessian with muscles and a compliant attachment:
    /// ∇g against central differences of g, ∇²g against central differences of ∇g.
    #[test]
    fn muscle_and_attachment_terms_of_the_objective_match_finite_differences() {
        let text = &crate::scene::overrides::fixture("scenes/unit/newton_muscle_attachment", &[]);
        let ls = crate::scene::load_str(text, std::path::Path::new("t.toml"), &[]).unwrap();
        let model = Model::from_scene(&ls).unwrap();
        assert!(!model.muscles.is_empty() && !model.attachments.is_empty());
        let sim = Simulator::new(&model, &ls.scene.solver).unwrap();
        let n3 = model.x0.len();
        let u = crate::solver::adjoint::loss::seeded_uniform(4, 2 * n3);
        let x_t: Vec<f64> = (0..n3).map(|j| model.x0[j] + 0.01 * u[j]).collect();
        let x: Vec<f64> = (0..n3).map(|j| x_t[j] + 0.03 * u[n3 + j]).collect();
        let y = x_t.clone();
        let sys = NewtonSystem::new(sim.model, &sim.prescribed);
        let ev = evaluate(&sim, NewtonEnergy::Pd, &x, &y, &x_t, (true, true));
        let k = assemble(&sim, &sys, &ev.hess);
        let eps = 1e-6;
        for j in 0..n3 {
            let mut xp = x.clone();
            xp[j] += eps;
            let mut xm = x.clone();
            xm[j] -= eps;
            let ep = evaluate(&sim, NewtonEnergy::Pd, &xp, &y, &x_t, (false, true));
            let em = evaluate(&sim, NewtonEnergy::Pd, &xm, &y, &x_t, (false, true));
            let fd_e = (ep.energy - em.energy) / (2.0 * eps);
            assert!(
                (fd_e - ev.grad[j]).abs() <= 1e-5 * (1.0 + ev.grad[j].abs()),
                "grad {j}: fd {fd_e} vs {}",
                ev.grad[j]
            );
            for i in 0..n3 {
                let fd = (ep.grad[i] - em.grad[i]) / (2.0 * eps);
                let kij = k.position(i, j).map(|p| k.values[p]).unwrap_or(0.0);
                assert!(
                    (fd - kij).abs() <= 1e-5 * (1.0 + kij.abs()),
                    "({i},{j}): fd {fd} vs {kij}"
                );
            }
        }
        // ∇g is A x − b(x) of the PD path (same energy), muscles included: with y = x_t
        // (v_t = 0, f_ext = 0) the constant part of b is c = M x_t/h² + D x_t/h
        let zeros = vec![0.0; n3];
        let c = sim.rhs_constant(&x_t, &zeros, &zeros);
        let mut warm = vec![nalgebra::Vector3::zeros(); model.num_samples()];
        let loc =
            crate::solver::stages::local::project_all(&model, &sim.derived, &x, &mut warm).unwrap();
        let mut bp = vec![0.0; n3];
        crate::solver::stages::local::scatter(&model, &loc.q, &mut bp);
        let mut ax = vec![0.0; n3];
        sim.system.apply_a(&x, &mut ax);
        // attachments: A holds k, b holds k p via f_ext (zero here), so Ax − c − b_p = ∇g
        let r: Vec<f64> = (0..n3).map(|j| ax[j] - c[j] - bp[j]).collect();
        let diff: f64 = r
            .iter()
            .zip(&ev.grad)
            .map(|(a, b)| (a - b).powi(2))
            .sum::<f64>()
            .sqrt();
        assert!(diff <= 1e-9 * norm(&ev.grad), "PD residual vs ∇g: {diff:e}");
    }

    /// The Delassus operator of an axis-coupled solver (three solves per node) equals the
    /// axis-decoupled one when the matrix does not couple the axes: the PD factor wrapped as
    /// "coupled" gives the same W and X λ.
    #[test]
    fn coupled_delassus_equals_decoupled_on_the_pd_matrix() {
        struct Coupled<'a>(&'a crate::linalg::GlobalSystem);
        impl LinearSolver for Coupled<'_> {
            fn num_nodes(&self) -> usize {
                self.0.num_nodes()
            }
            fn solve(&self, b: &[f64], d: &[f64], x: &mut [f64]) -> Result<(), LinalgError> {
                self.0.solve(b, d, x)
            }
            fn solve_homogeneous(&self, q: &[f64], z: &mut [f64]) -> Result<(), LinalgError> {
                self.0.solve_homogeneous(q, z)
            }
            fn apply_a(&self, x: &[f64], y: &mut [f64]) {
                self.0.apply_a(x, y)
            }
            fn axis_coupled(&self) -> bool {
                true
            }
        }
        let text = &crate::scene::overrides::fixture("scenes/unit/newton_tilted_plane", &[]);
        let ls = crate::scene::load_str(text, std::path::Path::new("t.toml"), &[]).unwrap();
        let model = Model::from_scene(&ls).unwrap();
        let sim = Simulator::new(&model, &ls.scene.solver).unwrap();
        let v0 = vec![0.0; model.x0.len()];
        let (set, _) = sim.contact_begin(0.0, &model.x0, &v0).expect("candidates");
        let d1 = contact::DenseDelassus::new(&set, &sim.system).unwrap();
        let d3 = contact::DenseDelassus::new(&set, &Coupled(&sim.system)).unwrap();
        let wn = d1.w.norm();
        assert!((&d1.w - &d3.w).norm() <= 1e-12 * wn, "W differs");
        let lam = crate::solver::adjoint::loss::seeded_uniform(2, set.nrows());
        let mut a = vec![0.0; model.x0.len()];
        let mut b = a.clone();
        d1.add_x(&set, &lam, &mut a);
        d3.add_x(&set, &lam, &mut b);
        let e: f64 = a
            .iter()
            .zip(&b)
            .map(|(p, q)| (p - q).powi(2))
            .sum::<f64>()
            .sqrt();
        assert!(e <= 1e-12 * norm(&a), "X lambda differs: {e:e}");
    }

    /// An indefinite exact Hessian (strongly expanded ν = 0.49 NH, large step, light body):
    /// the adjoint still solves the unshifted system (shifted factor + GMRES).
    #[test]
    fn indefinite_hessian_adjoint_solves_the_exact_system() {
        let text = &crate::scene::overrides::fixture("scenes/unit/newton_indefinite", &[]);
        let ls = crate::scene::load_str(text, std::path::Path::new("t.toml"), &[]).unwrap();
        let model = Model::from_scene(&ls).unwrap();
        let sim = Simulator::new(&model, &ls.scene.solver).unwrap();
        let x = model.x0.clone();
        let n3 = x.len();
        let g = crate::solver::adjoint::loss::seeded_uniform(9, n3);
        let cfg = BackwardConfig {
            rel_tol: 1e-8,
            abs_tol: 0.0,
            max_iterations: 2000,
            window: 5,
            gamma_max: 1e3,
            filter: HessianFilterMode::None,
            gmres_restart: 50,
            method: crate::model::AdjointMethod::FixedPoint,
            direct_after: 0,
            direct_first: false,
            device_direct_after: 0,
            device_gmres_restart: 50,
        };
        let lin0 = crate::solver::adjoint::backward::StepLinearization::new(&sim, &x, 0.0).unwrap();
        let (z, st) = solve_adjoint(&sim, &lin0, &x, &g, &cfg, 1).unwrap();
        assert_eq!(st.method, "newton_direct_shifted+gmres", "{st:?}");
        assert!(st.converged && st.relative_residual <= 1e-8, "{st:?}");
        // independent check with the matrix-free PD operator K = A − ΔA
        let lin = crate::solver::adjoint::backward::StepLinearization::new(&sim, &x, 0.0).unwrap();
        let mut kz = vec![0.0; n3];
        crate::solver::adjoint::backward::apply_k(&sim, &lin, &z, &mut kz).unwrap();
        let r: f64 = kz
            .iter()
            .zip(&g)
            .map(|(a, b)| (a - b).powi(2))
            .sum::<f64>()
            .sqrt();
        assert!(r <= 1e-7 * norm(&g), "residual {r:e}");
    }

    /// Clamp removes negative eigenvalues, abs mirrors them; an SPD matrix is unchanged.
    #[test]
    fn projection_is_psd_and_leaves_spd_alone() {
        let u = crate::solver::adjoint::loss::seeded_uniform(7, 81);
        let a = Mat9::from_fn(|r, c| u[9 * r + c]);
        let h = (a + a.transpose()) * 0.5;
        let (c, ch) = project_pd(&h, false);
        assert!(ch);
        let ev = SymmetricEigen::new(c).eigenvalues;
        assert!(ev.iter().all(|&l| l >= 0.0));
        let (ab, _) = project_pd(&h, true);
        let mut e1: Vec<f64> = SymmetricEigen::new(h)
            .eigenvalues
            .iter()
            .map(|v| v.abs())
            .collect();
        let mut e2: Vec<f64> = SymmetricEigen::new(ab)
            .eigenvalues
            .iter()
            .copied()
            .collect();
        e1.sort_by(f64::total_cmp);
        e2.sort_by(f64::total_cmp);
        for (p, q) in e1.iter().zip(&e2) {
            assert!((p - q).abs() < 1e-12);
        }
        let spd = a * a.transpose() + Mat9::identity();
        let (same, ch2) = project_pd(&spd, false);
        assert!(!ch2);
        assert!((same - spd).norm() < 1e-12);
    }
}
