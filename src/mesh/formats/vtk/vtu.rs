//! VTK XML unstructured grids (`.vtu`) as input meshes: [`parse_vtu`] reads the arrays with
//! [`crate::io::vtu_read`] (ASCII, raw or base64 binary, zlib-compressed; see there) and keeps
//! the volume cells as the legacy reader of [`crate::mesh::vtk`] does: tetrahedra (10),
//! voxels (11) and hexahedra (12, converted to lexicographic order with [`HEX_VTK_TO_LEX`]);
//! vertices, lines, polygons and other cells of type 1-9 are skipped; any other cell type is
//! an error, as is a mix of tets and hexes. The region tag of each kept cell is the first
//! one-component integral cell array named (case-insensitively) as in [`TAG_ARRAY_NAMES`];
//! 0 without one. Frames written by `simulate` read back this way (their `tag` is the body).

use crate::io::vtu_read::{parse_vtu_grid, VtuGrid, VtuValues};
use crate::mesh::check::{duplicate_element, duplicate_message};
use crate::mesh::vtk_tokens::{other_cell, TAG_ARRAY_NAMES, VTK_HEXAHEDRON, VTK_TETRA, VTK_VOXEL};
use crate::mesh::{ElementKind, Mesh, MeshError, HEX_VTK_TO_LEX};

/// Parses a `.vtu` file's bytes into a mesh (see the module docs); `path` labels errors.
pub fn parse_vtu(bytes: &[u8], path: &str) -> Result<Mesh, MeshError> {
    let perr = |line: usize, msg: String| MeshError::Parse {
        path: path.to_string(),
        line,
        msg,
    };
    let grid = parse_vtu_grid(bytes).map_err(|e| perr(e.line, e.msg))?;
    let line = grid.cells_line;
    let tags = region_tags(&grid).map_err(|e| perr(line, e.to_string()))?;
    let mut kind: Option<ElementKind> = None;
    let mut elements = Vec::new();
    let mut out_tags = Vec::new();
    let mut cell_of = Vec::new();
    for (c, (&ty, r)) in grid.types.iter().zip(&grid.cells).enumerate() {
        let k = match ty {
            VTK_TETRA => ElementKind::Tet4,
            VTK_VOXEL | VTK_HEXAHEDRON => ElementKind::Hex8,
            1..=9 => continue,
            t => {
                let msg = match other_cell(i64::from(t)) {
                    Some(name) => format!("cell {c}: unsupported volume cell type {t} ({name}); only tetrahedra (10), voxels (11) and hexahedra (12) are supported"),
                    None => format!("cell {c}: unknown cell type {t}"),
                };
                return Err(perr(line, msg));
            }
        };
        let ids = &grid.connectivity[r.clone()];
        if ids.len() != k.nodes() {
            return Err(perr(
                line,
                format!(
                    "cell {c} of type {ty} has {} nodes (expected {})",
                    ids.len(),
                    k.nodes()
                ),
            ));
        }
        match kind {
            None => kind = Some(k),
            Some(prev) if prev != k => {
                return Err(perr(line, format!("mesh mixes element types ({prev} and {k}, cell {c}); only one element type per mesh is supported")))
            }
            _ => {}
        }
        if ty == VTK_HEXAHEDRON {
            let mut lex = [0usize; 8];
            for (kk, &id) in ids.iter().enumerate() {
                lex[HEX_VTK_TO_LEX[kk]] = id;
            }
            elements.extend_from_slice(&lex);
        } else {
            elements.extend_from_slice(ids);
        }
        out_tags.push(tags.as_ref().map_or(0, |t| t[c]));
        cell_of.push(c);
    }
    let Some(kind) = kind else {
        return Err(perr(
            line,
            "file contains no tetrahedra (10), voxels (11) or hexahedra (12)".into(),
        ));
    };
    let mesh = Mesh {
        kind,
        nodes: grid.points,
        elements,
        tags: out_tags,
    };
    if let Some((a, b)) = duplicate_element(&mesh) {
        return Err(perr(
            line,
            format!(
                "{} (VTK cells {} and {})",
                duplicate_message(a, b, None),
                cell_of[a],
                cell_of[b]
            ),
        ));
    }
    Ok(mesh)
}

/// A region-tag array holding a value that is not an integer.
#[derive(Debug, thiserror::Error)]
#[error("cell {cell}: region tag {value} in array '{array}' is not an integer")]
struct NonIntegerTag {
    cell: usize,
    value: f64,
    array: String,
}

