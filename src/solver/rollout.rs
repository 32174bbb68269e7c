//! Rollout tape and the reverse sweep (spec §7.1).
//!
//! The tape keeps the state $x_t$ of every frame (and $v_0$); velocities are
//! $v_t=(x_t-x_{t-1})/h$, and everything else the backward needs (SVDs, projections, stretch
//! Jacobians, TR blend) is recomputed element-locally at $x_{t+1}$. Memory: $24n$ bytes
//! per frame ($3n$ f64) plus the per-step statistics.

use super::adjoint::error_estimate::{ErrorStep, ErrorSweep};
use super::backward::{solve_adjoint, StepLinearization};
use super::config::BackwardConfig;
use super::cotangent::{CotangentFrame, CotangentSource};
use super::error::SolverError;
use super::gradient::{accumulate_contact, accumulate_step, Gradients, StepStates};
use super::loss::Loss;
use super::offload::OffloadError;
use super::simulator::Simulator;
use super::stats::{AdjointStats, StepStats};
use super::timeloop::{run_system, PdState};
use crate::linalg::LinearSolver;
use crate::model::{HessianFilterMode, Motion, SolverMethod};
use nalgebra::{Matrix3, Vector3};
use std::collections::BTreeMap;

/// A forward rollout: the kept states, per-step statistics and the loss.
///
/// With `checkpoint_every = K` only frames `0, K, 2K, …` and the last frame are kept
/// (positions and velocities); the backward recomputes each segment from its checkpoint
/// (the PD step is Markovian). Memory: $48n$ bytes per kept frame plus $48n\,K$ for the
/// segment being differentiated, instead of $24n$ bytes for every frame with `K = 1`.
/// Recomputed states agree with the original ones to the forward tolerance.
///
/// A rollout starts at frame `start` (0 for a whole rollout from the model's initial state;
/// a later frame for [`forward_from`], whose steps see that frame's time) and ends at frame
/// `frames`; kept states and frame numbers are absolute, `steps[t - start]` is the step into
/// frame `t + 1`.
#[derive(Clone, Debug)]
pub struct Rollout {
    /// First frame (the given start state).
    pub start: usize,
    /// Last frame `T`.
    pub frames: usize,
    pub checkpoint_every: usize,
    /// `t → (x_t, v_t)` for the kept frames.
    pub kept: BTreeMap<usize, (Vec<f64>, Vec<f64>)>,
    pub steps: Vec<StepStats>,
    /// Loss accumulated frame by frame during the forward.
    pub loss: f64,
}

impl Rollout {
    /// Positions of the final frame.
    pub fn final_x(&self) -> &[f64] {
        &self.kept[&self.frames].0
    }
    /// Bytes held by the kept states.
    pub fn tape_bytes(&self) -> usize {
        self.kept
            .values()
            .map(|(x, v)| 8 * (x.len() + v.len()))
            .sum()
    }
    /// All states (only when every frame was kept).
    pub fn all_states(&self) -> Option<Vec<Vec<f64>>> {
        (self.kept.len() == self.frames + 1)
            .then(|| self.kept.values().map(|(x, _)| x.clone()).collect())
    }
}

/// One frame of a rollout, as the time loop reports it to its caller's sink.
#[derive(Clone, Copy)]
pub struct FrameEvent<'a, 'm> {
    /// The simulator after the step (its settings, statistics and accelerator counters).
    pub sim: &'a Simulator<'m>,
    /// Frame index `t` (the state after `t` steps; the start state is frame 0).
    pub frame: usize,
    /// Simulated time $t\,h$.
    pub time: f64,
    /// Positions $x_t$.
    pub x: &'a [f64],
    /// Velocities $v_t=(x_t-x_{t-1})/h$.
    pub v: &'a [f64],
    /// Positions $x_{t-1}$ of the frame before.
    pub x_prev: &'a [f64],
    /// The step's statistics.
    pub stats: &'a StepStats,
}

pub use super::timeloop::{Flow, RolloutError};

/// Where a rollout ended: the last frame taken and its state.
#[derive(Clone, Debug)]
pub struct RolloutEnd {
    pub frame: usize,
    pub x: Vec<f64>,
    pub v: Vec<f64>,
    /// The sink asked to stop before `to`.
    pub stopped: bool,
}

