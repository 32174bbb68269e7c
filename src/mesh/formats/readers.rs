//! Reading volumetric mesh files: [`read_mesh`] picks the format from the file name and
//! hands the text to the format's reader:
//!
//! - **TetGen** `.node` + `.ele` ([`crate::mesh::tetgen`]; the path may name either file, or
//!   the common stem such as `out.1`);
//! - **gmsh** `.msh`, ASCII 2.2 and 4.1 ([`crate::mesh::gmsh`]);
//! - **MEDIT** `.mesh`, ASCII ([`crate::mesh::medit`]);
//! - **legacy VTK** `.vtk`, ASCII unstructured grid ([`crate::mesh::vtk`]);
//! - **VTK XML** `.vtu`, ASCII or binary (raw, base64, zlib) unstructured grid
//!   ([`crate::mesh::vtu`]);
//! - **DiffPD** `.bin` ([`crate::mesh::diffpd_bin`]).
//!
//! The readers return the mesh as stored: they do not reorient or validate elements (run
//! [`crate::mesh::validate::validate_and_fix`]) but guarantee that every node index is in
//! range, that coordinates are finite, that the file has exactly one element type and that
//! no two elements share the same node set (duplicate elements are refused, naming both).
//! Nodes that no element references are read as they are: `mesh info`/`mesh check` report
//! them, `mesh convert --fix` drops them, and the simulation refuses them
//! ([`validate_and_fix`](crate::mesh::validate::validate_and_fix)).
//!
//! Every syntax problem is [`MeshError::Parse`] with the 1-based line number and what was
//! expected there; malformed or truncated input never panics. Files are read under the input
//! size limit of [`crate::io::input`] and decoded as UTF-8 with invalid bytes replaced, so
//! binary garbage ends in an ordinary parse error. Counts in headers are checked against the
//! file length before anything is allocated for them.
//!
//! The text-level parsers are re-exported here for callers that hold the file contents
//! (fuzzing, tests): [`parse_tetgen`], [`parse_msh`], [`parse_medit`], [`parse_vtk`], [`parse_vtu`]
//! and [`parse_bin`]; `path` only labels their errors.

pub use crate::mesh::diffpd_bin::parse_bin;
pub use crate::mesh::gmsh::parse_msh;
pub use crate::mesh::medit::parse_medit;
pub use crate::mesh::tetgen::parse_tetgen;
pub use crate::mesh::vtk::parse_vtk;
pub use crate::mesh::vtu::parse_vtu;

use crate::mesh::lexer::{display, read_bytes, read_text, with_suffix};
use crate::mesh::tetgen::read_tetgen;
use crate::mesh::{Mesh, MeshError, MeshFormat};
use std::path::Path;

/// Reads a tet or hex mesh, choosing the format by extension: `.node`/`.ele` (or a stem with a
/// `<stem>.node` next to it) → TetGen, `.msh` → gmsh ASCII 2.2/4.1, `.mesh` → MEDIT ASCII,
/// `.vtk` → legacy VTK ASCII unstructured grid ([`crate::mesh::vtk`]), `.vtu` → VTK XML
/// unstructured grid ([`crate::mesh::vtu`]), `.bin` → DiffPD binary
/// ([`crate::mesh::diffpd_bin`]). See the module documentation for the exact subset of each
/// format.
pub fn read_mesh(path: &Path) -> Result<Mesh, MeshError> {
    read_mesh_with_source(path).map(|(m, _)| m)
}

/// What a reader learned about a mesh file besides the mesh itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeshSource {
    /// Format the file was read as.
    pub format: MeshFormat,
    /// Numbering base of node indices in the file: the first point number of a TetGen `.node`
    /// file (0 or 1), 1 for MEDIT, 0 for VTK and DiffPD `.bin`; `None` for gmsh, whose node
    /// tags are arbitrary labels.
    pub index_base: Option<usize>,
}

