//! The background grid: a dense array of nodes xᵢ = origin + h·i, i ∈ {0..cells}³, storing the
//! lumped mass mᵢ and the momentum (after P2G) or velocity (after the grid update) of each node.
//!
//! Memory (allocated once, before any stepping; [`memory_estimate`]):
//!
//!   bytes = N_nodes · (8 + 24 + 4 + 4 + 1) + 4 + N_particles · B_p,   N_nodes = Π (cellsₐ + 1),
//!
//! where each node holds mass (f64), velocity (3 f64), the start of its particle bin and a
//! counting-sort cursor (u32 each) and an active flag (1 byte),
//! and B_p = [`PARTICLE_BYTES`] is the particle state plus the per-substep scratch.
//!
//! Walls: the `wall_cells` outermost node layers on each of the six faces are wall nodes. After
//! vᵢ = (mv)ᵢ/mᵢ + Δt g, a wall node's velocity is set by its face's [`WallKind`] (Taichi-style
//! MPM boundary, e.g. Hu et al. 2018 §6): sticky v = 0; slip vₙ = 0; separating vₙ = 0 only
//! when the node moves into the wall.

use nalgebra::Vector3;

use super::MpmError;

/// Boundary condition of one face of the domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WallKind {
    /// All velocity components of wall nodes are zeroed.
    Sticky,
    /// The normal component is zeroed (frictionless, bilateral).
    Slip,
    /// The normal component is zeroed only when it points into the wall (frictionless, unilateral).
    Separating,
}

/// Grid geometry and walls. Faces are ordered x−, x+, y−, y+, z−, z+.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GridSpec {
    pub origin: [f64; 3],
    pub cells: [usize; 3],
    pub h: f64,
    pub walls: [WallKind; 6],
    /// Node layers per face that are wall nodes (≥ 1; 3 keeps particles a cell away).
    pub wall_cells: usize,
}

/// Bytes per particle: state (x, v, C, F, mass, V⁰, plastic strain, volume correction,
/// material index) and P2G/G2P scratch (base node, fractional offset, 3×3 weights, affine
/// matrix, m·v, bin key, sorted index, trial F and plastic state).
pub const PARTICLE_BYTES: u64 = (3 * 8 + 3 * 8 + 9 * 8 + 9 * 8 + 4 * 8 + 4)
    + (3 * 4 + 3 * 8 + 9 * 8 + 9 * 8 + 3 * 8 + 4 + 4 + 9 * 8 + 2 * 8);
/// Bytes per grid node: mass, velocity, bin start, sort cursor, active flag.
pub const NODE_BYTES: u64 = 8 + 3 * 8 + 4 + 4 + 1;

impl GridSpec {
    /// A grid with the same wall kind on every face and `wall_cells = 3`.
    pub fn new(origin: [f64; 3], cells: [usize; 3], h: f64, wall: WallKind) -> Self {
        Self {
            origin,
            cells,
            h,
            walls: [wall; 6],
            wall_cells: 3,
        }
    }

    /// Nodes per axis (cells + 1).
    pub fn node_dims(&self) -> [usize; 3] {
        self.cells.map(|c| c + 1)
    }

    /// Total node count Π (cellsₐ + 1), saturating.
    pub fn node_count(&self) -> u64 {
        self.node_dims()
            .iter()
            .fold(1u64, |acc, &n| acc.saturating_mul(n as u64))
    }

    pub fn validate(&self) -> Result<(), MpmError> {
        if !(self.h.is_finite() && self.h > 0.0) {
            return Err(MpmError::InvalidParameter {
                key: "h",
                value: self.h,
                reason: "must be finite and > 0",
            });
        }
        if self.origin.iter().any(|o| !o.is_finite()) {
            return Err(MpmError::InvalidParameter {
                key: "origin",
                value: f64::NAN,
                reason: "must be finite",
            });
        }
        if self.wall_cells == 0 {
            return Err(MpmError::InvalidParameter {
                key: "wall_cells",
                value: 0.0,
                reason: "must be at least 1",
            });
        }
        for &c in &self.cells {
            if c < 2 * self.wall_cells + 1 || c >= u32::MAX as usize / 2 {
                return Err(MpmError::InvalidParameter {
                    key: "cells",
                    value: c as f64,
                    reason: "each axis needs at least 2·wall_cells + 1 cells",
                });
            }
        }
        if self.node_count() >= u32::MAX as u64 {
            return Err(MpmError::InvalidParameter {
                key: "cells",
                value: self.node_count() as f64,
                reason: "at most 2^32 - 1 grid nodes",
            });
        }
        Ok(())
    }
}