/// The PD rollout on the one time loop ([`super::timeloop::run_system`]): steps frames
/// `from + 1 ..= to` from the state `(x, v)` of frame `from`, with the step's velocity
/// $v_{t+1}=(x_{t+1}-x_t)/h$ (the implicit-Euler update, spec §3; `h` is the model's one time
/// step), and reports every frame to `sink`. The forward tape, the checkpointed backward's
/// recompute and `simulate`'s frame writer are sinks of this loop.
pub fn run<'m, E>(
    sim: &mut Simulator<'m>,
    from: usize,
    to: usize,
    (x, v): (Vec<f64>, Vec<f64>),
    mut sink: impl FnMut(FrameEvent<'_, 'm>) -> Result<Flow, E>,
) -> Result<RolloutEnd, RolloutError<E>> {
    let state = PdState {
        x,
        v,
        x_prev: Vec::new(),
    };
    let end = run_system(sim, from, to, state, |f| {
        sink(FrameEvent {
            sim: f.system,
            frame: f.frame,
            time: f.time,
            x: &f.state.x,
            v: &f.state.v,
            x_prev: &f.state.x_prev,
            stats: f.stats,
        })
    })?;
    Ok(RolloutEnd {
        frame: end.frame,
        x: end.state.x,
        v: end.state.v,
        stopped: end.stopped,
    })
}

/// A rollout whose sink cannot fail: the step's error is the only one.
fn run_infallible<'m>(
    sim: &mut Simulator<'m>,
    from: usize,
    to: usize,
    state: (Vec<f64>, Vec<f64>),
    sink: impl FnMut(FrameEvent<'_, 'm>) -> Flow,
) -> Result<RolloutEnd, SolverError> {
    let mut sink = sink;
    run::<std::convert::Infallible>(sim, from, to, state, |e| Ok(sink(e))).map_err(|e| match e {
        RolloutError::Step { error, .. } => error,
        RolloutError::Sink(never) => match never {},
    })
}

/// Run `frames` steps from the model's initial state, evaluating `loss` on the fly and
/// keeping every `checkpoint_every`-th state (1 = all).
pub fn forward(
    sim: &mut Simulator,
    frames: usize,
    checkpoint_every: usize,
    loss: &Loss,
) -> Result<Rollout, SolverError> {
    let state = (sim.model.x0.clone(), sim.model.v0.clone());
    forward_from(sim, 0, state, frames, checkpoint_every, loss)
}

/// Run from the state `(x, v)` of frame `start` to frame `frames` (absolute; the steps see
/// their frames' times: prescribed motions, muscle knots, moving obstacles), evaluating
/// `loss` on the fly and keeping frame `start`, every `checkpoint_every`-th frame after it
/// and the last. [`forward`] is the rollout from frame 0 and the model's initial state.
pub fn forward_from(
    sim: &mut Simulator,
    start: usize,
    state: (Vec<f64>, Vec<f64>),
    frames: usize,
    checkpoint_every: usize,
    loss: &Loss,
) -> Result<Rollout, SolverError> {
    let k = checkpoint_every.max(1);
    let h = sim.model.h;
    let mut kept = BTreeMap::new();
    kept.insert(start, state.clone());
    let mut steps = Vec::with_capacity(frames.saturating_sub(start));
    let mut total = 0.0;
    run_infallible(sim, start, frames, state, |e| {
        total += loss.frame_value(e.frame, frames, e.x, e.x_prev, h);
        if (e.frame - start).is_multiple_of(k) || e.frame == frames {
            kept.insert(e.frame, (e.x.to_vec(), e.v.to_vec()));
        }
        steps.push(e.stats.clone());
        Flow::Continue
    })?;
    Ok(Rollout {
        start,
        frames,
        checkpoint_every: k,
        kept,
        steps,
        loss: total,
    })
}

/// Result of the reverse sweep.
pub struct BackwardResult {
    /// Parameter gradients. `grads.x0`/`grads.v0` are $d\mathcal L/dx_0$, $d\mathcal L/dv_0$ of
    /// the model's initial state: for a rollout from frame 0 the start state's cotangents
    /// plus the prescribed values' dependence on $x_0$ (through their motions); from a later
    /// start frame only that dependence (the start state is not the model's).
    pub grads: Gradients,
    /// $d\mathcal L/dx_s$, $d\mathcal L/dv_s$ of the start state $(x_s, v_s)$ as given to the
    /// rollout, without the prescribed values' dependence on the model's $x_0$.
    pub x_start: Vec<f64>,
    pub v_start: Vec<f64>,
    /// One entry per step, last step first.
    pub adjoint: Vec<AdjointStats>,
    /// The gradients' first-order error from the adjoint residuals
    /// ([`backward_estimated`] with `estimate_error`).
    pub error: Option<ErrorSweep>,
}

impl BackwardResult {
    /// Steps whose adjoint solve did not converge.
    pub fn nonconverged(&self) -> Vec<usize> {
        self.adjoint
            .iter()
            .filter(|a| !a.converged)
            .map(|a| a.frame)
            .collect()
    }
}

