//! Frame files of a rollout: `.vtu` volumes (default) or PLY surfaces, and their names.
//!
//! - **PLY** (`frame_00012.ply`): the boundary surface of every body with per-vertex velocity,
//!   Young's modulus (element average) and, in scenes with obstacles, the contact force.
//! - **VTU** (`frame_00012.vtu`): the whole volume mesh, every body in one `<Piece>` (bodies may
//!   mix tets and hexes), point arrays `velocity` (and `contact_force` with obstacles), `node`
//!   (the global node index) and `body`, cell arrays `tag` and `body` (both the body index),
//!   `youngs_modulus` and the layout's per-frame [`CellFields`] (strain-energy density and von
//!   Mises stress for simulations), in the [`VtuEncoding`] chosen (appended zlib-compressed
//!   binary by default). A ParaView collection `frames.pvd`
//!   lists every written frame with its time; it is rewritten (atomically) after each frame,
//!   so a run that fails part-way leaves a valid collection of the frames it wrote.
//!
//! The writer takes plain numbers ([`FrameLayout`]): the caller describes each body's node
//! range, cells and surface once, and hands positions and velocities per frame.

pub use super::vtu::VtuEncoding;
use super::vtu::{encode_pvd, encode_vtu_pieces, IntArray, PointField, VtuPiece};
use super::{ply, write_atomic};
use std::ops::Range;
use std::path::Path;

/// Stable PLY frame file name (tracking losses read it back when no `.vtu` frame is there).
pub fn frame_name(frame: usize) -> String {
    format!("frame_{frame:05}.ply")
}

/// Stable VTU frame file name (what tracking losses read back first).
pub fn vtu_frame_name(frame: usize) -> String {
    format!("frame_{frame:05}.vtu")
}

/// Which files a run writes per frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameFiles {
    /// Binary PLY boundary surfaces.
    Ply,
    /// VTK XML volumes in the given encoding plus a `frames.pvd` collection.
    Vtu(VtuEncoding),
}

/// One body of the simulation as the frame writer sees it.
#[derive(Clone, Debug)]
pub struct FrameBody {
    /// The body's nodes: a contiguous range of the global node numbering.
    pub nodes: Range<usize>,
    /// VTK cell type of the body's elements (10 tetra, 12 hexahedron).
    pub cell_type: u8,
    /// Nodes per element.
    pub nodes_per_cell: usize,
    /// Element connectivity in global node numbers, VTK node order.
    pub connectivity: Vec<usize>,
    /// Young's modulus per element.
    pub youngs: Vec<f64>,
    /// Boundary triangles in global node numbers.
    pub surface: Vec<[usize; 3]>,
}

/// Per-element arrays computed from the positions of each frame, over all elements in
/// element order: `(name, one value per element)` (e.g. strain-energy density and von Mises
/// stress, see `solver::cell_fields`). The caller supplies the function, so the writer
/// stays a writer of plain numbers.
#[derive(Clone)]
pub struct CellFields(pub std::sync::Arc<CellFieldFn>);

/// Positions (node-major) → named per-element arrays.
pub type CellFieldFn = dyn Fn(&[f64]) -> Vec<(&'static str, Vec<f64>)> + Send + Sync;

impl std::fmt::Debug for CellFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CellFields(..)")
    }
}

/// Everything the frame writer needs to know about the model, fixed for a run.
#[derive(Clone, Debug)]
pub struct FrameLayout {
    /// Total number of nodes (all bodies).
    pub num_nodes: usize,
    /// Bodies in element order (body `k`'s elements follow body `k - 1`'s).
    pub bodies: Vec<FrameBody>,
    /// Per-frame cell arrays of `.vtu` frames beyond `tag` and `youngs_modulus`.
    pub cell_fields: Option<CellFields>,
}

/// Surface output data shared by all frames.
pub struct SurfaceMap {
    pub nodes: Vec<usize>,
    pub faces: Vec<[u32; 3]>,
    pub node_youngs: Vec<f64>,
}

/// The boundary nodes of a PLY frame in vertex order: every node of the triangles in
/// `surface` (all bodies' boundary triangles in body order), numbered by first appearance.
/// Also the node order of a tracking loss read from `.vtu` frames
/// (`optimize::problem`), so that it sums over the same nodes in the same order as one read
/// from PLY frames.
pub fn surface_node_order<'a>(
    num_nodes: usize,
    surface: impl IntoIterator<Item = &'a [usize; 3]>,
) -> Vec<usize> {
    let mut seen = vec![false; num_nodes];
    let mut nodes = Vec::new();
    for t in surface {
        for &i in t {
            if !seen[i] {
                seen[i] = true;
                nodes.push(i);
            }
        }
    }
    nodes
}

