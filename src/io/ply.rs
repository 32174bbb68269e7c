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

/// Positions of a PLY file written by [`encode`] (or any PLY with `x y z` and an integer
/// `node` vertex property), as `(node, position)` pairs. Parsed with the independent
/// `ply-rs-bw` reader, which also accepts ASCII PLY. The file is read under the input size
/// limit of [`super::input`].
pub fn read_node_positions(path: &std::path::Path) -> Result<Vec<(usize, [f64; 3])>, String> {
    use ply_rs_bw::ply::Property;
    let bytes = super::input::read_input(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut r = std::io::Cursor::new(bytes);
    let parser = ply_rs_bw::parser::Parser::<ply_rs_bw::ply::DefaultElement>::new();
    let ply = parser
        .read_ply(&mut r)
        .map_err(|e| format!("{}: not a readable PLY file: {e}", path.display()))?;
    let verts = ply
        .payload
        .get("vertex")
        .ok_or(format!("{}: no `vertex` element", path.display()))?;
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
        let node = num(v.get("node")).ok_or(format!(
            "{}: vertex {k} has no integer `node` property",
            path.display()
        ))?;
        let x = num(v.get("x")).ok_or(format!("{}: vertex {k} has no `x`", path.display()))?;
        let y = num(v.get("y")).ok_or(format!("{}: vertex {k} has no `y`", path.display()))?;
        let z = num(v.get("z")).ok_or(format!("{}: vertex {k} has no `z`", path.display()))?;
        if node < 0.0 {
            return Err(format!(
                "{}: vertex {k} has a negative node index",
                path.display()
            ));
        }
        out.push((node as usize, [x, y, z]));
    }
    Ok(out)
}
