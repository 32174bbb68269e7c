//! The MLS-MPM simulation as the grid side of the MPM–rigid coupling: [`Simulation`]
//! implements [`GridContactProblem`], so [`crate::contact::coupled_step`] drives it (seed
//! Eq. 3–8, Algorithm 1).
//!
//! The seam is the one of [`Simulation::substep_free_motion`] / [`Simulation::finish_substep_with`]:
//! - free motion = P2G, v* = (mv)ᵢ/mᵢ + h g and the walls (seed Eq. 6);
//! - node masses mᵢ and v* are the grid's arrays (inactive nodes have mᵢ = 0);
//! - the contact Jacobian rows of particle p are its 27 quadratic B-spline weights wᵢₚ from
//!   this substep's P2G, so v_p = Σᵢ wᵢₚ vᵢ is exactly the G2P velocity (J in seed Eq. 7);
//! - particle positions and velocities are those at the start of the substep (the contact is
//!   registered there: discrete detection, seed §V);
//! - the end of the substep is G2P with the post-contact velocities, F update, return mapping
//!   and guards. The substep length is the one given to the free motion.

use nalgebra::Vector3;

use super::sim::Simulation;
use super::MpmError;
use crate::contact::GridContactProblem;

impl GridContactProblem for Simulation {
    fn free_motion(&mut self, h: f64) -> Result<(), MpmError> {
        self.substep_free_motion(h)
    }

    fn node_masses(&self) -> &[f64] {
        self.grid().mass()
    }

    fn free_velocities(&self) -> &[Vector3<f64>] {
        self.grid().velocity()
    }

    fn num_particles(&self) -> usize {
        self.particles().len()
    }

    fn particle_position(&self, p: usize) -> Vector3<f64> {
        self.particles().x[p]
    }

    fn particle_velocity(&self, p: usize) -> Vector3<f64> {
        self.particles().v[p]
    }

    fn particle_stencil(&self, p: usize, out: &mut Vec<(usize, f64)>) {
        out.extend(Simulation::particle_stencil(self, p));
    }

    fn finish_substep(&mut self, v: &[Vector3<f64>], _h: f64) -> Result<(), MpmError> {
        self.finish_substep_with(v)
    }
}