/// States `x_c..=x_e` of a segment: from the tape, or recomputed from checkpoint `c`.
fn segment_states(
    sim: &mut Simulator,
    ro: &Rollout,
    c: usize,
    e: usize,
) -> Result<Vec<Vec<f64>>, SolverError> {
    if (c..=e).all(|t| ro.kept.contains_key(&t)) {
        return Ok((c..=e).map(|t| ro.kept[&t].0.clone()).collect());
    }
    let mut out = vec![ro.kept[&c].0.clone()];
    run_infallible(sim, c, e, ro.kept[&c].clone(), |ev| {
        out.push(ev.x.to_vec());
        Flow::Continue
    })?;
    Ok(out)
}

/// Reverse sweep over a rollout (spec §7.1–7.2), recomputing checkpointed segments, for the
/// cotangents of `source` on every frame (the scene's [`Loss`] is one source; see
/// [`super::cotangent`] for which $v_t$ they refer to). With $g_x$, $g_v$ the total
/// derivatives $d\mathcal L/dx_{t+1}$, $d\mathcal L/dv_{t+1}$, the step's adjoint solves
/// $Kz=g_x+g_v/h$ (Eq. 41); then $d\mathcal L/dx_t$ and $d\mathcal L/dv_t$ are the
/// propagated terms plus frame $t$'s own cotangents.
pub fn backward(
    sim: &mut Simulator,
    ro: &Rollout,
    source: &dyn CotangentSource,
    cfg: &BackwardConfig,
) -> Result<BackwardResult, SolverError> {
    backward_estimated(sim, ro, source, cfg, false)
}

