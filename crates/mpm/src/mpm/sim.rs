//! The MPM state and its substep driver:
//! `step(dt)` = [`Simulation::substep_free_motion`] (P2G + grid update, giving v*) followed by
//! [`Simulation::finish_substep`] (G2P + plasticity + guards). A contact solve acts on the grid
//! between the two ([`Simulation::step_with`], or call the halves yourself).

use nalgebra::{Matrix3, Vector3};

use super::constitutive::Material;
use super::grid::{check_memory, Grid, GridSpec};
pub use super::particles::Particles;
use super::plasticity::PlasticState;
use super::seeding::SeededParticles;
use super::transfer::{grid_to_particle, particle_to_grid, Scratch};
use super::MpmError;

/// One body: seeded particles, a material and a rigid initial velocity
/// v(x) = v₀ + ω × (x − x̄) about the particles' centroid x̄ (with APIC C = \[ω\]×, the exact
/// velocity gradient of that field).
#[derive(Debug, Clone)]
pub struct BodySpec {
    pub particles: SeededParticles,
    pub material: Material,
    pub velocity: Vector3<f64>,
    pub angular_velocity: Vector3<f64>,
}

/// Global simulation parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimParams {
    /// Gravitational acceleration g (m/s²).
    pub gravity: Vector3<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Ready,
    /// P2G and the grid update are done for a substep of this size.
    FreeMotion(f64),
}

/// Grid, particles, materials and scratch of an MLS-MPM simulation.
#[derive(Debug, Clone)]
pub struct Simulation {
    grid: Grid,
    particles: Particles,
    materials: Vec<Material>,
    params: SimParams,
    scratch: Scratch,
    substep: u64,
    phase: Phase,
}

/// The explicit time-step bound Δt ≤ c·h / (c_p + |v|_max) with the largest dilatational wave
/// speed c_p = √((λ + 2μ)/ρ) ≥ √(E/ρ) of the materials and the largest particle speed. With
/// quadratic B-splines c = 0.3 is a safe choice (the tests use 0.3–0.4); c must lie in (0, 1].
pub fn cfl_time_step(materials: &[Material], h: f64, max_speed: f64, c: f64) -> f64 {
    let cp = materials
        .iter()
        .map(Material::p_wave_speed)
        .fold(0.0, f64::max);
    c * h / (cp + max_speed)
}

/// Range checks of one body; `i` names it (bodies and materials share indices).
fn validate_body(b: &BodySpec, i: usize) -> Result<(), MpmError> {
    b.material.validate(i)?;
    let vol = b.particles.volume;
    if !(vol.is_finite() && vol > 0.0) {
        return Err(MpmError::InvalidMaterial {
            material: i,
            key: "particle volume",
            value: vol,
            reason: "must be finite and > 0",
        });
    }
    let bad_velocity = b
        .velocity
        .iter()
        .chain(b.angular_velocity.iter())
        .any(|v| !v.is_finite());
    if bad_velocity {
        return Err(MpmError::InvalidMaterial {
            material: i,
            key: "initial velocity",
            value: f64::NAN,
            reason: "must be finite",
        });
    }
    Ok(())
}

/// Appends a body's particles with material index `material`.
fn push_body(particles: &mut Particles, b: BodySpec, material: u32) {
    let count = b.particles.positions.len();
    let centroid = b.particles.positions.iter().sum::<Vector3<f64>>() / count.max(1) as f64;
    let omega = b.angular_velocity.cross_matrix();
    let mass = b.material.density * b.particles.volume;
    for x in b.particles.positions {
        particles
            .v
            .push(b.velocity + b.angular_velocity.cross(&(x - centroid)));
        particles.x.push(x);
        particles.c.push(omega);
        particles.f.push(Matrix3::identity());
        particles.mass.push(mass);
        particles.volume.push(b.particles.volume);
        particles.plastic.push(PlasticState::default());
        particles.material.push(material);
    }
}

impl Simulation {
    /// Adds a body between substeps (an emitter, a pour). Its material gets the next index.
    /// The memory of the enlarged state is checked against `memory_budget_bytes` first; the
    /// particle scratch is reallocated. Particles must lie on the grid (checked at the next
    /// P2G).
    pub fn add_body(&mut self, body: BodySpec, memory_budget_bytes: u64) -> Result<(), MpmError> {
        if self.phase != Phase::Ready {
            return Err(MpmError::SubstepOrder {
                substep: self.substep,
                what: "add_body called between substep_free_motion and finish_substep",
            });
        }
        let index = self.materials.len();
        validate_body(&body, index)?;
        let n = self.particles.len() + body.particles.positions.len();
        if n >= u32::MAX as usize || index >= u32::MAX as usize {
            return Err(MpmError::InvalidParameter {
                key: "particles",
                value: n as f64,
                reason: "at most 2^32 - 1 particles and materials",
            });
        }
        check_memory(self.grid.spec(), n as u64, memory_budget_bytes)?;
        self.materials.push(body.material);
        push_body(&mut self.particles, body, index as u32);
        self.scratch = Scratch::new(n, self.grid.mass.len());
        Ok(())
    }

