//! APIC / MLS-MPM particle–grid transfers (Jiang et al. 2015, APIC; Hu et al. 2018, MLS-MPM
//! Eq. 16–17 and §5.3), with quadratic B-splines ([`super::bspline`]) and D = (h²/4) I.
//!
//! **P2G as a gather.** Each particle p is binned by its base node bₚ (its stencil is the
//! 3×3×3 nodes bₚ + {0,1,2}³). Binning is a stable counting sort, so a bin lists its particles
//! in increasing index. Node i then sums, for d = (dx, dy, dz) in z-major order over {0,1,2}³,
//! over the particles of bin i − d in bin order:
//!
//!   mᵢ = Σ wᵢₚ mₚ,   (mv)ᵢ = Σ wᵢₚ [mₚ vₚ + Aₚ (xᵢ − xₚ)],   Aₚ = mₚ Cₚ − Δt (4/h²) Vₚ⁰ Pₚ Fₚᵀ.
//!
//! The summation order is fixed and independent of threads, so a GPU gather over particles
//! re-binned by cell reproduces it. On the host the per-particle stages (weights and stress
//! before the gather, G2P and the return mapping after it) and the gather (by z-slab of
//! nodes) run on the current rayon pool; every output is written by one item, so results
//! are bitwise the same for any number of threads, and a failing substep reports the
//! lowest-index particle that fails, as a serial loop would. The second term of Aₚ is the
//! MLS-MPM internal force fᵢ = −Σₚ Vₚ⁰ Pₚ Fₚᵀ ∇wᵢₚ with the MLS gradient ∇wᵢₚ ≈ (4/h²) wᵢₚ (xᵢ − xₚ).
//!
//! **G2P.** vₚ = Σᵢ wᵢₚ vᵢ, Cₚ = (4/h²) Σᵢ wᵢₚ vᵢ (xᵢ − xₚ)ᵀ, Fₚ ← (I + Δt Cₚ) Fₚ,
//! xₚ ← xₚ + Δt vₚ, then the plastic return mapping on Fₚ.

use nalgebra::{Matrix3, Vector3};
use rayon::prelude::*;

use super::bspline;
use super::constitutive::Material;
use super::grid::{node_index, Grid};
use super::particles::Particles;
use super::plasticity::PlasticState;
use super::MpmError;

/// Per-substep particle scratch, allocated once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scratch {
    base: Vec<[u32; 3]>,
    frac: Vec<Vector3<f64>>,
    weights: Vec<[[f64; 3]; 3]>,
    /// Aₚ during P2G, then the new Cₚ during G2P.
    affine: Vec<Matrix3<f64>>,
    /// mₚ vₚ during P2G, then the new vₚ during G2P.
    mv: Vec<Vector3<f64>>,
    key: Vec<u32>,
    sorted: Vec<u32>,
    bin_start: Vec<u32>,
    /// Counting-sort fill cursors, one per bin.
    fill: Vec<u32>,
    /// Nodes with a nonempty bin among their 27 gather bins.
    active: Vec<bool>,
    new_f: Vec<Matrix3<f64>>,
    new_plastic: Vec<PlasticState>,
}

impl Scratch {
    pub(crate) fn new(particles: usize, nodes: usize) -> Self {
        Self {
            base: vec![[0; 3]; particles],
            frac: vec![Vector3::zeros(); particles],
            weights: vec![[[0.0; 3]; 3]; particles],
            affine: vec![Matrix3::zeros(); particles],
            mv: vec![Vector3::zeros(); particles],
            key: vec![0; particles],
            sorted: vec![0; particles],
            bin_start: vec![0; nodes + 1],
            fill: vec![0; nodes],
            active: vec![false; nodes],
            new_f: vec![Matrix3::zeros(); particles],
            new_plastic: vec![PlasticState::default(); particles],
        }
    }

    /// The stencil of particle `p` from the last P2G: (node index, weight) for the 27 nodes.
    pub(crate) fn stencil(&self, grid: &Grid, p: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        stencil_of(self.base[p], &self.weights[p], grid.dims())
    }
}

/// The 27 (node index, weight) pairs of a particle with base node `b` and per-axis weights
/// `w`, d = (dx, dy, dz) in z-major order over {0,1,2}³.
fn stencil_of(
    b: [u32; 3],
    w: &[[f64; 3]; 3],
    dims: [usize; 3],
) -> impl Iterator<Item = (usize, f64)> + '_ {
    (0..27).map(move |n| {
        let (dx, dy, dz) = (n % 3, (n / 3) % 3, n / 9);
        let idx = (b[0] as usize + dx)
            + dims[0] * ((b[1] as usize + dy) + dims[1] * (b[2] as usize + dz));
        (idx, w[0][dx] * w[1][dy] * w[2][dz])
    })
}