/// [`backward`], and with `estimate_error` the first-order error of the gradients from the
/// adjoint solves' residuals alongside ([`super::adjoint::error_estimate`], in
/// [`BackwardResult::error`]).
pub fn backward_estimated(
    sim: &mut Simulator,
    ro: &Rollout,
    source: &dyn CotangentSource,
    cfg: &BackwardConfig,
    estimate_error: bool,
) -> Result<BackwardResult, SolverError> {
    let mut error = estimate_error.then(|| ErrorSweep::new(sim));
    let h = sim.model.h;
    let n = sim.model.num_nodes();
    let t_end = ro.frames;
    let t_start = ro.start;
    let mut grads = Gradients::zeros(sim);
    let mut adjoint = Vec::with_capacity(t_end);
    let mut d_presc: Vec<(usize, Vec<f64>)> = Vec::new();
    // gx = dL/dx_{t+1} (total), gv = dL/dv_{t+1} (total) while processing step t.
    let mut gx: Vec<f64> = vec![];
    let mut gv: Vec<f64> = vec![];
    let mut seg_end = t_end;
    while seg_end > t_start {
        let c = t_start + ((seg_end - 1 - t_start) / ro.checkpoint_every) * ro.checkpoint_every;
        let states = segment_states(sim, ro, c, seg_end)?;
        let v_c = ro.kept[&c].1.clone();
        if seg_end == t_end {
            let last = source.frame(&CotangentFrame {
                frame: t_end,
                last: t_end,
                x: &states[t_end - c],
                x_prev: &states[t_end - c - 1],
                h,
            });
            gx = last.x.unwrap_or_else(|| vec![0.0; 3 * n]);
            gv = last.v.unwrap_or_else(|| vec![0.0; 3 * n]);
        }
        for t in (c..seg_end).rev() {
            let frame = t + 1;
            let x_t = &states[t - c];
            let x_next = &states[t + 1 - c];
            let v_t = step_velocity(&states, (c, t), &v_c, h);
            // muscle activations of this step (segment recomputation moved the time)
            sim.derived.muscle_time = frame as f64 * h;
            // DiffPD glue contact: the step's active nodes were pinned at x_t (extra
            // Dirichlet DoFs); the adjoint is restricted to the other DoFs (z_C = 0).
            let step_stats = &ro.steps[t - t_start];
            let pinned = match (sim.config.method, &step_stats.diffpd_active) {
                (SolverMethod::Diffpd, Some(c)) if !c.is_empty() => Some(c.clone()),
                _ => None,
            };
            let saved = match &pinned {
                Some(c) => Some(super::diffpd::pin(sim, c)?),
                None => None,
            };
            let sim_ref: &Simulator = sim;
            let g: Vec<f64> = gx.iter().zip(&gv).map(|(a, b)| a + b / h).collect();
            let alpha = filter_alpha(cfg, step_stats);
            // a failure of the accelerator anywhere in this step's adjoint ends the backward
            let device = |error| SolverError::adjoint_offload(frame, error);
            let lin = StepLinearization::for_adjoint(sim_ref, x_next, alpha)
                .and_then(|l| l.with_contact(sim_ref, step_stats.contact_record.as_deref()))
                .map_err(device)?;
            let (z, mut st) = method_adjoint(sim_ref, &lin, x_next, &g, cfg, frame)?;
            st.alpha = alpha;
            if !sim_ref.prescribed.is_empty() {
                let kz = k_times(sim_ref, &lin, &z).map_err(device)?;
                let mut dp = vec![0.0; 3 * n];
                for &k in &sim_ref.prescribed {
                    dp[k] = g[k] - kz[k];
                }
                d_presc.push((frame, dp));
            }
            // x_{t+1,C} = x_{t,C}: dL/dx_{t,C} += (g − Kz)_C (the pinned rows are not equations)
            let mut pin_dx: Vec<(usize, f64)> = vec![];
            if let Some(c) = &pinned {
                let kz = k_times(sim_ref, &lin, &z).map_err(device)?;
                for &i in c {
                    for k in 3 * i..3 * i + 3 {
                        pin_dx.push((k, g[k] - kz[k]));
                    }
                }
            }
            let step = StepStates {
                frame,
                x_t,
                v_t: &v_t,
                x_next,
            };
            accumulate_step(sim_ref, &lin, step, &z, &mut grads).map_err(device)?;
            let contact =
                accumulate_contact(sim_ref, &lin, step, (&g, &z), &mut grads).map_err(device)?;
            if let Some(es) = error.as_mut() {
                let es_step = ErrorStep {
                    states: step,
                    g: &g,
                    z: &z,
                    other_system: lin.contact.is_some() || pinned.is_some(),
                    exact: sim_ref.config.method == SolverMethod::Newton
                        || st.method.contains("direct"),
                };
                es.step(sim_ref, &lin, cfg, es_step, propagate)
                    .map_err(device)?;
            }
            let (mut dx, mut dv) = propagate(sim_ref, &z, &gv);
            if t > t_start {
                let x_prev = if t > c {
                    states[t - 1 - c].clone()
                } else {
                    x_t.iter().zip(&v_c).map(|(a, b)| a - h * b).collect()
                };
                let own = source.frame(&CotangentFrame {
                    frame: t,
                    last: t_end,
                    x: x_t,
                    x_prev: &x_prev,
                    h,
                });
                for (out, add) in [(&mut dx, own.x), (&mut dv, own.v)] {
                    if let Some(add) = add {
                        out.iter_mut().zip(&add).for_each(|(a, b)| *a += b);
                    }
                }
            }
            gx = dx;
            gv = dv;
            if let Some(c) = contact {
                gx.iter_mut().zip(c.x_t).for_each(|(a, b)| *a += b);
                gv.iter_mut().zip(c.v_t).for_each(|(a, b)| *a += b);
            }
            for (k, v) in pin_dx {
                gx[k] += v;
            }
            adjoint.push(st);
            if let Some(sv) = saved {
                super::diffpd::unpin(sim, sv);
            }
        }
        seg_end = c;
    }
    // The start frame's own cotangents (the loss has none at frame 0).
    let start_state = &ro.kept[&t_start];
    if t_end == t_start {
        gx = vec![0.0; 3 * n];
        gv = vec![0.0; 3 * n];
    }
    let own = source.frame(&CotangentFrame {
        frame: t_start,
        last: t_end,
        x: &start_state.0,
        x_prev: &start_state.0,
        h,
    });
    for (out, add) in [(&mut gx, own.x), (&mut gv, own.v)] {
        if let Some(add) = add {
            out.iter_mut().zip(&add).for_each(|(a, b)| *a += b);
        }
    }
    // Prescribed values depend on the model's initial positions through the motion.
    let (x_start, v_start) = (gx.clone(), gv.clone());
    let mut x0g = if t_start == 0 { gx } else { vec![0.0; 3 * n] };
    for (frame, dp) in &d_presc {
        chain_prescribed(sim, *frame as f64 * h, dp, &mut x0g);
    }
    grads.x0 = x0g;
    grads.v0 = if t_start == 0 { gv } else { vec![0.0; 3 * n] };
    Ok(BackwardResult {
        grads,
        x_start,
        v_start,
        adjoint,
        error: error.map(|e| e.finish(t_start == 0)),
    })
}

/// Propagate the step's adjoint `z` to $(x_t, v_t)$ (Eq. 41): through
/// $y=x_t+hv_t+\dots$ and the $\tfrac1h\mathcal Dx_t$ term; `gv` is $d\mathcal L/dv_{t+1}$.
fn propagate(sim: &Simulator, z: &[f64], gv: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let h = sim.model.h;
    let n = sim.model.num_nodes();
    let d = &sim.derived;
    let mut kbz = vec![0.0; n];
    let mut dx = vec![0.0; 3 * n];
    for k in 0..3 {
        sim.kbeta.matvec_axis(z, k, &mut kbz);
        for i in 0..n {
            let j = 3 * i + k;
            dx[j] =
                -gv[j] / h + d.mass[i] * (1.0 / (h * h) + d.node_alpha[i] / h) * z[j] + kbz[i] / h;
        }
    }
    let dv: Vec<f64> = (0..3 * n).map(|j| d.mass[j / 3] * z[j] / h).collect();
    (dx, dv)
}

