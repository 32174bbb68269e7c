//! Forward time stepping (spec §6): implicit Euler solved by Projective Dynamics with the
//! persistent factor of $A$ (Eq. 31), bounded Anderson acceleration (Eqs. 18–21) and the
//! dual gate (Eq. 22).
//!
//! One step, from $(x_t,v_t)$:
//! $y=x_t+hv_t+h^2M^{-1}f_{ext}$; $c=\tfrac1{h^2}My+\tfrac1h\mathcal Dx_t$;
//! iterate $x^{k+1}=\mathrm{AA}\big(A^{-1}(c+b_p(x^k))\big)$ from $x^0=x_t$ (Dirichlet values
//! imposed) until the dual gate holds; $v_{t+1}=(x_{t+1}-x_t)/h$.

use super::anderson::TypeII;
use super::gate::{DualGate, GateResiduals};
use super::local;
use super::model::{Derived, Model};
use super::SolverError;
use crate::contact::{self, ncp::FbParams, ContactRecord, ContactSet, ContactStats, Delassus};
use crate::linalg::{assembly, CscMatrix, GlobalSystem, LinearSolver};
use crate::scene::{AndersonWindow, GateReference, OnNonConvergence, SolverSettings};
use nalgebra::Vector3;
use std::collections::HashMap;
use std::time::Instant;

/// Resolved solver settings.
#[derive(Clone, Debug)]
pub struct SolverConfig {
    pub max_iterations: usize,
    pub gate: DualGate,
    /// Position gate relative to ‖x_k‖ (spec) or to ‖x_k − x_t‖.
    pub gate_reference: GateReference,
    pub window: usize,
    pub gamma_max: f64,
    pub on_nonconvergence: OnNonConvergence,
    pub newton_polish: usize,
    pub polish_tol: f64,
    /// `[solver] method` (issue 7 baselines).
    pub method: crate::scene::SolverMethod,
    /// Settings of `method = "newton"`.
    pub newton: super::newton::NewtonConfig,
    /// L-BFGS history of `method = "diffpd"`.
    pub lbfgs_history: usize,
}

impl SolverConfig {
    /// Resolve `anderson_window = "auto"`. With the spec's position gate, the paper's rule:
    /// 1 on heterogeneous meshes, 5 on homogeneous ones (spec Eq. 21 and §6.6). With the
    /// displacement gate (the default), 5 everywhere. That gate asks for the step to be
    /// resolved, and m = 1 then stalls on stiff heterogeneous meshes. Measured at ε_rel
    /// 1e-4, total PD iterations m = 1 / m = 5: 100× NH tet bands 7744 / 1506, 1000× 8392 /
    /// 2735, 100× corotated cantilever 11452 / 2721, twist_bands_tet 4109 / 871. At 1e-5 the
    /// 100× cantilever with m = 1 hit a 3000 cap on every frame; m = 5 converged in ≤ 1346.
    /// See docs/NOTES.md "Gate tolerance".
    pub fn from_settings(s: &SolverSettings, heterogeneous: bool) -> Self {
        let window = match s.anderson_window {
            AndersonWindow::Auto => {
                if heterogeneous && s.gate_reference == GateReference::Position {
                    1
                } else {
                    5
                }
            }
            AndersonWindow::Fixed(m) => m,
        };
        SolverConfig {
            max_iterations: s.max_iterations,
            gate: DualGate {
                rel: s.rel_tol,
                abs: s.abs_tol,
            },
            gate_reference: s.gate_reference,
            window,
            gamma_max: s.anderson_gamma_max,
            on_nonconvergence: s.on_nonconvergence,
            newton_polish: s.newton_polish,
            polish_tol: s.polish_tol,
            method: s.method,
            newton: super::newton::NewtonConfig {
                energy: s.newton_energy,
                filter: s.newton_filter,
                max_iterations: s.newton_max_iterations,
                tol: s.newton_tol,
            },
            lbfgs_history: s.lbfgs_history,
        }
    }
}

