//! `log.json`: run header plus one record per frame. Rewritten atomically after each frame
//! so that it is valid JSON at every moment of a run, including after a failure.

use serde::Serialize;

/// Header of a run.
#[derive(Clone, Debug, Serialize)]
pub struct RunHeader {
    pub diffphd_version: String,
    /// Git commit the binary was built from (`-dirty` with local changes); null outside a checkout.
    pub git_commit: Option<String>,
    pub command: String,
    pub scene: String,
    /// SHA-256 of the effective scene (after `--set` overrides).
    pub scene_hash: String,
    pub overrides: Vec<String>,
    pub threads: usize,
    pub backend: diffphd::gpu::Backend,
    pub nodes: usize,
    pub elements: usize,
    pub samples: usize,
    pub dt: f64,
    pub frames_requested: usize,
    pub heterogeneous: bool,
    pub anderson_window: usize,
    /// `solver.gate_reference` of the run: what the position gate is relative to.
    pub gate_reference: diffphd::model::GateReference,
    /// `solver.method` of the run (`diffphd`, `diffpd`, `newton`; `auto` resolved).
    pub solver_method: String,
    /// Why `solver.method = "auto"` chose `solver_method` (absent for an explicit method).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method_reason: Option<String>,
    /// The rule's inputs behind `method_reason` (DoF, nnz(L), factor flops, stiffness
    /// contrast, contact candidates; absent for an explicit method).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method_quantities: Option<diffphd::solver::auto::MethodQuantities>,
    /// Assembly + ordering + factorization time (s).
    pub setup_seconds: f64,
    /// Stored entries of the Cholesky factor(s).
    pub factor_nnz: usize,
    /// Input the model repaired (e.g. re-oriented elements).
    pub warnings: Vec<String>,
}

use diffphd::diagnostics::{finite_or_name, Diagnostics};

/// One frame of the log.
#[derive(Clone, Debug, Serialize)]
pub struct FrameRecord {
    pub frame: usize,
    pub time: f64,
    pub iterations: usize,
    pub converged: bool,
    /// Position-gate residual at exit (≤ 1 = met); `"inf"`/`"nan"` when not finite.
    #[serde(serialize_with = "finite_or_name")]
    pub gate_position: f64,
    /// Projection-gate residual at exit (≤ 1 = met); `"inf"`/`"nan"` when not finite.
    #[serde(serialize_with = "finite_or_name")]
    pub gate_projection: f64,
    pub anderson_guard_firings: usize,
    /// Newton polish steps and final relative PD residual (with `solver.newton_polish > 0`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub polish: Option<(usize, f64)>,
    /// `solver.mode = "accurate"`: the step's final force residual relative to its first one
    /// (the quantity of `solver.residual_tol`), Newton–Krylov steps and their GMRES iterations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub residual: Option<ResidualRecord>,
    pub seconds_local: f64,
    pub seconds_global: f64,
    pub seconds_other: f64,
    /// Elements with a quadrature sample whose deformation gradient has det F ≤ 0 at the end
    /// of the frame (inverted), when there are any: `[count, first element]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inverted_elements: Option<(usize, usize)>,
    /// File written for this frame, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Physics diagnostics of the state at the end of the frame: the material law's elastic
    /// energy, kinetic and gravitational energy, centre of mass, linear and angular momentum,
    /// extreme principal strains, inverted elements ([`diffphd::diagnostics`]).
    pub diagnostics: Diagnostics,
    /// Contact statistics (scenes with obstacles): active contacts, max penetration,
    /// complementarity residual, timings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contact: Option<diffphd::contact::ContactStats>,
    /// Newton statistics (`solver.method = "newton"`): iterations, line-search halvings,
    /// projected elements, regularisations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newton: Option<NewtonRecord>,
    /// `solver.method = "auto"`: the method whose attempt missed this step's stopping test;
    /// the other method then solved the step from its start (these are its statistics).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retried_from: Option<diffphd::model::SolverMethod>,
    /// `solver.method = "auto"`: the method that solved this step (`diffphd` or `newton`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<diffphd::model::SolverMethod>,
    /// `solver.method = "auto"`: the step began with a probe of PD capped at this many
    /// iterations (docs/scene-format.md, "`method = "auto"`", per frame).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_budget: Option<usize>,
    /// `solver.method = "auto"`: the iterations and wall seconds of the attempts at this step
    /// that missed (a failed probe or a retry); the statistics above do not count them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missed_iterations: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missed_seconds: Option<f64>,
    /// `solver.diffpd_linear = "schwarz"`: the step's PCG solves (count, iterations, and
    /// `not_converged`: solves stopped at the iteration cap).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schwarz: Option<diffphd::solver::stats::PcgStats>,
}