/// Blend α of the backward's Hessian filter for a step (spec Eqs. 23–29): fixed by the
/// filter, or the forward's trust-region choice for a converged step.
fn filter_alpha(cfg: &BackwardConfig, step: &StepStats) -> f64 {
    match cfg.filter {
        HessianFilterMode::None => 0.0,
        HessianFilterMode::Clamp => 0.5,
        HessianFilterMode::Abs => 1.0,
        HessianFilterMode::TrustRegion => match (&step.tr, step.converged) {
            (Some(tr), true) => tr.alpha,
            _ => 1.0,
        },
    }
}

/// $v_t$ of step `t` in the segment recomputed from checkpoint `c` (whose velocity is `v_c`).
fn step_velocity(states: &[Vec<f64>], (c, t): (usize, usize), v_c: &[f64], h: f64) -> Vec<f64> {
    if t == c {
        return v_c.to_vec();
    }
    states[t - c]
        .iter()
        .zip(&states[t - 1 - c])
        .map(|(a, b)| (a - b) / h)
        .collect()
}

/// The adjoint of one step by the method the forward used (the backward side of the
/// method seam, `solver::step`).
fn method_adjoint(
    sim: &Simulator,
    lin: &StepLinearization,
    x_next: &[f64],
    g: &[f64],
    cfg: &BackwardConfig,
    frame: usize,
) -> Result<(Vec<f64>, AdjointStats), SolverError> {
    let device = |error| SolverError::adjoint_offload(frame, error);
    Ok(match sim.config.method {
        SolverMethod::Diffphd | SolverMethod::Auto if direct_fallback_applies(sim, lin, cfg) => {
            adjoint_gmres_then_direct(sim, lin, x_next, g, cfg, frame)?
        }
        // `Auto` is resolved when the simulator is built; never seen here
        SolverMethod::Diffphd | SolverMethod::Auto => {
            solve_adjoint(sim, lin, g, cfg, frame).map_err(device)?
        }
        SolverMethod::Diffpd => super::diffpd::solve_adjoint(sim, lin, g, cfg, frame)?,
        SolverMethod::Newton => {
            super::newton::adjoint::solve_adjoint(sim, lin, x_next, g, cfg, frame)?
        }
    })
}

/// Whether a frame's adjoint may fall back to the direct solve (`backward.direct_after`):
/// the $A^{-1}$-preconditioned GMRES adjoint (`woodbury` or `gmres`) without contact rows,
/// with the exact Hessian (the backward filters change $\Delta A$ in ways the assembled
/// Hessian does not reproduce) and the PD energy. On the device path too: the factor of
/// $K$ is a host factorization, and a frame whose device GMRES hit the cap would otherwise
/// leave its adjoint unconverged (the armadillo on an H100, 2026-11-27: 900 iterations a
/// frame, gradient 5.3e-5 off the CPU's).
fn direct_fallback_applies(sim: &Simulator, lin: &StepLinearization, cfg: &BackwardConfig) -> bool {
    use crate::model::{AdjointMethod, NewtonEnergy};
    (cfg.direct_after > 0 || cfg.direct_first)
        && matches!(cfg.method, AdjointMethod::Woodbury | AdjointMethod::Gmres)
        && cfg.filter == HessianFilterMode::None
        && lin.contact.is_none()
        && sim.config.newton.energy == NewtonEnergy::Pd
}

/// After a frame whose adjoint needed the direct solve, the next frames go straight to it,
/// retrying GMRES first on every `DIRECT_RETRY`-th (armadillo: 151 wasted GMRES iterations
/// a frame before the factorization otherwise).
const DIRECT_RETRY: usize = 8;

