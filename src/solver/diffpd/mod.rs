//! DiffPD baseline (issue 7; Du et al. 2021, DiffPD notes §1.4–1.5): Projective Dynamics
//! accelerated by L-BFGS (Liu et al. 2017) instead of Anderson, no trust region, no dual gate.
//!
//! Forward: minimise the PD objective
//! $g(x)=\tfrac1{2h^2}\|x-y\|_M^2+\tfrac1{2h}\|x-x_t\|^2_{\mathcal D}+E_{PD}(x)$ (the same energy as
//! [`crate::solver::adjoint::trust_region::pd_energy`]) with gradient $\nabla g=Ax-b(x)$ (one local step) by
//! L-BFGS with the initial inverse Hessian $H_0=A^{-1}$ (one prefactorized solve per
//! iteration), history `solver.lbfgs_history` (10), Armijo backtracking ($c=10^{-4}$, halving,
//! at most 10), a descent fallback to $-A^{-1}\nabla g$, and DiffPD's stop
//! $\|\nabla g_F\|\le\epsilon_r\|\tfrac{M}{h^2}y_F\|+\epsilon_a$ (`solver.rel_tol`, `abs_tol`).
//!
//! Muscle fibres (spec §3.5) are part of $A$, $b(x)$ and the energy ([`crate::solver::muscle::energy`]).
//! Contact against obstacles: DiffPD's own active-set "glue" contact ([`step`]); the backward
//! restricts the adjoint to the free DoFs of the step's active set ($z_C=0$, Alg. 5) and
//! routes $(g-Kz)_C$ to $x_{t,C}$ (the pinned positions); the set is held fixed (no
//! gradient through set changes, like DiffPD). Body–body contact is refused.
//!
//! Backward: DiffPD's quasi-Newton adjoint: minimise $s(z)=\tfrac12z^T(A-\Delta A)z-g^Tz$ by the
//! same L-BFGS ($H_0=A^{-1}$, Armijo) from $z=0$ until $\|(A-\Delta A)z-g\|\le\epsilon_r\|g\|+
//! \epsilon_a$ (`[backward]` tolerances). Where DiffPD falls back to a direct LDLᵀ of the exact
//! matrix (non-descent direction or iteration cap), this code falls back to
//! $A^{-1}$-preconditioned GMRES from the best iterate (recorded as `lbfgs+gmres`).
//!
//! `solver.diffpd_linear = "schwarz"` (the paper's MAS row, simplified): every $H_0=A^{-1}$
//! application above, forward and adjoint, is instead conjugate gradients with the two-level
//! additive Schwarz preconditioner (Nicolaides coarse space, 32-node Morton subdomains,
//! [`crate::linalg::schwarz`]), from 0 to the relative residual `solver.rel_tol` (forward) or
//! `backward.rel_tol` (adjoint), at most [`PCG_MAX_ITERATIONS`]; solves stopped at the cap
//! are counted in the step's / adjoint's `schwarz.not_converged`. The Cholesky factor is
//! still computed (and refactored per glue set by `pin`): the GMRES fallback uses it.

use crate::linalg::schwarz::{SchwarzSystem, SUBDOMAIN_NODES};
use crate::linalg::{AxisDirichlet, LinearSolver};
use crate::solver::adjoint::backward::{apply_k, solve_gmres, AdjointStart, StepLinearization};
use crate::solver::context::{norm, ContactOutcome, StepContext};
use crate::solver::records::config::BackwardConfig;
use crate::solver::records::error::SolverError;
use crate::solver::records::stats::{AdjointStats, PcgStats, StepStats};
use crate::solver::stages::local;
use nalgebra::Vector3;
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

pub mod stepper;

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Objective of [`lbfgs_minimize`]: value and gradient (prescribed entries zeroed).
pub type Objective<'a> = dyn FnMut(&[f64]) -> Result<(f64, Vec<f64>), SolverError> + 'a;

/// The initial inverse Hessian $H_0$ of [`lbfgs_minimize`] applied to a vector (a solve with
/// the PD factor, which may fail).
pub type InitialInverse<'a> = dyn Fn(&[f64]) -> Result<Vec<f64>, SolverError> + 'a;

