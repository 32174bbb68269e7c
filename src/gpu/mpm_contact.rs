//! The MPM–rigid contact solve of a substep on a device (`kernels/mpm_contact.cu`), and the
//! asynchronous coupled step (seed Eq. 3–4) with the MPM substeps resident on the device
//! (docs/gpu.md "MPM contact", docs/mpm.md "On a device").
//!
//! Per substep, after [`DeviceMpm::free_motion`] (P2G, grid update; the particles binned):
//!
//! 1. `dphd_mpm_contact_start`: the grid damping of v*, and $v = v^*$;
//! 2. `dphd_mpm_contact_register` (per particle): one slot per (particle, geometry), active
//!    when $\phi < 0$ at the rigid pose frozen for the step: frame, bias $b_c = R_c^T v_r(x_p)$,
//!    the lagged model with $w = \sum_k w_k^2/m_k$ (`contact::assemble_substep_problem`);
//!    the active slots counted (`dphd_sum_partial`, one copy back). No contact: done;
//! 3. the block-diagonal quasi-Newton iteration of `contact::GridProblem::solve_quasi_newton`,
//!    its control on the host: per gradient evaluation `dphd_mpm_contact_eval` (slots),
//!    `dphd_mpm_contact_node` (nodes; a gather over the substep's bins) and
//!    `dphd_mpm_sum_columns`, **one copy back of 6 · partials(nodes) doubles** (the stopping
//!    test's $\|D\nabla\ell\|^2$, $\|DMv\|^2$, $\|DJ^T\gamma\|^2$, $\phi'(0)$, $\Delta v^TM\Delta v$
//!    and a not-SPD count); per iteration `dphd_mpm_contact_direction`, the host's
//!    `contact::line_search::exact_line_search` with **one launch (`dphd_mpm_contact_line`)
//!    and one copy back of 2 · partials(slots) doubles per evaluation** of $(\phi', \phi'')$,
//!    and `dphd_axpy` for $v \mathrel{+}= \alpha\Delta v$. Only these partial sums cross;
//! 4. `dphd_mpm_contact_wrench`: the impulses $-R_c\gamma_c$ and their moments summed per
//!    rigid body (strided partials over fixed chunks of slots, combined in order on the host:
//!    6 · bodies · partials(slots) doubles);
//! 5. [`DeviceMpm::finish`] (G2P with the solved velocities).
//!
//! The rigid step stays on the host (`RigidWorld::step`, a small dense problem): per frame the
//! geometry table is uploaded once (32 doubles a geometry) and the particle state comes back
//! once ([`DeviceMpm::download`]).

use std::sync::{Arc, Mutex};

use diffphd_mpm::contact::line_search::exact_line_search;
use diffphd_mpm::contact::{
    ContactError, CoupledStepReport, CouplingError, LaggedParams, SolverOptions, Wrench,
};
use diffphd_mpm::mpm::Simulation;
use diffphd_mpm::rigid::{RigidWorld, Shape};
use nalgebra::Vector3;

use crate::cancel::Stage;
use crate::gpu::device::{Arg, Device};
use crate::gpu::kernels::Kernel;
use crate::gpu::mpm::{DeviceMpm, DeviceMpmError};
use crate::gpu::reduce;
use crate::gpu::GpuError;
use crate::gpu::{Backend, Counted, Emulator};
use crate::mpm::system::{MpmOffload, MpmOffloadStep, MpmStepError};

/// Doubles per geometry row of the device table (kernels/mpm_contact.cu).
pub const GEOMETRY_ROW: usize = 32;
/// Doubles per contact slot's lagged model (kernels/mpm_contact.cu).
const MODEL_ROW: usize = 8;
/// Columns of the per-node terms (kernels/mpm_contact.cu, `dphd_mpm_contact_node`).
const NODE_TERMS: usize = 6;

/// Device bytes per contact slot, one slot per (particle, geometry): frame 9, bias 3, model 8,
/// lever 3, active 1, v_c 3, γ 3, Rγ 3, RGRᵀ 9, Δv_c 3 doubles.
pub const DEVICE_SLOT_BYTES: u64 = (9 + 3 + 8 + 3 + 1 + 3 + 3 + 3 + 9 + 3) * 8;
/// Device bytes per grid node of the contact solve: v*, Δv (3 doubles each) and the six
/// per-node terms.
pub const DEVICE_CONTACT_NODE_BYTES: u64 = (3 + 3 + NODE_TERMS as u64) * 8;

