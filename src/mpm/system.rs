//! The MPM–rigid system on the one time loop: one frame = one asynchronous coupled step
//! (seed §IV-A, Eq. 3–4; `diffphd_mpm::contact::coupled_step`): N MPM substeps of Δt/N, each
//! P2G → grid update (→ optional grid damping) → the convex contact solve
//! argmin_v ½‖v − v*‖²_M + Σ ℓ_c(J_c v − b_c) (lagged Hunt–Crossley, quasi-Newton with exact
//! line search, ε_r = `mpm.rel_tol`) → G2P and return mapping, against the rigid state
//! frozen at tⁿ; then one rigid step of Δt with the accumulated impulses. Without MPM bodies
//! a frame is one rigid step (`RigidWorld::step`). With `mpm.coupling = "strong"` a frame is
//! instead one strongly coupled, fully implicit step (`diffphd_mpm::strong::strong_step`, the
//! seed's baseline \[10\]: grid velocities, rigid DoFs and contact in one convex problem, Newton
//! with a sparse Cholesky, ε_r = `mpm.rel_tol`); its Newton iterations are reported as the
//! frame's solver iterations.

use super::super::scene::mpm::{CouplingKind, MpmSettings};
use super::super::scene::Scene;
use crate::solver::timeloop::TimeStepped;
use diffphd_mpm::contact::{
    coupled_step_in, ContactError, CoupledStepReport, CouplingError, CouplingWorkspace,
    GridContactProblem, SolverOptions, Wrench,
};
use diffphd_mpm::mpm::{MpmError, Simulation};
use diffphd_mpm::rigid::{RigidError, RigidWorld};
use diffphd_mpm::strong::strong_step;
use nalgebra::Vector3;

/// The opaque state of an MPM/rigid rollout: the particles and grid (absent without MPM
/// bodies) and the rigid world (bodies, poses, velocities, half-spaces, time).
#[derive(Debug, Clone)]
pub struct MpmState {
    pub sim: Option<Simulation>,
    pub world: RigidWorld,
}

/// What one frame's step reports.
#[derive(Debug, Clone, Default)]
pub struct MpmStepStats {
    /// Mean force and torque (about the centre of mass) of the MPM particles on each rigid
    /// body over the step: the accumulated impulses / Δt (the rigid bodies' order).
    pub mpm_wrenches: Vec<Wrench>,
    /// Mean force and torque of rigid–rigid and rigid–obstacle contacts on each body.
    pub rigid_wrenches: Vec<Wrench>,
    /// Largest number of particle contacts in one substep.
    pub contacts: usize,
    /// Quasi-Newton iterations: largest and total over the substeps.
    pub qn_iterations_max: usize,
    pub qn_iterations_total: usize,
    /// Rigid contacts of the rigid step and its Newton iterations.
    pub rigid_contacts: usize,
    pub rigid_iterations: usize,
}

/// Why a step failed. [`MpmStepError::exit_code`]: 3 for the CFL guard and a contact solve
/// that missed its tolerance, 2 for an unsupported contact pair, 1 otherwise.
#[derive(Debug, thiserror::Error)]
pub enum MpmStepError {
    /// A particle moved more than h in a substep (the run ends; no frame is written).
    #[error(
        "substep {substep} of {substeps}: particle {particle} moved {distance:e} m in one \
         substep, more than the grid spacing h = {h} m (raise mpm.substeps or lower \
         simulation.dt)"
    )]
    Cfl {
        substep: usize,
        substeps: usize,
        particle: usize,
        distance: f64,
        h: f64,
    },
    /// Any other failure of the MPM core in a substep (non-finite, inverted, left the grid).
    /// The caller's [`crate::cancel::Cancel`] token tripped before substep `substep`
    /// (0-based) of the frame; exit code 130, as an interrupt.
    #[error("substep {substep} of {substeps}: cancelled")]
    Cancelled { substep: usize, substeps: usize },
    #[error("substep {substep} of {substeps}: {source}")]
    Mpm {
        substep: usize,
        substeps: usize,
        source: MpmError,
    },
    /// The contact solve of a substep failed (not converged: raise `mpm.max_iterations` or
    /// `mpm.rel_tol`).
    #[error("substep {substep} of {substeps}: MPM contact solve: {source}")]
    Contact {
        substep: usize,
        substeps: usize,
        source: ContactError,
    },
    /// The rigid step failed or a contact pair is not supported.
    #[error("rigid step: {0}")]
    Rigid(RigidError),
    /// The MPM accelerator's device failed ([`MpmOffload`]).
    #[error("device: {0}")]
    Device(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Any other coupling error.
    #[error("{0}")]
    Coupling(CouplingError),
}