/// Outcome of one L-BFGS minimisation.
pub struct LbfgsOutcome {
    pub iterations: usize,
    pub converged: bool,
    pub line_search_halvings: usize,
    /// The last direction was not a descent direction even after the $H_0$ fallback.
    pub stalled: bool,
}

/// L-BFGS (two-loop recursion, initial inverse Hessian `h0`) on `f`, with Armijo
/// backtracking. `f(x)` returns (value, gradient with prescribed entries zeroed);
/// `done(grad)` is the stopping test. At most `max_ls` halvings per iteration.
pub fn lbfgs_minimize(
    x: &mut Vec<f64>,
    f: &mut Objective,
    h0: &InitialInverse,
    done: &dyn Fn(&[f64]) -> bool,
    history: usize,
    max_iterations: usize,
    max_ls: usize,
) -> Result<LbfgsOutcome, SolverError> {
    let mut out = LbfgsOutcome {
        iterations: 0,
        converged: false,
        line_search_halvings: 0,
        stalled: false,
    };
    let mut mem: VecDeque<(Vec<f64>, Vec<f64>, f64)> = VecDeque::with_capacity(history);
    let (mut fx, mut g) = f(x)?;
    loop {
        if done(&g) {
            out.converged = true;
            return Ok(out);
        }
        if out.iterations >= max_iterations {
            return Ok(out);
        }
        // two-loop recursion
        let mut q = g.clone();
        let mut alphas = Vec::with_capacity(mem.len());
        for (s, y, rho) in mem.iter().rev() {
            let a = rho * dot(s, &q);
            q.iter_mut().zip(y).for_each(|(qi, yi)| *qi -= a * yi);
            alphas.push(a);
        }
        let mut r = h0(&q)?;
        for ((s, y, rho), a) in mem.iter().zip(alphas.iter().rev()) {
            let b = rho * dot(y, &r);
            r.iter_mut().zip(s).for_each(|(ri, si)| *ri += (a - b) * si);
        }
        let mut d: Vec<f64> = r.iter().map(|v| -v).collect();
        let mut slope = dot(&g, &d);
        if slope.is_nan() || slope >= 0.0 {
            mem.clear();
            d = h0(&g)?.iter().map(|v| -v).collect();
            slope = dot(&g, &d);
            if slope.is_nan() || slope >= 0.0 {
                out.stalled = true;
                return Ok(out);
            }
        }
        let mut t = 1.0;
        let mut accepted = None;
        for ls in 0..=max_ls {
            let trial: Vec<f64> = x.iter().zip(&d).map(|(a, b)| a + t * b).collect();
            let (ft, gt) = f(&trial)?;
            // accept at the cap too (DiffPD: max_ls_iter then take the step)
            let roundoff = -slope * t <= 1e-13 * (fx.abs() + 1.0);
            if (ft.is_finite() && (ft <= fx + 1e-4 * t * slope || roundoff)) || ls == max_ls {
                if ft.is_finite() {
                    accepted = Some((trial, ft, gt));
                }
                break;
            }
            t *= 0.5;
            out.line_search_halvings += 1;
        }
        let Some((xn, fnew, gn)) = accepted else {
            out.stalled = true;
            return Ok(out);
        };
        let s: Vec<f64> = xn.iter().zip(x.iter()).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = gn.iter().zip(&g).map(|(a, b)| a - b).collect();
        let sy = dot(&s, &y);
        if sy > 1e-300 {
            if mem.len() == history {
                mem.pop_front();
            }
            mem.push_back((s, y, 1.0 / sy));
        }
        *x = xn;
        fx = fnew;
        g = gn;
        out.iterations += 1;
    }
}

/// Iteration cap of one PCG solve of `solver.diffpd_linear = "schwarz"`.
pub const PCG_MAX_ITERATIONS: usize = 1000;