/// GMRES on $Kz=g$ preconditioned by $A^{-1}$ for at most `direct_after` iterations; if it
/// has not converged, $K=A-\Delta A$ (the step's PD Hessian) is assembled and factored and
/// $z$ solved directly ([`super::newton::adjoint::solve_adjoint`]). The stats add both
/// phases; the method reads `"woodbury+direct"` (or `"gmres+direct"`) when the direct solve ran
/// after GMRES, `"direct"` when it ran alone (the streak rule of [`DIRECT_RETRY`]).
fn adjoint_gmres_then_direct(
    sim: &Simulator,
    lin: &StepLinearization,
    x_next: &[f64],
    g: &[f64],
    cfg: &BackwardConfig,
    frame: usize,
) -> Result<(Vec<f64>, AdjointStats), SolverError> {
    use std::sync::atomic::Ordering::Relaxed;
    let streak = sim.direct_streak.load(Relaxed);
    if cfg.direct_first {
        let (z, mut direct) =
            super::newton::adjoint::solve_adjoint(sim, lin, x_next, g, cfg, frame)?;
        direct.method = "direct".into();
        return Ok((z, direct));
    }
    if streak > 0 && !streak.is_multiple_of(DIRECT_RETRY) {
        // the previous frame's GMRES ran past the cap: K is alike from frame to frame, so
        // this one goes straight to the direct solve (GMRES is tried again every
        // DIRECT_RETRY frames)
        sim.direct_streak.store(streak + 1, Relaxed);
        let (z, mut direct) =
            super::newton::adjoint::solve_adjoint(sim, lin, x_next, g, cfg, frame)?;
        direct.method = "direct".into();
        return Ok((z, direct));
    }
    let (z, st) = if lin.device_step.is_some() && device_cap(cfg) > cfg.direct_after {
        device_adjoint(sim, lin, g, cfg, frame)
    } else {
        let capped = BackwardConfig {
            max_iterations: cfg.max_iterations.min(cfg.direct_after),
            ..cfg.clone()
        };
        solve_adjoint(sim, lin, g, &capped, frame)
    }
    .map_err(|error| SolverError::adjoint_offload(frame, error))?;
    if st.converged {
        sim.direct_streak.store(0, Relaxed);
        return Ok((z, st));
    }
    sim.direct_streak.store(streak + 1, Relaxed);
    let (z, mut direct) = super::newton::adjoint::solve_adjoint(sim, lin, x_next, g, cfg, frame)?;
    direct.method = format!("{}+direct", st.method);
    direct.iterations += st.iterations;
    direct.gmres_iterations += st.gmres_iterations;
    direct.seconds += st.seconds;
    Ok((z, direct))
}

/// The relative residual at which GMRES stands in for the direct solve
/// (`backward.device_direct_after`): on the 126k-tet box its gradient lands 1.0e-9 from the
/// direct adjoint's (CPU, 650 iterations), on the 1M-tet box 4.5e-10 (H100, 641).
pub const DIRECT_EQUIVALENT_TOL: f64 = 1e-10;

/// Iterations GMRES needs from relative residual `now` to `target`, projected from the
/// contraction per iteration between `before` (relative residual `iterations` earlier) and
/// `now`; `None` when the residual did not fall.
pub fn projected_iterations(before: f64, now: f64, iterations: usize, target: f64) -> Option<f64> {
    if now <= target {
        return Some(0.0);
    }
    let rate = (now / before).ln() / iterations.max(1) as f64;
    (rate < 0.0 && rate.is_finite()).then(|| (target / now).ln() / rate)
}

/// Iterations between the continuation's projections, and the window each reads its rate
/// from: the CPU path's restart cycle, whose rates were traced (docs/BENCHMARKS.md,
/// session 11).
pub const RATE_WINDOW: usize = 50;

/// The accelerator's cap on a frame's GMRES iterations (`backward.device_direct_after`,
/// within `max_iterations`).
fn device_cap(cfg: &BackwardConfig) -> usize {
    cfg.device_direct_after.min(cfg.max_iterations)
}

/// When the device's adjoint GMRES of one frame goes on (`device_adjoint`), read after
/// every iteration from its estimated relative residual $\rho_k$ (`history[k]`, $\rho_0=1$).
/// Up to `direct_after` iterations it is the CPU path's solve: stop once
/// $\rho_k\le\tfrac12\epsilon$ ($\epsilon$ = `backward.rel_tol` + `abs_tol`/‖g‖, GMRES's own
/// test). From `direct_after` on, every [`RATE_WINDOW`] iterations, go on only while the
/// last window's rate projects [`DIRECT_EQUIVALENT_TOL`] within the cap
/// ([`projected_iterations`]); otherwise the caller solves the frame directly. Reads
/// residuals, never clocks: deterministic.
pub struct DevicePolicy {
    normal: f64,
    direct_after: usize,
    cap: usize,
    history: Vec<f64>,
}

impl DevicePolicy {
    pub fn new(normal: f64, direct_after: usize, cap: usize) -> Self {
        DevicePolicy {
            normal,
            direct_after,
            cap,
            history: vec![1.0],
        }
    }

    /// Whether GMRES goes on after iteration `k` with estimate `rho`.
    pub fn go_on(&mut self, k: usize, rho: f64) -> bool {
        self.history.resize(k, rho);
        self.history.push(rho);
        if k <= self.direct_after && rho <= 0.5 * self.normal {
            return false;
        }
        if k < self.direct_after || !(k - self.direct_after).is_multiple_of(RATE_WINDOW) {
            return true;
        }
        let w = RATE_WINDOW.min(k);
        let need = projected_iterations(self.history[k - w], rho, w, DIRECT_EQUIVALENT_TOL);
        matches!(need, Some(n) if n <= self.cap.saturating_sub(k) as f64)
    }
}

