//! Rollout tape and the reverse sweep (spec §7.1).
//!
//! The tape keeps the state $x_t$ of every frame (and $v_0$); velocities are
//! $v_t=(x_t-x_{t-1})/h$, and everything else the backward needs (SVDs, projections, stretch
//! Jacobians, TR blend) is recomputed element-locally at $x_{t+1}$. Memory: $24n$ bytes
//! per frame ($3n$ f64) plus the per-step statistics.

use super::backward::{
    solve_adjoint, AdjointStats, BackwardConfig, HessianFilterMode, StepLinearization,
};
use super::forward::{Simulator, StepStats};
use super::gradient::{accumulate_step, Gradients};
use super::loss::LossGradient;
use super::SolverError;
use crate::linalg::LinearSolver;
use crate::scene::Motion;
use nalgebra::{Matrix3, Vector3};

/// A forward rollout: states of frames `0..=T` and per-step statistics.
#[derive(Clone, Debug)]
pub struct Rollout {
    pub xs: Vec<Vec<f64>>,
    pub v0: Vec<f64>,
    pub steps: Vec<StepStats>,
}

impl Rollout {
    /// Velocity of frame `t`.
    pub fn velocity(&self, t: usize, h: f64) -> Vec<f64> {
        if t == 0 {
            self.v0.clone()
        } else {
            self.xs[t]
                .iter()
                .zip(&self.xs[t - 1])
                .map(|(a, b)| (a - b) / h)
                .collect()
        }
    }
    /// Bytes held by the tape's states.
    pub fn tape_bytes(&self) -> usize {
        self.xs.len() * self.xs[0].len() * 8
    }
}

/// Run `frames` steps from the model's initial state, keeping every state.
pub fn forward(sim: &mut Simulator, frames: usize) -> Result<Rollout, SolverError> {
    let h = sim.model.h;
    let mut xs = vec![sim.model.x0.clone()];
    let v0 = sim.model.v0.clone();
    let mut v = v0.clone();
    let mut steps = Vec::with_capacity(frames);
    for frame in 1..=frames {
        let x = xs.last().expect("non-empty");
        let (xn, st) = sim.step(frame, x, &v)?;
        v = xn.iter().zip(x).map(|(a, b)| (a - b) / h).collect();
        xs.push(xn);
        steps.push(st);
    }
    Ok(Rollout { xs, v0, steps })
}

/// Result of the reverse sweep.
pub struct BackwardResult {
    pub grads: Gradients,
    /// One entry per step, last step first.
    pub adjoint: Vec<AdjointStats>,
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

/// Reverse sweep over a rollout (spec §7.1–7.2).
pub fn backward(
    sim: &Simulator,
    ro: &Rollout,
    lg: &LossGradient,
    cfg: &BackwardConfig,
) -> BackwardResult {
    let model = sim.model;
    let h = model.h;
    let d = &sim.derived;
    let n = model.num_nodes();
    let t_end = ro.xs.len() - 1;
    let mut grads = Gradients::zeros(sim);
    let mut gx = lg.dx[t_end].clone();
    let mut gv = lg.dv_final.clone();
    let mut adjoint = Vec::with_capacity(t_end);
    // dL/d(prescribed value) per frame, node-major
    let mut d_presc: Vec<(usize, Vec<f64>)> = Vec::new();
    for t in (0..t_end).rev() {
        let frame = t + 1;
        let x_t = &ro.xs[t];
        let x_next = &ro.xs[t + 1];
        let v_t = ro.velocity(t, h);
        let g: Vec<f64> = gx.iter().zip(&gv).map(|(a, b)| a + b / h).collect();
        let alpha = match cfg.filter {
            HessianFilterMode::None => 0.0,
            HessianFilterMode::Clamp => 0.5,
            HessianFilterMode::Abs => 1.0,
            HessianFilterMode::TrustRegion => match (&ro.steps[t].tr, ro.steps[t].converged) {
                (Some(tr), true) => tr.alpha,
                _ => 1.0,
            },
        };
        let lin = StepLinearization::new(sim, x_next, alpha)
            .with_contact(sim, ro.steps[t].contact_record.as_deref());
        let (z, mut st) = solve_adjoint(sim, &lin, &g, cfg, frame);
        st.alpha = alpha;
        if !sim.prescribed.is_empty() {
            let mut az = vec![0.0; 3 * n];
            let mut daz = vec![0.0; 3 * n];
            sim.system.apply_a(&z, &mut az);
            lin.apply(model, &z, &mut daz);
            let mut dp = vec![0.0; 3 * n];
            for &k in &sim.prescribed {
                dp[k] = g[k] - (az[k] - daz[k]);
            }
            d_presc.push((frame, dp));
        }
        accumulate_step(sim, &lin, frame, x_t, &v_t, x_next, &z, &mut grads);
        let contact =
            super::backward::accumulate_contact(sim, &lin, frame, x_t, &v_t, &g, &z, &mut grads);
        // Propagate to (x_t, v_t): y = x_t + h v_t + ..., and the (1/h) D x_t term (Eq. 41).
        let mut kz = vec![0.0; n];
        let mut dx = vec![0.0; 3 * n];
        for k in 0..3 {
            sim.kbeta.matvec_axis(&z, k, &mut kz);
            for i in 0..n {
                let j = 3 * i + k;
                dx[j] = -gv[j] / h
                    + d.mass[i] * (1.0 / (h * h) + d.node_alpha[i] / h) * z[j]
                    + kz[i] / h;
            }
        }
        let dv: Vec<f64> = (0..3 * n).map(|j| d.mass[j / 3] * z[j] / h).collect();
        gx = dx.iter().zip(&lg.dx[t]).map(|(a, b)| a + b).collect();
        gv = dv;
        if let Some(c) = contact {
            gx.iter_mut().zip(c.x_t).for_each(|(a, b)| *a += b);
            gv.iter_mut().zip(c.v_t).for_each(|(a, b)| *a += b);
        }
        adjoint.push(st);
    }
    // Prescribed values depend on the initial positions through the motion.
    let mut x0g = gx;
    for (frame, dp) in &d_presc {
        chain_prescribed(sim, *frame as f64 * h, dp, &mut x0g);
    }
    grads.x0 = x0g;
    grads.v0 = gv;
    BackwardResult { grads, adjoint }
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
