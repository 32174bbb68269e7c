//! Binary little-endian PLY writer for boundary surfaces with per-vertex fields.
//!
//! Layout: `element vertex N` with `float x y z`, `float vx vy vz`, `float youngs_modulus`,
//! `int node` (index of the vertex in the simulation's node numbering, so frames can be
//! mapped back to nodes), in scenes with obstacles `float contact_fx contact_fy contact_fz`
//! (the node's contact force $J^T\lambda$ in N), and `element face M` with
//! `list uchar int vertex_indices`.
//! Hand-written (about 40 lines) rather than via a PLY crate: the writer is on the hot path
//! of every frame, and tests read the files back with the independent `ply-rs-bw` parser.

/// One surface frame.
pub struct SurfaceFrame<'a> {
    /// Global node index of each vertex.
    pub nodes: &'a [usize],
    /// Node-major positions of all nodes.
    pub x: &'a [f64],
    /// Node-major velocities of all nodes.
    pub v: &'a [f64],
    /// Per-node Young's modulus (mean of adjacent elements).
    pub youngs: &'a [f64],
    /// Triangles in *vertex* (local) indices.
    pub faces: &'a [[u32; 3]],
    /// Node-major contact forces of all nodes (written only when present).
    pub contact_force: Option<&'a [f64]>,
}

/// Encode a frame as binary PLY bytes.
pub fn encode(frame: &SurfaceFrame) -> Vec<u8> {
    let nv = frame.nodes.len();
    let mut out = Vec::with_capacity(64 + nv * 32 + frame.faces.len() * 13);
    let contact_props = if frame.contact_force.is_some() {
        "property float contact_fx\nproperty float contact_fy\nproperty float contact_fz\n"
    } else {
        ""
    };
    let header = format!(
        "ply\nformat binary_little_endian 1.0\ncomment diffphd {}\nelement vertex {nv}\nproperty float x\nproperty float y\nproperty float z\nproperty float vx\nproperty float vy\nproperty float vz\nproperty float youngs_modulus\nproperty int node\n{contact_props}element face {}\nproperty list uchar int vertex_indices\nend_header\n",
        env!("CARGO_PKG_VERSION"),
        frame.faces.len()
    );
    out.extend_from_slice(header.as_bytes());
    for &i in frame.nodes {
        for d in 0..3 {
            out.extend_from_slice(&(frame.x[3 * i + d] as f32).to_le_bytes());
        }
        for d in 0..3 {
            out.extend_from_slice(&(frame.v[3 * i + d] as f32).to_le_bytes());
        }
        out.extend_from_slice(&(frame.youngs[i] as f32).to_le_bytes());
        out.extend_from_slice(&(i as i32).to_le_bytes());
        if let Some(fc) = frame.contact_force {
            for d in 0..3 {
                out.extend_from_slice(&(fc[3 * i + d] as f32).to_le_bytes());
            }
        }
    }
    for f in frame.faces {
        out.push(3u8);
        for &k in f {
            out.extend_from_slice(&(k as i32).to_le_bytes());
        }
    }
    out
}