/// The Schwarz system of `sim`'s current matrix and prescribed DoFs (built at first use and
/// whenever the prescribed DoFs changed, e.g. glue-contact nodes pinned by [`pin`]), or
/// `None` with `solver.diffpd_linear = "cholesky"`.
fn schwarz_system(sim: &StepContext) -> Result<Option<Arc<SchwarzSystem>>, SolverError> {
    if sim.config.diffpd_linear != crate::model::DiffpdLinear::Schwarz {
        return Ok(None);
    }
    // a poisoned lock only means another thread panicked while building; rebuild
    let mut cache = sim.schwarz.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((key, s)) = cache.as_ref() {
        if *key == sim.prescribed {
            return Ok(Some(s.clone()));
        }
    }
    let sets = [0, 1, 2].map(|d| AxisDirichlet {
        nodes: sim.system.prescribed_nodes(d).to_vec(),
    });
    let s = Arc::new(SchwarzSystem::new(
        sim.system.a.clone(),
        &sets,
        &sim.model.rest,
        SUBDOMAIN_NODES,
    )?);
    *cache = Some((sim.prescribed.clone(), s.clone()));
    Ok(Some(s))
}

/// $z=A_{FF}^{-1}q$ ($z_D=0$): the Cholesky solve, or PCG with `schwarz` to `rel_tol`
/// (counted in `pcg`).
fn apply_inverse(
    sim: &StepContext,
    schwarz: Option<&SchwarzSystem>,
    rel_tol: f64,
    pcg: &Cell<PcgStats>,
    q: &[f64],
) -> Result<Vec<f64>, SolverError> {
    let mut z = vec![0.0; q.len()];
    match schwarz {
        Some(s) => {
            let o = s.solve_homogeneous(q, &mut z, rel_tol, PCG_MAX_ITERATIONS);
            let mut st = pcg.get();
            st.add(&o);
            pcg.set(st);
        }
        None => sim.system.solve_homogeneous(q, &mut z)?,
    }
    Ok(z)
}

/// L-BFGS minimisation of the PD objective of one step from `x` (prescribed entries already
/// set; they stay fixed). Returns the outcome, the local-step seconds and the PCG solves of
/// `solver.diffpd_linear = "schwarz"`.
fn minimize(
    simr: &StepContext,
    frame: usize,
    x_t: &[f64],
    y: &[f64],
    c: &[f64],
    thresh: f64,
    x: &mut Vec<f64>,
) -> Result<(LbfgsOutcome, f64, Option<PcgStats>), SolverError> {
    let model = simr.model;
    let mut warm = vec![Vector3::zeros(); model.num_samples()];
    let mut evals = 0usize;
    let mut t_local = 0.0;
    let mut f = |xx: &[f64]| -> Result<(f64, Vec<f64>), SolverError> {
        simr.cancel
            .poll(crate::cancel::Stage::DiffPd, evals)
            .map_err(|c| SolverError::cancelled(frame, c))?;
        let tl = Instant::now();
        evals += 1;
        let loc = local::project_all(model, &simr.derived, xx, &mut warm).map_err(|e| {
            SolverError::NonFiniteLocal {
                frame,
                iteration: evals,
                element: e.element,
            }
        })?;
        let mut bp = vec![0.0; xx.len()];
        local::scatter(model, &loc.q, &mut bp);
        let mut g = vec![0.0; xx.len()];
        simr.system.apply_a(xx, &mut g);
        for j in 0..g.len() {
            g[j] -= c[j] + bp[j];
        }
        for &k in &simr.prescribed {
            g[k] = 0.0;
        }
        // the PD objective whose gradient is Ax − b(x): elastic + muscle fibres + the
        // quadratic part of compliant attachments (their linear part is in y)
        let pd = crate::solver::adjoint::trust_region::pd_energy(simr, xx, y, x_t)
            .map_err(|error| SolverError::offload(frame, evals, error))?;
        let e = pd
            + crate::solver::muscle::energy(model, xx, simr.derived.muscle_time)
            + crate::contact::attachment::quadratic_energy(&model.attachments, xx);
        t_local += tl.elapsed().as_secs_f64();
        Ok((e, g))
    };
    let schwarz = schwarz_system(simr)?;
    let pcg = Cell::new(PcgStats::default());
    let h0 = |q: &[f64]| apply_inverse(simr, schwarz.as_deref(), simr.config.gate.rel, &pcg, q);
    let done = |g: &[f64]| norm(g) <= thresh;
    let out = lbfgs_minimize(
        x,
        &mut f,
        &h0,
        &done,
        simr.config.lbfgs_history,
        simr.config.max_iterations,
        10,
    )?;
    Ok((out, t_local, schwarz.map(|_| pcg.get())))
}