/// Bytes needed by a simulation with this grid and `particles` particles (formula in the
/// module docs), computed without allocating.
pub fn memory_estimate(spec: &GridSpec, particles: u64) -> u64 {
    spec.node_count()
        .saturating_mul(NODE_BYTES)
        .saturating_add(4)
        .saturating_add(particles.saturating_mul(PARTICLE_BYTES))
}

/// Refuses a simulation whose [`memory_estimate`] exceeds `budget_bytes`.
pub fn check_memory(spec: &GridSpec, particles: u64, budget_bytes: u64) -> Result<u64, MpmError> {
    let needed = memory_estimate(spec, particles);
    if needed > budget_bytes {
        return Err(MpmError::MemoryBudget {
            needed_bytes: needed,
            budget_bytes,
            nodes: spec.node_count(),
            particles,
        });
    }
    Ok(needed)
}

/// Node masses and velocities of a dense grid.
#[derive(Debug, Clone)]
pub struct Grid {
    spec: GridSpec,
    dims: [usize; 3],
    pub(crate) mass: Vec<f64>,
    /// Momentum after P2G, velocity after the grid update.
    pub(crate) velocity: Vec<Vector3<f64>>,
}

impl Grid {
    pub(crate) fn new(spec: GridSpec) -> Self {
        let dims = spec.node_dims();
        let n = dims[0] * dims[1] * dims[2];
        Self {
            spec,
            dims,
            mass: vec![0.0; n],
            velocity: vec![Vector3::zeros(); n],
        }
    }

    pub fn spec(&self) -> &GridSpec {
        &self.spec
    }

    /// Nodes per axis.
    pub fn dims(&self) -> [usize; 3] {
        self.dims
    }

    /// Linear index of node (i, j, k); x varies fastest.
    #[inline]
    pub fn index(&self, i: usize, j: usize, k: usize) -> usize {
        node_index(self.dims, i, j, k)
    }

    /// Node (i, j, k) of a linear index.
    #[inline]
    pub fn coords(&self, idx: usize) -> [usize; 3] {
        let i = idx % self.dims[0];
        let r = idx / self.dims[0];
        [i, r % self.dims[1], r / self.dims[1]]
    }

    /// World position origin + h·(i, j, k) of a node.
    pub fn node_position(&self, idx: usize) -> Vector3<f64> {
        let c = self.coords(idx);
        Vector3::from_fn(|a, _| self.spec.origin[a] + self.spec.h * c[a] as f64)
    }

    /// Lumped node masses mᵢ (zero where no particle contributes).
    pub fn mass(&self) -> &[f64] {
        &self.mass
    }

    /// Node velocities (v* between the grid update and G2P).
    pub fn velocity(&self) -> &[Vector3<f64>] {
        &self.velocity
    }

    /// Node velocities, for a contact solve acting between the grid update and G2P.
    pub fn velocity_mut(&mut self) -> &mut [Vector3<f64>] {
        &mut self.velocity
    }

    /// vᵢ = (mv)ᵢ/mᵢ + Δt g on nodes with mass, then the walls; massless nodes get v = 0.
    pub(crate) fn update(&mut self, dt: f64, gravity: &Vector3<f64>) {
        let t = self.spec.wall_cells;
        let cells = self.spec.cells;
        let walls = self.spec.walls;
        for idx in 0..self.mass.len() {
            let m = self.mass[idx];
            if m <= 0.0 {
                self.velocity[idx] = Vector3::zeros();
                continue;
            }
            let mut v = self.velocity[idx] / m + dt * gravity;
            let c = self.coords(idx);
            for a in 0..3 {
                if c[a] < t {
                    apply_wall(walls[2 * a], a, -1.0, &mut v);
                }
                if c[a] > cells[a] - t {
                    apply_wall(walls[2 * a + 1], a, 1.0, &mut v);
                }
            }
            self.velocity[idx] = v;
        }
    }