/// On an accelerator, a frame that may fall back to the direct solve: one GMRES run (restart
/// `backward.device_gmres_restart`, toward [`DIRECT_EQUIVALENT_TOL`], at most
/// `device_direct_after` iterations) under [`DevicePolicy`], so that the Krylov space
/// GMRES built before `direct_after` is kept past it. Converged when it stopped by
/// `direct_after` within `rel_tol` (the method reads `woodbury` or `gmres`, as on the CPU) or
/// later within [`DIRECT_EQUIVALENT_TOL`] (`…+device`); unconverged, the caller solves
/// directly. With the device restart equal to `gmres_restart` and `direct_after` a multiple
/// of it, its iterates are those of a capped run continued cycle by cycle (the policy of
/// sessions 11–13).
fn device_adjoint(
    sim: &Simulator,
    lin: &StepLinearization,
    g: &[f64],
    cfg: &BackwardConfig,
    frame: usize,
) -> Result<(Vec<f64>, AdjointStats), OffloadError> {
    let t0 = std::time::Instant::now();
    let mut gf = g.to_vec();
    sim.zero_prescribed(&mut gf);
    let gnorm = super::simulator::norm(&gf);
    let target = cfg.rel_tol.min(DIRECT_EQUIVALENT_TOL);
    let normal = cfg.rel_tol
        + if gnorm > 0.0 {
            cfg.abs_tol / gnorm
        } else {
            0.0
        };
    let run = BackwardConfig {
        rel_tol: target,
        max_iterations: device_cap(cfg),
        gmres_restart: cfg.device_gmres_restart.max(1),
        ..cfg.clone()
    };
    let mut policy = DevicePolicy::new(normal, cfg.direct_after, run.max_iterations);
    let mut z = vec![0.0; gf.len()];
    let ks = super::backward::solve_gmres_monitored(sim, lin, &gf, &mut z, &run, &mut |k, rho| {
        policy.go_on(k, rho)
    })?;
    let within_cap = ks.iterations <= cfg.direct_after;
    let base = super::backward::gmres_method(cfg);
    let st = AdjointStats {
        frame,
        method: if within_cap {
            base.to_string()
        } else {
            format!("{base}+device")
        },
        iterations: ks.iterations,
        gmres_iterations: ks.iterations,
        converged: ks.converged || (within_cap && ks.relative_residual <= normal),
        relative_residual: ks.relative_residual,
        max_abs_z: z.iter().map(|v| v.abs()).fold(0.0, f64::max),
        filtered_samples: lin.filtered_samples,
        seconds: t0.elapsed().as_secs_f64(),
        ..Default::default()
    };
    Ok((z, st))
}

/// $Kz=(A-\Delta A)z$ on all DoFs (unreduced); fails where the accelerator's $\Delta A\,z$ does.
fn k_times(sim: &Simulator, lin: &StepLinearization, z: &[f64]) -> Result<Vec<f64>, OffloadError> {
    let n3 = z.len();
    let mut az = vec![0.0; n3];
    let mut daz = vec![0.0; n3];
    sim.system.apply_a(z, &mut az);
    super::backward::delta_a(sim, lin, z, &mut daz)?;
    Ok(az.iter().zip(&daz).map(|(a, d)| a - d).collect())
}