/// Active-set iterations of DiffPD's glue contact (diffpd-notes §1.9, Alg. 3; the
/// reference code's `max_contact_iter`).
pub const MAX_CONTACT_ITERATIONS: usize = 5;

/// One implicit-Euler step of DiffPD's L-BFGS-accelerated PD. With obstacles (`[contact]
/// model = "ncp"`): DiffPD's own contact (diffpd-notes §1.9, Alg. 3, the reference code's
/// "glue" variant): active nodes are pinned at their start-of-step positions as extra
/// Dirichlet DoFs; from the previous step's active set, at most
/// [`MAX_CONTACT_ITERATIONS`] times: solve, compute $r=\nabla g(x)$ (the reaction,
/// $\tfrac1{h^2}M(x-y)-f_{int}$, Eq. 29a) at the active nodes, keep an active node iff
/// $n^Tr\ge0$, add an inactive candidate iff $\phi(x)<0$ (obstacles at $t+h$); stop when the
/// set repeats (also on a 2-cycle). Penalty contact is the explicit force, as in diffphd.
pub fn step(
    sim: &mut StepContext,
    previous_active: &[usize],
    frame: usize,
    x_t: &[f64],
    v_t: &[f64],
) -> Result<(Vec<f64>, StepStats), SolverError> {
    let t0 = Instant::now();
    let model = sim.model;
    let h = model.h;
    sim.derived.muscle_time = frame as f64 * h;
    let t_start = (frame - 1) as f64 * h;
    let mut f_ext = model.external_force(t_start, &sim.derived.mass);
    let penalty_force = sim.penalty_forces(t_start, x_t, v_t, &mut f_ext);
    let c = sim.rhs_constant(x_t, v_t, &f_ext);
    let m = &sim.derived.mass;
    let y = sim.inertial_target(x_t, v_t, &f_ext);
    let mut xd = model.dirichlet_values(frame as f64 * h);
    let mut my: Vec<f64> = (0..y.len()).map(|j| m[j / 3] * y[j] / (h * h)).collect();
    sim.zero_prescribed(&mut my);
    let thresh = sim.config.gate.rel * norm(&my) + sim.config.gate.abs;
    let glue = !model.obstacles.is_empty() && penalty_force.is_none();
    let t_end = frame as f64 * h;
    let mut active: Vec<usize> = if glue {
        previous_active.to_vec()
    } else {
        vec![]
    };
    let mut history: Vec<Vec<usize>> = vec![];
    let mut iterations = 0;
    let mut lbfgs_converged;
    let mut t_local = 0.0;
    let mut x;
    // ∇g(x) of the last solved set: its values at the active nodes are the contact forces
    let mut r = vec![];
    let mut set_iterations = 0;
    let mut pcg: Option<PcgStats> = None;
    loop {
        set_iterations += 1;
        for &i in &active {
            for d in 0..3 {
                xd[3 * i + d] = x_t[3 * i + d];
            }
        }
        let saved = if active.is_empty() {
            None
        } else {
            Some(sim.pin_nodes(&active)?)
        };
        x = x_t.to_vec();
        sim.impose_prescribed(&mut x, &xd);
        let res = minimize(sim, frame, x_t, &y, &c, thresh, &mut x);
        if let Some(sv) = saved {
            sim.unpin_nodes(sv);
        }
        let (out, tl, p) = res?;
        if let Some(p) = p {
            pcg.get_or_insert_with(PcgStats::default).merge(&p);
        }
        iterations += out.iterations;
        lbfgs_converged = out.converged;
        t_local += tl;
        if !x.iter().all(|v| v.is_finite()) {
            return Err(SolverError::Diverged {
                frame,
                iteration: iterations,
                element: None,
            });
        }
        if !glue {
            break;
        }
        // r = ∇g(x) = A x − c − b_p(x) at the active nodes (the contact force)
        r = objective_gradient(sim, &c, &x).map_err(|element| SolverError::NonFiniteLocal {
            frame,
            iteration: iterations,
            element,
        })?;
        let next = next_active_set(sim, &active, &x, &r, t_end);
        let repeat = next == active || (history.len() >= 2 && history[history.len() - 2] == next);
        if repeat || set_iterations >= MAX_CONTACT_ITERATIONS {
            // keep the solution of the last solved set, `active`
            break;
        }
        history.push(active);
        active = next;
    }
    let mut stats = StepStats {
        iterations,
        converged: lbfgs_converged,
        time_local: t_local,
        time_other: t0.elapsed().as_secs_f64() - t_local,
        schwarz: pcg,
        ..Default::default()
    };
    if glue {
        record_glue(sim, active, (&x, &r), t_end, &mut stats);
    } else if penalty_force.is_some() {
        let outcome = ContactOutcome {
            ncp: None,
            penalty_force,
            stats: crate::contact::ContactStats::default(),
        };
        sim.contact_finish(frame, outcome, (x_t, v_t), &mut x, &mut stats);
    }
    if !stats.converged && sim.config.on_nonconvergence == crate::model::OnNonConvergence::Error {
        return Err(SolverError::NotConverged {
            frame,
            iterations,
            position: f64::NAN,
            projection: f64::NAN,
        });
    }
    Ok((x, stats))
}

