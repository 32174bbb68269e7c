//! Frame files of MPM/rigid runs, through the io writers (`io::ply::encode_table`,
//! `io::vtu::encode_vtu_pieces`, `io::vtu::encode_pvd`):
//!
//! - `particles_NNNNNN.ply|vtu`: the particles as a point cloud with velocity, the plastic
//!   measure (`plastic_strain`), the von Mises stress and the Cauchy stress σ (PLY: `s_xx`
//!   … `s_xy`; VTU: 3-vectors `stress_diagonal` (σxx, σyy, σzz) and `stress_off_diagonal`
//!   (σyz, σxz, σxy)), and the MPM body index (`body`; VTU: the cell `tag`);
//! - `rigid_NNNNNN.ply|vtu`: one triangle surface per rigid body (obstacle colliders
//!   included, `mpm::surface`) with the rigid point velocity and the body index;
//! - with VTU, `particles.pvd` and `rigid.pvd` list the frames for ParaView.

use super::surface::body_surface;
use super::MpmState;
use crate::io::frames::FrameFiles;
use crate::io::ply::encode_table;
use crate::io::vtu::{encode_pvd, encode_vtu_pieces, VtuEncoding, VtuPiece};
use crate::io::write_atomic;
use nalgebra::Vector3;
use std::path::Path;

/// Writes the frames of one MPM/rigid run in the scene's `[output] format`.
pub struct MpmFrameWriter {
    vtu: Option<VtuEncoding>,
    particle_frames: Vec<(f64, String)>,
    rigid_frames: Vec<(f64, String)>,
}

/// Per-particle arrays of a frame.
struct ParticleArrays {
    x: Vec<[f64; 3]>,
    v: Vec<[f64; 3]>,
    body: Vec<i64>,
    plastic: Vec<f64>,
    von_mises: Vec<f64>,
    /// σxx, σyy, σzz, σyz, σxz, σxy.
    stress: [Vec<f64>; 6],
}

fn particle_arrays(sim: &diffphd_mpm::mpm::Simulation) -> ParticleArrays {
    let p = sim.particles();
    let n = p.len();
    let mut stress: [Vec<f64>; 6] = Default::default();
    for s in &mut stress {
        s.reserve(n);
    }
    for i in 0..n {
        let c = sim.cauchy_stress(i);
        for (k, (r, col)) in [(0, 0), (1, 1), (2, 2), (1, 2), (0, 2), (0, 1)]
            .into_iter()
            .enumerate()
        {
            stress[k].push(c[(r, col)]);
        }
    }
    ParticleArrays {
        x: p.x.iter().map(|x| [x.x, x.y, x.z]).collect(),
        v: p.v.iter().map(|v| [v.x, v.y, v.z]).collect(),
        body: p.material().iter().map(|&m| m as i64).collect(),
        plastic: (0..n).map(|i| sim.plastic_strain(i)).collect(),
        von_mises: (0..n).map(|i| sim.von_mises_stress(i)).collect(),
        stress,
    }
}

/// Surfaces of every rigid body: vertices, triangles, point velocities, body index.
type RigidArrays = (Vec<[f64; 3]>, Vec<[usize; 3]>, Vec<[f64; 3]>, Vec<i64>);

fn rigid_arrays(world: &diffphd_mpm::rigid::RigidWorld) -> RigidArrays {
    let (mut x, mut t, mut v, mut tag) = (vec![], vec![], vec![], vec![]);
    for (b, body) in world.bodies.iter().enumerate() {
        let (bx, bt) = body_surface(body);
        let base = x.len();
        for p in &bx {
            let pv = body.point_velocity(&Vector3::from(*p));
            v.push([pv.x, pv.y, pv.z]);
        }
        x.extend(bx);
        t.extend(bt.iter().map(|f| f.map(|i| i + base)));
        tag.extend(std::iter::repeat_n(b as i64, bt.len()));
    }
    (x, t, v, tag)
}

fn flat(v: &[[f64; 3]], k: usize) -> Vec<f64> {
    v.iter().map(|a| a[k]).collect()
}

impl MpmFrameWriter {
    pub fn new(files: impl Into<FrameFiles>) -> Self {
        MpmFrameWriter {
            vtu: match files.into() {
                FrameFiles::Ply => None,
                FrameFiles::Vtu(e) => Some(e),
            },
            particle_frames: vec![],
            rigid_frames: vec![],
        }
    }