/// The material of particle `p`, or the error naming its index when the table has none.
fn material_of<'m>(
    materials: &'m [Material],
    particles: &Particles,
    p: usize,
) -> Result<&'m Material, MpmError> {
    let index = particles.material[p];
    materials
        .get(index as usize)
        .ok_or(MpmError::InvalidParameter {
            key: "particle material index",
            value: index as f64,
            reason: "no such material",
        })
}

/// P2G: bins the particles, evaluates their stress and gathers mass and momentum on the grid.
pub(crate) fn particle_to_grid(
    grid: &mut Grid,
    particles: &Particles,
    materials: &[Material],
    scratch: &mut Scratch,
    dt: f64,
    substep: u64,
) -> Result<(), MpmError> {
    let spec = *grid.spec();
    let h = spec.h;
    let inv_h = 1.0 / h;
    let stress_scale = dt * 4.0 / (h * h);
    let n = particles.len();
    let g: &Grid = grid;
    let failed = (
        scratch.base[..n].par_iter_mut(),
        scratch.frac[..n].par_iter_mut(),
        scratch.weights[..n].par_iter_mut(),
        scratch.affine[..n].par_iter_mut(),
        scratch.mv[..n].par_iter_mut(),
        scratch.key[..n].par_iter_mut(),
    )
        .into_par_iter()
        .enumerate()
        .find_map_first(|(p, (base, frac, w, affine, mv, key))| {
            let x = particles.x[p];
            for a in 0..3 {
                let (b, f) = bspline::base_and_fraction((x[a] - spec.origin[a]) * inv_h);
                if !(b >= 0 && b as usize + 2 <= spec.cells[a] && f.is_finite()) {
                    return Some(MpmError::OutsideGrid {
                        substep,
                        particle: p,
                        x: x[0],
                        y: x[1],
                        z: x[2],
                    });
                }
                base[a] = b as u32;
                frac[a] = f;
                w[a] = bspline::weights(f);
            }
            let mat = match material_of(materials, particles, p) {
                Ok(m) => m,
                Err(e) => return Some(e),
            };
            let f = &particles.f[p];
            if mat.needs_positive_det() {
                let det = f.determinant();
                if det <= 0.0 {
                    return Some(MpmError::Inverted {
                        substep,
                        particle: p,
                        det,
                    });
                }
            }
            let stress = mat.first_piola(f) * f.transpose();
            let m = particles.mass[p];
            *affine = m * particles.c[p] - stress_scale * particles.volume[p] * stress;
            *mv = m * particles.v[p];
            *key = g.index(base[0] as usize, base[1] as usize, base[2] as usize) as u32;
            None
        });
    if let Some(e) = failed {
        return Err(e);
    }
    // Stable counting sort of particles by base node.
    let starts = &mut scratch.bin_start;
    starts.iter_mut().for_each(|s| *s = 0);
    for &k in &scratch.key[..n] {
        starts[k as usize + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let fill = &mut scratch.fill;
    fill.copy_from_slice(&starts[..starts.len() - 1]);
    for (p, &k) in scratch.key[..n].iter().enumerate() {
        scratch.sorted[fill[k as usize] as usize] = p as u32;
        fill[k as usize] += 1;
    }
    // Active nodes: those reached by a nonempty bin (bin b feeds nodes b + {0,1,2}³).
    let dims = grid.dims();
    scratch.active.iter_mut().for_each(|a| *a = false);
    for bin in 0..dims[0] * dims[1] * dims[2] {
        if scratch.bin_start[bin] == scratch.bin_start[bin + 1] {
            continue;
        }
        let [bi, bj, bk] = grid.coords(bin);
        for dz in 0..3 {
            for dy in 0..3 {
                for dx in 0..3 {
                    // Particles are inside the grid, so b + 2 stays on it.
                    scratch.active[grid.index(bi + dx, bj + dy, bk + dz)] = true;
                }
            }
        }
    }
    // Gather: node i sums over the bins i − d, d ∈ {0,1,2}³, in fixed order; one z-slab of
    // nodes per item.
    let scratch = &*scratch;
    let slab = dims[0] * dims[1];
    grid.mass
        .par_chunks_mut(slab)
        .zip(grid.velocity.par_chunks_mut(slab))
        .enumerate()
        .for_each(|(k, (mass, velocity))| {
            for j in 0..dims[1] {
                for i in 0..dims[0] {
                    let local = i + dims[0] * j;
                    if !scratch.active[local + slab * k] {
                        mass[local] = 0.0;
                        velocity[local] = Vector3::zeros();
                        continue;
                    }
                    let mut m_i = 0.0;
                    let mut mv_i = Vector3::zeros();
                    for dz in 0..3usize {
                        if dz > k {
                            break;
                        }
                        for dy in 0..3usize {
                            if dy > j {
                                break;
                            }
                            for dx in 0..3usize {
                                if dx > i {
                                    break;
                                }
                                let bin = node_index(dims, i - dx, j - dy, k - dz);
                                let (s, e) = (scratch.bin_start[bin], scratch.bin_start[bin + 1]);
                                for &p in &scratch.sorted[s as usize..e as usize] {
                                    let p = p as usize;
                                    let w = &scratch.weights[p];
                                    let wip = w[0][dx] * w[1][dy] * w[2][dz];
                                    let d = Vector3::new(dx as f64, dy as f64, dz as f64);
                                    let dpos = h * (d - scratch.frac[p]);
                                    m_i += wip * particles.mass[p];
                                    mv_i += wip * (scratch.mv[p] + scratch.affine[p] * dpos);
                                }
                            }
                        }
                    }
                    mass[local] = m_i;
                    velocity[local] = mv_i;
                }
            }
        });
    Ok(())
}

/// G2P, the F update, the return mapping and the guards; commits only when every particle
/// passes (a failed substep leaves the particles as they were before it).
pub(crate) fn grid_to_particle(
    grid: &Grid,
    particles: &mut Particles,
    materials: &[Material],
    scratch: &mut Scratch,
    dt: f64,
    substep: u64,
) -> Result<(), MpmError> {
    let h = grid.spec().h;
    let c_scale = 4.0 / (h * h);
    let n = particles.len();
    let (base, frac, weights) = (&scratch.base, &scratch.frac, &scratch.weights);
    let dims = grid.dims();
    let parts: &Particles = particles;
    let failed = (
        scratch.mv[..n].par_iter_mut(),
        scratch.affine[..n].par_iter_mut(),
        scratch.new_f[..n].par_iter_mut(),
        scratch.new_plastic[..n].par_iter_mut(),
    )
        .into_par_iter()
        .enumerate()
        .find_map_first(|(p, (mv, affine, new_f, new_plastic))| {
            let mut v = Vector3::zeros();
            let mut b = Matrix3::zeros();
            for (n_idx, (idx, wip)) in stencil_of(base[p], &weights[p], dims).enumerate() {
                let d = Vector3::new(
                    (n_idx % 3) as f64,
                    ((n_idx / 3) % 3) as f64,
                    (n_idx / 9) as f64,
                );
                let dpos = h * (d - frac[p]);
                let vi = grid.velocity[idx];
                v += wip * vi;
                b += (wip * vi) * dpos.transpose();
            }
            let c = c_scale * b;
            if !(v.iter().all(|s| s.is_finite()) && c.iter().all(|s| s.is_finite())) {
                return Some(MpmError::NonFinite {
                    substep,
                    particle: p,
                    what: "velocity",
                });
            }
            let distance = dt * v.norm();
            if distance > h {
                return Some(MpmError::Cfl {
                    substep,
                    particle: p,
                    distance,
                    h,
                });
            }
            let mat = match material_of(materials, parts, p) {
                Ok(m) => m,
                Err(e) => return Some(e),
            };
            let f_trial = (Matrix3::identity() + dt * c) * parts.f[p];
            let mut plastic = parts.plastic[p];
            let f_next = if mat.plasticity == super::Plasticity::None {
                f_trial
            } else {
                let det = f_trial.determinant();
                if det <= 0.0 {
                    return Some(MpmError::Inverted {
                        substep,
                        particle: p,
                        det,
                    });
                }
                let (mu, lambda) = mat.lame();
                mat.plasticity
                    .return_map(mu, lambda, &f_trial, &mut plastic)
            };
            if !f_next.iter().all(|s| s.is_finite()) {
                return Some(MpmError::NonFinite {
                    substep,
                    particle: p,
                    what: "deformation gradient",
                });
            }
            *mv = v;
            *affine = c;
            *new_f = f_next;
            *new_plastic = plastic;
            None
        });
    if let Some(e) = failed {
        return Err(e);
    }
    for p in 0..n {
        let v = scratch.mv[p];
        particles.x[p] += dt * v;
        particles.v[p] = v;
        particles.c[p] = scratch.affine[p];
        particles.f[p] = scratch.new_f[p];
        particles.plastic[p] = scratch.new_plastic[p];
    }
    Ok(())
}
