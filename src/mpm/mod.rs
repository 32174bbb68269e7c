//! MPM and rigid bodies as scenes of the tool: a validated scene's `[mpm]`, `[[mpm_body]]`,
//! `[[rigid_body]]` and `[[obstacle]]` tables → the `diffphd-mpm` crate's grid, particles
//! and rigid world ([`build()`]), and the system the one time loop drives
//! ([`system::MpmSystem`], a [`crate::solver::timeloop::TimeStepped`]): per frame one
//! asynchronous coupled step (seed Eq. 3–4: N MPM substeps of Δt/N with the convex contact
//! solve against the frozen rigid state, then one rigid step of Δt). docs/mpm.md.
//!
//! Checks that need the seeded particles are done here, before the step loop, with the
//! scene's `(key path, message)` errors: particles outside the grid's interior, the CFL bound
//! on Δt/N, and the memory estimate (grid nodes and particles, `diffphd_mpm::mpm::
//! memory_estimate`) against the caller's budget.

pub mod build;
pub mod frames;
pub mod surface;
pub mod system;

pub use build::{build, estimate, MpmEstimate};
pub use diffphd_mpm::contact::Wrench;
pub use system::{MpmOffload, MpmOffloadStep, MpmState, MpmStepError, MpmStepStats, MpmSystem};

/// Errors of building an MPM/rigid scene (exit 2 on the command line: bad input).
#[derive(Debug, thiserror::Error)]
pub enum MpmSceneError {
    /// A key's value is refused once the particles are seeded or the shapes built.
    #[error("{path}: key `{key}`: {msg}")]
    Invalid {
        path: String,
        key: String,
        msg: String,
    },
    /// The grid and particles would need more memory than allowed.
    #[error(
        "{path}: the MPM state needs {needed_bytes} bytes ({nodes} grid nodes, at most \
         {particles} particles), over the budget of {budget_bytes} bytes ({budget_name}); use a \
         coarser grid (mpm.spacing), a smaller domain or fewer particles per cell"
    )]
    Memory {
        path: String,
        needed_bytes: u64,
        budget_bytes: u64,
        budget_name: String,
        nodes: u64,
        particles: u64,
    },
}

/// Energies and linear momentum of a frame (SI units; gravitational energy −Σ m g·x).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct FrameEnergies {
    /// MPM: Σ½m|v|², the APIC affine part Σ½m(h²/4)‖C‖², Σ V⁰ψ(F_E), −Σ m g·x.
    pub mpm_kinetic: f64,
    pub mpm_affine_kinetic: f64,
    pub mpm_elastic: f64,
    pub mpm_gravitational: f64,
    /// Rigid bodies (obstacle colliders included): Σ ½m|v|² + ½ωᵀI ω and −Σ m g·x_com.
    pub rigid_kinetic: f64,
    pub rigid_gravitational: f64,
    /// Σ m v of the particles, of the rigid bodies, and their sum.
    pub mpm_linear_momentum: [f64; 3],
    pub rigid_linear_momentum: [f64; 3],
    pub linear_momentum: [f64; 3],
    /// Mass-weighted mean particle position Σ m x / Σ m (zero without particles).
    pub mpm_center_of_mass: [f64; 3],
}

/// The energies and momentum of `state` (`diffphd_mpm::mpm::Simulation::diagnostics` and
/// the rigid bodies' own).
pub fn energies(state: &MpmState) -> FrameEnergies {
    let mut e = FrameEnergies::default();
    let mut p_mpm = nalgebra::Vector3::zeros();
    if let Some(sim) = &state.sim {
        let d = sim.diagnostics();
        e.mpm_kinetic = d.kinetic;
        e.mpm_affine_kinetic = d.affine_kinetic;
        e.mpm_elastic = d.elastic;
        e.mpm_gravitational = d.gravitational;
        p_mpm = d.linear_momentum;
        let p = sim.particles();
        let mass: f64 = p.mass().iter().sum();
        if mass > 0.0 {
            let c =
                p.x.iter()
                    .zip(p.mass())
                    .fold(nalgebra::Vector3::zeros(), |a, (x, m)| a + x * *m)
                    / mass;
            e.mpm_center_of_mass = [c.x, c.y, c.z];
        }
    }
    let mut p_rigid = nalgebra::Vector3::zeros();
    for b in &state.world.bodies {
        e.rigid_kinetic += b.kinetic_energy();
        e.rigid_gravitational -= b.mass() * state.world.gravity.dot(&b.com());
        p_rigid += b.velocity * b.mass();
    }
    let arr = |v: nalgebra::Vector3<f64>| [v.x, v.y, v.z];
    e.mpm_linear_momentum = arr(p_mpm);
    e.rigid_linear_momentum = arr(p_rigid);
    e.linear_momentum = arr(p_mpm + p_rigid);
    e
}
