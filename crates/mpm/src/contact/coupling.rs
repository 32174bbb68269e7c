//! Asynchronous time-splitting of MPM and rigid bodies (seed §IV-A, Eq. 3–4).
//!
//! One rigid step of length Δt wraps N MPM substeps of h = Δt/N:
//!
//!   MPM, k = 0..N−1:  M_d (v_d^{k+1} − v_d^k) = h·k_d + J_dᵀ γ_d^k,   γ_d^k = γ_d(v_rⁿ, v_d^{k+1}),
//!   rigid, once:      M_r (v_r^{n+1} − v_r^n) = Δt·k_r + J_rrᵀ γ_r + J_rᵀ Σ_k γ_d^k,
//!
//! with the rigid velocity v_rⁿ and pose frozen during the substeps. Each substep is the free
//! motion (the MPM's explicit update, behind [`GridContactProblem::free_motion`]) followed by
//! the convex contact solve of [`super::grid`] with the quasi-Newton method. Contacts are
//! registered at the start of each substep, one per particle–geometry pair with the particle
//! inside the geometry (φ < 0) at the step-start rigid pose (discrete detection, seed §V):
//! frame R_c from the geometry's outward normal, bias b_c = R_cᵀ v_r(x_p) (the frozen rigid
//! point velocity), stencil = the particle's B-spline weights, penetration φ₀ and normal
//! velocity v_n0 = n̂·(v_p − v_r(x_p)) at registration, Delassus estimate w = Σ_k w_k²/m_k.
//! The geometry's MPM surface parameters ([`crate::rigid::RigidBody::mpm_contact`],
//! [`crate::rigid::HalfSpace::mpm_contact`], by default [`super::LaggedParams::mpm_default`])
//! are used as they are. The impulses −R_c γ_c on each body are summed over the substeps and
//! applied once, as an external impulse of the rigid step ([`RigidWorld::step`]), which then
//! resolves rigid–rigid and rigid–ground contact.
//!
//! Momentum between MPM and rigid bodies is exchanged exactly only as far as the solve is
//! converged: the grid's change Σ M(v − v*) and the impulses Σ R_c γ_c differ by the gradient
//! residual, which the stopping test bounds by ε_r times the *largest* impulse scale. At the
//! seed's ε_r = 5e-2 a 10 N squeeze hides a 0.3 N friction force (docs/mpm.md).

use nalgebra::Vector3;
use thiserror::Error;

use super::grid::{GridContact, GridProblem, QnWorkspace, SolverOptions, Wrench};
use super::model::contact_frame;
use super::{ContactError, LaggedContact, LaggedParams};
use crate::mpm::MpmError;
use crate::rigid::{RigidError, RigidStepReport, RigidWorld};

/// The minimal interface the coupling needs from an MPM substepper.
///
/// Call order per substep: [`free_motion`](Self::free_motion) (particle-to-grid transfer at the
/// current particle positions, grid forces and the explicit grid update: afterwards
/// [`node_masses`](Self::node_masses) and [`free_velocities`](Self::free_velocities) describe
/// v*), then the queries, then [`finish_substep`](Self::finish_substep) with the post-contact
/// grid velocities (grid-to-particle transfer and advection). Node indices are those of the
/// two slices; nodes of zero mass are inactive and are passed through unchanged.
pub trait GridContactProblem {
    /// Free motion of one substep of length `h`. Errors are the MPM core's (guards, order).
    fn free_motion(&mut self, h: f64) -> Result<(), MpmError>;
    /// Lumped node masses (one per node; zero = inactive).
    fn node_masses(&self) -> &[f64];
    /// Free-motion node velocities v* (world).
    fn free_velocities(&self) -> &[Vector3<f64>];
    /// Number of particles that may touch rigid geometry.
    fn num_particles(&self) -> usize;
    /// Particle position (world), unchanged since `free_motion`.
    fn particle_position(&self, p: usize) -> Vector3<f64>;
    /// Particle velocity (world) at the start of the substep.
    fn particle_velocity(&self, p: usize) -> Vector3<f64>;
    /// The particle's interpolation stencil: (node, weight) pairs, v_p = Σ w v_node. `out` is
    /// cleared by the caller.
    fn particle_stencil(&self, p: usize, out: &mut Vec<(usize, f64)>);
    /// Ends the substep with the post-contact node velocities (same length as the slices).
    /// Errors are the MPM core's (CFL, non-finite or inverted particles, leaving the grid).
    fn finish_substep(&mut self, v: &[Vector3<f64>], h: f64) -> Result<(), MpmError>;
}

