//! VTK unstructured grids: legacy `.vtk` (ASCII) read and write, XML `.vtu` (ASCII) write
//! (reading `.vtu` is [`crate::mesh::vtu`]).
//!
//! **Legacy reader** ([`parse_vtk`]): line 1 `# vtk DataFile Version x.y`, line 2 a title
//! (anything, may be empty), line 3 `ASCII` (`BINARY` is rejected), then the free-format
//! token stream of `DATASET UNSTRUCTURED_GRID`:
//! - `POINTS n <type>` and `3n` coordinates;
//! - `CELLS`, either the classic layout `CELLS n size` with `n` records `k i0 .. i(k-1)`, or
//!   the VTK ≥ 5 layout `CELLS <#offsets> <#connectivity>` followed by `OFFSETS <type>` and
//!   `CONNECTIVITY <type>` arrays;
//! - `CELL_TYPES n`. Volume cells kept: `VTK_TETRA` (10), `VTK_HEXAHEDRON` (12, converted to
//!   lexicographic order with [`HEX_VTK_TO_LEX`]) and `VTK_VOXEL` (11, already lexicographic).
//!   Vertices, lines, polylines, triangles, strips, polygons, pixels and quads (1-9) are
//!   skipped; any other cell type is an error, as is a mix of tets and hexes;
//! - `CELL_DATA` / `POINT_DATA` attributes (`SCALARS` with optional `LOOKUP_TABLE`,
//!   `VECTORS`, `NORMALS`, `TENSORS`, `TEXTURE_COORDINATES`, `COLOR_SCALARS`,
//!   `LOOKUP_TABLE`, `GLOBAL_IDS`, `FIELD` arrays) and VTK 5 `METADATA` blocks are skipped,
//!   except that the region tag of each kept cell is read from the first one-component cell
//!   array named (case-insensitively) `tag`, `region`, `gmsh:physical`, `medit:ref`,
//!   `CellEntityIds`, `material` or `MaterialIds`, whose values must be integral; 0 without
//!   one.
//!
//! **Legacy writer** ([`encode_vtk`]): version 3.0 header, `POINTS n double`, classic
//! `CELLS`, `CELL_TYPES` 10 or 12 (hexes in VTK order), and `CELL_DATA` `SCALARS tag int 1`
//! (`vtktypeint64` when a tag does not fit in 32 bits).
//!
//! **XML writer** ([`encode_vtu`], [`write_vtu`]): a mesh with node positions and data arrays
//! as one `<Piece>` of [`crate::io::vtu`] (hexahedra in VTK order). ParaView reads both files
//! directly.
//!
//! Errors follow the other readers: [`MeshError::Parse`] with the line number, no panics on
//! malformed input.

pub(in crate::mesh) mod tokens;
pub mod vtu;

pub use crate::mesh::vtk_tokens::TAG_ARRAY_NAMES;

use crate::io::vtu::{encode_vtu_pieces, CellScalar, PointField, VtuEncoding, VtuError, VtuPiece};
use crate::mesh::check::{check_structure, duplicate_element, duplicate_message};
use crate::mesh::encode::{file_order, push_point, save};
use crate::mesh::lexer::{clip, num, real, values};
use crate::mesh::vtk_tokens::{
    attribute, other_cell, read_cells, Cells, Tokens, VTK_HEXAHEDRON, VTK_TETRA, VTK_VOXEL,
};
use crate::mesh::{ElementKind, Mesh, MeshError, HEX_VTK_TO_LEX};
use std::fmt::Write as _;
use std::path::Path;

/// Parses a legacy ASCII VTK unstructured grid given as text (see the module docs).
pub fn parse_vtk(text: &str, path: &str) -> Result<Mesh, MeshError> {
    let (version_major, mut tk) = header(text, path)?;
    let s = sections(&mut tk, version_major)?;
    assemble(&tk, s)
}