/// Device memory of the contact solve for `nodes` grid nodes, `particles` particles and
/// `geometries` rigid geometries (bodies and half-spaces) of which `bodies` are bodies:
/// `particles · geometries · DEVICE_SLOT_BYTES + nodes · DEVICE_CONTACT_NODE_BYTES +
/// geometries · 256` plus the partials (at most 8 · 4,096 · max(6, 6 · bodies) bytes).
pub fn contact_device_bytes(nodes: u64, particles: u64, geometries: u64, bodies: u64) -> u64 {
    let p = reduce::MAX_PARTIALS as u64;
    particles * geometries * DEVICE_SLOT_BYTES
        + nodes * DEVICE_CONTACT_NODE_BYTES
        + geometries * GEOMETRY_ROW as u64 * 8
        + 8 * p * (NODE_TERMS as u64 + 1 + 2 + 6 * bodies)
}

/// Errors of the device coupled step.
#[derive(Debug, thiserror::Error)]
pub enum DeviceCouplingError {
    /// The device failed.
    #[error(transparent)]
    Device(#[from] GpuError),
    /// What the CPU coupled step would report (substep, MPM guard, contact solve, rigid step).
    #[error(transparent)]
    Coupling(#[from] CouplingError),
    /// A geometry the device registration has no signed distance for.
    #[error("rigid body {body} is a {shape}: the device contact registration supports spheres, boxes, capsules, cylinders and half-spaces (run it with --backend cpu)")]
    UnsupportedShape { body: usize, shape: &'static str },
    /// The world's bodies or half-spaces changed in number since the upload.
    #[error("the rigid world has {got} geometries, the device table {expected}")]
    Geometries { expected: usize, got: usize },
    /// A particle or node count over the kernels' 32-bit indices.
    #[error("{what} = {count} is over the device substep's 32-bit indices (2^31 - 1)")]
    TooLarge { what: &'static str, count: usize },
    /// The caller's poll before substep `substep` stopped the step.
    #[error("cancelled before substep {substep}")]
    Cancelled { substep: usize },
}

impl DeviceCouplingError {
    fn at(e: DeviceMpmError, substep: usize) -> Self {
        match e {
            DeviceMpmError::Device(g) => Self::Device(g),
            DeviceMpmError::Mpm(source) => Self::Coupling(CouplingError::Grid { substep, source }),
            DeviceMpmError::TooLarge { what, count } => Self::TooLarge { what, count },
        }
    }
}

/// The device table row of a geometry (module doc of kernels/mpm_contact.cu).
fn body_row(world: &RigidWorld, b: usize) -> Result<[f64; GEOMETRY_ROW], DeviceCouplingError> {
    let body = &world.bodies[b];
    let mut row = [0.0; GEOMETRY_ROW];
    let (kind, q) = match &body.shape {
        Shape::Sphere { radius } => (1.0, [*radius, 0.0, 0.0]),
        Shape::Box { half_extents: h } => (2.0, [h.x, h.y, h.z]),
        Shape::Capsule {
            radius,
            half_length,
        } => (3.0, [*radius, *half_length, 0.0]),
        Shape::Cylinder {
            radius,
            half_length,
        } => (4.0, [*radius, *half_length, 0.0]),
        other => {
            return Err(DeviceCouplingError::UnsupportedShape {
                body: b,
                shape: other.name(),
            })
        }
    };
    row[0] = kind;
    row[1] = b as f64;
    row[2..5].copy_from_slice(&q);
    let pose = body.shape_pose();
    let r = pose.rotation.to_rotation_matrix();
    for i in 0..3 {
        for j in 0..3 {
            row[6 + 3 * i + j] = r.matrix()[(i, j)];
        }
    }
    row[15..18].copy_from_slice(pose.translation.vector.as_slice());
    row[18..21].copy_from_slice(body.com().as_slice());
    row[21..24].copy_from_slice(body.velocity.as_slice());
    row[24..27].copy_from_slice(body.angular_velocity.as_slice());
    params_into(&body.mpm_contact, &mut row);
    Ok(row)
}

fn params_into(p: &LaggedParams, row: &mut [f64; GEOMETRY_ROW]) {
    row[27..32].copy_from_slice(&[
        p.stiffness,
        p.dissipation,
        p.friction,
        p.stiction_tolerance,
        p.sigma,
    ]);
}

/// The geometry table of `world` at its current (frozen) state: bodies, then half-spaces
/// (the CPU registration's order), validating every MPM contact parameter set.
pub fn geometry_table(world: &RigidWorld) -> Result<Vec<f64>, DeviceCouplingError> {
    let mut out = Vec::with_capacity(GEOMETRY_ROW * (world.bodies.len() + world.planes.len()));
    for b in 0..world.bodies.len() {
        world.bodies[b]
            .mpm_contact
            .validate()
            .map_err(|source| CouplingError::Contact { substep: 0, source })?;
        out.extend(body_row(world, b)?);
    }
    for plane in &world.planes {
        plane
            .mpm_contact
            .validate()
            .map_err(|source| CouplingError::Contact { substep: 0, source })?;
        let mut row = [0.0; GEOMETRY_ROW];
        row[1] = -1.0;
        row[2..5].copy_from_slice(plane.normal.as_slice());
        row[5] = plane.offset;
        params_into(&plane.mpm_contact, &mut row);
        out.extend(row);
    }
    Ok(out)
}

/// What one device substep's contact solve did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContactSolveStats {
    /// Active contact slots (the CPU's contact count).
    pub contacts: usize,
    /// Quasi-Newton iterations.
    pub iterations: usize,
    /// Line-search evaluations of (φ′, φ″), all iterations together.
    pub line_evaluations: usize,
}

/// The contact slots and scratch of a device MPM simulation against a rigid world of
/// `geometries` bodies and half-spaces.
pub struct DeviceContact<D: Device> {
    geometries: usize,
    bodies: usize,
    slots: usize,
    rig: D::Real,
    frame: D::Real,
    bias: D::Real,
    model: D::Real,
    lever: D::Real,
    active: D::Real,
    vc: D::Real,
    gamma_c: D::Real,
    gamma_w: D::Real,
    hess_w: D::Real,
    dvc: D::Real,
    vstar: D::Real,
    dv: D::Real,
    terms: D::Real,
    node_partial: D::Real,
    slot_partial: D::Real,
}

impl<D: Device> DeviceContact<D> {
    /// Allocates the slots of `mpm`'s particles against `world`'s geometries and uploads the
    /// geometry table (refusing shapes without a device signed distance: meshes).
    pub fn new(mpm: &DeviceMpm<D>, world: &RigidWorld) -> Result<Self, DeviceCouplingError> {
        let dev = mpm.device();
        let geometries = world.bodies.len() + world.planes.len();
        let table = geometry_table(world)?;
        // a device buffer is never empty: a world without geometries uploads one zero
        let table = if table.is_empty() { vec![0.0] } else { table };
        let slots = mpm.particles * geometries;
        if slots > i32::MAX as usize {
            return Err(DeviceCouplingError::TooLarge {
                what: "contact slots (particles x geometries)",
                count: slots,
            });
        }
        let nodes = mpm.nodes;
        let sp = reduce::partials(slots);
        // no zero-length device buffers (a world without geometries, no particles)
        let s1 = slots.max(1);
        Ok(Self {
            geometries,
            bodies: world.bodies.len(),
            slots,
            rig: dev.upload(&table)?,
            frame: dev.zeros(9 * s1)?,
            bias: dev.zeros(3 * s1)?,
            model: dev.zeros(MODEL_ROW * s1)?,
            lever: dev.zeros(3 * s1)?,
            active: dev.zeros(s1)?,
            vc: dev.zeros(3 * s1)?,
            gamma_c: dev.zeros(3 * s1)?,
            gamma_w: dev.zeros(3 * s1)?,
            hess_w: dev.zeros(9 * s1)?,
            dvc: dev.zeros(3 * s1)?,
            vstar: dev.zeros(3 * nodes)?,
            dv: dev.zeros(3 * nodes)?,
            terms: dev.zeros(NODE_TERMS * nodes)?,
            node_partial: dev.zeros(NODE_TERMS * reduce::partials(nodes))?,
            slot_partial: dev.zeros(sp * 2.max(6 * world.bodies.len()))?,
        })
    }

    /// Uploads the rigid state frozen for the next coupled step (one copy).
    pub fn upload_world(
        &mut self,
        mpm: &DeviceMpm<D>,
        world: &RigidWorld,
    ) -> Result<(), DeviceCouplingError> {
        let got = world.bodies.len() + world.planes.len();
        if got != self.geometries || world.bodies.len() != self.bodies {
            return Err(DeviceCouplingError::Geometries {
                expected: self.geometries,
                got,
            });
        }
        if got > 0 {
            mpm.device().write(&mut self.rig, &geometry_table(world)?)?;
        }
        Ok(())
    }

    /// The contact solve of the substep whose free motion `mpm` just ran (module doc, steps
    /// 1–4): leaves the solved velocities on `mpm`'s grid and adds each body's impulse to
    /// `impulses`. `damp` scales v* first (the grid damping, 1 for none).
    pub fn solve(
        &mut self,
        mpm: &mut DeviceMpm<D>,
        h: f64,
        damp: f64,
        options: &SolverOptions,
        impulses: &mut [Wrench],
    ) -> Result<ContactSolveStats, ContactSolveError> {
        let mut stats = ContactSolveStats::default();
        let nodes = mpm.nodes;
        if self.geometries == 0 && damp == 1.0 {
            return Ok(stats);
        }
        let dev = &mpm.dev;
        dev.launch(
            Kernel::MpmContactStart,
            3 * nodes,
            &mut [
                Arg::Real(damp),
                Arg::Out(&mut mpm.grid_velocity),
                Arg::Out(&mut self.vstar),
            ],
        )?;
        if self.geometries == 0 {
            return Ok(stats);
        }
        dev.launch(
            Kernel::MpmContactRegister,
            mpm.particles,
            &mut [
                Arg::Int(self.geometries as i64),
                Arg::Real(h),
                Arg::Index(&mpm.dims),
                Arg::In(&mpm.geo),
                Arg::In(&self.rig),
                Arg::In(&mpm.state.x),
                Arg::In(&mpm.state.v),
                Arg::In(&mpm.weights),
                Arg::In(&mpm.grid_mass),
                Arg::In(&mpm.code),
                Arg::Out(&mut self.frame),
                Arg::Out(&mut self.bias),
                Arg::Out(&mut self.model),
                Arg::Out(&mut self.lever),
                Arg::Out(&mut self.active),
            ],
        )?;
        let count = reduce::sum(dev, (&self.active, self.slots), &mut self.slot_partial)?;
        stats.contacts = count as usize;
        if stats.contacts == 0 {
            return Ok(stats);
        }
        loop {
            let sums = self.gradient(mpm)?;
            let [r2, p2, j2, dphi0, a, bad] = sums;
            let residual = r2.sqrt();
            let tolerance = options.abs_tol + options.rel_tol * p2.sqrt().max(j2.sqrt());
            if residual < tolerance {
                break;
            }
            if stats.iterations >= options.max_iterations {
                return Err(ContactError::NotConverged {
                    solver: "block-diagonal quasi-Newton",
                    iterations: stats.iterations,
                    residual,
                    tolerance,
                }
                .into());
            }
            if bad > 0.0 {
                let t = mpm.device().download(&self.terms)?;
                let node = t[NODE_TERMS.saturating_sub(1) * nodes..]
                    .iter()
                    .position(|&x| x != 0.0)
                    .unwrap_or(0);
                return Err(ContactError::NotPositiveDefinite { node }.into());
            }
            self.direction(mpm)?;
            let mut failure = None;
            let ls = exact_line_search(
                |alpha| match self.line_terms(mpm, alpha) {
                    Ok((d1, d2)) => (dphi0 + alpha * a - d1, a + d2),
                    Err(e) => {
                        if failure.is_none() {
                            failure = Some(e);
                        }
                        (0.0, 0.0)
                    }
                },
                dphi0,
                options.line_search_rel_tol,
                options.line_search_max_iterations,
            );
            if let Some(e) = failure {
                return Err(e.into());
            }
            stats.line_evaluations += ls.evaluations;
            if ls.alpha == 0.0 {
                return Err(ContactError::NotConverged {
                    solver: "block-diagonal quasi-Newton (stalled)",
                    iterations: stats.iterations,
                    residual,
                    tolerance,
                }
                .into());
            }
            mpm.dev.launch(
                Kernel::Axpy,
                3 * nodes,
                &mut [
                    Arg::Real(ls.alpha),
                    Arg::In(&self.dv),
                    Arg::Out(&mut mpm.grid_velocity),
                ],
            )?;
            stats.iterations += 1;
        }
        self.accumulate(mpm, impulses)?;
        Ok(stats)
    }

    /// One gradient evaluation: the slots' impulses, the nodes' step and the six sums.
    fn gradient(&mut self, mpm: &DeviceMpm<D>) -> Result<[f64; NODE_TERMS], GpuError> {
        let dev = mpm.device();
        dev.launch(
            Kernel::MpmContactEval,
            self.slots,
            &mut [
                Arg::Int(self.geometries as i64),
                Arg::Index(&mpm.dims),
                Arg::In(&mpm.geo),
                Arg::In(&mpm.state.x),
                Arg::In(&mpm.weights),
                Arg::In(&mpm.grid_velocity),
                Arg::In(&self.frame),
                Arg::In(&self.bias),
                Arg::In(&self.model),
                Arg::In(&self.active),
                Arg::Out(&mut self.vc),
                Arg::Out(&mut self.gamma_c),
                Arg::Out(&mut self.gamma_w),
                Arg::Out(&mut self.hess_w),
            ],
        )?;
        dev.launch(
            Kernel::MpmContactNode,
            mpm.nodes,
            &mut [
                Arg::Int(self.geometries as i64),
                Arg::Index(&mpm.dims),
                Arg::Index32(&mpm.start),
                Arg::Index32(mpm.sort.values()),
                Arg::In(&mpm.weights),
                Arg::In(&mpm.grid_mass),
                Arg::In(&self.vstar),
                Arg::In(&mpm.grid_velocity),
                Arg::In(&self.active),
                Arg::In(&self.gamma_w),
                Arg::In(&self.hess_w),
                Arg::Out(&mut self.dv),
                Arg::Out(&mut self.terms),
            ],
        )?;
        let parts = reduce::partials(mpm.nodes);
        dev.launch(
            Kernel::MpmSumColumns,
            parts,
            &mut [
                Arg::Int(mpm.nodes as i64),
                Arg::Int(NODE_TERMS as i64),
                Arg::In(&self.terms),
                Arg::Out(&mut self.node_partial),
            ],
        )?;
        let p = dev.download_prefix(&self.node_partial, NODE_TERMS * parts)?;
        Ok(std::array::from_fn(|c| column_sum(&p, parts, c)))
    }

    /// Δv_c of every active slot.
    fn direction(&mut self, mpm: &DeviceMpm<D>) -> Result<(), GpuError> {
        mpm.device().launch(
            Kernel::MpmContactDirection,
            self.slots,
            &mut [
                Arg::Int(self.geometries as i64),
                Arg::Index(&mpm.dims),
                Arg::In(&mpm.geo),
                Arg::In(&mpm.state.x),
                Arg::In(&mpm.weights),
                Arg::In(&self.dv),
                Arg::In(&self.frame),
                Arg::In(&self.active),
                Arg::Out(&mut self.dvc),
            ],
        )
    }

    /// The contact sums of the line search at `alpha`: Σ(γ(α) − γ(0))·Δv_c and
    /// Σ Δv_cᵀG(α)Δv_c.
    fn line_terms(&mut self, mpm: &DeviceMpm<D>, alpha: f64) -> Result<(f64, f64), GpuError> {
        let dev = mpm.device();
        let parts = reduce::partials(self.slots);
        dev.launch(
            Kernel::MpmContactLine,
            parts,
            &mut [
                Arg::Int(self.slots as i64),
                Arg::Real(alpha),
                Arg::In(&self.model),
                Arg::In(&self.active),
                Arg::In(&self.vc),
                Arg::In(&self.gamma_c),
                Arg::In(&self.dvc),
                Arg::Out(&mut self.slot_partial),
            ],
        )?;
        let p = dev.download_prefix(&self.slot_partial, 2 * parts)?;
        Ok((column_sum(&p, parts, 0), column_sum(&p, parts, 1)))
    }

    /// Adds the solved impulses on each body (force, moment about its centre of mass).
    fn accumulate(&mut self, mpm: &DeviceMpm<D>, impulses: &mut [Wrench]) -> Result<(), GpuError> {
        if self.bodies == 0 {
            return Ok(());
        }
        let dev = mpm.device();
        let parts = reduce::partials(self.slots);
        dev.launch(
            Kernel::MpmContactWrench,
            parts,
            &mut [
                Arg::Int(self.slots as i64),
                Arg::Int(self.geometries as i64),
                Arg::Int(self.bodies as i64),
                Arg::In(&self.rig),
                Arg::In(&self.active),
                Arg::In(&self.gamma_w),
                Arg::In(&self.lever),
                Arg::Out(&mut self.slot_partial),
            ],
        )?;
        let p = dev.download_prefix(&self.slot_partial, 6 * self.bodies * parts)?;
        for (b, w) in impulses.iter_mut().enumerate().take(self.bodies) {
            let sum = |q: usize| column_sum(&p, parts, 6 * b + q);
            *w += Wrench {
                force: Vector3::new(sum(0), sum(1), sum(2)),
                torque: Vector3::new(sum(3), sum(4), sum(5)),
            };
        }
        Ok(())
    }
}

/// Column `c` of a block of strided partials laid out column by column (`parts` per column),
/// summed in order (the second pass of the kernels' two-pass reductions).
fn column_sum(p: &[f64], parts: usize, c: usize) -> f64 {
    p[c * parts..(c + 1) * parts].iter().sum()
}

/// Errors of one contact solve: the device's or the CPU solve's.
#[derive(Debug, thiserror::Error)]
pub enum ContactSolveError {
    #[error(transparent)]
    Device(#[from] GpuError),
    #[error(transparent)]
    Contact(#[from] ContactError),
}

/// A device coupled step's report: the CPU's [`CoupledStepReport`] and the line-search
/// evaluations of each substep's contact solve.
#[derive(Debug, Clone, Default)]
pub struct DeviceStepReport {
    pub report: CoupledStepReport,
    pub line_evaluations_per_substep: Vec<usize>,
}

/// One asynchronous coupled step (`diffphd_mpm::contact::coupled_step`) with the MPM
/// substeps and their contact solves on the device: `substeps` substeps of `dt/substeps`
/// against the rigid state frozen at the step start, each v* damped by `damp` (1: none),
/// then the host's rigid step with the accumulated impulses. `before_substep(k)` runs first
/// in each substep (the caller's cancellation poll; its error ends the step). The particle
/// state stays on the device ([`DeviceMpm::download`]).
#[allow(clippy::too_many_arguments)]
pub fn coupled_step<D: Device>(
    mpm: &mut DeviceMpm<D>,
    contact: &mut DeviceContact<D>,
    world: &mut RigidWorld,
    dt: f64,
    substeps: usize,
    damp: f64,
    options: &SolverOptions,
    mut before_substep: impl FnMut(usize) -> Result<(), DeviceCouplingError>,
) -> Result<DeviceStepReport, DeviceCouplingError> {
    if substeps == 0 || !(dt > 0.0 && dt.is_finite()) {
        return Err(CouplingError::InvalidStep { dt, substeps }.into());
    }
    let h = dt / substeps as f64;
    let nb = world.bodies.len();
    let mut out = DeviceStepReport::default();
    out.report.body_impulses = vec![Wrench::default(); nb];
    contact.upload_world(mpm, world)?;
    for substep in 0..substeps {
        before_substep(substep)?;
        mpm.free_motion(h)
            .map_err(|e| DeviceCouplingError::at(e, substep))?;
        let stats = contact
            .solve(mpm, h, damp, options, &mut out.report.body_impulses)
            .map_err(|e| match e {
                ContactSolveError::Device(g) => DeviceCouplingError::Device(g),
                ContactSolveError::Contact(source) => {
                    CouplingError::Contact { substep, source }.into()
                }
            })?;
        out.report.contacts_per_substep.push(stats.contacts);
        out.report.iterations_per_substep.push(stats.iterations);
        out.line_evaluations_per_substep
            .push(stats.line_evaluations);
        mpm.finish(h)
            .map_err(|e| DeviceCouplingError::at(e, substep))?;
    }
    out.report.rigid = world
        .step(dt, &out.report.body_impulses)
        .map_err(CouplingError::from)?;
    Ok(out)
}

/// The MPM system's accelerator (`mpm::system::MpmOffload`) on a device: the particles are
/// uploaded at the first step and stay resident; after every step they are written back into
/// the host's `Simulation` (frames, diagnostics).
pub struct DeviceMpmOffload<D: Device + Clone> {
    dev: D,
    run: Option<(DeviceMpm<D>, DeviceContact<D>)>,
    /// Line-search evaluations of every substep so far (for the traffic checks).
    pub line_evaluations: Vec<usize>,
}

impl<D: Device + Clone> DeviceMpmOffload<D> {
    /// The accelerator on `dev` (nothing is uploaded before the first step).
    pub fn new(dev: D) -> Self {
        Self {
            dev,
            run: None,
            line_evaluations: Vec::new(),
        }
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.dev
    }

    /// One coupled step of `sim` and `world` (see [`coupled_step`]); the particle state comes
    /// back into `sim` at the end.
    #[allow(clippy::too_many_arguments)]
    pub fn step(
        &mut self,
        world: &mut RigidWorld,
        sim: &mut Simulation,
        dt: f64,
        substeps: usize,
        damp: f64,
        options: &SolverOptions,
        before_substep: impl FnMut(usize) -> Result<(), DeviceCouplingError>,
    ) -> Result<CoupledStepReport, DeviceCouplingError> {
        if self.run.is_none() {
            let mpm =
                DeviceMpm::new(self.dev.clone(), sim).map_err(|e| DeviceCouplingError::at(e, 0))?;
            let contact = DeviceContact::new(&mpm, world)?;
            self.run = Some((mpm, contact));
        }
        let Some((mpm, contact)) = self.run.as_mut() else {
            return Ok(CoupledStepReport::default());
        };
        let rep = coupled_step(
            mpm,
            contact,
            world,
            dt,
            substeps,
            damp,
            options,
            before_substep,
        )?;
        self.line_evaluations
            .extend(&rep.line_evaluations_per_substep);
        mpm.download(sim)
            .map_err(|e| DeviceCouplingError::at(e, substeps.saturating_sub(1)))?;
        Ok(rep.report)
    }
}

impl<D: Device + Clone> std::fmt::Debug for DeviceMpmOffload<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceMpmOffload({})", self.dev.name())
    }
}

impl<D: Device + Clone> MpmOffload for DeviceMpmOffload<D> {
    fn coupled_step(
        &mut self,
        world: &mut RigidWorld,
        sim: &mut Simulation,
        step: MpmOffloadStep<'_>,
    ) -> Result<CoupledStepReport, MpmStepError> {
        let n = step.substeps;
        let cancel = step.cancel;
        self.step(world, sim, step.dt, n, step.damp, step.options, |k| {
            cancel
                .poll(Stage::Mpm, k)
                .map_err(|_| DeviceCouplingError::Cancelled { substep: k })
        })
        .map_err(|e| match e {
            DeviceCouplingError::Coupling(c) => MpmStepError::from_coupling(c, n),
            DeviceCouplingError::Cancelled { substep } => MpmStepError::Cancelled {
                substep,
                substeps: n,
            },
            other => MpmStepError::Device(Box::new(other)),
        })
    }

    fn describe(&self) -> String {
        format!(
            "MPM substeps and their contact solves on {} (rigid step on the host)",
            self.dev.name()
        )
    }
}

/// The MPM accelerator of `backend` (`None` for the CPU): the emulator, or the CUDA device
/// where the build has it.
pub fn mpm_offload(backend: Backend) -> Result<Option<Arc<Mutex<dyn MpmOffload>>>, GpuError> {
    Ok(match backend {
        Backend::Cpu => None,
        Backend::Emulator => Some(Arc::new(Mutex::new(DeviceMpmOffload::new(Counted::new(
            Emulator,
        ))))),
        #[cfg(feature = "cuda")]
        Backend::Cuda => Some(Arc::new(Mutex::new(DeviceMpmOffload::new(Counted::new(
            crate::gpu::cuda::Cuda::new(0)?,
        ))))),
        #[cfg(not(feature = "cuda"))]
        Backend::Cuda => return Err(GpuError::Unavailable(crate::gpu::Unavailable::NoFeature)),
    })
}