/// Statistics of one time step (what `log.json` records per frame).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct StepStats {
    pub iterations: usize,
    pub converged: bool,
    /// Gate residuals at exit (≤ 1 means met).
    pub gate: GateResiduals,
    pub anderson_guard_firings: usize,
    pub time_local: f64,
    pub time_global: f64,
    pub time_other: f64,
    /// Newton polish steps taken and the final relative PD residual $\|Ax-b(x)\|/\|b\|$
    /// (only with `newton_polish > 0`).
    pub polish_steps: usize,
    pub polish_residual: f64,
    /// Trust-region statistics (only when requested, see [`Simulator::compute_tr`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tr: Option<super::trust_region::TrStats>,
    /// Contact statistics (scenes with obstacles).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contact: Option<ContactStats>,
    /// Contact tape of the step (NCP model with candidates): what the backward needs
    /// (spec §6.2 step 27).
    #[serde(skip)]
    pub contact_record: Option<Box<ContactRecord>>,
    /// Newton statistics (`method = "newton"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newton: Option<super::newton::NewtonStats>,
    /// `method = "diffpd"` with obstacles: the active (glued) contact nodes the step was
    /// solved with, pinned at their start-of-step positions (what the backward restricts to).
    #[serde(skip)]
    pub diffpd_active: Option<Vec<usize>>,
}

/// The forward simulator: model, derived parameters, factored system and solver state.
pub struct Simulator<'m> {
    pub model: &'m Model,
    pub derived: Derived,
    pub system: GlobalSystem,
    /// Stiffness-damping Laplacian $\hat K_\beta$ (for the $\tfrac1h\mathcal Dx_t$ term).
    pub kbeta: CscMatrix,
    pub config: SolverConfig,
    /// Prescribed DoF indices into node-major vectors.
    pub prescribed: Vec<usize>,
    /// Time spent assembling and factoring (s).
    pub setup_seconds: f64,
    /// Compute the TR ratio ρ and blend α at the end of every step (needed by the
    /// `trust_region` backward filter; costs one extra local step and one product with A).
    pub compute_tr: bool,
    /// Contact candidates: boundary nodes without prescribed DoFs (contact on a prescribed
    /// DoF has no effect and is skipped).
    pub contact_nodes: Vec<usize>,
    /// Multipliers of the previous step per (node, obstacle), for warm starts.
    contact_warm: HashMap<(usize, usize), [f64; 3]>,
    warm: Vec<Vector3<f64>>,
    aa: TypeII,
    /// Hessian pattern and reusable symbolic factor of the Newton baseline.
    pub(crate) newton_system: Option<Box<super::newton::NewtonSystem>>,
    /// Active contact set of the previous step (`method = "diffpd"`, warm start).
    pub(crate) diffpd_active: Vec<usize>,
}

/// Settings of the per-iteration NCP contact solve from `[contact]`.
pub(crate) fn contact_settings(model: &Model) -> contact::SolveSettings {
    contact::SolveSettings {
        fb: FbParams {
            smoothing: model.contact.smoothing,
            s_floor: model.contact.s_floor,
        },
        tolerance: model.contact.tolerance,
        max_newton: model.contact.max_newton,
    }
}

/// Euclidean norm.
pub fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

impl<'m> Simulator<'m> {
    /// Derive weights, assemble and factor $A$ (spec §6.1 SETUP).
    pub fn new(model: &'m Model, settings: &SolverSettings) -> Result<Self, SolverError> {
        let derived = model.derive(&model.params);
        Self::with_derived(model, derived, settings)
    }