/// Errors of the coupled step.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum CouplingError {
    /// `substeps` was zero or Δt not positive.
    #[error(
        "invalid coupled step: dt = {dt}, substeps = {substeps} (need dt > 0 and substeps ≥ 1)"
    )]
    InvalidStep {
        /// The step.
        dt: f64,
        /// The substeps.
        substeps: usize,
    },
    /// The grid's slices disagree in length.
    #[error("grid returned {masses} node masses but {velocities} free velocities")]
    GridSize {
        /// Node masses.
        masses: usize,
        /// Velocities.
        velocities: usize,
    },
    /// A particle's stencil names a node that is inactive or out of range.
    #[error(
        "particle {particle}'s stencil names node {node}, which is out of range or has zero mass"
    )]
    BadStencil {
        /// Particle.
        particle: usize,
        /// Node.
        node: usize,
    },
    /// A substep's contact solve failed.
    #[error("substep {substep}: {source}")]
    Contact {
        /// Substep index.
        substep: usize,
        /// The solver error.
        source: ContactError,
    },
    /// The MPM substepper failed (free motion or the end of the substep).
    #[error("substep {substep}: {source}")]
    Grid {
        /// Substep index within the coupled step.
        substep: usize,
        /// The MPM error.
        source: MpmError,
    },
    /// The rigid step failed.
    #[error("rigid step: {0}")]
    Rigid(#[from] RigidError),
}

/// What a coupled step did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CoupledStepReport {
    /// Σ over substeps of the MPM impulses on each body (what the rigid step applied).
    pub body_impulses: Vec<Wrench>,
    /// Contacts registered per substep.
    pub contacts_per_substep: Vec<usize>,
    /// Quasi-Newton iterations per substep.
    pub iterations_per_substep: Vec<usize>,
    /// The rigid step's report.
    pub rigid: RigidStepReport,
}

/// One asynchronous coupled step (module doc): `substeps` MPM substeps of `dt/substeps` against
/// the frozen rigid state, then one rigid step of `dt` with the accumulated impulses.
/// [`coupled_step_in`] with a fresh [`CouplingWorkspace`] (every solve starts from v*).
pub fn coupled_step<G: GridContactProblem + ?Sized>(
    world: &mut RigidWorld,
    grid: &mut G,
    dt: f64,
    substeps: usize,
    options: &SolverOptions,
) -> Result<CoupledStepReport, CouplingError> {
    coupled_step_in(
        world,
        grid,
        dt,
        substeps,
        options,
        &mut CouplingWorkspace::new(),
    )
}