impl SurfaceMap {
    pub fn new(layout: &FrameLayout) -> Self {
        let n = layout.num_nodes;
        let surface = layout.bodies.iter().flat_map(|b| b.surface.iter());
        let nodes = surface_node_order(n, surface.clone());
        let mut local = vec![u32::MAX; n];
        for (k, &i) in nodes.iter().enumerate() {
            local[i] = k as u32;
        }
        let faces = surface.map(|t| t.map(|i| local[i])).collect();
        let mut sum = vec![0.0; n];
        let mut cnt = vec![0usize; n];
        for b in &layout.bodies {
            let cells = b.connectivity.chunks(b.nodes_per_cell.max(1));
            for (cell, &e) in cells.zip(&b.youngs) {
                for &i in cell {
                    sum[i] += e;
                    cnt[i] += 1;
                }
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

/// One body of a volume frame in body-local node numbering.
struct VolumeBody {
    cell_type: u8,
    nodes_per_cell: usize,
    connectivity: Vec<usize>,
    tags: Vec<i64>,
    nodes: Range<usize>,
    youngs: Vec<f64>,
    /// Global node index of each of the body's nodes.
    node_index: Vec<i64>,
    /// The body index, once per node.
    node_body: Vec<i64>,
}

/// Volume output data shared by all frames: one single-kind cell set per body in body-local
/// node numbering (the body's nodes are the contiguous range [`FrameBody::nodes`]).
pub struct VolumeMap {
    bodies: Vec<VolumeBody>,
    cell_fields: Option<CellFields>,
    encoding: VtuEncoding,
}

impl VolumeMap {
    pub fn new(layout: &FrameLayout, encoding: VtuEncoding) -> Self {
        let bodies = layout
            .bodies
            .iter()
            .enumerate()
            .map(|(bi, b)| VolumeBody {
                node_index: b.nodes.clone().map(|i| i as i64).collect(),
                node_body: vec![bi as i64; b.nodes.len()],
                cell_type: b.cell_type,
                nodes_per_cell: b.nodes_per_cell,
                connectivity: b.connectivity.iter().map(|&i| i - b.nodes.start).collect(),
                tags: vec![bi as i64; b.youngs.len()],
                nodes: b.nodes.clone(),
                youngs: b.youngs.clone(),
            })
            .collect();
        VolumeMap {
            bodies,
            cell_fields: layout.cell_fields.clone(),
            encoding,
        }
    }

    /// The `.vtu` bytes of one frame (`x`, `v`, `contact_force` node-major, length 3n).
    pub fn encode(
        &self,
        x: &[f64],
        v: &[f64],
        contact_force: Option<&[f64]>,
    ) -> Result<Vec<u8>, crate::io::vtu::VtuError> {
        let split = |a: &[f64], r: &Range<usize>| -> Vec<[f64; 3]> {
            r.clone()
                .map(|i| [a[3 * i], a[3 * i + 1], a[3 * i + 2]])
                .collect()
        };
        let data: Vec<_> = self
            .bodies
            .iter()
            .map(|b| {
                let r = &b.nodes;
                (split(x, r), split(v, r), contact_force.map(|f| split(f, r)))
            })
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
        let extra = self
            .cell_fields
            .as_ref()
            .map(|f| (f.0)(x))
            .unwrap_or_default();
        let mut first_element = 0;
        let cells: Vec<Vec<(&str, &[f64])>> = self
            .bodies
            .iter()
            .map(|b| {
                let r = first_element..first_element + b.youngs.len();
                first_element = r.end;
                let mut c: Vec<(&str, &[f64])> = vec![("youngs_modulus", &b.youngs[..])];
                c.extend(extra.iter().map(|(name, v)| (*name, &v[r.clone()])));
                c
            })
            .collect();
        let ints: Vec<([IntArray<'_>; 2], [IntArray<'_>; 1])> = self
            .bodies
            .iter()
            .map(|b| {
                (
                    [("node", &b.node_index[..]), ("body", &b.node_body[..])],
                    [("body", &b.tags[..])],
                )
            })
            .collect();
        let pieces: Vec<VtuPiece<'_>> = self
            .bodies
            .iter()
            .enumerate()
            .map(|(k, b)| VtuPiece {
                point_fields: &fields[k],
                point_ints: &ints[k].0,
                cell_ints: &ints[k].1,
                cell_scalars: &cells[k],
                ..VtuPiece::new(
                    b.cell_type,
                    b.nodes_per_cell,
                    &b.connectivity,
                    &b.tags,
                    &data[k].0,
                )
            })
            .collect();
        encode_vtu_pieces(&pieces, self.encoding)
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
    /// A writer for `layout` (anything that converts into one, e.g. the simulation model)
    /// writing `files` (e.g. the scene's `[output] format`).
    pub fn new(layout: impl Into<FrameLayout>, files: impl Into<FrameFiles>) -> Self {
        let layout = layout.into();
        match files.into() {
            FrameFiles::Ply => FrameWriter::Ply(SurfaceMap::new(&layout)),
            FrameFiles::Vtu(encoding) => FrameWriter::Vtu {
                map: VolumeMap::new(&layout, encoding),
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
                let bytes = map
                    .encode(x, v, contact_force)
                    .map_err(|m| std::io::Error::new(std::io::ErrorKind::InvalidData, m))?;
                write_atomic(&dir.join(&name), &bytes)?;
                written.retain(|(_, n)| *n != name);
                written.push((time, name.clone()));
                write_atomic(&dir.join("frames.pvd"), encode_pvd(written).as_bytes())?;
                Ok(name)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tet body (nodes 0..4) and a one-hex body (nodes 4..12), hex in VTK order.
    fn layout() -> FrameLayout {
        FrameLayout {
            num_nodes: 12,
            bodies: vec![
                FrameBody {
                    nodes: 0..4,
                    cell_type: 10,
                    nodes_per_cell: 4,
                    connectivity: vec![0, 1, 2, 3],
                    youngs: vec![2.0],
                    surface: vec![[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]],
                },
                FrameBody {
                    nodes: 4..12,
                    cell_type: 12,
                    nodes_per_cell: 8,
                    connectivity: (4..12).collect(),
                    youngs: vec![6.0],
                    surface: vec![[4, 5, 6]],
                },
            ],
            cell_fields: Some(CellFields(std::sync::Arc::new(|x: &[f64]| {
                vec![("first_x", vec![x[0], x[12]])]
            }))),
        }
    }

    /// Per-frame cell arrays are evaluated at the frame's positions and split per body.
    #[test]
    fn volume_frames_carry_the_layouts_cell_fields_per_body() {
        let map = VolumeMap::new(&layout(), VtuEncoding::Ascii);
        let x: Vec<f64> = (0..36).map(|i| i as f64).collect();
        let text = String::from_utf8(map.encode(&x, &vec![0.0; 36], None).unwrap()).unwrap();
        let block = text
            .split("Name=\"first_x\" format=\"ascii\">\n")
            .nth(1)
            .unwrap();
        let vals: Vec<&str> = block.lines().take(2).collect();
        assert_eq!(vals, ["0", "12"], "{text}");
    }

    #[test]
    fn surface_map_numbers_vertices_in_face_order_and_averages_youngs() {
        let s = SurfaceMap::new(&layout());
        assert_eq!(s.nodes, vec![1, 2, 3, 0, 4, 5, 6]);
        assert_eq!(s.faces[0], [0, 1, 2]);
        assert_eq!(s.faces[4], [4, 5, 6]);
        assert_eq!(s.node_youngs[0], 2.0);
        assert_eq!(s.node_youngs[7], 6.0);
    }

    #[test]
    fn volume_frames_hold_every_body_in_one_piece() {
        let map = VolumeMap::new(&layout(), VtuEncoding::Ascii);
        let x: Vec<f64> = (0..36).map(|i| i as f64).collect();
        let v = vec![0.0; 36];
        let text = String::from_utf8(map.encode(&x, &v, None).expect("vtu")).unwrap();
        assert_eq!(text.matches("<Piece ").count(), 1);
        assert!(text.contains("<Piece NumberOfPoints=\"12\" NumberOfCells=\"2\">"));
        // The hex body's connectivity is shifted past the tet body's 4 points; its positions
        // are x[12..].
        assert!(text.contains("\n4 5 6 7 8 9 10 11\n"), "{text}");
        assert!(text.contains("\n12 13 14\n"), "{text}");
        assert_eq!(frame_name(12), "frame_00012.ply");
        assert_eq!(vtu_frame_name(3), "frame_00003.vtu");
    }
}