/// Position of node `i` in a node-major vector.
fn node(x: &[f64], i: usize) -> Vector3<f64> {
    Vector3::new(x[3 * i], x[3 * i + 1], x[3 * i + 2])
}

/// $\nabla g(x)=Ax-c-b_p(x)$ of the step objective (all DoFs); `Err(element)` on a
/// non-finite local step.
fn objective_gradient(sim: &StepContext, c: &[f64], x: &[f64]) -> Result<Vec<f64>, usize> {
    let model = sim.model;
    let mut warm = vec![Vector3::zeros(); model.num_samples()];
    let loc = local::project_all(model, &sim.derived, x, &mut warm).map_err(|e| e.element)?;
    let mut bp = vec![0.0; x.len()];
    local::scatter(model, &loc.q, &mut bp);
    let mut r = vec![0.0; x.len()];
    sim.system.apply_a(x, &mut r);
    for j in 0..r.len() {
        r[j] -= c[j] + bp[j];
    }
    Ok(r)
}

/// DiffPD's glue active set after a solve at `x` (sorted): active nodes whose contact
/// force `r` pushes out of the nearest obstacle stay, inactive nodes that penetrate it at
/// `t_end` join.
fn next_active_set(
    sim: &StepContext,
    active: &[usize],
    x: &[f64],
    r: &[f64],
    t_end: f64,
) -> Vec<usize> {
    // nearest obstacle's signed distance and normal at the end-of-step pose
    let query = |p: &Vector3<f64>| {
        sim.model
            .obstacles
            .iter()
            .map(|o| o.query(p, t_end))
            .min_by(|a, b| a.dist.total_cmp(&b.dist))
            .map(|q| (q.dist, q.normal))
    };
    let mut next: Vec<usize> = vec![];
    for &i in &sim.contact_nodes {
        let Some((dist, n)) = query(&node(x, i)) else {
            continue;
        };
        if active.binary_search(&i).is_ok() {
            if n.dot(&node(r, i)) >= 0.0 {
                next.push(i);
            }
        } else if dist < 0.0 {
            next.push(i);
        }
    }
    next.sort_unstable();
    next
}

