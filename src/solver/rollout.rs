//! Rollout tape and the reverse sweep (spec §7.1).
//!
//! The tape keeps the state $x_t$ of every frame (and $v_0$); velocities are
//! $v_t=(x_t-x_{t-1})/h$, and everything else the backward needs (SVDs, projections, stretch
//! Jacobians, TR blend) is recomputed element-locally at $x_{t+1}$. Memory: $24n$ bytes
//! per frame ($3n$ f64) plus the per-step statistics.

use super::adjoint::backward::StepLinearization;
use super::adjoint::cotangent::{CotangentFrame, CotangentSource};
use super::adjoint::error_estimate::{ErrorStep, ErrorSweep};
use super::adjoint::gradient::{accumulate_contact, accumulate_step, Gradients, StepStates};
use super::adjoint::loss::Loss;
use super::context::StepContext;
use super::offload::OffloadError;
use super::records::config::BackwardConfig;
use super::records::error::SolverError;
use super::records::stats::{AdjointStats, StepStats};
use super::simulator::Simulator;
use super::timeloop::{run_system, PdState};
use crate::linalg::LinearSolver;
use crate::model::{HessianFilterMode, Motion};
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
    sim.stepper.begin_rollout(start);
    run_infallible(sim, start, frames, state, |e| {
        total += loss.frame_value(e.frame, frames, e.x, e.x_prev, h);
        if loss.has_force_terms() {
            total += loss.force_value(e.frame, e.stats.contact_record.as_deref());
        }
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
/// [`super::adjoint::cotangent`] for which $v_t$ they refer to). With $g_x$, $g_v$ the total
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
            // nodes the step held at x_t (DiffPD's glue contact: extra Dirichlet DoFs); the
            // adjoint is restricted to the other DoFs (z_C = 0)
            let step_stats = &ro.steps[t - t_start];
            let pinned = sim.stepper().pinned_nodes(step_stats);
            let saved = match &pinned {
                Some(c) => Some(sim.pin_nodes(c)?),
                None => None,
            };
            let sim_ref: &Simulator = sim;
            let stepper = sim_ref.stepper();
            let g: Vec<f64> = gx.iter().zip(&gv).map(|(a, b)| a + b / h).collect();
            let alpha = filter_alpha(cfg, step_stats);
            // a failure of the accelerator anywhere in this step's adjoint ends the backward
            let device = |error| SolverError::adjoint_offload(frame, error);
            let mut lin = stepper
                .linearize(sim_ref, x_next, alpha, step_stats)
                .map_err(device)?;
            // a loss on this step's contact forces (a load cell): the contact rows' own
            // right-hand side g_λ (crate::contact::adjoint)
            if let (Some(c), Some(rec)) = (lin.contact.as_mut(), &step_stats.contact_record) {
                let force = source.contact_force(frame, rec);
                if !force.is_empty() {
                    c.set_force_cotangent(force);
                }
            }
            let (z, mut st) = stepper.adjoint(sim_ref, &lin, (x_next, &g), cfg, frame)?;
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
                    exact: stepper.adjoint_is_exact(&st),
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
                sim.unpin_nodes(sv);
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
fn propagate(sim: &StepContext, z: &[f64], gv: &[f64]) -> (Vec<f64>, Vec<f64>) {
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

/// $Kz=(A-\Delta A)z$ on all DoFs (unreduced); fails where the accelerator's $\Delta A\,z$ does.
fn k_times(sim: &Simulator, lin: &StepLinearization, z: &[f64]) -> Result<Vec<f64>, OffloadError> {
    let n3 = z.len();
    let mut az = vec![0.0; n3];
    let mut daz = vec![0.0; n3];
    sim.system.apply_a(z, &mut az);
    super::adjoint::backward::delta_a(sim, lin, z, &mut daz)?;
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