impl MpmStepError {
    /// The command line's exit code (see the type's doc).
    pub fn exit_code(&self) -> i32 {
        match self {
            MpmStepError::Cancelled { .. } => 130,
            MpmStepError::Cfl { .. } => 3,
            MpmStepError::Contact {
                source: ContactError::NotConverged { .. },
                ..
            } => 3,
            MpmStepError::Rigid(RigidError::Unsupported { .. }) => 2,
            MpmStepError::Rigid(RigidError::Contact(ContactError::NotConverged { .. })) => 3,
            _ => 1,
        }
    }

    /// The step error of a coupled step's error (`substeps` substeps a step).
    pub fn from_coupling(e: CouplingError, substeps: usize) -> Self {
        match e {
            CouplingError::Grid {
                substep,
                source:
                    MpmError::Cfl {
                        particle,
                        distance,
                        h,
                        ..
                    },
            } => MpmStepError::Cfl {
                substep,
                substeps,
                particle,
                distance,
                h,
            },
            CouplingError::Grid {
                substep,
                source: MpmError::Stopped { .. },
            } => MpmStepError::Cancelled { substep, substeps },
            CouplingError::Grid { substep, source } => MpmStepError::Mpm {
                substep,
                substeps,
                source,
            },
            CouplingError::Contact { substep, source } => MpmStepError::Contact {
                substep,
                substeps,
                source,
            },
            CouplingError::Rigid(r) => MpmStepError::Rigid(r),
            other => MpmStepError::Coupling(other),
        }
    }
}

/// What a weak-coupling step asks of an [`MpmOffload`].
#[derive(Debug, Clone, Copy)]
pub struct MpmOffloadStep<'a> {
    /// The rigid step Δt and its MPM substeps N.
    pub dt: f64,
    pub substeps: usize,
    /// The grid damping factor e^{−c Δt/N} applied to v* every substep (1: none).
    pub damp: f64,
    /// The contact solve's settings.
    pub options: &'a SolverOptions,
    /// Polled before every substep.
    pub cancel: &'a crate::cancel::Cancel,
}

/// The accelerator seam of the weak coupling: one asynchronous coupled step
/// (`diffphd_mpm::contact::coupled_step`) with the MPM substeps elsewhere (a device:
/// `gpu::mpm_contact::DeviceMpmOffload`, which keeps the particles resident and writes them
/// back into `sim` after the step). Without one the step runs on the CPU.
pub trait MpmOffload: Send + std::fmt::Debug {
    /// One coupled step of `world` and `sim`; errors as the CPU step's.
    fn coupled_step(
        &mut self,
        world: &mut RigidWorld,
        sim: &mut Simulation,
        step: MpmOffloadStep<'_>,
    ) -> Result<CoupledStepReport, MpmStepError>;
    /// What runs where, for the command line.
    fn describe(&self) -> String;
    /// The device's launches and copies so far, where it counts them (the emulator and CUDA
    /// devices of `gpu::mpm_contact::mpm_offload` do); `None` otherwise.
    fn traffic(&self) -> Option<crate::solver::offload::DeviceTraffic> {
        None
    }
}