/// Add $(\partial\bar x_D(t)/\partial x_0)^T\,d\mathcal L/d\bar x_D(t)$ to `out`.
fn chain_prescribed(sim: &Simulator, t: f64, dp: &[f64], out: &mut [f64]) {
    let model = sim.model;
    // last group wins on shared DoFs, as in Model::dirichlet_values
    let mut owner = std::collections::HashMap::new();
    for (gi, g) in model.dirichlet.iter().enumerate() {
        for &i in &g.nodes {
            for c in 0..3 {
                if g.axes[c] {
                    owner.insert(3 * i + c, gi);
                }
            }
        }
    }
    for (gi, g) in model.dirichlet.iter().enumerate() {
        let mut gvec: Vec<Vector3<f64>> = Vec::with_capacity(g.nodes.len());
        for &i in &g.nodes {
            let mut v = Vector3::zeros();
            for c in 0..3 {
                if owner.get(&(3 * i + c)) == Some(&gi) {
                    v[c] = dp[3 * i + c];
                }
            }
            gvec.push(v);
        }
        match &g.motion {
            Motion::Fixed | Motion::Translate { .. } => {
                for (k, &i) in g.nodes.iter().enumerate() {
                    for c in 0..3 {
                        out[3 * i + c] += gvec[k][c];
                    }
                }
            }
            Motion::Rotate { axis, rate, center } => {
                let r: Matrix3<f64> = nalgebra::Rotation3::from_axis_angle(
                    &nalgebra::Unit::new_normalize(Vector3::from(*axis)),
                    rate * t,
                )
                .into_inner();
                let rt = r.transpose();
                let sum: Vector3<f64> = gvec.iter().sum();
                let m = g.nodes.len() as f64;
                for (k, &i) in g.nodes.iter().enumerate() {
                    let mut v = rt * gvec[k];
                    if center.is_none() {
                        // x̄_i = R(x0_i - c) + c, c = mean_j x0_j
                        v += (Matrix3::identity() - rt) * sum / m;
                    }
                    for c in 0..3 {
                        out[3 * i + c] += v[c];
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::projected_iterations;

    /// A steady contraction of 10× per 50 iterations from 1e-2 needs 400 more to reach 1e-10;
    /// a residual that did not fall projects nothing (the caller then solves directly).
    #[test]
    fn projection_reads_the_last_blocks_rate() {
        let need = projected_iterations(1.0, 1e-3, 150, 1e-10).unwrap();
        assert!((need - 350.0).abs() < 1e-9, "{need}");
        let need = projected_iterations(1e-1, 1e-2, 50, 1e-10).unwrap();
        assert!((need - 400.0).abs() < 1e-9, "{need}");
        assert_eq!(projected_iterations(1e-2, 1e-11, 50, 1e-10), Some(0.0));
        assert_eq!(projected_iterations(1e-2, 1e-2, 50, 1e-10), None);
        assert_eq!(projected_iterations(1e-2, 2e-2, 50, 1e-10), None);
        assert_eq!(projected_iterations(1e-2, f64::NAN, 50, 1e-10), None);
    }

    /// Where [`super::DevicePolicy`] stops a GMRES run whose estimates interpolate
    /// `points` (iteration, relative residual) log-linearly; `None` when it goes on through
    /// the last point. Cap 2000, `direct_after` 150, `rel_tol` 1e-6 (the defaults).
    fn stop_of(points: &[(usize, f64)]) -> Option<usize> {
        let mut policy = super::DevicePolicy::new(1e-6, 150, 2000);
        for w in points.windows(2) {
            let ((k0, r0), (k1, r1)) = (w[0], w[1]);
            for k in k0 + 1..=k1 {
                let t = (k - k0) as f64 / (k1 - k0) as f64;
                let rho = (r0.ln() + t * (r1.ln() - r0.ln())).exp();
                if !policy.go_on(k, rho) {
                    return Some(k);
                }
            }
        }
        None
    }

    /// The policy's decisions on GMRES residual histories traced on the CPU path at restart
    /// 50 (docs/BENCHMARKS.md, session 11), where its windows are the restart cycles. Named
    /// regression: the armadillo's frame 2 went on at 150 and stopped one cycle later (the
    /// average rate since the start projected within the cap; its last 50 iterations,
    /// 1.0e-2 → 7.3e-3, project 2,879 more), so it now stops at 150. Its frame 1 goes on one
    /// window and stops at 200. The 126k-tet box goes on until it converges. A run that
    /// reaches half of `rel_tol` before `direct_after` stops there, as GMRES would.
    #[test]
    fn window_rates_stop_the_armadillo_and_not_the_box() {
        let frame2 = [
            (0, 1.0),
            (50, 3.2e-2),
            (100, 1.0e-2),
            (150, 7.301e-3),
            (200, 5.198e-3),
        ];
        assert_eq!(stop_of(&frame2), Some(150));
        let frame1 = [
            (0, 1.0),
            (50, 1.7e-2),
            (100, 6.6e-3),
            (150, 3.7e-3),
            (200, 2.5e-3),
        ];
        assert_eq!(stop_of(&frame1), Some(200));
        let long_box = [
            (0, 1.0),
            (50, 6.3e-3),
            (100, 1.4e-3),
            (150, 3.559e-4),
            (200, 1.066e-4),
            (250, 2.833e-5),
            (300, 1.153e-5),
            (350, 2.803e-6),
            (400, 1.106e-6),
            (450, 1.630e-7),
            (500, 5.073e-8),
            (550, 4.707e-9),
            (600, 8.682e-10),
            (650, 1.1e-10),
        ];
        assert_eq!(stop_of(&long_box), None);
        assert_eq!(stop_of(&[(0, 1.0), (100, 1e-7)]), Some(91)); // 10^(-7k/100) <= 5e-7
                                                                 // past `direct_after`, reaching `rel_tol` is not enough: the target is 1e-10
        assert_eq!(stop_of(&[(0, 1.0), (150, 1e-5), (200, 1e-7)]), None);
    }
}