/// [`read_mesh`], also returning the format and the index base of the file.
pub fn read_mesh_with_source(path: &Path) -> Result<(Mesh, MeshSource), MeshError> {
    let source = |format, index_base| MeshSource { format, index_base };
    let format = match MeshFormat::from_path(path) {
        Some(f) => f,
        None if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("meshb")) =>
        {
            return Err(MeshError::Format {
                path: display(path),
                msg: "binary MEDIT (.meshb) files are not supported; convert to ASCII .mesh".into(),
            })
        }
        None if with_suffix(path, ".node").is_file() => {
            let (m, base) = read_tetgen(path)?;
            return Ok((m, source(MeshFormat::Tetgen, Some(base))));
        }
        None => {
            return Err(MeshError::Format {
                path: display(path),
                msg: "unknown extension and no TetGen '<path>.node' file next to it".into(),
            })
        }
    };
    match format {
        MeshFormat::Tetgen => {
            let (m, base) = read_tetgen(&path.with_extension(""))?;
            Ok((m, source(format, Some(base))))
        }
        MeshFormat::Gmsh => Ok((
            parse_msh(&read_text(path)?, &display(path))?,
            source(format, None),
        )),
        MeshFormat::Medit => Ok((
            parse_medit(&read_text(path)?, &display(path))?,
            source(format, Some(1)),
        )),
        MeshFormat::Vtk => Ok((
            parse_vtk(&read_text(path)?, &display(path))?,
            source(format, Some(0)),
        )),
        MeshFormat::DiffpdBin => {
            let bytes = read_bytes(path)?;
            Ok((parse_bin(&bytes, &display(path))?, source(format, Some(0))))
        }
        MeshFormat::Vtu => {
            let bytes = read_bytes(path)?;
            Ok((parse_vtu(&bytes, &display(path))?, source(format, Some(0))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::lexer::with_suffix;
    use crate::mesh::validate::{element_volume, validate_and_fix};
    use crate::mesh::ElementKind;
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

    fn two_tets() -> Mesh {
        Mesh {
            kind: ElementKind::Tet4,
            nodes: vec![
                [0.0, 0.0, 0.0],
                [1.0, 0.0, 0.0],
                [0.0, 1.0, 0.0],
                [0.0, 0.0, 1.0],
                [1.0, 1.0, 1.0],
            ],
            elements: vec![0, 1, 2, 3, 1, 2, 3, 4],
            tags: vec![1, 2],
        }
    }

    fn two_hexes() -> Mesh {
        let mut nodes = Vec::new();
        for z in 0..2 {
            for y in 0..2 {
                for x in 0..3 {
                    nodes.push([x as f64, y as f64, z as f64]);
                }
            }
        }
        Mesh {
            kind: ElementKind::Hex8,
            nodes,
            elements: vec![0, 1, 3, 4, 6, 7, 9, 10, 1, 2, 4, 5, 7, 8, 10, 11],
            tags: vec![3, 4],
        }
    }

    /// (line, message) of a parse error, asserting the error names `file`.
    fn parse_err(r: Result<Mesh, MeshError>, file: &str) -> (usize, String) {
        match r {
            Err(MeshError::Parse { path, line, msg }) => {
                assert!(path.ends_with(file), "error names {path}, expected {file}");
                (line, msg)
            }
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn reads_two_tets_in_every_format() {
        for name in [
            "two_tets_0based.node",
            "two_tets_0based.ele",
            "two_tets_0based",
            "two_tets_1based.ele",
            "two_tets_v22.msh",
            "two_tets_v41.msh",
            "two_tets.mesh",
        ] {
            let mut m = read_mesh(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(m, two_tets(), "{name}");
            let r = validate_and_fix(&mut m).expect("valid");
            assert!(r.flipped.is_empty());
            assert!((r.total_volume - 0.5).abs() < 1e-14);
        }
    }

    #[test]
    fn reads_two_hexes_in_every_format() {
        for name in ["two_hexes.mesh", "two_hexes_v22.msh", "two_hexes_v41.msh"] {
            let mut m = read_mesh(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(m, two_hexes(), "{name}");
            let r = validate_and_fix(&mut m).expect("valid");
            assert!(r.flipped.is_empty(), "{name}");
            for e in 0..2 {
                assert!((element_volume(&m, e) - 1.0).abs() < 1e-14);
            }
        }
    }

    #[test]
    fn malformed_fixtures_name_the_line() {
        let (line, msg) = parse_err(
            read_mesh(&fixture("bad_short_ele.node")),
            "bad_short_ele.ele",
        );
        assert_eq!(line, 3);
        assert_eq!(msg, "expected 4 node indices after element id, found 3");

        let (line, msg) = parse_err(read_mesh(&fixture("bad_range.ele")), "bad_range.ele");
        assert_eq!(line, 3);
        assert!(msg.starts_with("node index 6 out of range"), "{msg}");
        assert!(msg.contains("valid 1..=5"), "{msg}");

        let (line, msg) = parse_err(
            read_mesh(&fixture("bad_mixed_v22.msh")),
            "bad_mixed_v22.msh",
        );
        assert_eq!(line, 19);
        assert!(
            msg.contains("mixes element types: tet4 here but hex8 at line 18"),
            "{msg}"
        );

        let (line, msg) = parse_err(
            read_mesh(&fixture("bad_garbled_v41.msh")),
            "bad_garbled_v41.msh",
        );
        assert_eq!(
            (line, msg.as_str()),
            (25, "expected y coordinate, found 'abc'")
        );

        let (line, msg) = parse_err(
            read_mesh(&fixture("bad_truncated.mesh")),
            "bad_truncated.mesh",
        );
        assert_eq!(line, 12);
        assert!(
            msg.starts_with("unexpected end of file, expected number of entries after 'Triangles'"),
            "{msg}"
        );

        let (line, msg) = parse_err(read_mesh(&fixture("bad_range.mesh")), "bad_range.mesh");
        assert_eq!(line, 18);
        assert!(
            msg.contains("node 9, which is not defined (file has 5 nodes)"),
            "{msg}"
        );

        let (line, msg) = parse_err(read_mesh(&fixture("bad_binary.msh")), "bad_binary.msh");
        assert_eq!(line, 2);
        assert!(
            msg.starts_with("binary .msh files are not supported"),
            "{msg}"
        );
    }

    #[test]
    fn dispatch_and_io_errors() {
        let e = read_mesh(&fixture("does_not_exist.msh")).unwrap_err();
        assert!(matches!(e, MeshError::Io { .. }), "{e}");
        assert!(e.to_string().contains("does_not_exist.msh"));
        // .node present but .ele missing.
        let dir = tempfile::tempdir().expect("tempdir");
        let stem = dir.path().join("lonely");
        std::fs::write(with_suffix(&stem, ".node"), "1 3\n0 0 0 0\n").expect("write");
        let e = read_mesh(&stem).unwrap_err();
        assert!(
            matches!(&e, MeshError::Io { path, .. } if path.ends_with("lonely.ele")),
            "{e}"
        );
        for name in ["mesh.xyz", "mesh"] {
            let e = read_mesh(&dir.path().join(name)).unwrap_err();
            assert!(matches!(e, MeshError::Format { .. }), "{e}");
        }
        let e = read_mesh(&dir.path().join("x.meshb")).unwrap_err();
        assert!(e.to_string().contains("binary MEDIT"), "{e}");
        // Upper-case extension and TetGen stems with dots (out.1.node).
        std::fs::copy(fixture("two_tets.mesh"), dir.path().join("A.MESH")).expect("copy");
        assert_eq!(
            read_mesh(&dir.path().join("A.MESH")).expect("read"),
            two_tets()
        );
        for ext in ["node", "ele"] {
            std::fs::copy(
                fixture(&format!("two_tets_1based.{ext}")),
                dir.path().join(format!("out.1.{ext}")),
            )
            .expect("copy");
        }
        assert_eq!(
            read_mesh(&dir.path().join("out.1")).expect("stem"),
            two_tets()
        );
        assert_eq!(
            read_mesh(&dir.path().join("out.1.ele")).expect("ele"),
            two_tets()
        );
    }

    fn tetgen(node: &str, ele: &str) -> Result<Mesh, MeshError> {
        parse_tetgen(node, "t.node", ele, "t.ele")
    }

    #[test]
    fn tetgen_details() {
        let node = "4 3\n0 0 0 0\n1 1 0 0\n2 0 1 0\n3 0 0 1\n";
        let m = tetgen(node, "1 4\n0 0 1 2 3\n").expect("no attributes");
        assert_eq!(m.tags, vec![0]);
        assert_eq!(m.elements, vec![0, 1, 2, 3]);
        // CRLF line endings.
        let m2 = tetgen(&node.replace('\n', "\r\n"), "1 4 0\r\n0 0 1 2 3\r\n").expect("crlf");
        assert_eq!(m, m2);
        let cases: [(&str, &str, &str, usize, &str); 9] = [
            (
                "4 2\n",
                "1 4\n0 0 1 2 3\n",
                "t.node",
                1,
                "dimension must be 3, found 2",
            ),
            (
                "4 3\n2 0 0 0\n",
                "",
                "t.node",
                2,
                "first point number must be 0 or 1",
            ),
            (
                "4 3\n0 0 0 0\n2 1 0 0\n",
                "",
                "t.node",
                3,
                "expected point number 1",
            ),
            (
                "4 3 0 0\n0 0 0 0\n1 1 0 0 5\n",
                "",
                "t.node",
                3,
                "expected 3 values after point number",
            ),
            (
                "4 3\n0 0 0 0\n1 1 0 0\n2 0 1 0\n",
                "",
                "t.node",
                4,
                "unexpected end of file, expected point 4 of 4",
            ),
            (
                node,
                "1 10\n",
                "t.ele",
                1,
                "only 4-node tetrahedra are supported, found 10",
            ),
            (
                node,
                "1 4 1\n0 0 1 2 3\n",
                "t.ele",
                2,
                "expected 1 attribute(s) after the 4 node indices",
            ),
            (
                node,
                "1 4 1\n0 0 1 2 3 0.5\n",
                "t.ele",
                2,
                "expected integer region attribute, found '0.5'",
            ),
            (
                node,
                "1 4\n0 0 1 2 3\n1 0 1 2 3\n",
                "t.ele",
                3,
                "unexpected '1' after the 1 declared tetrahedra",
            ),
        ];
        for (n, e, file, line, want) in cases {
            let (l, msg) = parse_err(tetgen(n, e), file);
            assert_eq!(l, line, "{msg}");
            assert!(msg.starts_with(want), "got '{msg}', want '{want}'");
        }
        // Out-of-range with 0-based numbering: index 4 of 4 points.
        let (l, msg) = parse_err(tetgen(node, "1 4\n0 1 2 3 4\n"), "t.ele");
        assert_eq!(l, 2);
        assert!(msg.contains("valid 0..=3"), "{msg}");
    }

    fn msh(text: &str) -> Result<Mesh, MeshError> {
        parse_msh(text, "t.msh")
    }

    const MSH41_HEAD: &str = "$MeshFormat\n4.1 0 8\n$EndMeshFormat\n$Nodes\n1 4 1 4\n3 9 0 4\n1\n2\n3\n4\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n$EndNodes\n";

    #[test]
    fn msh_details() {
        // 4.1 without $Entities: the entity tag is the region tag.
        let m = msh(&format!(
            "{MSH41_HEAD}$Elements\n1 1 1 1\n3 9 4 1\n1 1 2 3 4\n$EndElements\n"
        ))
        .expect("entity tag");
        assert_eq!(m.tags, vec![9]);
        // 2.2 element without tags.
        let v2 = "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Nodes\n4\n1 0 0 0\n2 1 0 0\n3 0 1 0\n4 0 0 1\n$EndNodes\n";
        let m = msh(&format!("{v2}$Elements\n1\n1 4 0 1 2 3 4\n$EndElements\n")).expect("no tags");
        assert_eq!(m.tags, vec![0]);
        let cases: Vec<(String, usize, &str)> = vec![
            ("".into(), 1, "unexpected end of file, expected '$MeshFormat'"),
            ("$MeshFormat\n4.0 0 8\n".into(), 2, "unsupported msh version '4.0'"),
            ("$MeshFormat\n2.2 0 8\n$EndMeshFormat\n".into(), 3, "file has no $Nodes section"),
            (format!("{v2}$Elements\n1\n1 6 0 1 2 3 4 1 2\n$EndElements\n"), 13, "unsupported volume element type 6 (6-node prism)"),
            (format!("{v2}$Elements\n1\n1 4 2 7 7 1 2 3\n$EndElements\n"), 13, "expected 4 node indices after element id, type and 2 tags, found 3"),
            (format!("{v2}$Elements\n1\n1 4 5 1 2 3 4\n$EndElements\n"), 13, "expected 5 tags after element type, found 4"),
            (format!("{v2}$Elements\n2\n1 4 0 1 2 3 4\n$EndElements\n"), 14, "expected element line 'id type ntags tags... nodes...', found '$EndElements'"),
            (format!("{v2}$Elements\n1\n1 2 0 1 2 3\n$EndElements\n"), 14, "file contains no tetrahedra"),
            (format!("{v2}$Elements\n1\n1 4 0 1 2 3 5\n$EndElements\n"), 13, "element refers to node 5, which is not defined"),
            (format!("{v2}$Foo\n1\n"), 11, "section '$Foo' starting here has no '$EndFoo'"),
            (v2.replace("3 0 1 0", "3 0 1 nan"), 8, "z coordinate must be finite, found 'nan'"),
            (v2.replace("4 0 0 1", "3 0 0 1"), 9, "node 3 is defined twice"),
            (v2.replace("$EndNodes", "5 1 1 1\n$EndNodes"), 10, "expected '$EndNodes', found '5'"),
            (format!("{MSH41_HEAD}$Elements\n1 1 1 1\n3 9 11 1\n1 1 2 3 4 1 2 3 4 1 2\n$EndElements\n"), 18, "unsupported volume element type 11 (10-node tetrahedron)"),
            (format!("{MSH41_HEAD}$Elements\n1 2 1 1\n3 9 4 1\n1 1 2 3 4\n$EndElements\n"), 17, "header declares 2 elements but the blocks hold 1"),
            (format!("{MSH41_HEAD}$Elements\n1 1 1 1\n3 9 4 1\n1 1 2 3\n$EndElements\n"), 19, "expected 4 node indices after element id, found 3"),
            (MSH41_HEAD.replace("1 4 1 4", "1 5 1 4"), 5, "header declares 5 nodes but the blocks hold 4"),
            (MSH41_HEAD.replace("3 9 0 4", "3 9 0 5"), 11, "expected a single node tag, found 3 values"),
        ];
        for (t, line, want) in cases {
            let (l, msg) = parse_err(msh(&t), "t.msh");
            assert!(msg.starts_with(want), "got '{msg}', want '{want}'");
            assert_eq!(l, line, "{msg}");
        }
    }

    fn medit(text: &str) -> Result<Mesh, MeshError> {
        parse_medit(text, "t.mesh")
    }

    #[test]
    fn medit_details() {
        let v = "Vertices\n4\n0 0 0 1\n1 0 0 1\n0 1 0 1\n0 0 1 1\n";
        let m = medit(&format!(
            "{v}tetrahedra 1 # count on the keyword line\n1 2 3 4 -3\n"
        ))
        .expect("no End, comment");
        assert_eq!(m.tags, vec![-3]);
        let m = medit(&format!(
            "{v}Prisms\n0\nTetrahedra\n1\n1 2 3 4 0\nEnd\ngarbage after end"
        ))
        .expect("empty prisms");
        assert_eq!(m.num_elements(), 1);
        let cases: Vec<(String, usize, &str)> = vec![
            ("".into(), 1, "file has no 'Vertices' section"),
            ("Dimension 2\n".into(), 1, "only 3D meshes are supported, found Dimension 2"),
            (format!("{v}Tetrahedra\n1\n1 2 3 4\n"), 9, "expected tetrahedron 1 of 1 as 4 vertex indices and a reference id, found 4 values"),
            (format!("{v}Tetrahedra\n1\n1 2 3 0 1\n"), 9, "element refers to node 0"),
            (format!("{v}Tetrahedra\n1 2\n1 2 3 4 1\n"), 8, "unexpected '2' after the count of 'Tetrahedra'"),
            (format!("{v}Prisms\n1\n1 2 3 4 1 2 0\n"), 7, "'Prisms' elements are not supported"),
            (format!("{v}Foo\n"), 7, "unknown MEDIT keyword 'Foo'"),
            (format!("{v}Tetrahedra\n1\n1 2 3 4 1\nHexahedra\n1\n1 2 3 4 1 2 3 4 1\n"), 10, "mesh mixes element types: hex8 here but tet4 at line 7"),
            (format!("{v}Tetrahedra\n0\n"), 8, "file contains no Tetrahedra or Hexahedra"),
            (v.replace("0 1 0 1", "0 1 0"), 5, "expected vertex 3 of 4 as 'x y z ref' (4 values), found 3 values"),
            (format!("{v}Triangles\n2\n1 2 3 0\n"), 9, "unexpected end of file, expected entry 2 of 2 of 'Triangles'"),
        ];
        for (t, line, want) in cases {
            let (l, msg) = parse_err(medit(&t), "t.mesh");
            assert!(msg.starts_with(want), "got '{msg}', want '{want}'");
            assert_eq!(l, line, "{msg}");
        }
    }

    /// Regression (#18): huge counts in mesh headers are refused at the header line, before
    /// anything is allocated for them, in every text format.
    #[test]
    fn huge_header_counts_are_refused_before_allocating() {
        let big = "99999999999";
        let node = "4 3\n0 0 0 0\n1 1 0 0\n2 0 1 0\n3 0 0 1\n";
        let msh2 = "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n";
        let msh4 = "$MeshFormat\n4.1 0 8\n$EndMeshFormat\n";
        let cases: Vec<(Result<Mesh, MeshError>, usize, &str)> = vec![
            (tetgen(&format!("{big} 3\n0 0 0 0\n"), ""), 1, "points"),
            (
                tetgen(node, &format!("{big} 4\n0 0 1 2 3\n")),
                1,
                "tetrahedra",
            ),
            (msh(&format!("{msh2}$Nodes\n{big}\n1 0 0 0\n")), 5, "nodes"),
            (msh(&format!("{msh2}$Elements\n{big}\n")), 5, "elements"),
            (msh(&format!("{msh4}$Nodes\n1 {big} 1 4\n")), 5, "nodes"),
            (
                msh(&format!("{msh4}$Elements\n{big} 1 1 1\n")),
                5,
                "element blocks",
            ),
            (medit(&format!("Vertices\n{big}\n0 0 0 1\n")), 1, "vertices"),
            (
                medit(&format!("Vertices\n1\n0 0 0 1\nTetrahedra\n{big}\n")),
                4,
                "elements",
            ),
        ];
        for (r, line, what) in cases {
            let (l, msg) = match r {
                Err(MeshError::Parse { line, msg, .. }) => (line, msg),
                other => panic!("{what}: {other:?}"),
            };
            assert_eq!(l, line, "{msg}");
            assert!(msg.contains(&format!("declares {big} {what}")), "{msg}");
        }
        let vtk = format!("# vtk DataFile Version 3.0\nt\nASCII\nDATASET UNSTRUCTURED_GRID\nPOINTS {big} double\n0 0 0\n");
        let e = parse_vtk(&vtk, "t.vtk").unwrap_err().to_string();
        assert!(
            e.contains("t.vtk:5: number of points is 99999999999, but only 4 values follow"),
            "{e}"
        );
    }

    /// Readers used by the fuzz tests: (fixture, parser of a mutated copy of it).
    type Parser = fn(&str) -> Result<Mesh, MeshError>;

    fn fuzz_targets() -> Vec<(String, Parser)> {
        fn node(t: &str) -> Result<Mesh, MeshError> {
            tetgen(t, &text("two_tets_0based.ele"))
        }
        fn ele(t: &str) -> Result<Mesh, MeshError> {
            tetgen(&text("two_tets_0based.node"), t)
        }
        vec![
            (text("two_tets_0based.node"), node as Parser),
            (text("two_tets_0based.ele"), ele),
            (text("two_tets_v22.msh"), msh),
            (text("two_tets_v41.msh"), msh),
            (text("two_hexes_v22.msh"), msh),
            (text("two_hexes_v41.msh"), msh),
            (text("two_tets.mesh"), medit),
            (text("two_hexes.mesh"), medit),
        ]
    }

    /// A successful parse must still satisfy the reader guarantees.
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
        for (full, parse) in fuzz_targets() {
            let lines: Vec<&str> = full.lines().collect();
            for k in 0..lines.len() {
                let cut = lines[..k].join("\n");
                // A strict prefix of the lines is always incomplete except for trailing
                // comments/sections that may be optional; only require no panic.
                check(parse(&cut));
            }
            for (i, _) in full.char_indices() {
                check(parse(&full[..i]));
            }
            check(parse(&full));
            assert!(parse(&full).is_ok());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let s = String::from_utf8_lossy(&bytes);
            check(msh(&s));
            check(medit(&s));
            check(tetgen(&s, &s));
            check(tetgen(&text("two_tets_1based.node"), &s));
            let with_header = format!("$MeshFormat\n2.2 0 8\n$EndMeshFormat\n{s}");
            check(msh(&with_header));
        }

        #[test]
        fn mutated_fixtures_never_panic(
            which in 0usize..8,
            edits in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<u8>()), 1..6),
        ) {
            let targets = fuzz_targets();
            let (full, parse) = &targets[which];
            let mut b = full.clone().into_bytes();
            let pool = b"0123456789 -.\n$eE#x";
            for (at, op, byte) in edits {
                if b.is_empty() { break; }
                let i = at.index(b.len());
                let c = pool[byte as usize % pool.len()];
                match op {
                    0 => b[i] = c,
                    1 => b.insert(i, c),
                    2 => { b.remove(i); }
                    _ => {
                        // Duplicate or drop a whole line.
                        let start = b[..i].iter().rposition(|&x| x == b'\n').map_or(0, |p| p + 1);
                        let end = b[i..].iter().position(|&x| x == b'\n').map_or(b.len(), |p| i + p + 1);
                        if byte % 2 == 0 {
                            let line = b[start..end].to_vec();
                            b.splice(start..start, line);
                        } else {
                            b.drain(start..end);
                        }
                    }
                }
            }
            check(parse(&String::from_utf8_lossy(&b)));
        }
    }
}
