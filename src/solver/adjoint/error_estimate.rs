//! A first-order estimate of the gradient's error from the adjoint solves' residuals (issue 37
//! item 5; docs/gradcheck.md "The gradient's error bar").
//!
//! The reverse sweep solves, per step $t$ (last first), $K_tz_t=g_t$ where $g_t$ is built
//! from the later steps' $z$ (`rollout::backward`), and adds $G_t(z_t)$, linear in $z_t$, to
//! the parameter gradients. Each solve stops at a residual $r_t=g_t-K_t\tilde z_t$. With
//! exact solves $z^*$ the errors $e_t=z^*_t-\tilde z_t$ satisfy, to first order (the sweep is
//! linear in the $z$),
//!
//! $$K_te_t=r_t+\delta g_t,\qquad \delta g_t=P_{t+1}(e_{t+1}),$$
//!
//! where $P$ is the sweep's own propagation of a step's adjoint to the previous step's
//! cotangents (Eq. 41), and the gradient's error is $\delta\theta=\sum_tG_t(e_t)$ — the same
//! sweep run on the residuals. [`ErrorSweep`] runs it alongside the backward: one product
//! with $K_t$ per step for $r_t$, and where the right-hand side is above round-off a short
//! GMRES on $K_te_t$ (relative residual [`CORRECTION_TOL`], so the estimate is itself good
//! to about that fraction). Frames solved directly leave $r_t$ at round-off; a scene whose
//! frames are all direct costs one product per frame. The estimate is signed (it is the
//! first-order correction $g^*-\tilde g$); `grad` reports its magnitude per parameter.
//!
//! Not covered, and said so in the output: steps with NCP contact rows or DiffPD's glue pins
//! (their adjoint is a different system; `skipped_frames`), the Newton method's adjoint (a
//! direct solve of its own Hessian: its residual is round-off, taken as 0), the prescribed
//! values' dependence on $x_0$, and the forward's residuals (the states' error enters the
//! gradient through second derivatives; at the forward's default stopping tests, 1e-8 of the
//! motion, it is below the adjoint's).

use super::backward::{apply_k, solve_gmres, StepLinearization};
use super::gradient::{accumulate_contact, accumulate_step, Gradients, StepStates};
use crate::solver::context::StepContext;
use crate::solver::offload::OffloadError;
use crate::solver::records::config::BackwardConfig;

/// Relative residual of the correction solves $K_te_t=r_t+\delta g_t$.
pub const CORRECTION_TOL: f64 = 1e-2;

/// Iteration cap of one correction solve (GMRES right-preconditioned by $A^{-1}$).
pub const CORRECTION_MAX_ITERATIONS: usize = 60;

/// A right-hand side below this fraction of $\|g_t\|$ is round-off: no correction solve.
pub const ROUND_OFF: f64 = 1e-13;

/// The error sweep's state between steps and its result.
pub struct ErrorSweep {
    /// $\delta(d\mathcal L/dx_{t+1})$, $\delta(d\mathcal L/dv_{t+1})$ carried from the later
    /// steps (empty before the first step).
    egx: Vec<f64>,
    egv: Vec<f64>,
    /// $\sum_tG_t(e_t)$: the first-order error of every parameter class's gradient.
    pub grads: Gradients,
    /// Steps whose error the sweep does not model (NCP contact rows, glue pins).
    pub skipped_frames: Vec<usize>,
    /// Largest $\|r_t\|/\|g_t\|$ of a step's own solve.
    pub max_relative_residual: f64,
    /// GMRES iterations of the correction solves.
    pub iterations: usize,
    pub seconds: f64,
}

/// What the error sweep needs of one step of the reverse sweep.
pub struct ErrorStep<'a> {
    pub states: StepStates<'a>,
    /// The step's right-hand side $g_t$ and its computed adjoint $\tilde z_t$.
    pub g: &'a [f64],
    pub z: &'a [f64],
    /// The step's adjoint is not $K_tz=g_t$ on the free DoFs (NCP contact rows, glue pins).
    pub other_system: bool,
    /// The step's residual is round-off by construction (the Newton method's direct adjoint).
    pub exact: bool,
}

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|a| a * a).sum::<f64>().sqrt()
}