    /// Write frame `frame` (time `time`) of `state` into `dir`; the file names.
    pub fn write(
        &mut self,
        dir: &Path,
        frame: usize,
        time: f64,
        state: &MpmState,
    ) -> std::io::Result<Vec<String>> {
        let mut names = vec![];
        let bad = |m: crate::io::vtu::VtuError| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string())
        };
        if let Some(sim) = &state.sim {
            let a = particle_arrays(sim);
            let name = match self.vtu {
                None => {
                    let (vx, vy, vz) = (flat(&a.v, 0), flat(&a.v, 1), flat(&a.v, 2));
                    let s = &a.stress;
                    let floats: [(&str, &[f64]); 11] = [
                        ("vx", &vx),
                        ("vy", &vy),
                        ("vz", &vz),
                        ("plastic_strain", &a.plastic),
                        ("von_mises", &a.von_mises),
                        ("s_xx", &s[0]),
                        ("s_yy", &s[1]),
                        ("s_zz", &s[2]),
                        ("s_yz", &s[3]),
                        ("s_xz", &s[4]),
                        ("s_xy", &s[5]),
                    ];
                    let name = format!("particles_{frame:06}.ply");
                    let bytes = encode_table(&a.x, &floats, &[("body", &a.body)], &[]);
                    write_atomic(&dir.join(&name), &bytes)?;
                    name
                }
                Some(enc) => {
                    let conn: Vec<usize> = (0..a.x.len()).collect();
                    let diag: Vec<[f64; 3]> = (0..a.x.len())
                        .map(|i| [a.stress[0][i], a.stress[1][i], a.stress[2][i]])
                        .collect();
                    let off: Vec<[f64; 3]> = (0..a.x.len())
                        .map(|i| [a.stress[3][i], a.stress[4][i], a.stress[5][i]])
                        .collect();
                    let fields = [
                        ("velocity", &a.v[..]),
                        ("stress_diagonal", &diag[..]),
                        ("stress_off_diagonal", &off[..]),
                    ];
                    let scalars = [
                        ("plastic_strain", &a.plastic[..]),
                        ("von_mises", &a.von_mises[..]),
                    ];
                    let piece = VtuPiece {
                        point_fields: &fields,
                        cell_scalars: &scalars,
                        ..VtuPiece::new(1, 1, &conn, &a.body, &a.x)
                    };
                    let bytes = encode_vtu_pieces(&[piece], enc).map_err(bad)?;
                    let name = format!("particles_{frame:06}.vtu");
                    write_atomic(&dir.join(&name), &bytes)?;
                    self.particle_frames.retain(|(_, n)| *n != name);
                    self.particle_frames.push((time, name.clone()));
                    write_atomic(
                        &dir.join("particles.pvd"),
                        encode_pvd(&self.particle_frames).as_bytes(),
                    )?;
                    name
                }
            };
            names.push(name);
        }
        if !state.world.bodies.is_empty() {
            let (x, t, v, tag) = rigid_arrays(&state.world);
            let name = match self.vtu {
                None => {
                    let mut body = vec![0i64; x.len()];
                    for (f, &b) in t.iter().zip(&tag) {
                        for &i in f {
                            body[i] = b;
                        }
                    }
                    let (vx, vy, vz) = (flat(&v, 0), flat(&v, 1), flat(&v, 2));
                    let floats: [(&str, &[f64]); 3] = [("vx", &vx), ("vy", &vy), ("vz", &vz)];
                    let name = format!("rigid_{frame:06}.ply");
                    write_atomic(
                        &dir.join(&name),
                        &encode_table(&x, &floats, &[("body", &body)], &t),
                    )?;
                    name
                }
                Some(enc) => {
                    let conn: Vec<usize> = t.iter().flatten().copied().collect();
                    let fields = [("velocity", &v[..])];
                    let piece = VtuPiece {
                        point_fields: &fields,
                        ..VtuPiece::new(5, 3, &conn, &tag, &x)
                    };
                    let bytes = encode_vtu_pieces(&[piece], enc).map_err(bad)?;
                    let name = format!("rigid_{frame:06}.vtu");
                    write_atomic(&dir.join(&name), &bytes)?;
                    self.rigid_frames.retain(|(_, n)| *n != name);
                    self.rigid_frames.push((time, name.clone()));
                    write_atomic(
                        &dir.join("rigid.pvd"),
                        encode_pvd(&self.rigid_frames).as_bytes(),
                    )?;
                    name
                }
            };
            names.push(name);
        }
        Ok(names)
    }
}
