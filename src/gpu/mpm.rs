//! The MLS-MPM substep on a device (`kernels/mpm.cu`, `kernels/mpm.h`, `kernels/sort.cu`):
//! the particles and the grid of a `diffphd_mpm::mpm::Simulation` uploaded once, then substeps
//! run resident (docs/gpu.md "MPM substep", docs/mpm.md "On a device").
//!
//! One substep, the CPU reference's `Simulation::step` (crates/mpm/src/mpm/transfer.rs,
//! grid.rs) in the kernel subset:
//!
//! 1. `dphd_mpm_prepare` (per particle): base node and quadratic B-spline weights, the stress
//!    $A_p = m_p C_p - \Delta t\,(4/h^2)\,V_p^0 P(F_p) F_p^T$, the bin key (the base node's
//!    index), failure codes;
//! 2. the particles re-binned: `dphd_iota32`, ⌈log₂ n⌉ stable merge passes by key
//!    ([`crate::gpu::sort`]), `dphd_bin_starts` (bins = nodes);
//! 3. `dphd_mpm_p2g` (per node): $m_i = \sum w_{ip} m_p$,
//!    $(mv)_i = \sum w_{ip}[m_p v_p + A_p(x_i - x_p)]$ gathered over the 27 bins $i - d$,
//!    $d \in \{0,1,2\}^3$, z-major, each bin in particle order: the CPU's order, so the sums
//!    are the CPU's to the last bit where the per-particle terms are;
//! 4. `dphd_mpm_grid_update` (per node): $v_i = (mv)_i/m_i + \Delta t\,g$, the walls;
//! 5. `dphd_mpm_g2p` (per particle): $v_p$, $C_p = (4/h^2)\sum w_{ip} v_i (x_i - x_p)^T$,
//!    $F \leftarrow (I + \Delta t C) F$, the return mapping, $x \leftarrow x + \Delta t v$,
//!    into a second set of particle arrays;
//! 6. the failure codes summed (`dphd_sum_partial`, one small copy back); when none failed
//!    the two sets of particle arrays swap (host-side, no copy), else the first failing
//!    particle's error is returned and the state is the one before the substep, as on the CPU.
//!
//! Per substep: ⌈log₂ n⌉ + 7 launches and one copy back of
//! [`crate::gpu::reduce::partials`]`(n)` doubles; nothing is uploaded.

use diffphd_mpm::mpm::{ElasticModel, MpmError, Plasticity, Simulation, WallKind};
use nalgebra::{Matrix3, Vector3};

use crate::gpu::device::{Arg, Device};
use crate::gpu::kernels::Kernel;
use crate::gpu::reduce;
use crate::gpu::sort::KeyValueSort;
use crate::gpu::GpuError;

/// Doubles per material row of the device table (kernels/mpm.h).
pub const MATERIAL_ROW: usize = 8;

/// Device bytes per particle: state twice (x, v, C, F, plastic state: 3 + 3 + 9 + 9 + 2
/// doubles, the second set for the committed swap), mass, V⁰, the material index (8 bytes),
/// the scratch (fractional offset 3, weights 9, affine matrix 9 doubles), failure code and
/// value (2 doubles), and four 32-bit sort arrays (keys and values, twice).
pub const DEVICE_PARTICLE_BYTES: u64 = 2 * 26 * 8 + 2 * 8 + 8 + 21 * 8 + 2 * 8 + 4 * 4;
/// Device bytes per grid node: mass, momentum/velocity (4 doubles), the bin start (4 bytes).
pub const DEVICE_NODE_BYTES: u64 = 4 * 8 + 4;

/// Device memory of a simulation with `nodes` grid nodes and `particles` particles:
/// `particles · DEVICE_PARTICLE_BYTES + nodes · DEVICE_NODE_BYTES` plus one start entry, the
/// material table and the reduction's partials (a few kB).
pub fn device_bytes(nodes: u64, particles: u64) -> u64 {
    particles * DEVICE_PARTICLE_BYTES + nodes * DEVICE_NODE_BYTES + 4
}