/// Buffers of [`coupled_step_in`], sized to the largest substep seen and reused (plan once,
/// execute every substep: after the first substeps a coupled step allocates only its report),
/// and the warm start of the contact solve.
///
/// **Warm start.** After each substep the workspace keeps the contact's momentum change per
/// grid node, Δp_k = M_k(v_k − v*_k) (= (Jᵀγ)_k at the optimum), and the next solve starts from
/// v⁰_k = v*_k + (h/h_prev)·Δp_k/M_k on the nodes of its contact stencils (v* elsewhere, which
/// is exact there), provided ℓ_p(v⁰) < ℓ_p(v*); otherwise from v* as before. Contact impulses
/// change little from one substep to the next (a resting or rolling contact carries the same
/// force), so the solve starts close to its optimum. The seed's Algorithm 1 starts from
/// v^k, the grid velocity before the free motion: on contact nodes that is the same guess
/// (v* − v^k = h·(forces)/m, which the contact cancels in a steady contact), but on the free
/// nodes v^k is wrong by h·(forces)/m and would have to be iterated back to v*.
///
/// The warm start is **off by default**: at a loose ε_r the solve accepts a warm guess that
/// already meets the stopping test (0 iterations), so the previous substeps' error, up to ε_r,
/// is carried forward instead of being re-approached from v* every substep. Measured with
/// ε_r = 5e-2 (`tests/mpm/contact_coupling.rs`): a particle resting on the ground sinks
/// 9.27e-6 m instead of mg/k = 9.81e-6 m (−5.5 %, cold: within 2 %), and a ground's impulse
/// is 0.13 % low (cold: within 0.1 %). It cuts iterations (a dough substep: 7 → 0 at
/// ε_r = 1e-1, 145 → 91 at 1e-5; `tests/mpm/mpm_speed.rs`).
#[derive(Debug, Clone)]
pub struct CouplingWorkspace {
    /// Start each contact solve from the previous substep's impulses (above); default false.
    pub warm_start: bool,
    /// The last substep's problem over its active nodes.
    pub problem: SubstepProblem,
    /// The quasi-Newton buffers; `qn.v` and `qn.impulses` hold the last substep's solution.
    pub qn: QnWorkspace,
    /// Δp per grid node from the last substep (zero off its active nodes), and its h.
    correction: Vec<Vector3<f64>>,
    correction_h: f64,
    v0: Vec<Vector3<f64>>,
    v_grid: Vec<Vector3<f64>>,
    compact: Vec<usize>,
    spare: Vec<GridContact>,
    hits: Vec<Hit>,
    stencil: Vec<(usize, f64)>,
    nodes: Vec<(usize, f64)>,
    wrenches: Vec<Wrench>,
}

impl Default for CouplingWorkspace {
    fn default() -> Self {
        Self::new()
    }
}

impl CouplingWorkspace {
    /// Empty buffers (they grow on the first substeps), warm start off.
    pub fn new() -> Self {
        Self {
            warm_start: false,
            problem: SubstepProblem::default(),
            qn: QnWorkspace::default(),
            correction: Vec::new(),
            correction_h: 0.0,
            v0: Vec::new(),
            v_grid: Vec::new(),
            compact: Vec::new(),
            spare: Vec::new(),
            hits: Vec::new(),
            stencil: Vec::with_capacity(27),
            nodes: Vec::with_capacity(27),
            wrenches: Vec::new(),
        }
    }

    /// Forgets the warm start (the next solve starts from v*).
    pub fn reset_warm_start(&mut self) {
        self.correction.clear();
        self.correction_h = 0.0;
    }

    /// The warm-start guess v⁰ for the registered problem (`self.problem`, substep length `h`)
    /// over its nodes, kept in the workspace ([`Self::warm_v0`]); false when there is none or
    /// it is not better than v* (ℓ_p(v⁰) ≥ ℓ_p(v*)): the solve then starts from v*.
    pub fn prepare_warm_start(&mut self, h: f64) -> bool {
        let SubstepProblem { problem, active } = &self.problem;
        if !self.warm_start
            || self.correction_h <= 0.0
            || problem.contacts.is_empty()
            || active.iter().any(|&k| k >= self.correction.len())
        {
            return false;
        }
        let scale = h / self.correction_h;
        self.v0.clear();
        let mut moved = false;
        for (c, &k) in active.iter().enumerate() {
            let dp = self.correction[k];
            let v = if dp == Vector3::zeros() {
                problem.v_star[c]
            } else {
                moved = true;
                problem.v_star[c] + (dp * scale).component_div(&problem.mass[c])
            };
            self.v0.push(v);
        }
        moved && problem.objective(&self.v0) < problem.objective(&problem.v_star)
    }

    /// The last guess of [`Self::prepare_warm_start`].
    pub fn warm_v0(&self) -> &[Vector3<f64>] {
        &self.v0
    }

    /// Keeps Δp = M(v − v*) of the solution just computed, per grid node.
    fn keep_correction(&mut self, grid_nodes: usize, h: f64) {
        let SubstepProblem { problem, active } = &self.problem;
        self.correction.clear();
        self.correction.resize(grid_nodes, Vector3::zeros());
        for (c, &k) in active.iter().enumerate() {
            self.correction[k] = (self.qn.v[c] - problem.v_star[c]).component_mul(&problem.mass[c]);
        }
        self.correction_h = h;
    }
}