    /// The wall conditions of [`Grid::update`] applied to a full array of node velocities
    /// (the strongly coupled step applies them to its solved velocities).
    pub(crate) fn apply_walls(&self, v: &mut [Vector3<f64>]) {
        let t = self.spec.wall_cells;
        let cells = self.spec.cells;
        for (idx, vi) in v.iter_mut().enumerate() {
            let c = self.coords(idx);
            for a in 0..3 {
                if c[a] < t {
                    apply_wall(self.spec.walls[2 * a], a, -1.0, vi);
                }
                if c[a] > cells[a] - t {
                    apply_wall(self.spec.walls[2 * a + 1], a, 1.0, vi);
                }
            }
        }
    }

    /// The velocity components of node `idx` that a wall holds at zero whatever the motion:
    /// all three in a sticky wall layer, the face's normal one in a slip layer. A separating
    /// layer holds nothing unconditionally (vₙ = 0 only when moving into the wall). The
    /// strongly coupled step makes these equality constraints of its Newton problem.
    pub(crate) fn held_components(&self, idx: usize) -> [bool; 3] {
        let t = self.spec.wall_cells;
        let cells = self.spec.cells;
        let c = self.coords(idx);
        let mut held = [false; 3];
        for a in 0..3 {
            for (inside, kind) in [
                (c[a] < t, self.spec.walls[2 * a]),
                (c[a] > cells[a] - t, self.spec.walls[2 * a + 1]),
            ] {
                match (inside, kind) {
                    (true, WallKind::Sticky) => held = [true; 3],
                    (true, WallKind::Slip) => held[a] = true,
                    _ => {}
                }
            }
        }
        held
    }

    /// Σᵢ mᵢ vᵢ and Σᵢ xᵢ × mᵢ vᵢ (for checking the transfers).
    pub fn momenta(&self) -> (Vector3<f64>, Vector3<f64>) {
        let mut p = Vector3::zeros();
        let mut l = Vector3::zeros();
        for idx in 0..self.mass.len() {
            let mv = self.mass[idx] * self.velocity[idx];
            p += mv;
            l += self.node_position(idx).cross(&mv);
        }
        (p, l)
    }
}

/// Linear index of node (i, j, k) on a grid of `dims` nodes per axis; x varies fastest
/// ([`Grid::index`], for callers that hold the grid's arrays mutably).
#[inline]
pub(crate) fn node_index(dims: [usize; 3], i: usize, j: usize, k: usize) -> usize {
    i + dims[0] * (j + dims[1] * k)
}

/// `outward` is −1 on a lower face and +1 on an upper face of axis `a`.
fn apply_wall(kind: WallKind, a: usize, outward: f64, v: &mut Vector3<f64>) {
    match kind {
        WallKind::Sticky => *v = Vector3::zeros(),
        WallKind::Slip => v[a] = 0.0,
        WallKind::Separating => {
            if v[a] * outward > 0.0 {
                v[a] = 0.0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_refusal_names_the_numbers() {
        let spec = GridSpec::new([0.0; 3], [99, 99, 99], 0.01, WallKind::Sticky);
        let need = memory_estimate(&spec, 1_000_000);
        assert_eq!(
            need,
            1_000_000 * NODE_BYTES + 4 + 1_000_000 * PARTICLE_BYTES
        );
        let err = check_memory(&spec, 1_000_000, 100_000_000).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(&need.to_string()), "{msg}");
        assert!(msg.contains("1000000 grid nodes"), "{msg}");
        assert!(msg.contains("100000000 bytes"), "{msg}");
        assert!(check_memory(&spec, 1_000_000, need).is_ok());
    }

    #[test]
    fn walls_sticky_slip_separating() {
        let mut v = Vector3::new(1.0, 2.0, 3.0);
        apply_wall(WallKind::Separating, 0, -1.0, &mut v);
        assert_eq!(
            v,
            Vector3::new(1.0, 2.0, 3.0),
            "moving away from the x− wall"
        );
        apply_wall(WallKind::Separating, 1, 1.0, &mut v);
        assert_eq!(v, Vector3::new(1.0, 0.0, 3.0), "moving into the y+ wall");
        apply_wall(WallKind::Separating, 2, -1.0, &mut v);
        assert_eq!(
            v,
            Vector3::new(1.0, 0.0, 3.0),
            "moving away from the z− wall"
        );
        apply_wall(WallKind::Slip, 2, -1.0, &mut v);
        assert_eq!(v, Vector3::new(1.0, 0.0, 0.0));
        apply_wall(WallKind::Sticky, 0, -1.0, &mut v);
        assert_eq!(v, Vector3::zeros());
    }
}
