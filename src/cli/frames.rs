//! Frame files of a rollout: PLY surfaces (default) or `.vtu` volumes (`[output] format`).
//!
//! - **PLY** (`frame_00012.ply`): the boundary surface of every body with per-vertex velocity,
//!   Young's modulus (element average) and, in scenes with obstacles, the contact force.
//! - **VTU** (`frame_00012.vtu`): the whole volume mesh, every body in one `<Piece>` (bodies
//!   may mix tets and hexes; one piece, so that readers like meshio see them all), point
//!   arrays `velocity` (and `contact_force` with obstacles), cell arrays `tag` (the body
//!   index), `youngs_modulus`, `strain_energy_density` and `von_mises_stress`
//!   ([`crate::io::cell_fields`]). A ParaView collection `frames.pvd`
//!   lists every written frame with its time; it is rewritten (atomically) after each frame,
//!   so a run that fails part-way leaves a valid collection of the frames it wrote.

use crate::io::{ply, write_atomic};
use crate::mesh::vtk::{encode_vtu_pieces, VtuPiece};
use crate::mesh::Mesh;
use crate::scene::FrameFormat;
use crate::solver::Model;
use std::path::Path;

/// Stable PLY frame file name (also what tracking losses read back).
pub fn frame_name(frame: usize) -> String {
    format!("frame_{frame:05}.ply")
}

/// Stable VTU frame file name.
pub fn vtu_frame_name(frame: usize) -> String {
    format!("frame_{frame:05}.vtu")
}

/// Surface output data shared by all frames.
pub struct SurfaceMap {
    pub nodes: Vec<usize>,
    pub faces: Vec<[u32; 3]>,
    pub node_youngs: Vec<f64>,
}

impl SurfaceMap {
    pub fn new(model: &Model) -> Self {
        let n = model.num_nodes();
        let mut local = vec![u32::MAX; n];
        let mut nodes = Vec::new();
        let mut faces = Vec::new();
        for b in &model.bodies {
            for t in &b.surface {
                let mut f = [0u32; 3];
                for k in 0..3 {
                    if local[t[k]] == u32::MAX {
                        local[t[k]] = nodes.len() as u32;
                        nodes.push(t[k]);
                    }
                    f[k] = local[t[k]];
                }
                faces.push(f);
            }
        }
        let mut sum = vec![0.0; n];
        let mut cnt = vec![0usize; n];
        for e in 0..model.num_elements() {
            for &i in model.element(e) {
                sum[i] += model.params.youngs[e];
                cnt[i] += 1;
            }
        }
        let node_youngs = sum
            .iter()
            .zip(&cnt)
            .map(|(s, c)| s / (*c).max(1) as f64)
            .collect();
        SurfaceMap {
            nodes,
            faces,
            node_youngs,
        }
    }

    pub fn write(
        &self,
        path: &Path,
        x: &[f64],
        v: &[f64],
        contact_force: Option<&[f64]>,
    ) -> std::io::Result<()> {
        let bytes = ply::encode(&ply::SurfaceFrame {
            nodes: &self.nodes,
            x,
            v,
            youngs: &self.node_youngs,
            faces: &self.faces,
            contact_force,
        });
        write_atomic(path, &bytes)
    }
}

/// A named per-node 3-vector array.
type PointField<'a> = (&'a str, &'a [[f64; 3]]);

/// Volume output data shared by all frames: one single-kind mesh per body in body-local node
/// numbering (the body's nodes are the contiguous range `BodyInfo::nodes`).
pub struct VolumeMap {
    bodies: Vec<(Mesh, std::ops::Range<usize>, Vec<f64>)>,
    /// For the per-element strain-energy density and von Mises stress of each frame.
    model: Box<Model>,
}

impl VolumeMap {
    pub fn new(model: &Model) -> Self {
        let bodies = model
            .bodies
            .iter()
            .enumerate()
            .map(|(bi, b)| {
                let n0 = b.nodes.start;
                let mut elements = Vec::new();
                for e in b.elements.clone() {
                    elements.extend(model.element(e).iter().map(|&i| i - n0));
                }
                let mesh = Mesh {
                    kind: b.kind,
                    nodes: model.rest[b.nodes.clone()].to_vec(),
                    elements,
                    tags: vec![bi as i64; b.elements.len()],
                };
                let youngs = model.params.youngs[b.elements.clone()].to_vec();
                (mesh, b.nodes.clone(), youngs)
            })
            .collect();
        VolumeMap {
            bodies,
            model: Box::new(model.clone()),
        }
    }