/// The force-balance record of a step under `solver.mode = "accurate"`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ResidualRecord {
    /// $\|b(x)-Ax\|/\|b(x^0)-Ax^0\|$ at exit; `"inf"` when never evaluated.
    #[serde(serialize_with = "finite_or_name")]
    pub relative: f64,
    pub newton_krylov_steps: usize,
    pub gmres_iterations: usize,
}

/// Newton statistics of one step, as logged (the solver's per-step Newton counters).
#[derive(Clone, Debug, Default, Serialize)]
pub struct NewtonRecord {
    pub iterations: usize,
    pub converged: bool,
    /// Final $\|\nabla g\|/\mathrm{scale}$ on the free DoFs.
    pub relative_gradient: f64,
    /// Armijo halvings summed over the iterations.
    pub line_search_halvings: usize,
    /// Element Hessians eigen-decomposed and projected by the filter.
    pub projected_elements: usize,
    /// Of those, elements whose Hessian the projection actually changed.
    pub modified_elements: usize,
    /// Failed (indefinite) factorizations.
    pub indefinite_factorizations: usize,
    /// Diagonal shifts applied (`none` filter on an indefinite Hessian).
    pub regularizations: usize,
    pub factorizations: usize,
    /// `"converged to round-off"` when the step stopped at the round-off floor instead of
    /// `solver.newton_tol` (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<&'static str>,
    /// The round-off floor $\epsilon\,\||K|\,|x|\|/s$ in the units of `relative_gradient`, where the
    /// step checked it (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roundoff_floor: Option<f64>,
}

/// Run outcome.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// In progress, or ended without a final record (killed): incomplete.
    Running,
    Completed,
    /// Ran to its last frame, but some frames missed their stopping test
    /// (`solver.on_nonconvergence = "fail"`, the default; exit code 3).
    Incomplete,
    Failed,
    /// Stopped by SIGINT/SIGTERM/SIGHUP after a complete frame.
    Interrupted,
}

/// The whole log.
#[derive(Clone, Debug, Serialize)]
pub struct RunLog {
    pub header: RunHeader,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The diagnostics of the initial state (frame 0, which has no frame record).
    pub initial_diagnostics: Diagnostics,
    pub frames: Vec<FrameRecord>,
    pub summary: Summary,
}

/// Totals over the frames so far.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub frames_done: usize,
    pub total_iterations: usize,
    pub max_iterations: usize,
    pub nonconverged_frames: usize,
    pub seconds_local: f64,
    pub seconds_global: f64,
    pub seconds_other: f64,
    pub seconds_total: f64,
    /// Largest penetration over all frames (m; scenes with obstacles).
    pub max_penetration: f64,
    /// Largest number of active contacts in a frame.
    pub max_active_contacts: usize,
    /// Contact set-up and solve time over all frames (s).
    pub seconds_contact: f64,
    /// The device's launches and copies over the frames (GPU backends; the setup excluded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_traffic: Option<diffphd::solver::offload::DeviceTraffic>,
    /// `solver.method = "auto"`: frames solved by each method, and the frames that began
    /// with a probe of PD.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method_frames: Option<MethodFrames>,
}

/// Frames per method of a `solver.method = "auto"` run (`Summary::method_frames`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct MethodFrames {
    pub diffphd: usize,
    pub newton: usize,
    pub probes: usize,
}