    /// As [`Simulator::new`] with explicitly derived parameters.
    pub fn with_derived(
        model: &'m Model,
        derived: Derived,
        settings: &SolverSettings,
    ) -> Result<Self, SolverError> {
        let t0 = Instant::now();
        let (a, kbeta) = assembly::pd_matrices(model, &derived, model.h);
        let system = GlobalSystem::new(a, model.dirichlet_sets())?;
        let sets = model.dirichlet_sets();
        let mut prescribed: Vec<usize> = (0..3)
            .flat_map(|d| sets[d].nodes.iter().map(move |&i| 3 * i + d))
            .collect();
        prescribed.sort_unstable();
        let config = SolverConfig::from_settings(settings, derived.heterogeneous);
        let aa = TypeII::new(config.window, config.gamma_max);
        let contact_nodes: Vec<usize> = model
            .boundary_nodes
            .iter()
            .copied()
            .filter(|&i| (0..3).all(|d| prescribed.binary_search(&(3 * i + d)).is_err()))
            .collect();
        if let Some(p) = crate::contact::initial::deepest_penetration(
            model,
            &model.obstacles,
            &contact_nodes,
            &model.x0,
            model.contact_margin,
        ) {
            return Err(SolverError::InitialPenetration(Box::new(p)));
        }
        Ok(Simulator {
            contact_nodes,
            contact_warm: HashMap::new(),
            model,
            warm: vec![Vector3::zeros(); model.num_samples()],
            derived,
            system,
            kbeta,
            config,
            prescribed,
            setup_seconds: t0.elapsed().as_secs_f64(),
            compute_tr: false,
            aa,
            newton_system: None,
            diffpd_active: Vec::new(),
        })
    }

    /// Zero the prescribed (Dirichlet) entries of a node-major vector: the free-DoF part
    /// of a residual, step or adjoint right-hand side.
    pub fn zero_prescribed(&self, v: &mut [f64]) {
        for &k in &self.prescribed {
            v[k] = 0.0;
        }
    }

    /// Set the prescribed entries of `x` to their Dirichlet values `xd`.
    pub fn impose_prescribed(&self, x: &mut [f64], xd: &[f64]) {
        for &k in &self.prescribed {
            x[k] = xd[k];
        }
    }

    /// Constant part of the RHS: $c=\tfrac1{h^2}My+\tfrac1h(\alpha Mx_t+\hat K_\beta x_t)$ with
    /// $y=x_t+hv_t+h^2M^{-1}f$ (Eqs. 3, 31).
    pub fn rhs_constant(&self, x_t: &[f64], v_t: &[f64], f_ext: &[f64]) -> Vec<f64> {
        let h = self.model.h;
        let n = self.model.num_nodes();
        let m = &self.derived.mass;
        let mut c = vec![0.0; 3 * n];
        let mut t = vec![0.0; n];
        for d in 0..3 {
            self.kbeta.matvec_axis(x_t, d, &mut t);
            for i in 0..n {
                let k = 3 * i + d;
                let y = x_t[k] + h * v_t[k] + h * h * f_ext[k] / m[i];
                c[k] = m[i] * y / (h * h) + (self.derived.node_alpha[i] * m[i] * x_t[k] + t[i]) / h;
            }
        }
        c
    }