/// The settings of an MPM/rigid rollout (the state is [`MpmState`]).
#[derive(Debug, Clone)]
pub struct MpmSystem {
    /// Frame (rigid) time step Δt.
    pub dt: f64,
    /// MPM substeps N per frame.
    pub substeps: usize,
    /// Weak (seed) or strong (baseline \[10\]) coupling (`mpm.coupling`).
    pub coupling: CouplingKind,
    /// Frames of the run (`simulation.frames`).
    pub frames: usize,
    /// The quasi-Newton solve's settings (`mpm.rel_tol`, `mpm.max_iterations`).
    pub options: SolverOptions,
    /// Grid damping rate (1/s) and its end time.
    pub grid_damping: f64,
    pub grid_damping_until: f64,
    /// Name of each rigid body of the world (`[[rigid_body]]`s, then obstacle colliders).
    pub body_names: Vec<String>,
    /// Name of each MPM body (material index).
    pub mpm_body_names: Vec<String>,
    /// Velocity damping rate (1/s) of each rigid body.
    pub velocity_damping: Vec<f64>,
    /// Simulated time of the state.
    pub time: f64,
    /// The caller's cancellation token, polled before every MPM substep
    /// ([`crate::cancel`]; [`crate::cancel::Cancel::current`] when built).
    pub cancel: crate::cancel::Cancel,
    /// The weak coupling's buffers, sized once, and its contact solves' warm start
    /// (`diffphd_mpm::contact::CouplingWorkspace`), carried from frame to frame.
    pub workspace: CouplingWorkspace,
    /// The weak coupling's accelerator (`--backend emulator|cuda`); `None`: the CPU.
    pub offload: Option<std::sync::Arc<std::sync::Mutex<dyn MpmOffload>>>,
}

impl MpmSystem {
    pub(super) fn new(
        dt: f64,
        m: Option<&MpmSettings>,
        body_names: Vec<String>,
        velocity_damping: Vec<f64>,
        scene: &Scene,
    ) -> Self {
        let options = SolverOptions {
            rel_tol: m.map_or(5e-2, |m| m.rel_tol),
            max_iterations: m.map_or(1000, |m| m.max_iterations),
            ..SolverOptions::default()
        };
        MpmSystem {
            dt,
            substeps: m.map_or(1, |m| m.substeps),
            coupling: m.map_or(CouplingKind::Weak, |m| m.coupling),
            frames: scene.simulation.frames,
            options,
            grid_damping: m.map_or(0.0, |m| m.grid_damping),
            grid_damping_until: m
                .and_then(|m| m.grid_damping_until)
                .unwrap_or(f64::INFINITY),
            body_names,
            mpm_body_names: scene
                .mpm_bodies
                .iter()
                .enumerate()
                .map(|(i, b)| b.name.clone().unwrap_or_else(|| format!("mpm_body[{i}]")))
                .collect(),
            velocity_damping,
            time: 0.0,
            cancel: crate::cancel::Cancel::current(),
            workspace: CouplingWorkspace::new(),
            offload: None,
        }
    }
}

/// The simulation with the grid damping v* ← e^{−c h} v* after each free motion.
struct DampedGrid<'a> {
    sim: &'a mut Simulation,
    rate: f64,
    /// Polled before each substep's free motion; `substep` counts them.
    cancel: &'a crate::cancel::Cancel,
    substep: usize,
}

impl GridContactProblem for DampedGrid<'_> {
    fn free_motion(&mut self, h: f64) -> Result<(), MpmError> {
        if self
            .cancel
            .poll(crate::cancel::Stage::Mpm, self.substep)
            .is_err()
        {
            return Err(MpmError::Stopped {
                substep: self.substep as u64,
            });
        }
        self.substep += 1;
        self.sim.free_motion(h)?;
        if self.rate > 0.0 {
            let f = (-self.rate * h).exp();
            self.sim
                .grid_mut()
                .velocity_mut()
                .iter_mut()
                .for_each(|v| *v *= f);
        }
        Ok(())
    }
    fn node_masses(&self) -> &[f64] {
        self.sim.node_masses()
    }
    fn free_velocities(&self) -> &[Vector3<f64>] {
        GridContactProblem::free_velocities(&*self.sim)
    }
    fn num_particles(&self) -> usize {
        GridContactProblem::num_particles(&*self.sim)
    }
    fn particle_position(&self, p: usize) -> Vector3<f64> {
        self.sim.particle_position(p)
    }
    fn particle_velocity(&self, p: usize) -> Vector3<f64> {
        self.sim.particle_velocity(p)
    }
    fn particle_stencil(&self, p: usize, out: &mut Vec<(usize, f64)>) {
        GridContactProblem::particle_stencil(&*self.sim, p, out)
    }
    fn finish_substep(&mut self, v: &[Vector3<f64>], h: f64) -> Result<(), MpmError> {
        GridContactProblem::finish_substep(&mut *self.sim, v, h)
    }
}