/// Lines 1-3 (version, title, `ASCII`) and `DATASET UNSTRUCTURED_GRID`; returns the major
/// version and the token stream positioned after the data set type.
fn header<'a>(text: &'a str, path: &'a str) -> Result<(u32, Tokens<'a>), MeshError> {
    let err = |line: usize, msg: String| MeshError::Parse {
        path: path.to_string(),
        line,
        msg,
    };
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("");
    let version = first
        .trim()
        .strip_prefix('#')
        .map(str::trim_start)
        .and_then(|s| s.strip_prefix("vtk"))
        .map(str::trim_start)
        .and_then(|s| s.strip_prefix("DataFile Version"))
        .map(str::trim);
    let Some(version) = version else {
        return Err(err(
            1,
            format!(
                "expected '# vtk DataFile Version x.y', found '{}'",
                clip(first)
            ),
        ));
    };
    let version_major: u32 = version
        .split('.')
        .next()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| err(1, format!("bad version number '{}'", clip(version))))?;
    if lines.next().is_none() {
        return Err(err(
            1,
            "unexpected end of file, expected the title line".into(),
        ));
    }
    let mode = lines.next().map(str::trim).unwrap_or("");
    if mode.eq_ignore_ascii_case("BINARY") {
        return Err(err(
            3,
            "binary legacy VTK files are not supported; save as ASCII".into(),
        ));
    }
    if !mode.eq_ignore_ascii_case("ASCII") {
        return Err(err(3, format!("expected 'ASCII', found '{}'", clip(mode))));
    }
    let toks: Vec<(usize, &str)> = lines
        .enumerate()
        .flat_map(|(i, l)| l.split_whitespace().map(move |t| (i + 4, t)))
        .collect();
    let mut tk = Tokens { path, toks, pos: 0 };

    let (ln, t) = tk.next("'DATASET UNSTRUCTURED_GRID'")?;
    if !t.eq_ignore_ascii_case("DATASET") {
        return Err(tk.err(ln, format!("expected 'DATASET', found '{}'", clip(t))));
    }
    let (ln, t) = tk.next("data set type")?;
    if !t.eq_ignore_ascii_case("UNSTRUCTURED_GRID") {
        return Err(tk.err(
            ln,
            format!(
                "only DATASET UNSTRUCTURED_GRID is supported, found '{}'",
                clip(t)
            ),
        ));
    }
    Ok((version_major, tk))
}

/// The sections of the body as read, in any order.
struct Sections {
    points: Option<Vec<[f64; 3]>>,
    cells: Option<Cells>,
    /// Line of `CELL_TYPES` and the types.
    types: Option<(usize, Vec<u8>)>,
    tags: Option<Vec<i64>>,
}

/// Reads every section of the body: points, cells, cell types and the region-tag array;
/// other attributes and metadata are skipped.
fn sections(tk: &mut Tokens, version_major: u32) -> Result<Sections, MeshError> {
    let mut points: Option<Vec<[f64; 3]>> = None;
    let mut cells: Option<Cells> = None;
    let mut types: Option<(usize, Vec<u8>)> = None;
    let mut tags: Option<Vec<i64>> = None;
    // (is cell data, count) of the current *_DATA block.
    let mut block: Option<(bool, usize)> = None;
    while tk.peek().is_some() {
        let (ln, key) = tk.next("keyword")?;
        match key.to_ascii_uppercase().as_str() {
            "POINTS" => {
                if points.is_some() {
                    return Err(tk.err(ln, "second POINTS section"));
                }
                let n = tk.records("number of points", 3)?;
                tk.data_type("POINTS")?;
                let mut p = Vec::with_capacity(n.min(1 << 22));
                for i in 0..n {
                    let mut x = [0.0; 3];
                    for (d, v) in x.iter_mut().enumerate() {
                        let what = format!("coordinate {} of point {}", ["x", "y", "z"][d], i);
                        *v = tk.parse(&what, real)?;
                    }
                    p.push(x);
                }
                tk.skip_metadata(3)?;
                points = Some(p);
            }
            "CELLS" => {
                if cells.is_some() {
                    return Err(tk.err(ln, "second CELLS section"));
                }
                let Some(p) = &points else {
                    return Err(tk.err(ln, "CELLS before POINTS"));
                };
                cells = Some(read_cells(tk, version_major, p.len())?);
            }
            "CELL_TYPES" => {
                let n = tk.records("number of cell types", 1)?;
                let mut v = Vec::with_capacity(n.min(1 << 22));
                for i in 0..n {
                    let (l, t) = tk.next(&format!("cell type {} of {n}", i + 1))?;
                    let ty: i64 = num(t, "cell type").map_err(|m| tk.err(l, m))?;
                    if let Some(name) = other_cell(ty) {
                        return Err(tk.err(
                            l,
                            format!("unsupported volume cell type {ty} ({name}); only tetrahedra (10), voxels (11) and hexahedra (12) are supported"),
                        ));
                    }
                    if !(1..=12).contains(&ty) {
                        return Err(tk.err(l, format!("unknown cell type {ty}")));
                    }
                    v.push(ty as u8);
                }
                types = Some((ln, v));
            }
            "CELL_DATA" => block = Some((true, tk.count("number of cells after CELL_DATA")?)),
            "POINT_DATA" => block = Some((false, tk.count("number of points after POINT_DATA")?)),
            "METADATA" => {
                tk.pos -= 1;
                tk.skip_metadata(0)?;
            }
            k => {
                let Some((is_cell, n)) = block else {
                    return Err(tk.err(ln, format!("unknown or unsupported keyword '{}'", clip(k))));
                };
                if let Some(t) = attribute(tk, k, n, is_cell)? {
                    if tags.is_none() {
                        tags = Some(t);
                    }
                }
            }
        }
    }
    Ok(Sections {
        points,
        cells,
        types,
        tags,
    })
}