/// [`coupled_step`] in the caller's buffers (see [`CouplingWorkspace`]); keep one workspace
/// per simulation so that the warm start carries from step to step.
pub fn coupled_step_in<G: GridContactProblem + ?Sized>(
    world: &mut RigidWorld,
    grid: &mut G,
    dt: f64,
    substeps: usize,
    options: &SolverOptions,
    ws: &mut CouplingWorkspace,
) -> Result<CoupledStepReport, CouplingError> {
    if substeps == 0 || !(dt > 0.0 && dt.is_finite()) {
        return Err(CouplingError::InvalidStep { dt, substeps });
    }
    let h = dt / substeps as f64;
    let nb = world.bodies.len();
    let mut report = CoupledStepReport {
        body_impulses: vec![Wrench::default(); nb],
        contacts_per_substep: Vec::with_capacity(substeps),
        iterations_per_substep: Vec::with_capacity(substeps),
        ..Default::default()
    };
    for substep in 0..substeps {
        grid.free_motion(h)
            .map_err(|source| CouplingError::Grid { substep, source })?;
        assemble_substep_problem_in(world, &*grid, h, ws).map_err(|e| e.at_substep(substep))?;
        let warm = ws.prepare_warm_start(h);
        let v0 = if warm { Some(&ws.v0[..]) } else { None };
        let stats = ws
            .problem
            .problem
            .solve_quasi_newton_in(v0, options, &mut ws.qn)
            .map_err(|source| CouplingError::Contact { substep, source })?;
        // −R_c γ_c per body, summed over the substep's contacts, then added to the step's.
        ws.wrenches.clear();
        ws.wrenches.resize(nb, Wrench::default());
        for (c, g) in ws.problem.problem.contacts.iter().zip(&ws.qn.impulses) {
            if let Some(b) = c.body.filter(|&b| b < nb) {
                let f = -(c.frame * g);
                ws.wrenches[b] += Wrench {
                    force: f,
                    torque: c.lever.cross(&f),
                };
            }
        }
        for (acc, w) in report.body_impulses.iter_mut().zip(&ws.wrenches) {
            *acc += *w;
        }
        report
            .contacts_per_substep
            .push(ws.problem.problem.contacts.len());
        report.iterations_per_substep.push(stats.iterations);
        ws.v_grid.clear();
        ws.v_grid.extend_from_slice(grid.free_velocities());
        for (c, &k) in ws.problem.active.iter().enumerate() {
            ws.v_grid[k] = ws.qn.v[c];
        }
        ws.keep_correction(ws.v_grid.len(), h);
        grid.finish_substep(&ws.v_grid, h)
            .map_err(|source| CouplingError::Grid { substep, source })?;
    }
    report.rigid = world.step(dt, &report.body_impulses)?;
    Ok(report)
}

/// The convex contact problem of one substep over the active (m > 0) nodes, with the map
/// back to the grid's node indices.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SubstepProblem {
    /// The problem over active nodes (node c of the problem is grid node `active[c]`).
    pub problem: GridProblem,
    /// Grid node index of each problem node.
    pub active: Vec<usize>,
}

/// A particle's hit of one geometry: body (None for a half-space), φ, n̂, the rigid point
/// velocity, the lever about the body's centre of mass and the surface's MPM parameters.
type Hit = (
    Option<usize>,
    f64,
    Vector3<f64>,
    Vector3<f64>,
    Vector3<f64>,
    LaggedParams,
);

/// Registers the contacts of one substep (module doc) after the grid's free motion: one per
/// particle–geometry pair with φ < 0 at the current (step-start) rigid pose, against every
/// body of `world` (free or prescribed) and every half-space. Substep indices in errors are 0;
/// [`coupled_step`] replaces them with the real one.
pub fn assemble_substep_problem<G: GridContactProblem + ?Sized>(
    world: &RigidWorld,
    grid: &G,
    h: f64,
) -> Result<SubstepProblem, CouplingError> {
    let mut ws = CouplingWorkspace::new();
    assemble_substep_problem_in(world, grid, h, &mut ws)?;
    Ok(ws.problem)
}