    /// One implicit-Euler step producing frame `frame` (1-based) from $(x_t, v_t)$.
    /// Returns $x_{t+1}$ and the step statistics.
    pub fn step(
        &mut self,
        frame: usize,
        x_t: &[f64],
        v_t: &[f64],
    ) -> Result<(Vec<f64>, StepStats), SolverError> {
        // Baselines (issue 7): Newton and DiffPD's L-BFGS PD (no contact, no muscles).
        match self.config.method {
            crate::scene::SolverMethod::Newton => {
                return super::newton::step(self, frame, x_t, v_t)
            }
            crate::scene::SolverMethod::Diffpd => {
                return super::diffpd::step(self, frame, x_t, v_t)
            }
            crate::scene::SolverMethod::Diffphd => {}
        }
        let model = self.model;
        let h = model.h;
        let t_start = (frame - 1) as f64 * h;
        self.derived.muscle_time = frame as f64 * h;
        let mut f_ext = model.external_force(t_start, &self.derived.mass);
        let penalty_force = self.penalty_forces(t_start, x_t, v_t, &mut f_ext);
        let c = self.rhs_constant(x_t, v_t, &f_ext);
        let xd = model.dirichlet_values(frame as f64 * h);
        let mut x = x_t.to_vec();
        self.impose_prescribed(&mut x, &xd);
        let mut stats = StepStats::default();
        // Contact set-up (spec §6.2 step 3): candidates, frozen frames, Delassus columns.
        let t_c = Instant::now();
        let csettings = contact_settings(model);
        let mut ncp = self.contact_begin(t_start, x_t, v_t).map(|(set, lambda)| {
            let del = Delassus::new(&set, &self.system);
            (set, del, lambda)
        });
        let mut cstats = ContactStats {
            seconds_setup: t_c.elapsed().as_secs_f64(),
            ..Default::default()
        };
        let guard0 = self.aa.guard_firings;
        self.aa.reset();
        let n3 = x.len();
        let mut bp = vec![0.0; n3];
        let mut bp_prev = vec![0.0; n3];
        let mut xhat = vec![0.0; n3];
        let mut converged = false;
        let mut last_gate = GateResiduals {
            position: f64::INFINITY,
            projection: f64::INFINITY,
        };
        let mut k = 0;
        let mut x_before = Vec::new();
        let mut b_before = Vec::new();
        // The gate also requires the last contact solve to meet `contact.tolerance`.
        let mut contact_ok = true;
        let mut newton_cache = None;
        while k < self.config.max_iterations {
            let t0 = Instant::now();
            let loc =
                local::project_all(model, &self.derived, &x, &mut self.warm).map_err(|e| {
                    SolverError::NonFiniteLocal {
                        frame,
                        iteration: k,
                        element: e.element,
                    }
                })?;
            local::scatter(model, &loc.q, &mut bp);
            let t1 = Instant::now();
            let b: Vec<f64> = c.iter().zip(&bp).map(|(a, b)| a + b).collect();
            self.system.solve(&b, &xd, &mut xhat);
            let t2 = Instant::now();
            if let Some((set, del, lambda)) = ncp.as_mut() {
                // Contact projection of the global step (spec §6.2 steps 10–18).
                let info = contact::solve(
                    set,
                    del,
                    &xhat,
                    lambda,
                    &csettings,
                    csettings.tolerance,
                    &mut newton_cache,
                );
                del.add_x(set, lambda, &mut xhat);
                contact_ok = info.residual <= csettings.tolerance;
                cstats.newton_iterations += info.iterations;
                cstats.factorizations += info.factorizations;
                cstats.seconds_solve += t2.elapsed().as_secs_f64();
            }
            let t2c = Instant::now();
            if !xhat.iter().all(|v| v.is_finite()) {
                return Err(SolverError::Diverged {
                    frame,
                    iteration: k,
                    element: self.first_bad_element(&xhat),
                });
            }
            let g: Vec<f64> = xhat.iter().zip(&x).map(|(a, b)| a - b).collect();
            let mut xn = self.aa.step(&x, &g);
            self.impose_prescribed(&mut xn, &xd);
            if k >= 1 {
                // Position gate on the un-accelerated PD step g_k = Φ(x_k) − x_k: the mixed
                // step x_{k+1} − x_k can be tiny while Anderson stagnates far from the fixed
                // point (measured: finite differences off by 40 % with that gate).
                let dx = norm(&g);
                let dbp = norm(
                    &bp.iter()
                        .zip(&bp_prev)
                        .map(|(a, b)| a - b)
                        .collect::<Vec<_>>(),
                );
                let (xref, floor) = match self.config.gate_reference {
                    GateReference::Position => (norm(&x), 0.0),
                    // ‖x_k − x_t‖ without a temporary (same summation order as `norm`),
                    // with the round-off floor (tight tolerances, bodies at rest)
                    GateReference::Displacement => (
                        x.iter()
                            .zip(x_t)
                            .map(|(a, b)| (a - b) * (a - b))
                            .sum::<f64>()
                            .sqrt(),
                        super::gate::DISPLACEMENT_FLOOR * norm(&x),
                    ),
                };
                last_gate = self
                    .config
                    .gate
                    .evaluate(dx, xref, floor, dbp, norm(&bp_prev));
                if DualGate::met(&last_gate) && contact_ok {
                    converged = true;
                }
            }
            std::mem::swap(&mut bp, &mut bp_prev);
            if converged && ncp.is_some() {
                // return the contact-projected global step: it satisfies the contact
                // conditions to the contact tolerance, whatever the PD tolerance
                xn = xhat.clone();
            }
            if self.compute_tr {
                x_before = std::mem::replace(&mut x, xn);
                b_before = b;
            } else {
                x = xn;
            }
            let t3 = Instant::now();
            stats.time_local += (t1 - t0).as_secs_f64();
            stats.time_global += (t2 - t1).as_secs_f64();
            stats.time_other += (t3 - t2c).as_secs_f64();
            k += 1;
            if converged {
                break;
            }
        }
        // Newton polish does not model NCP contact (penalty forces are explicit, in f_ext).
        if self.config.newton_polish > 0 && converged && ncp.is_none() {
            let t0 = Instant::now();
            let (steps, res) = self.polish(&c, &xd, &mut x);
            stats.polish_steps = steps;
            stats.polish_residual = res;
            stats.time_other += t0.elapsed().as_secs_f64();
        }
        let ncp = ncp.take().map(|(set, _, lambda)| (set, lambda));
        self.contact_finish(
            frame,
            ncp,
            penalty_force,
            x_t,
            v_t,
            &mut x,
            cstats,
            &mut stats,
        );
        stats.iterations = k;
        stats.converged = converged;
        stats.gate = last_gate;
        stats.anderson_guard_firings = self.aa.guard_firings - guard0;
        if self.compute_tr && !x_before.is_empty() {
            stats.tr = Some(self.tr_stats(x_t, v_t, &f_ext, &x_before, &b_before, &x));
        }
        if !converged && self.config.on_nonconvergence == OnNonConvergence::Error {
            return Err(SolverError::NotConverged {
                frame,
                iterations: k,
                position: last_gate.position,
                projection: last_gate.projection,
            });
        }
        Ok((x, stats))
    }