/// Per-body mean force/torque of the rigid contacts of a step (impulses / Δt; torque about
/// the body's centre of mass at the step end).
fn rigid_wrenches(
    world: &RigidWorld,
    rep: &diffphd_mpm::rigid::RigidStepReport,
    dt: f64,
) -> Vec<Wrench> {
    let mut out = vec![Wrench::default(); world.bodies.len()];
    for c in &rep.contacts {
        let f = c.impulse / dt;
        let mut add = |b: usize, f: Vector3<f64>| {
            if let (Some(w), Some(body)) = (out.get_mut(b), world.bodies.get(b)) {
                w.force += f;
                w.torque += (c.point - body.com()).cross(&f);
            }
        };
        add(c.body_a, f);
        if let Some(b) = c.body_b {
            add(b, -f);
        }
    }
    out
}

impl TimeStepped for MpmSystem {
    type State = MpmState;
    type Stats = MpmStepStats;
    type Error = MpmStepError;

    fn frame_dt(&self) -> f64 {
        self.dt
    }

    fn advance(&mut self, frame: usize, s: &mut MpmState) -> Result<MpmStepStats, MpmStepError> {
        let t = (frame - 1) as f64 * self.dt;
        let n = self.substeps;
        let mut stats = MpmStepStats::default();
        match s.sim.as_mut() {
            Some(sim) => {
                let rate = if t < self.grid_damping_until {
                    self.grid_damping
                } else {
                    0.0
                };
                let rep = match (self.coupling, self.offload.as_ref()) {
                    (CouplingKind::Weak, Some(off)) => {
                        let h = self.dt / n as f64;
                        let step = MpmOffloadStep {
                            dt: self.dt,
                            substeps: n,
                            damp: if rate > 0.0 { (-rate * h).exp() } else { 1.0 },
                            options: &self.options,
                            cancel: &self.cancel,
                        };
                        let mut off = off.lock().unwrap_or_else(|p| p.into_inner());
                        Ok(off.coupled_step(&mut s.world, sim, step)?)
                    }
                    (CouplingKind::Weak, None) => {
                        let mut grid = DampedGrid {
                            sim,
                            rate,
                            cancel: &self.cancel,
                            substep: 0,
                        };
                        coupled_step_in(
                            &mut s.world,
                            &mut grid,
                            self.dt,
                            n,
                            &self.options,
                            &mut self.workspace,
                        )
                    }
                    (CouplingKind::Strong, _) => {
                        if self.cancel.poll(crate::cancel::Stage::Mpm, 0).is_err() {
                            return Err(MpmStepError::Cancelled {
                                substep: 0,
                                substeps: 1,
                            });
                        }
                        let damping = (-rate * self.dt).exp();
                        strong_step(&mut s.world, sim, self.dt, &self.options, damping)
                    }
                }
                .map_err(|e| MpmStepError::from_coupling(e, n))?;
                stats.mpm_wrenches = rep
                    .body_impulses
                    .iter()
                    .map(|w| Wrench {
                        force: w.force / self.dt,
                        torque: w.torque / self.dt,
                    })
                    .collect();
                stats.contacts = rep.contacts_per_substep.iter().copied().max().unwrap_or(0);
                stats.qn_iterations_max = rep
                    .iterations_per_substep
                    .iter()
                    .copied()
                    .max()
                    .unwrap_or(0);
                stats.qn_iterations_total = rep.iterations_per_substep.iter().sum();
                stats.rigid_wrenches = rigid_wrenches(&s.world, &rep.rigid, self.dt);
                stats.rigid_contacts = rep.rigid.contacts.len();
                stats.rigid_iterations = rep.rigid.iterations;
            }
            None => {
                let rep = s.world.step(self.dt, &[]).map_err(MpmStepError::Rigid)?;
                stats.mpm_wrenches = vec![Wrench::default(); s.world.bodies.len()];
                stats.rigid_wrenches = rigid_wrenches(&s.world, &rep, self.dt);
                stats.rigid_contacts = rep.contacts.len();
                stats.rigid_iterations = rep.iterations;
            }
        }
        for (b, &c) in s.world.bodies.iter_mut().zip(&self.velocity_damping) {
            if c > 0.0 {
                let f = (-c * self.dt).exp();
                for a in 0..3 {
                    if b.drives[a].is_dynamic() {
                        b.velocity[a] *= f;
                    }
                }
            }
        }
        self.time = frame as f64 * self.dt;
        Ok(stats)
    }
}