impl ErrorSweep {
    pub fn new(sim: &StepContext) -> Self {
        ErrorSweep {
            egx: vec![],
            egv: vec![],
            grads: Gradients::zeros(sim),
            skipped_frames: vec![],
            max_relative_residual: 0.0,
            iterations: 0,
            seconds: 0.0,
        }
    }

    /// One step, after the reverse sweep solved it: the error $e_t$ of its adjoint, its
    /// contribution to the gradients' error, and the error carried to the previous step.
    /// `propagate` is the sweep's own map of $(z_t, d\mathcal L/dv_{t+1})$ to
    /// $(d\mathcal L/dx_t, d\mathcal L/dv_t)$.
    pub fn step(
        &mut self,
        sim: &StepContext,
        lin: &StepLinearization,
        cfg: &BackwardConfig,
        s: ErrorStep,
        propagate: impl Fn(&StepContext, &[f64], &[f64]) -> (Vec<f64>, Vec<f64>),
    ) -> Result<(), OffloadError> {
        let t0 = std::time::Instant::now();
        let n3 = s.z.len();
        let h = sim.model.h;
        if self.egx.is_empty() {
            self.egx = vec![0.0; n3];
            self.egv = vec![0.0; n3];
        }
        let mut gf = s.g.to_vec();
        sim.zero_prescribed(&mut gf);
        let gnorm = norm(&gf);
        // δg_t = δ(dL/dx_{t+1}) + δ(dL/dv_{t+1})/h, as the sweep builds g_t
        let mut eg: Vec<f64> = self
            .egx
            .iter()
            .zip(&self.egv)
            .map(|(a, b)| a + b / h)
            .collect();
        let mut e = vec![0.0; n3];
        if s.other_system {
            self.skipped_frames.push(s.states.frame);
        } else {
            let mut rhs = eg.clone();
            sim.zero_prescribed(&mut rhs);
            if !s.exact && gnorm > 0.0 {
                let mut kz = vec![0.0; n3];
                apply_k(sim, lin, s.z, &mut kz)?;
                let mut own = 0.0;
                for k in 0..n3 {
                    let r = gf[k] - kz[k];
                    own += r * r;
                    rhs[k] += r;
                }
                sim.zero_prescribed(&mut rhs);
                self.max_relative_residual = self.max_relative_residual.max(own.sqrt() / gnorm);
            }
            let scale = gnorm.max(norm(&eg));
            if norm(&rhs) > ROUND_OFF * scale {
                let loose = BackwardConfig {
                    rel_tol: CORRECTION_TOL,
                    abs_tol: 0.0,
                    max_iterations: CORRECTION_MAX_ITERATIONS,
                    ..cfg.clone()
                };
                let st = solve_gmres(sim, lin, &rhs, &mut e, &loose)?;
                self.iterations += st.iterations;
            }
        }
        accumulate_step(sim, lin, s.states, &e, &mut self.grads)?;
        sim.zero_prescribed(&mut eg);
        let contact = if s.other_system {
            None
        } else {
            accumulate_contact(sim, lin, s.states, (&eg, &e), &mut self.grads)?
        };
        let (mut dx, mut dv) = propagate(sim, &e, &self.egv);
        if let Some(c) = contact {
            dx.iter_mut().zip(c.x_t).for_each(|(a, b)| *a += b);
            dv.iter_mut().zip(c.v_t).for_each(|(a, b)| *a += b);
        }
        self.egx = dx;
        self.egv = dv;
        self.seconds += t0.elapsed().as_secs_f64();
        Ok(())
    }

    /// The errors of $d\mathcal L/dx_0$, $d\mathcal L/dv_0$ (rollouts from frame 0).
    pub fn finish(mut self, from_frame_zero: bool) -> Self {
        let n3 = self.grads.x0.len();
        if from_frame_zero && self.egx.len() == n3 {
            self.grads.x0 = std::mem::take(&mut self.egx);
            self.grads.v0 = std::mem::take(&mut self.egv);
        }
        self
    }
}