    /// Explicit penalty contact forces of the step from $t$ (`[contact] model = "penalty"`
    /// with obstacles), added to `f_ext`; returns (forces, pairs), `None` for other models.
    pub(crate) fn penalty_forces(
        &self,
        t_start: f64,
        x_t: &[f64],
        v_t: &[f64],
        f_ext: &mut [f64],
    ) -> Option<(Vec<f64>, usize)> {
        let model = self.model;
        if !contact::penalty_enabled(model) {
            return None;
        }
        let mut fp = vec![0.0; f_ext.len()];
        let (pairs, _) =
            contact::penalty::add_forces(model, &self.contact_nodes, t_start, x_t, v_t, &mut fp);
        f_ext.iter_mut().zip(&fp).for_each(|(a, b)| *a += b);
        Some((fp, pairs))
    }

    /// NCP contact set of the step from $t$ (spec §6.2 step 3): obstacle candidates with
    /// frozen frames, body–body candidates with `[contact] bodies`, and the multipliers
    /// warm-started from the previous step. `None` without NCP contact or candidates. Shared
    /// by the PD path and the Newton baseline.
    pub(crate) fn contact_begin(
        &self,
        t_start: f64,
        x_t: &[f64],
        v_t: &[f64],
    ) -> Option<(ContactSet, Vec<f64>)> {
        let model = self.model;
        if !contact::enabled(model) || contact::penalty_enabled(model) {
            return None;
        }
        let mut set = ContactSet::build(
            model,
            &model.obstacles,
            &self.contact_nodes,
            &model.contact_kappa,
            model.contact_margin,
            t_start,
            x_t,
            v_t,
        );
        if model.contact.bodies {
            contact::bodies::add_candidates(
                &mut set,
                model,
                &self.contact_nodes,
                &model.contact_kappa,
                model.contact_margin,
                x_t,
                v_t,
            );
        }
        if set.is_empty() {
            return None;
        }
        let mut lambda = vec![0.0; set.nrows()];
        for j in 0..set.len() {
            if let Some(w) = self.contact_warm.get(&(set.node[j], set.obstacle[j])) {
                for (a, r) in set.rows(j).enumerate() {
                    lambda[r] = w[a];
                }
            }
        }
        Some((set, lambda))
    }