/// The region tag of every cell from the first tag-named one-component cell array.
fn region_tags(grid: &VtuGrid) -> Result<Option<Vec<i64>>, NonIntegerTag> {
    let Some(a) = TAG_ARRAY_NAMES.iter().find_map(|t| {
        grid.cell_data
            .iter()
            .find(|a| a.components == 1 && a.name.eq_ignore_ascii_case(t))
    }) else {
        return Ok(None);
    };
    match &a.values {
        VtuValues::Int(v) => Ok(Some(v.clone())),
        VtuValues::Float(v) => v
            .iter()
            .enumerate()
            .map(|(c, &x)| {
                if x.fract() == 0.0 && x.abs() < 9e15 {
                    Ok(x as i64)
                } else {
                    Err(NonIntegerTag {
                        cell: c,
                        value: x,
                        array: a.name.clone(),
                    })
                }
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::vtu::{encode_vtu_pieces, VtuEncoding, VtuPiece};
    use crate::mesh::generate::{box_hex, box_tet};
    use crate::mesh::readers::read_mesh;
    use crate::mesh::vtk::{encode_vtu, vtk_cell_type};
    use crate::mesh::writers::write_mesh;

    /// Tet and hex meshes (hexes reordered to VTK order on write and back on read) come back
    /// exactly from the `.vtu` writer, by file name through `read_mesh` too.
    #[test]
    fn meshes_round_trip_through_vtu_in_every_encoding() {
        let mut tets = box_tet([2, 1, 1], 0.5, [0.1, 0.0, -0.2]);
        tets.tags = (0..tets.num_elements() as i64).map(|t| 3 - t).collect();
        let hexes = box_hex([2, 2, 1], 1.0 / 3.0, [0.0; 3]);
        for m in [&tets, &hexes] {
            let xml = encode_vtu(m, &m.nodes, &[], &[]).expect("encode");
            assert_eq!(&parse_vtu(xml.as_bytes(), "m.vtu").expect("ascii"), m);
            let conn: Vec<usize> = (0..m.num_elements())
                .flat_map(|e| crate::mesh::encode::file_order(m, e))
                .collect();
            let p = VtuPiece::new(
                vtk_cell_type(m.kind),
                m.kind.nodes(),
                &conn,
                &m.tags,
                &m.nodes,
            );
            for enc in [VtuEncoding::Binary, VtuEncoding::Zlib] {
                let b = encode_vtu_pieces(&[p], enc).expect("encode");
                assert_eq!(&parse_vtu(&b, "m.vtu").expect("binary"), m, "{enc:?}");
            }
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("h.vtu");
        write_mesh(&path, &hexes).expect("write");
        assert_eq!(read_mesh(&path).expect("read"), hexes);
    }

    /// A frame of two bodies of different element types is not one mesh; lower-dimensional
    /// cells are skipped; wedges are named; duplicate cells are refused with both indices.
    #[test]
    fn unsupported_grids_are_one_line_errors() {
        let t = box_tet([1, 1, 1], 1.0, [0.0; 3]);
        let h = box_hex([1, 1, 1], 1.0, [0.0; 3]);
        let hconn: Vec<usize> = crate::mesh::encode::file_order(&h, 0);
        let pieces = [
            VtuPiece::new(10, 4, &t.elements, &t.tags, &t.nodes),
            VtuPiece::new(12, 8, &hconn, &h.tags, &h.nodes),
        ];
        let b = encode_vtu_pieces(&pieces, VtuEncoding::Zlib).unwrap();
        let e = parse_vtu(&b, "two.vtu").unwrap_err().to_string();
        assert!(e.starts_with("two.vtu:"), "{e}");
        assert!(
            e.contains("mesh mixes element types (tet4 and hex8, cell 6)"),
            "{e}"
        );
        let tri = [0usize, 1, 2];
        let with_tri = [
            VtuPiece::new(5, 3, &tri, &[0], &t.nodes),
            VtuPiece::new(10, 4, &t.elements, &t.tags, &t.nodes),
        ];
        let b = encode_vtu_pieces(&with_tri, VtuEncoding::Binary).unwrap();
        let m = parse_vtu(&b, "t.vtu").expect("triangle skipped");
        assert_eq!(m.num_elements(), t.num_elements());
        assert_eq!(m.nodes.len(), 2 * t.nodes.len());
        let w = VtuPiece::new(13, 6, &[0, 1, 2, 3, 4, 5], &[0], &h.nodes);
        let e = parse_vtu(
            &encode_vtu_pieces(&[w], VtuEncoding::Ascii).unwrap(),
            "w.vtu",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("cell 0: unsupported volume cell type 13 (wedge)"),
            "{e}"
        );
        let mut dup = t.elements.clone();
        dup.extend_from_slice(&t.elements[..4]);
        let tags = vec![0; dup.len() / 4];
        let d = VtuPiece::new(10, 4, &dup, &tags, &t.nodes);
        let e = parse_vtu(
            &encode_vtu_pieces(&[d], VtuEncoding::Zlib).unwrap(),
            "d.vtu",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("duplicate elements are not allowed (VTK cells 0 and 6)"),
            "{e}"
        );
    }
}

#[cfg(test)]
mod fixtures {
    use super::*;

    fn read(name: &str) -> Result<Mesh, MeshError> {
        let path = format!("{}/tests/fixtures/vtu/{name}", env!("CARGO_MANIFEST_DIR"));
        let bytes = std::fs::read(&path).expect("fixture");
        parse_vtu(&bytes, name)
    }

    /// Files written by meshio (inline base64 with and without zlib, ASCII) read as the same
    /// two tets with their `material` tags; the triangle is skipped.
    #[test]
    fn meshio_files_read() {
        for f in [
            "meshio_tets_zlib.vtu",
            "meshio_tets_raw.vtu",
            "meshio_tets_ascii.vtu",
        ] {
            let m = read(f).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(m.kind, ElementKind::Tet4, "{f}");
            assert_eq!(m.elements, [0, 1, 2, 3, 1, 2, 3, 4], "{f}");
            assert_eq!(m.tags, [5, 6], "{f}");
            assert_eq!(m.nodes[4], [1.0, 1.0, 1.0], "{f}");
        }
    }

    /// Files written by VTK's XML writer (inline zlib, appended base64, appended raw with
    /// UInt32 headers) read as one hexahedron in lexicographic order with its `tag`.
    #[test]
    fn vtk_writer_files_read() {
        for f in [
            "vtk_hex.vtu",
            "vtk_hex_appended_base64.vtu",
            "vtk_hex_appended_raw_uint32.vtu",
        ] {
            let m = read(f).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(m.kind, ElementKind::Hex8, "{f}");
            assert_eq!(m.tags, [3], "{f}");
            for (a, &n) in m.elements.iter().enumerate() {
                let corner = [(a & 1) as f64, ((a >> 1) & 1) as f64, (a >> 2) as f64];
                assert_eq!(m.nodes[n], corner, "{f}: local node {a}");
            }
        }
    }
}