/// Checks that the sections fit together and builds the mesh of the volume cells.
fn assemble(tk: &Tokens, s: Sections) -> Result<Mesh, MeshError> {
    let Sections {
        points,
        cells,
        types,
        tags,
    } = s;
    let Some(points) = points else {
        return Err(tk.err(tk.line(), "file has no POINTS section".to_string()));
    };
    let Some(cells) = cells else {
        return Err(tk.err(tk.line(), "file has no CELLS section".to_string()));
    };
    let Some((tl, types)) = types else {
        return Err(tk.err(tk.line(), "file has no CELL_TYPES section".to_string()));
    };
    if types.len() != cells.ranges.len() {
        return Err(tk.err(
            tl,
            format!(
                "CELL_TYPES lists {} cells but CELLS has {}",
                types.len(),
                cells.ranges.len()
            ),
        ));
    }
    if let Some(t) = &tags {
        if t.len() != types.len() {
            return Err(tk.err(
                tl,
                format!(
                    "region tag array has {} values for {} cells",
                    t.len(),
                    types.len()
                ),
            ));
        }
    }
    let mut kind: Option<ElementKind> = None;
    let mut elements = Vec::new();
    let mut out_tags = Vec::new();
    let mut cell_of = Vec::new();
    for (c, (&ty, &(start, len))) in types.iter().zip(&cells.ranges).enumerate() {
        let k = match ty {
            VTK_TETRA => ElementKind::Tet4,
            VTK_VOXEL | VTK_HEXAHEDRON => ElementKind::Hex8,
            _ => continue,
        };
        if len != k.nodes() {
            return Err(tk.err(
                cells.line,
                format!(
                    "cell {c} of type {ty} has {} (expected {})",
                    values(len),
                    k.nodes()
                ),
            ));
        }
        match kind {
            None => kind = Some(k),
            Some(prev) if prev != k => {
                return Err(tk.err(
                    tl,
                    format!("mesh mixes element types ({prev} and {k}, cell {c}); only one element type per mesh is supported"),
                ))
            }
            _ => {}
        }
        let ids = &cells.conn[start..start + len];
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
        return Err(tk.err(
            tl,
            "file contains no tetrahedra (10), voxels (11) or hexahedra (12)".to_string(),
        ));
    };
    let mesh = Mesh {
        kind,
        nodes: points,
        elements,
        tags: out_tags,
    };
    if let Some((a, b)) = duplicate_element(&mesh) {
        return Err(tk.err(
            cells.line,
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

/// VTK cell type of an element kind (10 tetra, 12 hexahedron).
pub fn vtk_cell_type(kind: ElementKind) -> u8 {
    match kind {
        ElementKind::Tet4 => VTK_TETRA,
        ElementKind::Hex8 => VTK_HEXAHEDRON,
    }
}

/// Legacy ASCII VTK text of `mesh` (see the module docs). The mesh must pass
/// [`check_structure`] (the writers call it).
pub fn encode_vtk(mesh: &Mesh) -> String {
    let nn = mesh.num_nodes();
    let ne = mesh.num_elements();
    let nv = mesh.kind.nodes();
    let mut out = format!(
        "# vtk DataFile Version 3.0\ndiffphd {} mesh, {nn} nodes, {ne} elements\nASCII\nDATASET UNSTRUCTURED_GRID\nPOINTS {nn} double\n",
        mesh.kind
    );
    for p in &mesh.nodes {
        push_point(&mut out, p);
        out.push('\n');
    }
    let _ = writeln!(out, "CELLS {ne} {}", ne * (nv + 1));
    for e in 0..ne {
        let _ = write!(out, "{nv}");
        for n in file_order(mesh, e) {
            let _ = write!(out, " {n}");
        }
        out.push('\n');
    }
    let _ = writeln!(out, "CELL_TYPES {ne}");
    let ty = vtk_cell_type(mesh.kind);
    for _ in 0..ne {
        let _ = writeln!(out, "{ty}");
    }
    let wide = mesh.tags.iter().any(|&t| i32::try_from(t).is_err());
    let _ = writeln!(
        out,
        "CELL_DATA {ne}\nSCALARS tag {} 1\nLOOKUP_TABLE default",
        if wide { "vtktypeint64" } else { "int" }
    );
    for t in &mesh.tags {
        let _ = writeln!(out, "{t}");
    }
    out
}

/// VTK XML unstructured-grid text of `mesh` with node positions `positions` (e.g. a deformed
/// frame; `&mesh.nodes` for the rest state), per-node 3-vector arrays and per-element scalar
/// arrays. Errors when an array length does not match, a position is not finite, or the mesh
/// fails [`check_structure`].
pub fn encode_vtu(
    mesh: &Mesh,
    positions: &[[f64; 3]],
    point_fields: &[PointField<'_>],
    cell_scalars: &[CellScalar<'_>],
) -> Result<String, MeshError> {
    check_structure(mesh)?;
    let nn = mesh.num_nodes();
    if positions.len() != nn {
        return Err(MeshError::Invalid(format!(
            "{} positions for a mesh of {nn} nodes",
            positions.len()
        )));
    }
    let connectivity: Vec<usize> = (0..mesh.num_elements())
        .flat_map(|e| file_order(mesh, e))
        .collect();
    let piece = VtuPiece {
        point_fields,
        cell_scalars,
        ..VtuPiece::new(
            vtk_cell_type(mesh.kind),
            mesh.kind.nodes(),
            &connectivity,
            &mesh.tags,
            positions,
        )
    };
    let bytes = encode_vtu_pieces(&[piece], VtuEncoding::Ascii).map_err(|e| match e {
        VtuError::NonFinite { node, position } => MeshError::BadNode {
            node,
            msg: format!("non-finite position {position:?}"),
        },
        e => MeshError::Invalid(e.to_string()),
    })?;
    // The ASCII encoding writes only ASCII text.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Writes a `.vtu` file (see [`encode_vtu`]) atomically.
pub fn write_vtu(
    path: &Path,
    mesh: &Mesh,
    positions: &[[f64; 3]],
    point_fields: &[PointField<'_>],
    cell_scalars: &[CellScalar<'_>],
) -> Result<(), MeshError> {
    let text = encode_vtu(mesh, positions, point_fields, cell_scalars)?;
    save(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::generate::box_hex;
    use crate::mesh::readers::read_mesh;
    use proptest::prelude::*;
    use std::path::PathBuf;

    /// `tests/fixtures/meshes/<name>`; the malformed files (`bad_*`) are in `bad/`.
    fn fixture(name: &str) -> PathBuf {
        let dir = if name.starts_with("bad_") { "bad" } else { "" };
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/meshes")
            .join(dir)
            .join(name)
    }

    fn text(name: &str) -> String {
        std::fs::read_to_string(fixture(name)).expect("fixture")
    }

    fn vtk(t: &str) -> Result<Mesh, MeshError> {
        parse_vtk(t, "t.vtk")
    }

    #[test]
    fn reads_classic_and_v51_layouts() {
        let m = read_mesh(&fixture("two_hexes_mixed.vtk")).expect("classic");
        assert_eq!(m.kind, ElementKind::Hex8);
        assert_eq!(m.nodes.len(), 12);
        assert_eq!(
            m.elements,
            vec![0, 1, 3, 4, 6, 7, 9, 10, 1, 2, 4, 5, 7, 8, 10, 11]
        );
        assert_eq!(m.tags, vec![3, 4]);
        let m = read_mesh(&fixture("two_tets_v51.vtk")).expect("5.1");
        assert_eq!(m.kind, ElementKind::Tet4);
        assert_eq!(m.elements, vec![0, 1, 2, 3, 1, 2, 3, 4]);
        assert_eq!(m.tags, vec![1, 2]);
        assert_eq!(m.nodes[4], [1.0, 1.0, 1.0]);
    }

    #[test]
    fn errors_name_the_line() {
        let base = text("two_tets_v51.vtk");
        let cases: Vec<(String, usize, &str)> = vec![
            ("".into(), 1, "expected '# vtk DataFile Version x.y'"),
            (
                base.replace("ASCII", "BINARY"),
                3,
                "binary legacy VTK files are not supported",
            ),
            (
                base.replace("UNSTRUCTURED_GRID", "POLYDATA"),
                4,
                "only DATASET UNSTRUCTURED_GRID",
            ),
            (
                base.replace("0 0 1 1 1 1", "0 0 1 1 1 x"),
                7,
                "expected coordinate z of point 4, found 'x'",
            ),
            (
                base.replace("1 2 3 4\nCELL", "1 2 3 5\nCELL"),
                13,
                "point index 5 out of range (file has 5 points)",
            ),
            (
                base.replace("0 4 8", "0 4 3"),
                10,
                "offset 3 is not a non-decreasing index",
            ),
            (
                base.replace("10\n10", "10\n13"),
                16,
                "unsupported volume cell type 13 (wedge)",
            ),
            (
                base.replace("10\n10", "10\n12"),
                8,
                "cell 1 of type 12 has 4 values (expected 8)",
            ),
            (
                base.replace("CELL_TYPES 2\n10\n10", "CELL_TYPES 3\n10\n10\n10"),
                14,
                "CELL_TYPES lists 3 cells but CELLS has 2",
            ),
            (
                base.replace("CELL_TYPES 2", "CELL_TYPES 1"),
                16,
                "unknown or unsupported keyword '10'",
            ),
            (
                base.replace("1 2\nMETADATA", "1 2.5\nMETADATA"),
                21,
                "expected integer region tag, found '2.5'",
            ),
            (
                base.replace("CellEntityIds 1 2 int\n1 2", "CellEntityIds 1 2 int\n1"),
                22,
                "expected integer region tag, found 'METADATA'",
            ),
            (
                base.replace("CELL_DATA 2", "CELL_DATA 2\nFOO 3"),
                19,
                "unknown or unsupported keyword 'FOO'",
            ),
            (
                base.replace("10\n10", "3\n5"),
                14,
                "file contains no tetrahedra",
            ),
            (
                base[..base.find("CELL_TYPES").expect("types")].to_string(),
                13,
                "file has no CELL_TYPES section",
            ),
            (
                base[..base.find("0 4 8").expect("offsets")].to_string(),
                9,
                "unexpected end of file, expected offset 1 of 3",
            ),
        ];
        for (t, line, want) in cases {
            match vtk(&t) {
                Err(MeshError::Parse { line: l, msg, .. }) => {
                    assert!(msg.starts_with(want), "got '{msg}', want '{want}'");
                    assert_eq!(l, line, "{msg}");
                }
                other => panic!("want '{want}', got {other:?}"),
            }
        }
        let mixed = text("two_hexes_mixed.vtk").replace("12\n11\n9\n1", "12\n11\n9\n10");
        assert!(vtk(&mixed).is_err());
    }

    /// Pulls the text of the `DataArray` named `name` out of a `.vtu` written by
    /// [`encode_vtu`] (an independent, minimal reading of the XML).
    fn vtu_array(xml: &str, name: &str) -> Vec<f64> {
        let tag = format!("Name=\"{name}\"");
        let start = xml.find(&tag).unwrap_or_else(|| panic!("no array {name}"));
        let open = start + xml[start..].find('>').expect(">") + 1;
        let close = open + xml[open..].find("</DataArray>").expect("close");
        xml[open..close]
            .split_whitespace()
            .map(|t| t.parse().expect("number"))
            .collect()
    }

    #[test]
    fn vtu_holds_positions_connectivity_and_fields() {
        let m = box_hex([2, 1, 1], 0.5, [0.0; 3]);
        let x: Vec<[f64; 3]> = m
            .nodes
            .iter()
            .map(|p| [p[0] + 0.1, p[1], p[2] * 2.0])
            .collect();
        let v: Vec<[f64; 3]> = (0..m.nodes.len()).map(|i| [i as f64, 0.0, -1.5]).collect();
        let e = [1e6, 2e6];
        let xml = encode_vtu(
            &m,
            &x,
            &[("velocity", &v), ("a<b", &v)],
            &[("youngs_modulus", &e)],
        )
        .expect("vtu");
        assert!(xml.starts_with("<?xml"));
        assert!(xml.contains("Name=\"a&lt;b\""));
        assert_eq!(
            vtu_array(&xml, "Points"),
            x.iter().flatten().copied().collect::<Vec<_>>()
        );
        assert_eq!(
            vtu_array(&xml, "velocity"),
            v.iter().flatten().copied().collect::<Vec<_>>()
        );
        assert_eq!(vtu_array(&xml, "youngs_modulus"), e.to_vec());
        assert_eq!(vtu_array(&xml, "types"), vec![12.0, 12.0]);
        assert_eq!(vtu_array(&xml, "offsets"), vec![8.0, 16.0]);
        assert_eq!(vtu_array(&xml, "tag"), vec![0.0, 0.0]);
        // Connectivity is in VTK order: map back to lexicographic.
        let conn = vtu_array(&xml, "connectivity");
        for e in 0..2 {
            let mut lex = [0usize; 8];
            for k in 0..8 {
                lex[HEX_VTK_TO_LEX[k]] = conn[8 * e + k] as usize;
            }
            assert_eq!(&lex[..], m.element(e));
        }
        // Size mismatches are errors.
        assert!(encode_vtu(&m, &x[1..], &[], &[]).is_err());
        assert!(encode_vtu(&m, &x, &[("v", &v[1..])], &[]).is_err());
        assert!(encode_vtu(&m, &x, &[], &[("e", &e[1..])]).is_err());
        let mut bad = x.clone();
        bad[3][0] = f64::INFINITY;
        assert!(encode_vtu(&m, &bad, &[], &[]).is_err());
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("f.vtu");
        write_vtu(&p, &m, &x, &[("velocity", &v)], &[]).expect("write");
        assert!(std::fs::read_to_string(&p)
            .expect("read")
            .ends_with("</VTKFile>\n"));
    }

    fn check(r: Result<Mesh, MeshError>) {
        match r {
            Ok(m) => {
                assert_eq!(m.elements.len(), m.tags.len() * m.kind.nodes());
                assert!(m.elements.iter().all(|&n| n < m.nodes.len()));
                assert!(m.nodes.iter().flatten().all(|c| c.is_finite()));
            }
            Err(MeshError::Parse { line, .. }) => assert!(line >= 1),
            Err(e) => panic!("unexpected error kind {e:?}"),
        }
    }

    #[test]
    fn truncation_never_panics() {
        for name in ["two_hexes_mixed.vtk", "two_tets_v51.vtk"] {
            let full = text(name);
            for (i, _) in full.char_indices() {
                check(vtk(&full[..i]));
            }
            assert!(vtk(&full).is_ok());
        }
        let written = encode_vtk(&box_hex([1, 1, 2], 1.0, [0.0; 3]));
        for (i, _) in written.char_indices() {
            check(vtk(&written[..i]));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn mutated_vtk_never_panics(
            which in 0usize..2,
            edits in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<u8>()), 1..6),
        ) {
            let full = text(["two_hexes_mixed.vtk", "two_tets_v51.vtk"][which]);
            let mut b = full.into_bytes();
            let pool = b"0123456789 -.\nexE";
            for (at, op, byte) in edits {
                if b.is_empty() { break; }
                let i = at.index(b.len());
                let c = pool[byte as usize % pool.len()];
                match op {
                    0 => b[i] = c,
                    1 => b.insert(i, c),
                    _ => { b.remove(i); }
                }
            }
            check(vtk(&String::from_utf8_lossy(&b)));
        }

        #[test]
        fn random_text_never_panics(s in "[# a-zA-Z0-9_.\n-]{0,300}") {
            check(vtk(&s));
            check(vtk(&format!("# vtk DataFile Version 5.1\nt\nASCII\nDATASET UNSTRUCTURED_GRID\n{s}")));
        }
    }
}
