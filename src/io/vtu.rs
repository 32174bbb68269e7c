//! VTK XML unstructured-grid (`.vtu`) text from plain arrays, and the ParaView collection
//! (`.pvd`) that lists frames by time.
//!
//! Layout: `VTKFile type="UnstructuredGrid" version="1.0"` with ASCII `DataArray`s in one piece:
//! the point arrays (3-vectors, Float64), `CellData` with the region `tag` (Int64) and any
//! cell scalars (Float64), `Points` (Float64) and `Cells` (`connectivity` and `offsets` Int64,
//! `types` UInt8). The caller hands connectivity already in VTK node order with its VTK cell
//! type; [`crate::mesh::vtk::encode_vtu`] does that for a mesh.

use super::text::{push_point, push_real};
use std::fmt::Write as _;

/// A per-node 3-vector array.
pub type PointField<'a> = (&'a str, &'a [[f64; 3]]);
/// A per-cell scalar array.
pub type CellScalar<'a> = (&'a str, &'a [f64]);

/// One `<Piece>`: cells of one VTK type and the arrays that go with them.
#[derive(Clone, Copy, Debug)]
pub struct VtuPiece<'a> {
    /// VTK cell type of every cell (10 tetra, 12 hexahedron).
    pub cell_type: u8,
    /// Nodes per cell.
    pub nodes_per_cell: usize,
    /// `nodes_per_cell` indices into `positions` per cell, in VTK order.
    pub connectivity: &'a [usize],
    /// Region tag per cell.
    pub tags: &'a [i64],
    /// Node positions.
    pub positions: &'a [[f64; 3]],
    pub point_fields: &'a [PointField<'a>],
    pub cell_scalars: &'a [CellScalar<'a>],
}

/// Arrays that do not fit together.
#[derive(Debug, thiserror::Error)]
pub enum VtuError {
    #[error("vtu piece {piece} has different arrays than piece 0")]
    Arrays { piece: usize },
    #[error("{what} has {found} values for {expected}")]
    Length {
        what: String,
        found: usize,
        expected: String,
    },
    #[error("node {node}: non-finite position {position:?}")]
    NonFinite { node: usize, position: [f64; 3] },
    #[error("cell {cell}: node index {index} out of range ({points} points)")]
    Index {
        cell: usize,
        index: usize,
        points: usize,
    },
}