    /// End of a step with contact (spec §6.2 steps 24–27): record the converged multipliers
    /// (the tape of the backward), apply restitution, keep the warm start, and fill the
    /// step's contact statistics (solve counts and times from `cstats`, max penetration
    /// at $t+h$). Shared by the PD path and the Newton baseline.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn contact_finish(
        &mut self,
        frame: usize,
        ncp: Option<(ContactSet, Vec<f64>)>,
        penalty_force: Option<(Vec<f64>, usize)>,
        x_t: &[f64],
        v_t: &[f64],
        x: &mut [f64],
        mut cstats: ContactStats,
        stats: &mut StepStats,
    ) {
        let model = self.model;
        if !contact::enabled(model) {
            return;
        }
        let fb = contact_settings(model).fb;
        let t_end = frame as f64 * model.h;
        if let Some((set, lambda)) = ncp {
            let rec = ContactRecord::new(set, lambda, x, &fb);
            self.restitution(&rec, x_t, v_t, x);
            self.contact_warm.clear();
            for j in 0..rec.set.len() {
                let mut w = [0.0; 3];
                for (a, r) in rec.set.rows(j).enumerate() {
                    w[a] = rec.lambda[r];
                }
                self.contact_warm
                    .insert((rec.set.node[j], rec.set.obstacle[j]), w);
            }
            let mut st = rec.stats.clone();
            st.newton_iterations = cstats.newton_iterations;
            st.factorizations = cstats.factorizations;
            st.seconds_setup = cstats.seconds_setup;
            st.seconds_solve = cstats.seconds_solve;
            cstats = st;
            stats.contact_record = Some(Box::new(rec));
        } else {
            self.contact_warm.clear();
        }
        if let Some((fp, pairs)) = penalty_force {
            cstats.candidates = pairs;
            cstats.active = pairs;
            stats.contact_record = Some(Box::new(ContactRecord {
                penalty_forces: Some(fp),
                ..Default::default()
            }));
        }
        cstats.max_penetration =
            contact::max_penetration(&model.obstacles, &model.boundary_nodes, x, t_end);
        if model.contact.bodies {
            cstats.max_penetration = cstats
                .max_penetration
                .max(contact::bodies::max_penetration(model, x));
        }
        stats.contact = Some(cstats);
    }

    /// Restitution post-correction (spec §6.2 step 24, S0 §7.1): for an active contact on an
    /// obstacle with $e_r>0$ and approaching normal velocity $v^{in}_n<0$, raise the outgoing
    /// normal velocity to $-e_rv^{in}_n$. Not differentiated (the backward treats the
    /// corrected state as the step's output).
    fn restitution(&self, rec: &ContactRecord, x_t: &[f64], v_t: &[f64], x: &mut [f64]) {
        let h = self.model.h;
        let set = &rec.set;
        for j in 0..set.len() {
            if set.obstacle[j] == contact::BODY {
                continue;
            }
            let e = self.model.obstacles[set.obstacle[j]].restitution;
            if e <= 0.0 || rec.state[j] == contact::State::Separated {
                continue;
            }
            let i = set.node[j];
            let n = set.normal[j];
            let u_obs = set.obstacle_motion[j];
            let vt = Vector3::new(v_t[3 * i], v_t[3 * i + 1], v_t[3 * i + 2]);
            let v_in = n.dot(&(vt - u_obs / h));
            if v_in >= 0.0 {
                continue;
            }
            let dx = Vector3::new(
                x[3 * i] - x_t[3 * i],
                x[3 * i + 1] - x_t[3 * i + 1],
                x[3 * i + 2] - x_t[3 * i + 2],
            );
            let v_out = n.dot(&(dx - u_obs)) / h;
            if v_out < -e * v_in {
                let corr = n * (h * (-e * v_in - v_out));
                for d in 0..3 {
                    x[3 * i + d] += corr[d];
                }
            }
        }
    }

    /// Residual $b(x)-Ax$ on the free DoFs and $\|b(x)\|$.
    fn pd_residual(&mut self, c: &[f64], x: &[f64]) -> Result<(Vec<f64>, f64), ()> {
        let loc =
            local::project_all(self.model, &self.derived, x, &mut self.warm).map_err(|_| ())?;
        let mut bp = vec![0.0; x.len()];
        local::scatter(self.model, &loc.q, &mut bp);
        let b: Vec<f64> = c.iter().zip(&bp).map(|(a, b)| a + b).collect();
        let mut ax = vec![0.0; x.len()];
        self.system.apply_a(x, &mut ax);
        let mut r: Vec<f64> = b.iter().zip(&ax).map(|(a, b)| a - b).collect();
        let mut bf = b;
        for &k in &self.prescribed {
            r[k] = 0.0;
            bf[k] = 0.0;
        }
        Ok((r, norm(&bf)))
    }

    /// Newton polish of a converged step (see `SolverSettings::newton_polish`). Each step is
    /// kept only if it reduces the residual. Returns (steps, final relative residual).
    fn polish(&mut self, c: &[f64], xd: &[f64], x: &mut Vec<f64>) -> (usize, f64) {
        let Ok((mut r, mut bn)) = self.pd_residual(c, x) else {
            return (0, f64::NAN);
        };
        let mut rel = norm(&r) / bn.max(f64::MIN_POSITIVE);
        let cfg = super::backward::BackwardConfig {
            rel_tol: 1e-3 * self.config.polish_tol.max(1e-16) / rel.max(1e-300),
            abs_tol: 0.0,
            max_iterations: 500,
            window: 0,
            gamma_max: self.config.gamma_max,
            filter: super::backward::HessianFilterMode::None,
            gmres_restart: 50,
            method: super::backward::AdjointMethod::Gmres,
        };
        let mut steps = 0;
        while steps < self.config.newton_polish && rel > self.config.polish_tol {
            let lin = super::backward::StepLinearization::new(self, x, 0.0);
            let mut delta = vec![0.0; x.len()];
            let mut cfg_s = cfg.clone();
            cfg_s.rel_tol = 1e-6;
            super::backward::solve_gmres(self, &lin, &r, &mut delta, &cfg_s);
            let trial: Vec<f64> = x.iter().zip(&delta).map(|(a, b)| a + b).collect();
            let mut trial = trial;
            self.impose_prescribed(&mut trial, xd);
            let Ok((r2, bn2)) = self.pd_residual(c, &trial) else {
                break;
            };
            let rel2 = norm(&r2) / bn2.max(f64::MIN_POSITIVE);
            if rel2.is_nan() || rel2 >= rel {
                break;
            }
            *x = trial;
            r = r2;
            bn = bn2;
            rel = rel2;
            steps += 1;
        }
        let _ = bn;
        (steps, rel)
    }

    /// Spec §6.5 TR_STATS from the last two iterates of the step.
    fn tr_stats(
        &self,
        x_t: &[f64],
        v_t: &[f64],
        f_ext: &[f64],
        x_prev: &[f64],
        b_prev: &[f64],
        x_k: &[f64],
    ) -> super::trust_region::TrStats {
        let h = self.model.h;
        let m = &self.derived.mass;
        let y: Vec<f64> = (0..x_t.len())
            .map(|j| x_t[j] + h * v_t[j] + h * h * f_ext[j] / m[j / 3])
            .collect();
        let mut dx: Vec<f64> = x_k.iter().zip(x_prev).map(|(a, b)| a - b).collect();
        let mut r = vec![0.0; dx.len()];
        self.system.apply_a(x_prev, &mut r);
        for (rj, bj) in r.iter_mut().zip(b_prev) {
            *rj -= bj;
        }
        for &k in &self.prescribed {
            dx[k] = 0.0;
            r[k] = 0.0;
        }
        let mut adx = vec![0.0; dx.len()];
        self.system.apply_a(&dx, &mut adx);
        let pred = -r.iter().zip(&dx).map(|(a, b)| a * b).sum::<f64>()
            - 0.5 * adx.iter().zip(&dx).map(|(a, b)| a * b).sum::<f64>();
        let e_prev = super::trust_region::pd_energy(self, x_prev, &y, x_t);
        let e_k = super::trust_region::pd_energy(self, x_k, &y, x_t);
        super::trust_region::blend(pred, e_prev - e_k, e_prev)
    }

    fn first_bad_element(&self, x: &[f64]) -> Option<usize> {
        (0..self.model.num_samples())
            .find(|&s| {
                !self
                    .model
                    .deformation_gradient(s, x)
                    .iter()
                    .all(|v| v.is_finite())
            })
            .map(|s| self.model.samples.elem[s])
    }
}