/// Errors of the device substep: the device's, or the CPU reference's error for the first
/// failing particle.
#[derive(Debug, thiserror::Error)]
pub enum DeviceMpmError {
    #[error(transparent)]
    Device(#[from] GpuError),
    #[error(transparent)]
    Mpm(#[from] MpmError),
    /// A particle or node count over the kernels' 32-bit indices.
    #[error("{what} = {count} is over the device substep's 32-bit indices (2^31 - 1)")]
    TooLarge { what: &'static str, count: usize },
}

/// The row of material `m` in the device table: [μ, λ, elastic model, plastic model,
/// yield stress, Drucker–Prager α, volume correction, 0] (kernels/mpm.h).
pub fn material_row(m: &diffphd_mpm::mpm::Material) -> [f64; MATERIAL_ROW] {
    let (mu, lambda) = m.lame();
    let elastic = match m.elastic {
        ElasticModel::FixedCorotated => 0.0,
        ElasticModel::NeoHookean => 1.0,
        ElasticModel::StvkHencky => 2.0,
    };
    let (plastic, yield_stress, alpha, vc) = match m.plasticity {
        Plasticity::None => (0.0, 0.0, 0.0, 0.0),
        Plasticity::VonMises { yield_stress } => (1.0, yield_stress, 0.0, 0.0),
        Plasticity::DruckerPrager {
            friction_angle_deg,
            volume_correction,
        } => (
            2.0,
            0.0,
            Plasticity::drucker_prager_alpha(friction_angle_deg),
            if volume_correction { 1.0 } else { 0.0 },
        ),
    };
    [mu, lambda, elastic, plastic, yield_stress, alpha, vc, 0.0]
}

/// One set of particle state arrays on the device.
pub(crate) struct State<D: Device> {
    pub(crate) x: D::Real,
    pub(crate) v: D::Real,
    c: D::Real,
    f: D::Real,
    plastic: D::Real,
}

/// Row-major 9 doubles per matrix (kernels' layout) from nalgebra's matrices.
fn rows(m: &[Matrix3<f64>]) -> Vec<f64> {
    m.iter()
        .flat_map(|a| (0..9).map(move |k| a[(k / 3, k % 3)]))
        .collect()
}

fn flat(v: &[Vector3<f64>]) -> Vec<f64> {
    v.iter().flat_map(|a| [a.x, a.y, a.z]).collect()
}

/// An MPM simulation resident on a device: particles, grid and scratch uploaded once by
/// [`DeviceMpm::new`]; [`DeviceMpm::substep`] runs one substep without uploads;
/// [`DeviceMpm::download`] writes the particle state back into a `Simulation`.
pub struct DeviceMpm<D: Device> {
    pub(crate) dev: D,
    pub(crate) particles: usize,
    pub(crate) nodes: usize,
    materials: usize,
    substep: u64,
    pub(crate) dims: D::Index,
    pub(crate) geo: D::Real,
    material: D::Index,
    mat: D::Real,
    mass: D::Real,
    volume: D::Real,
    pub(crate) state: State<D>,
    next: State<D>,
    pub(crate) frac: D::Real,
    pub(crate) weights: D::Real,
    affine: D::Real,
    pub(crate) sort: KeyValueSort<D>,
    pub(crate) start: D::Index32,
    pub(crate) grid_mass: D::Real,
    pub(crate) grid_velocity: D::Real,
    pub(crate) code: D::Real,
    value: D::Real,
    partial: D::Real,
}

fn wall_code(w: WallKind) -> i64 {
    match w {
        WallKind::Sticky => 0,
        WallKind::Slip => 1,
        WallKind::Separating => 2,
    }
}

impl<D: Device> DeviceMpm<D> {
    /// Uploads `sim`'s particles, materials and grid geometry; allocates the grid and scratch.
    pub fn new(dev: D, sim: &Simulation) -> Result<Self, DeviceMpmError> {
        let p = sim.particles();
        let n = p.len();
        let spec = *sim.grid().spec();
        let nodes = sim.grid().mass().len();
        let limit = i32::MAX as usize;
        if n > limit {
            return Err(DeviceMpmError::TooLarge {
                what: "particles",
                count: n,
            });
        }
        if nodes >= limit {
            return Err(DeviceMpmError::TooLarge {
                what: "grid nodes",
                count: nodes,
            });
        }
        let mut dims: Vec<i64> = spec.cells.iter().map(|&c| c as i64).collect();
        dims.push(spec.wall_cells as i64);
        dims.extend(spec.walls.iter().map(|&w| wall_code(w)));
        let g = sim.params().gravity;
        let geo = [
            spec.origin[0],
            spec.origin[1],
            spec.origin[2],
            spec.h,
            g.x,
            g.y,
            g.z,
        ];
        let mat: Vec<f64> = sim.materials().iter().flat_map(material_row).collect();
        let material: Vec<i64> = p.material().iter().map(|&m| i64::from(m)).collect();
        let plastic: Vec<f64> = p
            .plastic
            .iter()
            .flat_map(|s| [s.plastic_strain, s.log_volume_correction])
            .collect();
        let state = State {
            x: dev.upload(&flat(&p.x))?,
            v: dev.upload(&flat(&p.v))?,
            c: dev.upload(&rows(&p.c))?,
            f: dev.upload(&rows(&p.f))?,
            plastic: dev.upload(&plastic)?,
        };
        let next = State {
            x: dev.zeros(3 * n)?,
            v: dev.zeros(3 * n)?,
            c: dev.zeros(9 * n)?,
            f: dev.zeros(9 * n)?,
            plastic: dev.zeros(2 * n)?,
        };
        Ok(Self {
            particles: n,
            nodes,
            materials: sim.materials().len(),
            substep: sim.substep_count(),
            dims: dev.upload_index(&dims)?,
            geo: dev.upload(&geo)?,
            material: dev.upload_index(&material)?,
            mat: dev.upload(&mat)?,
            mass: dev.upload(p.mass())?,
            volume: dev.upload(p.volume())?,
            state,
            next,
            frac: dev.zeros(3 * n)?,
            weights: dev.zeros(9 * n)?,
            affine: dev.zeros(9 * n)?,
            sort: KeyValueSort::new(&dev, n)?,
            start: dev.zeros_index32(nodes + 1)?,
            grid_mass: dev.zeros(nodes)?,
            grid_velocity: dev.zeros(3 * nodes)?,
            code: dev.zeros(n)?,
            value: dev.zeros(n)?,
            partial: dev.zeros(reduce::partials(n))?,
            dev,
        })
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.dev
    }

    /// Substeps completed (counting those of the `Simulation` it was built from).
    pub fn substep_count(&self) -> u64 {
        self.substep
    }

    /// One substep of size `dt` (module docs). On error the particle state is the one before.
    pub fn substep(&mut self, dt: f64) -> Result<(), DeviceMpmError> {
        self.free_motion(dt)?;
        self.finish(dt)
    }

    /// The first half of a substep (steps 1–4 of the module docs): P2G and the grid update
    /// leave v* in [`DeviceMpm::grid`]'s velocities, the bins of the substep in place for a
    /// contact solve's gathers (`gpu::mpm_contact`); [`DeviceMpm::finish`] ends the substep.
    pub fn free_motion(&mut self, dt: f64) -> Result<(), DeviceMpmError> {
        if !(dt.is_finite() && dt > 0.0) {
            return Err(MpmError::InvalidParameter {
                key: "dt",
                value: dt,
                reason: "must be finite and > 0",
            }
            .into());
        }
        let n = self.particles;
        let dev = &self.dev;
        dev.launch(
            Kernel::MpmPrepare,
            n,
            &mut [
                Arg::Int(self.materials as i64),
                Arg::Real(dt),
                Arg::Index(&self.dims),
                Arg::In(&self.geo),
                Arg::In(&self.state.x),
                Arg::In(&self.state.c),
                Arg::In(&self.state.f),
                Arg::In(&self.mass),
                Arg::In(&self.volume),
                Arg::Index(&self.material),
                Arg::In(&self.mat),
                Arg::Out(&mut self.frac),
                Arg::Out(&mut self.weights),
                Arg::Out(&mut self.affine),
                Arg::Index32Out(self.sort.keys_mut()),
                Arg::Out(&mut self.code),
                Arg::Out(&mut self.value),
            ],
        )?;
        self.sort.iota(dev)?;
        self.sort.sort(dev)?;
        self.sort.bin_starts(dev, self.nodes, &mut self.start)?;
        dev.launch(
            Kernel::MpmP2g,
            self.nodes,
            &mut [
                Arg::Index(&self.dims),
                Arg::In(&self.geo),
                Arg::Index32(&self.start),
                Arg::Index32(self.sort.values()),
                Arg::In(&self.frac),
                Arg::In(&self.weights),
                Arg::In(&self.mass),
                Arg::In(&self.state.v),
                Arg::In(&self.affine),
                Arg::Out(&mut self.grid_mass),
                Arg::Out(&mut self.grid_velocity),
            ],
        )?;
        dev.launch(
            Kernel::MpmGridUpdate,
            self.nodes,
            &mut [
                Arg::Real(dt),
                Arg::Index(&self.dims),
                Arg::In(&self.geo),
                Arg::In(&self.grid_mass),
                Arg::Out(&mut self.grid_velocity),
            ],
        )?;
        Ok(())
    }

    /// The second half of a substep (steps 5–6): G2P with the grid velocities as they are
    /// (v*, or a contact solve's), the failure sum, and the swap of the particle arrays.
    pub fn finish(&mut self, dt: f64) -> Result<(), DeviceMpmError> {
        let n = self.particles;
        let dev = &self.dev;
        dev.launch(
            Kernel::MpmG2p,
            n,
            &mut [
                Arg::Real(dt),
                Arg::Index(&self.dims),
                Arg::In(&self.geo),
                Arg::In(&self.grid_velocity),
                Arg::In(&self.frac),
                Arg::In(&self.weights),
                Arg::In(&self.state.x),
                Arg::In(&self.state.f),
                Arg::In(&self.state.plastic),
                Arg::Index(&self.material),
                Arg::In(&self.mat),
                Arg::Out(&mut self.next.x),
                Arg::Out(&mut self.next.v),
                Arg::Out(&mut self.next.c),
                Arg::Out(&mut self.next.f),
                Arg::Out(&mut self.next.plastic),
                Arg::Out(&mut self.code),
                Arg::Out(&mut self.value),
            ],
        )?;
        let failures = if n == 0 {
            0.0
        } else {
            reduce::sum(dev, (&self.code, n), &mut self.partial)?
        };
        if failures != 0.0 {
            return Err(self.first_failure()?.into());
        }
        std::mem::swap(&mut self.state, &mut self.next);
        self.substep += 1;
        Ok(())
    }

    /// The CPU reference's error for the first failing particle: a P2G failure (codes 1–3)
    /// before any G2P failure (4–7), as the CPU's P2G runs over every particle first.
    fn first_failure(&self) -> Result<MpmError, GpuError> {
        let code = self.dev.download(&self.code)?;
        let value = self.dev.download(&self.value)?;
        let x = self.dev.download(&self.state.x)?;
        let substep = self.substep;
        let pick = |lo: f64, hi: f64| code.iter().position(|&c| c >= lo && c <= hi);
        let p = pick(1.0, 3.0).or_else(|| pick(4.0, 7.0)).unwrap_or(0);
        let (val, pos) = (value[p], &x[3 * p..3 * p + 3]);
        Ok(match code[p] as i64 {
            1 => MpmError::OutsideGrid {
                substep,
                particle: p,
                x: pos[0],
                y: pos[1],
                z: pos[2],
            },
            2 => MpmError::InvalidParameter {
                key: "particle material index",
                value: val,
                reason: "no such material",
            },
            3 | 6 => MpmError::Inverted {
                substep,
                particle: p,
                det: val,
            },
            4 => MpmError::NonFinite {
                substep,
                particle: p,
                what: "velocity",
            },
            5 => MpmError::Cfl {
                substep,
                particle: p,
                distance: val,
                h: self.dev.download(&self.geo)?[3],
            },
            _ => MpmError::NonFinite {
                substep,
                particle: p,
                what: "deformation gradient",
            },
        })
    }

    /// Writes the device's particle state (x, v, C, F, plastic state) into `sim`, which must
    /// be the simulation this was built from (or one with as many particles).
    pub fn download(&self, sim: &mut Simulation) -> Result<(), DeviceMpmError> {
        let d = &self.dev;
        let (x, v, c, f, plastic) = (
            d.download(&self.state.x)?,
            d.download(&self.state.v)?,
            d.download(&self.state.c)?,
            d.download(&self.state.f)?,
            d.download(&self.state.plastic)?,
        );
        let p = sim.particles_mut();
        if p.len() != self.particles {
            return Err(GpuError::Length {
                expected: self.particles,
                got: p.len(),
            }
            .into());
        }
        let mat = |a: &[f64]| Matrix3::from_row_slice(a);
        for i in 0..self.particles {
            p.x[i] = Vector3::from_column_slice(&x[3 * i..3 * i + 3]);
            p.v[i] = Vector3::from_column_slice(&v[3 * i..3 * i + 3]);
            p.c[i] = mat(&c[9 * i..9 * i + 9]);
            p.f[i] = mat(&f[9 * i..9 * i + 9]);
            p.plastic[i].plastic_strain = plastic[2 * i];
            p.plastic[i].log_volume_correction = plastic[2 * i + 1];
        }
        Ok(())
    }

    /// Node masses and velocities after the last substep's grid update (v*, the values G2P
    /// read), for checks against the CPU grid.
    pub fn grid(&self) -> Result<(Vec<f64>, Vec<f64>), GpuError> {
        Ok((
            self.dev.download(&self.grid_mass)?,
            self.dev.download(&self.grid_velocity)?,
        ))
    }
}