impl RunLog {
    pub fn push(&mut self, r: FrameRecord) {
        let s = &mut self.summary;
        s.frames_done += 1;
        s.total_iterations += r.iterations;
        s.max_iterations = s.max_iterations.max(r.iterations);
        s.nonconverged_frames += usize::from(!r.converged);
        s.seconds_local += r.seconds_local;
        s.seconds_global += r.seconds_global;
        s.seconds_other += r.seconds_other;
        if let Some(m) = r.method {
            let f = s.method_frames.get_or_insert_with(MethodFrames::default);
            match m {
                diffphd::model::SolverMethod::Newton => f.newton += 1,
                _ => f.diffphd += 1,
            }
            f.probes += usize::from(r.probe_budget.is_some());
        }
        if let Some(c) = &r.contact {
            s.max_penetration = s.max_penetration.max(c.max_penetration);
            s.max_active_contacts = s.max_active_contacts.max(c.active);
            s.seconds_contact += c.seconds_setup + c.seconds_solve;
        }
        self.frames.push(r);
    }
}

/// `log.json` of an MPM/rigid `simulate` run (docs/mpm.md): header, status, one record per
/// frame; rewritten atomically after each frame as the PD log is.
#[derive(Clone, Debug, Serialize)]
pub struct MpmRunLog {
    pub header: MpmRunHeader,
    pub status: Status,
    pub error: Option<String>,
    pub frames: Vec<MpmFrameRecord>,
    /// Wall-clock seconds of the stepping so far.
    pub seconds_total: f64,
}

/// Header of an MPM/rigid run.
#[derive(Clone, Debug, Serialize)]
pub struct MpmRunHeader {
    pub diffphd_version: String,
    pub git_commit: Option<String>,
    pub command: String,
    pub scene: String,
    pub scene_hash: String,
    pub overrides: Vec<String>,
    pub threads: usize,
    /// `"mpm"`: the MPM–rigid system (docs/mpm.md).
    pub system: String,
    /// Frame (rigid) time step Δt (s) and MPM substeps N per frame.
    pub dt: f64,
    pub substeps: usize,
    pub frames_requested: usize,
    pub particles: usize,
    pub grid_nodes: u64,
    /// Grid spacing h (m), absent without MPM bodies.
    pub spacing: Option<f64>,
    /// Estimated bytes of the MPM state (grid and particles).
    pub memory_bytes: Option<u64>,
    pub mpm_bodies: Vec<String>,
    /// Rigid bodies, then obstacle colliders, in the order of `frames[].bodies`.
    pub rigid_bodies: Vec<String>,
    /// Each MPM body's total mass (kg).
    pub mpm_body_masses: Vec<f64>,
    /// Each rigid body's mass (kg).
    pub rigid_body_masses: Vec<f64>,
}

/// One frame of an MPM/rigid run.
#[derive(Clone, Debug, Serialize)]
pub struct MpmFrameRecord {
    pub frame: usize,
    pub time: f64,
    /// Energies and linear momentum (`diffphd::mpm::FrameEnergies`).
    pub energies: diffphd::mpm::FrameEnergies,
    /// Largest particle contact count of a substep; quasi-Newton iterations (largest, total).
    pub contacts: usize,
    pub qn_iterations_max: usize,
    pub qn_iterations_total: usize,
    pub rigid_contacts: usize,
    pub bodies: Vec<RigidBodyRecord>,
    /// Frame files written for this frame.
    pub files: Vec<String>,
    /// `--backend emulator|cuda`: the device's launches and host↔device copies during this
    /// frame's step (absent on the CPU; docs/gpu.md "MPM contact").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_traffic: Option<diffphd::solver::offload::DeviceTraffic>,
}

/// Pose, velocity and contact wrenches of one rigid body after a frame.
#[derive(Clone, Debug, Serialize)]
pub struct RigidBodyRecord {
    /// Centre of mass (m) and orientation of the principal axes (unit quaternion w, x, y, z).
    pub position: [f64; 3],
    pub orientation: [f64; 4],
    pub velocity: [f64; 3],
    pub angular_velocity: [f64; 3],
    /// Mean force (N) and torque about the centre of mass (N·m) of the MPM particles on the
    /// body over the step (the accumulated contact impulses / Δt).
    pub mpm_force: [f64; 3],
    pub mpm_torque: [f64; 3],
    /// The same for rigid–rigid and rigid–obstacle contact.
    pub contact_force: [f64; 3],
    pub contact_torque: [f64; 3],
}