    /// The `.vtu` text of one frame (`x`, `v`, `contact_force` node-major, length 3n).
    pub fn encode(
        &self,
        x: &[f64],
        v: &[f64],
        contact_force: Option<&[f64]>,
    ) -> Result<String, String> {
        let split = |a: &[f64], r: &std::ops::Range<usize>| -> Vec<[f64; 3]> {
            r.clone()
                .map(|i| [a[3 * i], a[3 * i + 1], a[3 * i + 2]])
                .collect()
        };
        let data: Vec<_> = self
            .bodies
            .iter()
            .map(|(_, r, _)| (split(x, r), split(v, r), contact_force.map(|f| split(f, r))))
            .collect();
        let fields: Vec<Vec<PointField<'_>>> = data
            .iter()
            .map(|(_, vel, fc)| {
                let mut f: Vec<PointField<'_>> = vec![("velocity", &vel[..])];
                if let Some(fc) = fc {
                    f.push(("contact_force", &fc[..]));
                }
                f
            })
            .collect();
        let (psi, mises) = crate::io::cell_fields::cell_fields(&self.model, x);
        let cells: Vec<[(&str, &[f64]); 3]> = self
            .bodies
            .iter()
            .zip(&self.model.bodies)
            .map(|((_, _, e), b)| {
                [
                    ("youngs_modulus", &e[..]),
                    ("strain_energy_density", &psi[b.elements.clone()]),
                    ("von_mises_stress", &mises[b.elements.clone()]),
                ]
            })
            .collect();
        let pieces: Vec<VtuPiece<'_>> = self
            .bodies
            .iter()
            .enumerate()
            .map(|(k, (mesh, _, _))| VtuPiece {
                mesh,
                positions: &data[k].0,
                point_fields: &fields[k],
                cell_scalars: &cells[k],
            })
            .collect();
        encode_vtu_pieces(&pieces).map_err(|e| e.to_string())
    }
}

/// Writes the frames of one run in the chosen format.
pub enum FrameWriter {
    Ply(SurfaceMap),
    Vtu {
        map: VolumeMap,
        /// (time, file name) of every frame written so far, for `frames.pvd`.
        written: Vec<(f64, String)>,
    },
}

impl FrameWriter {
    pub fn new(model: &Model, format: FrameFormat) -> Self {
        match format {
            FrameFormat::Ply => FrameWriter::Ply(SurfaceMap::new(model)),
            FrameFormat::Vtu => FrameWriter::Vtu {
                map: VolumeMap::new(model),
                written: Vec::new(),
            },
        }
    }

    /// Write frame `frame` (time `time`) into `dir`; returns the file name.
    pub fn write(
        &mut self,
        dir: &Path,
        frame: usize,
        time: f64,
        x: &[f64],
        v: &[f64],
        contact_force: Option<&[f64]>,
    ) -> std::io::Result<String> {
        match self {
            FrameWriter::Ply(s) => {
                let name = frame_name(frame);
                s.write(&dir.join(&name), x, v, contact_force)?;
                Ok(name)
            }
            FrameWriter::Vtu { map, written } => {
                let name = vtu_frame_name(frame);
                let text = map
                    .encode(x, v, contact_force)
                    .map_err(|m| std::io::Error::new(std::io::ErrorKind::InvalidData, m))?;
                write_atomic(&dir.join(&name), text.as_bytes())?;
                written.retain(|(_, n)| *n != name);
                written.push((time, name.clone()));
                write_atomic(&dir.join("frames.pvd"), pvd(written).as_bytes())?;
                Ok(name)
            }
        }
    }
}

/// ParaView collection file listing `(time, file)` pairs.
fn pvd(frames: &[(f64, String)]) -> String {
    let mut s = String::from(
        "<?xml version=\"1.0\"?>\n<VTKFile type=\"Collection\" version=\"1.0\">\n<Collection>\n",
    );
    for (t, f) in frames {
        s.push_str(&format!(
            "<DataSet timestep=\"{t:e}\" part=\"0\" file=\"{f}\"/>\n"
        ));
    }
    s.push_str("</Collection>\n</VTKFile>\n");
    s
}