/// Encode a point cloud or triangle surface as binary little-endian PLY: `element vertex N`
/// with `float x y z`, then one `float` property per entry of `floats` and one `int` per
/// entry of `ints` (each one value per vertex), and `element face M` with
/// `list uchar int vertex_indices` (M = 0 for a point cloud). Used for MPM particle frames
/// and rigid-body surfaces.
pub fn encode_table(
    positions: &[[f64; 3]],
    floats: &[(&str, &[f64])],
    ints: &[(&str, &[i64])],
    faces: &[[usize; 3]],
) -> Vec<u8> {
    let nv = positions.len();
    let mut header = format!(
        "ply\nformat binary_little_endian 1.0\ncomment diffphd {}\nelement vertex {nv}\nproperty float x\nproperty float y\nproperty float z\n",
        env!("CARGO_PKG_VERSION")
    );
    for (name, _) in floats {
        header.push_str(&format!("property float {name}\n"));
    }
    for (name, _) in ints {
        header.push_str(&format!("property int {name}\n"));
    }
    header.push_str(&format!(
        "element face {}\nproperty list uchar int vertex_indices\nend_header\n",
        faces.len()
    ));
    let per = 4 * (3 + floats.len() + ints.len());
    let mut out = Vec::with_capacity(header.len() + nv * per + faces.len() * 13);
    out.extend_from_slice(header.as_bytes());
    for (i, p) in positions.iter().enumerate() {
        for c in p {
            out.extend_from_slice(&(*c as f32).to_le_bytes());
        }
        for (_, f) in floats {
            out.extend_from_slice(&(f.get(i).copied().unwrap_or(0.0) as f32).to_le_bytes());
        }
        for (_, f) in ints {
            out.extend_from_slice(&(f.get(i).copied().unwrap_or(0) as i32).to_le_bytes());
        }
    }
    for f in faces {
        out.push(3u8);
        for &k in f {
            out.extend_from_slice(&(k as i32).to_le_bytes());
        }
    }
    out
}

/// Why [`read_node_positions`] refused a file: the file and the problem.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {why}")]
pub struct PlyReadError {
    pub path: String,
    pub why: PlyProblem,
}

/// The problem of a [`PlyReadError`], naming the vertex where there is one.
#[derive(Debug, thiserror::Error)]
pub enum PlyProblem {
    #[error("{0}")]
    Read(std::io::Error),
    /// The PLY reader's message.
    #[error("not a readable PLY file: {0}")]
    Unreadable(String),
    #[error("no `vertex` element")]
    NoVertices,
    #[error("vertex {vertex} has no integer `node` property")]
    NoNode { vertex: usize },
    #[error("vertex {vertex} has no `{name}`")]
    NoCoordinate { vertex: usize, name: &'static str },
    #[error("vertex {vertex} has a negative node index")]
    NegativeNode { vertex: usize },
}

/// Positions of a PLY file written by [`encode`] (or any PLY with `x y z` and an integer
/// `node` vertex property), as `(node, position)` pairs. Parsed with the independent
/// `ply-rs-bw` reader, which also accepts ASCII PLY. The file is read under the input size
/// limit of [`super::input`].
pub fn read_node_positions(path: &std::path::Path) -> Result<Vec<(usize, [f64; 3])>, PlyReadError> {
    use ply_rs_bw::ply::Property;
    let fail = |why: PlyProblem| PlyReadError {
        path: path.display().to_string(),
        why,
    };
    let bytes = super::input::read_input(path).map_err(|e| fail(PlyProblem::Read(e)))?;
    let mut r = std::io::Cursor::new(bytes);
    let parser = ply_rs_bw::parser::Parser::<ply_rs_bw::ply::DefaultElement>::new();
    let ply = parser
        .read_ply(&mut r)
        .map_err(|e| fail(PlyProblem::Unreadable(e.to_string())))?;
    let verts = ply
        .payload
        .get("vertex")
        .ok_or_else(|| fail(PlyProblem::NoVertices))?;
    let num = |p: Option<&Property>| -> Option<f64> {
        match p? {
            Property::Float(v) => Some(*v as f64),
            Property::Double(v) => Some(*v),
            Property::Int(v) => Some(*v as f64),
            Property::UInt(v) => Some(*v as f64),
            _ => None,
        }
    };
    let mut out = Vec::with_capacity(verts.len());
    for (k, v) in verts.iter().enumerate() {
        let node = num(v.get("node")).ok_or_else(|| fail(PlyProblem::NoNode { vertex: k }))?;
        let coord = |c: &'static str| {
            num(v.get(c)).ok_or_else(|| fail(PlyProblem::NoCoordinate { vertex: k, name: c }))
        };
        let (x, y, z) = (coord("x")?, coord("y")?, coord("z")?);
        if node < 0.0 {
            return Err(fail(PlyProblem::NegativeNode { vertex: k }));
        }
        out.push((node as usize, [x, y, z]));
    }
    Ok(out)
}