/// [`assemble_substep_problem`] into `ws.problem`, reusing its buffers (no allocation once
/// they have grown).
pub fn assemble_substep_problem_in<G: GridContactProblem + ?Sized>(
    world: &RigidWorld,
    grid: &G,
    h: f64,
    ws: &mut CouplingWorkspace,
) -> Result<(), CouplingError> {
    let (masses, v_free) = (grid.node_masses(), grid.free_velocities());
    if masses.len() != v_free.len() {
        return Err(CouplingError::GridSize {
            masses: masses.len(),
            velocities: v_free.len(),
        });
    }
    // Active nodes only (the convex problem needs M ≻ 0).
    let SubstepProblem { problem, active } = &mut ws.problem;
    ws.compact.clear();
    ws.compact.resize(masses.len(), usize::MAX);
    active.clear();
    problem.mass.clear();
    problem.v_star.clear();
    for (k, &m) in masses.iter().enumerate() {
        if m > 0.0 {
            ws.compact[k] = active.len();
            active.push(k);
            problem.mass.push(Vector3::repeat(m));
            problem.v_star.push(v_free[k]);
        }
    }
    ws.spare.append(&mut problem.contacts);
    for p in 0..grid.num_particles() {
        let x = grid.particle_position(p);
        ws.hits.clear();
        for (b, body) in world.bodies.iter().enumerate() {
            let (phi, n) = body.sdf(&x);
            if phi < 0.0 {
                ws.hits.push((
                    Some(b),
                    phi,
                    n,
                    body.point_velocity(&x),
                    x - body.com(),
                    body.mpm_contact,
                ));
            }
        }
        for plane in &world.planes {
            let phi = plane.sdf(&x);
            if phi < 0.0 {
                ws.hits.push((
                    None,
                    phi,
                    plane.normal,
                    Vector3::zeros(),
                    Vector3::zeros(),
                    plane.mpm_contact,
                ));
            }
        }
        if ws.hits.is_empty() {
            continue;
        }
        ws.stencil.clear();
        grid.particle_stencil(p, &mut ws.stencil);
        ws.stencil.retain(|&(_, w)| w != 0.0);
        ws.nodes.clear();
        let mut delassus = 0.0;
        for &(k, w) in &ws.stencil {
            let c = ws.compact.get(k).copied().unwrap_or(usize::MAX);
            if c == usize::MAX {
                return Err(CouplingError::BadStencil {
                    particle: p,
                    node: k,
                });
            }
            ws.nodes.push((c, w));
            delassus += w * w / masses[k];
        }
        let vp = grid.particle_velocity(p);
        for &(body, phi, n, v_rigid, lever, params) in &ws.hits {
            let frame = contact_frame(&n);
            let model = LaggedContact::new(&params, h, phi, n.dot(&(vp - v_rigid)), delassus)
                .map_err(|source| CouplingError::Contact { substep: 0, source })?;
            let contact = match ws.spare.pop() {
                Some(mut c) => {
                    c.nodes.clear();
                    c.nodes.extend_from_slice(&ws.nodes);
                    c.frame = frame;
                    c.bias = frame.tr_mul(&v_rigid);
                    c.model = model;
                    c.body = body;
                    c.lever = lever;
                    c
                }
                None => GridContact {
                    nodes: ws.nodes.clone(),
                    frame,
                    bias: frame.tr_mul(&v_rigid),
                    model,
                    body,
                    lever,
                },
            };
            problem.contacts.push(contact);
        }
    }
    Ok(())
}

impl CouplingError {
    /// Sets the substep index of a per-substep error.
    fn at_substep(self, substep: usize) -> Self {
        match self {
            CouplingError::Contact { source, .. } => CouplingError::Contact { substep, source },
            CouplingError::Grid { source, .. } => CouplingError::Grid { substep, source },
            other => other,
        }
    }
}