/// VTK XML unstructured-grid text of several entries (e.g. the bodies of a scene, possibly
/// of different cell types) as ONE `<Piece>`: points concatenated in entry order, each
/// entry's connectivity shifted by the points before it, offsets and cell types per entry,
/// and every array concatenated the same way (the `tag` cell array keeps each entry's tags).
/// One piece because readers such as meshio keep only the last of several pieces. Every
/// entry must carry the same array names in the same order.
pub fn encode_vtu_pieces(pieces: &[VtuPiece<'_>]) -> Result<String, VtuError> {
    let mut out = String::from("<?xml version=\"1.0\"?>\n<VTKFile type=\"UnstructuredGrid\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">\n<UnstructuredGrid>\n");
    let names = |q: &VtuPiece<'_>| -> (Vec<String>, Vec<String>) {
        (
            q.point_fields.iter().map(|f| f.0.to_string()).collect(),
            q.cell_scalars.iter().map(|f| f.0.to_string()).collect(),
        )
    };
    for (k, p) in pieces.iter().enumerate() {
        if k > 0 && names(p) != names(&pieces[0]) {
            return Err(VtuError::Arrays { piece: k });
        }
        check_piece(p)?;
    }
    if !pieces.is_empty() {
        encode_merged(&mut out, pieces);
    }
    out.push_str("</UnstructuredGrid>\n</VTKFile>\n");
    Ok(out)
}

fn check_piece(piece: &VtuPiece<'_>) -> Result<(), VtuError> {
    let nn = piece.positions.len();
    let ne = piece.tags.len();
    let npc = piece.nodes_per_cell;
    if piece.connectivity.len() != ne * npc {
        return Err(VtuError::Length {
            what: "connectivity".into(),
            found: piece.connectivity.len(),
            expected: format!("{ne} cells of {npc} nodes"),
        });
    }
    if let Some(k) = piece.connectivity.iter().position(|&i| i >= nn) {
        return Err(VtuError::Index {
            cell: k / npc.max(1),
            index: piece.connectivity[k],
            points: nn,
        });
    }
    if let Some(i) = piece
        .positions
        .iter()
        .position(|p| p.iter().any(|c| !c.is_finite()))
    {
        return Err(VtuError::NonFinite {
            node: i,
            position: piece.positions[i],
        });
    }
    for (name, f) in piece.point_fields {
        if f.len() != nn {
            return Err(VtuError::Length {
                what: format!("point field '{name}'"),
                found: f.len(),
                expected: format!("{nn} nodes"),
            });
        }
    }
    for (name, f) in piece.cell_scalars {
        if f.len() != ne {
            return Err(VtuError::Length {
                what: format!("cell scalar '{name}'"),
                found: f.len(),
                expected: format!("{ne} elements"),
            });
        }
    }
    Ok(())
}

/// Escapes `&`, `<`, `>` and `"` for an XML attribute value.
fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// Appends one `<Piece>` holding every entry of checked, non-empty `pieces` with the same
/// array names.
fn encode_merged(out: &mut String, pieces: &[VtuPiece<'_>]) {
    let nn: usize = pieces.iter().map(|p| p.positions.len()).sum();
    let ne: usize = pieces.iter().map(|p| p.tags.len()).sum();
    let first = &pieces[0];
    let _ = writeln!(
        out,
        "<Piece NumberOfPoints=\"{nn}\" NumberOfCells=\"{ne}\">"
    );
    if let Some(f0) = first.point_fields.first() {
        let _ = writeln!(out, "<PointData Vectors=\"{}\">", xml_escape(f0.0));
        for (k, (name, _)) in first.point_fields.iter().enumerate() {
            let _ = writeln!(
                out,
                "<DataArray type=\"Float64\" Name=\"{}\" NumberOfComponents=\"3\" format=\"ascii\">",
                xml_escape(name)
            );
            for p in pieces {
                for v in p.point_fields[k].1.iter() {
                    push_point(out, v);
                    out.push('\n');
                }
            }
            out.push_str("</DataArray>\n");
        }
        out.push_str("</PointData>\n");
    }
    out.push_str(
        "<CellData Scalars=\"tag\">\n<DataArray type=\"Int64\" Name=\"tag\" format=\"ascii\">\n",
    );
    for p in pieces {
        for t in p.tags {
            let _ = writeln!(out, "{t}");
        }
    }
    out.push_str("</DataArray>\n");
    for (k, (name, _)) in first.cell_scalars.iter().enumerate() {
        let _ = writeln!(
            out,
            "<DataArray type=\"Float64\" Name=\"{}\" format=\"ascii\">",
            xml_escape(name)
        );
        for p in pieces {
            for &v in p.cell_scalars[k].1.iter() {
                push_real(out, v);
                out.push('\n');
            }
        }
        out.push_str("</DataArray>\n");
    }
    out.push_str("</CellData>\n<Points>\n<DataArray type=\"Float64\" Name=\"Points\" NumberOfComponents=\"3\" format=\"ascii\">\n");
    for p in pieces {
        for x in p.positions {
            push_point(out, x);
            out.push('\n');
        }
    }
    out.push_str("</DataArray>\n</Points>\n<Cells>\n<DataArray type=\"Int64\" Name=\"connectivity\" format=\"ascii\">\n");
    let mut base = 0;
    for p in pieces {
        for cell in p.connectivity.chunks(p.nodes_per_cell.max(1)) {
            let ids: Vec<String> = cell.iter().map(|n| (n + base).to_string()).collect();
            let _ = writeln!(out, "{}", ids.join(" "));
        }
        base += p.positions.len();
    }
    out.push_str("</DataArray>\n<DataArray type=\"Int64\" Name=\"offsets\" format=\"ascii\">\n");
    let mut offset = 0;
    for p in pieces {
        for _ in 0..p.tags.len() {
            offset += p.nodes_per_cell;
            let _ = writeln!(out, "{offset}");
        }
    }
    out.push_str("</DataArray>\n<DataArray type=\"UInt8\" Name=\"types\" format=\"ascii\">\n");
    for p in pieces {
        for _ in 0..p.tags.len() {
            let _ = writeln!(out, "{}", p.cell_type);
        }
    }
    out.push_str("</DataArray>\n</Cells>\n</Piece>\n");
}

/// ParaView collection file listing `(time, file)` pairs.
pub fn encode_pvd(frames: &[(f64, String)]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn piece<'a>(positions: &'a [[f64; 3]], conn: &'a [usize]) -> VtuPiece<'a> {
        VtuPiece {
            cell_type: 10,
            nodes_per_cell: 4,
            connectivity: conn,
            tags: &[7],
            positions,
            point_fields: &[],
            cell_scalars: &[],
        }
    }

    #[test]
    fn arrays_that_do_not_fit_are_errors_naming_what() {
        let x = [[0.0; 3], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
        let ok = encode_vtu_pieces(&[piece(&x, &[0, 1, 2, 3])]).expect("valid");
        assert!(ok.contains("Name=\"tag\" format=\"ascii\">\n7\n</DataArray>"));
        let e = encode_vtu_pieces(&[piece(&x, &[0, 1, 2, 4])]).unwrap_err();
        assert!(
            matches!(
                e,
                VtuError::Index {
                    cell: 0,
                    index: 4,
                    points: 4
                }
            ),
            "{e}"
        );
        let e = encode_vtu_pieces(&[piece(&x, &[0, 1, 2])]).unwrap_err();
        assert!(
            e.to_string().starts_with("connectivity has 3 values"),
            "{e}"
        );
        let mut bad = x;
        bad[2][1] = f64::NAN;
        let e = encode_vtu_pieces(&[piece(&bad, &[0, 1, 2, 3])]).unwrap_err();
        assert!(matches!(e, VtuError::NonFinite { node: 2, .. }), "{e}");
        let v = [[0.0; 3]; 3];
        let fields = [("velocity", &v[..])];
        let mut p = piece(&x, &[0, 1, 2, 3]);
        p.point_fields = &fields;
        let e = encode_vtu_pieces(&[p]).unwrap_err();
        assert!(
            e.to_string()
                .contains("point field 'velocity' has 3 values"),
            "{e}"
        );
        let q = piece(&x, &[0, 1, 2, 3]);
        let e = encode_vtu_pieces(&[q, p]).unwrap_err();
        assert!(matches!(e, VtuError::Arrays { piece: 1 }), "{e}");
        let pvd = encode_pvd(&[(0.5, "frame_00001.vtu".into())]);
        assert!(pvd.contains("timestep=\"5e-1\" part=\"0\" file=\"frame_00001.vtu\""));
    }
}