    /// Builds a simulation. The memory estimate of the grid and particles is checked against
    /// `memory_budget_bytes` before anything is allocated.
    pub fn new(
        spec: GridSpec,
        params: SimParams,
        bodies: Vec<BodySpec>,
        memory_budget_bytes: u64,
    ) -> Result<Self, MpmError> {
        spec.validate()?;
        for (i, b) in bodies.iter().enumerate() {
            validate_body(b, i)?;
        }
        if params.gravity.iter().any(|g| !g.is_finite()) {
            return Err(MpmError::InvalidParameter {
                key: "gravity",
                value: f64::NAN,
                reason: "must be finite",
            });
        }
        let n: usize = bodies.iter().map(|b| b.particles.positions.len()).sum();
        if n >= u32::MAX as usize {
            return Err(MpmError::InvalidParameter {
                key: "particles",
                value: n as f64,
                reason: "at most 2^32 - 1 particles",
            });
        }
        check_memory(&spec, n as u64, memory_budget_bytes)?;
        let mut particles = Particles {
            x: Vec::with_capacity(n),
            v: Vec::with_capacity(n),
            c: Vec::with_capacity(n),
            f: Vec::with_capacity(n),
            mass: Vec::with_capacity(n),
            volume: Vec::with_capacity(n),
            plastic: Vec::with_capacity(n),
            material: Vec::with_capacity(n),
        };
        let mut materials = Vec::with_capacity(bodies.len());
        for (i, b) in bodies.into_iter().enumerate() {
            materials.push(b.material);
            push_body(&mut particles, b, i as u32);
        }
        let grid = Grid::new(spec);
        let scratch = Scratch::new(n, grid.mass.len());
        Ok(Self {
            grid,
            particles,
            materials,
            params,
            scratch,
            substep: 0,
            phase: Phase::Ready,
        })
    }

    pub fn grid(&self) -> &Grid {
        &self.grid
    }

    /// The grid, e.g. for a contact solve on v* between the halves of a substep.
    pub fn grid_mut(&mut self) -> &mut Grid {
        &mut self.grid
    }

    pub fn particles(&self) -> &Particles {
        &self.particles
    }

    /// Particle state, for setting up initial conditions (positions must stay on the grid).
    pub fn particles_mut(&mut self) -> &mut Particles {
        &mut self.particles
    }

    pub fn materials(&self) -> &[Material] {
        &self.materials
    }

    pub fn params(&self) -> &SimParams {
        &self.params
    }

    /// Completed substeps.
    pub fn substep_count(&self) -> u64 {
        self.substep
    }

    /// The CFL bound [`cfl_time_step`] for this simulation's materials and current speeds.
    pub fn cfl_time_step(&self, c: f64) -> f64 {
        let vmax = self
            .particles
            .v
            .iter()
            .map(|v| v.norm())
            .fold(0.0, f64::max);
        cfl_time_step(&self.materials, self.grid.spec().h, vmax, c)
    }

    /// The stencil of particle `p` from the current substep's P2G: (node index, weight) of its
    /// 27 nodes — the rows of the transfer operator J that a contact solve needs.
    /// Meaningful between `substep_free_motion` and `finish_substep`.
    pub fn particle_stencil(&self, p: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        self.scratch.stencil(&self.grid, p)
    }

    /// First half of a substep: P2G and the grid update, leaving v* on the grid.
    pub fn substep_free_motion(&mut self, dt: f64) -> Result<(), MpmError> {
        if self.phase != Phase::Ready {
            return Err(MpmError::SubstepOrder {
                substep: self.substep,
                what: "substep_free_motion called twice without finish_substep",
            });
        }
        if !(dt.is_finite() && dt > 0.0) {
            return Err(MpmError::InvalidParameter {
                key: "dt",
                value: dt,
                reason: "must be finite and > 0",
            });
        }
        particle_to_grid(
            &mut self.grid,
            &self.particles,
            &self.materials,
            &mut self.scratch,
            dt,
            self.substep,
        )?;
        self.grid.update(dt, &self.params.gravity);
        self.phase = Phase::FreeMotion(dt);
        Ok(())
    }

    /// Second half of a substep: G2P, F update, return mapping and the CFL / finiteness guard.
    /// On error the particles keep their state from before this substep.
    pub fn finish_substep(&mut self) -> Result<(), MpmError> {
        let Phase::FreeMotion(dt) = self.phase else {
            return Err(MpmError::SubstepOrder {
                substep: self.substep,
                what: "finish_substep called without substep_free_motion",
            });
        };
        self.phase = Phase::Ready;
        grid_to_particle(
            &self.grid,
            &mut self.particles,
            &self.materials,
            &mut self.scratch,
            dt,
            self.substep,
        )?;
        self.substep += 1;
        Ok(())
    }

    /// `finish_substep` with the grid velocities replaced by `v` (post-contact velocities from
    /// a solver that works on its own copy of v*, e.g. the `GridContactProblem` of the contact
    /// module). `v` must have one entry per grid node.
    pub fn finish_substep_with(&mut self, v: &[Vector3<f64>]) -> Result<(), MpmError> {
        if v.len() != self.grid.velocity.len() {
            return Err(MpmError::InvalidParameter {
                key: "grid velocities",
                value: v.len() as f64,
                reason: "need one velocity per grid node",
            });
        }
        self.grid.velocity.copy_from_slice(v);
        self.finish_substep()
    }

    /// One explicit MLS-MPM substep without contact.
    pub fn step(&mut self, dt: f64) -> Result<(), MpmError> {
        self.substep_free_motion(dt)?;
        self.finish_substep()
    }

    /// One substep with a grid-velocity hook between the grid update and G2P (the contact seam
    /// of seed Eq. 7–8: `hook` receives the grid holding v*, masses and node positions).
    pub fn step_with<H>(&mut self, dt: f64, hook: H) -> Result<(), MpmError>
    where
        H: FnOnce(&mut Grid, f64),
    {
        self.substep_free_motion(dt)?;
        hook(&mut self.grid, dt);
        self.finish_substep()
    }
}