/// Record the glue contact of a solved step: the reaction (∇g at the nodes of the solved
/// set `active`, zero elsewhere) as the step's contact record, its statistics, and the set
/// (the warm start of the next step, kept by [`stepper::DiffpdStepper`], and what the
/// backward pins).
fn record_glue(
    sim: &StepContext,
    active: Vec<usize>,
    (x, r): (&[f64], &[f64]),
    t_end: f64,
    stats: &mut StepStats,
) {
    let model = sim.model;
    let mut reaction = vec![0.0; x.len()];
    for &i in &active {
        reaction[3 * i..3 * i + 3].copy_from_slice(&r[3 * i..3 * i + 3]);
    }
    let cstats = crate::contact::ContactStats {
        candidates: sim.contact_nodes.len(),
        active: active.len(),
        sticking: active.len(),
        max_penetration: crate::contact::max_penetration(
            &model.obstacles,
            &model.boundary_nodes,
            x,
            t_end,
        ),
        max_lambda: (0..reaction.len() / 3)
            .map(|i| node(&reaction, i).norm())
            .fold(0.0, f64::max),
        ..Default::default()
    };
    stats.contact = Some(cstats);
    stats.contact_record = Some(Box::new(crate::contact::ContactRecord {
        penalty_forces: Some(reaction),
        ..Default::default()
    }));
    stats.diffpd_active = Some(active);
}

/// DiffPD's adjoint of one step: L-BFGS on $s(z)=\tfrac12z^TKz-g^Tz$, $K=A-\Delta A$, with
/// $H_0=A^{-1}$; GMRES fallback.
pub fn solve_adjoint(
    sim: &StepContext,
    lin: &StepLinearization,
    g: &[f64],
    cfg: &BackwardConfig,
    frame: usize,
) -> Result<(Vec<f64>, AdjointStats), SolverError> {
    let device = |error| SolverError::adjoint_offload(frame, error);
    let n3 = g.len();
    let start = AdjointStart::new(sim, g, frame, "lbfgs");
    if let Some(answer) = start.zero_answer() {
        return Ok(answer);
    }
    let AdjointStart {
        t0,
        g: gf,
        gnorm,
        mut stats,
    } = start;
    let mut z = vec![0.0; n3];
    let mut evals = 0;
    let mut f = |zz: &[f64]| -> Result<(f64, Vec<f64>), SolverError> {
        sim.cancel
            .poll(crate::cancel::Stage::Adjoint, evals)
            .map_err(|c| SolverError::cancelled(frame, c))?;
        evals += 1;
        let mut kz = vec![0.0; n3];
        apply_k(sim, lin, zz, &mut kz).map_err(device)?;
        let val = 0.5 * dot(zz, &kz) - dot(&gf, zz);
        let grad: Vec<f64> = kz.iter().zip(&gf).map(|(a, b)| a - b).collect();
        Ok((val, grad))
    };
    let schwarz = schwarz_system(sim)?;
    let pcg = Cell::new(PcgStats::default());
    let h0 = |q: &[f64]| apply_inverse(sim, schwarz.as_deref(), cfg.rel_tol, &pcg, q);
    let thresh = cfg.rel_tol * gnorm + cfg.abs_tol;
    let done = |r: &[f64]| norm(r) <= thresh;
    // the quadratic objective fails only where K z or A^{-1} does
    let out = lbfgs_minimize(&mut z, &mut f, &h0, &done, 10, cfg.max_iterations, 10)?;
    stats.iterations = out.iterations;
    stats.converged = out.converged;
    stats.schwarz = schwarz.map(|_| pcg.get());
    if !out.converged {
        let st = solve_gmres(sim, lin, &gf, &mut z, cfg).map_err(device)?;
        stats.method = "lbfgs+gmres".into();
        stats.gmres_iterations = st.iterations;
        stats.converged = st.converged;
    }
    let mut kz = vec![0.0; n3];
    apply_k(sim, lin, &z, &mut kz).map_err(device)?;
    stats.relative_residual =
        norm(&kz.iter().zip(&gf).map(|(a, b)| a - b).collect::<Vec<_>>()) / gnorm;
    stats.max_abs_z = z.iter().map(|v| v.abs()).fold(0.0, f64::max);
    stats.filtered_samples = lin.filtered_samples;
    stats.seconds = t0.elapsed().as_secs_f64();
    Ok((z, stats))
}
