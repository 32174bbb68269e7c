//! Writing volumetric mesh files, the inverse of [`crate::mesh::readers`].
//!
//! [`write_mesh`] picks the format from the extension of the output path (see
//! [`MeshFormat::from_path`]) and hands the mesh to the format's encoder:
//!
//! - **TetGen** `.node`/`.ele` (tets only; [`encode_tetgen`]): both `<stem>.node` and
//!   `<stem>.ele` are written, numbered from [`TETGEN_BASE`] (1, TetGen's own default), with
//!   the region tag as the one tetrahedron attribute;
//! - **gmsh** `.msh`: ASCII 4.1 by default ([`encode_msh41`]), 2.2 with [`write_mesh_msh`]
//!   ([`encode_msh22`]);
//! - **MEDIT** `.mesh` ([`encode_medit`]);
//! - **legacy VTK** `.vtk` and **VTK XML** `.vtu` ([`crate::mesh::vtk`]);
//! - **DiffPD** `.bin` ([`crate::mesh::diffpd_bin`]).
//!
//! Coordinates are written with the shortest decimal representation that parses back to the
//! same `f64` (exponent notation outside `[1e-4, 1e15)`), so every write/read round trip is
//! exact. Writers refuse meshes that are structurally broken ([`check_structure`]: index out
//! of range, wrong tag count, non-finite coordinate) with [`MeshError::Invalid`]; files are
//! written atomically.

pub use crate::mesh::check::check_structure;
pub use crate::mesh::gmsh::{encode_msh22, encode_msh41};
pub use crate::mesh::medit::encode_medit;
pub use crate::mesh::tetgen::encode_tetgen;

use crate::mesh::diffpd_bin::encode_bin;
use crate::mesh::encode::save;
use crate::mesh::lexer::display;
use crate::mesh::vtk::{encode_vtk, write_vtu};
use crate::mesh::{Mesh, MeshError, MeshFormat};
use std::path::Path;

/// Index base of TetGen files written by [`write_mesh`].
pub const TETGEN_BASE: usize = 1;

/// gmsh ASCII file versions that can be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MshVersion {
    V22,
    V41,
}

/// Writes `mesh` in the format named by the extension of `path`. `.msh` is gmsh 4.1; use
/// [`write_mesh_msh`] for 2.2. `.vtu` writes the rest positions with no data arrays besides
/// the region tag.
pub fn write_mesh(path: &Path, mesh: &Mesh) -> Result<(), MeshError> {
    let Some(format) = MeshFormat::from_path(path) else {
        return Err(MeshError::Format {
            path: display(path),
            msg: "cannot tell the output format from the file extension".into(),
        });
    };
    check_structure(mesh)?;
    match format {
        MeshFormat::Tetgen => {
            let (node, ele) = encode_tetgen(mesh, TETGEN_BASE)?;
            let [node_path, ele_path] = output_paths(path);
            save(&node_path, node.as_bytes())?;
            save(&ele_path, ele.as_bytes())
        }
        MeshFormat::Gmsh => write_mesh_msh(path, mesh, MshVersion::V41),
        MeshFormat::Medit => save(path, encode_medit(mesh).as_bytes()),
        MeshFormat::Vtk => save(path, encode_vtk(mesh).as_bytes()),
        MeshFormat::Vtu => write_vtu(path, mesh, &mesh.nodes, &[], &[]),
        MeshFormat::DiffpdBin => save(path, &encode_bin(mesh)?),
    }
}

/// The files [`write_mesh`] writes for `path`: `<stem>.node` and `<stem>.ele` for TetGen,
/// `path` itself (twice) for every other format.
pub fn output_paths(path: &Path) -> [std::path::PathBuf; 2] {
    match MeshFormat::from_path(path) {
        Some(MeshFormat::Tetgen) => {
            let stem = path.with_extension("");
            [with_ext(&stem, "node"), with_ext(&stem, "ele")]
        }
        _ => [path.to_path_buf(), path.to_path_buf()],
    }
}

/// Writes a gmsh ASCII file of the given version.
pub fn write_mesh_msh(path: &Path, mesh: &Mesh, version: MshVersion) -> Result<(), MeshError> {
    check_structure(mesh)?;
    let text = match version {
        MshVersion::V22 => encode_msh22(mesh),
        MshVersion::V41 => encode_msh41(mesh),
    };
    save(path, text.as_bytes())
}

/// `stem` + `.ext`, keeping dots already in the stem (`out.1` → `out.1.node`).
fn with_ext(stem: &Path, ext: &str) -> std::path::PathBuf {
    let mut s = stem.as_os_str().to_owned();
    s.push(".");
    s.push(ext);
    s.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::text::push_real;
    use crate::mesh::generate::{box_hex, box_tet};
    use crate::mesh::readers::{read_mesh, read_mesh_with_source};
    use crate::mesh::ElementKind;
    use proptest::prelude::*;

    /// A mesh with awkward coordinates (tiny, huge, negative zero, non-terminating binary
    /// fractions) and tags (negative, zero, beyond 32 bits, interleaved).
    fn awkward(kind: ElementKind) -> Mesh {
        let mut m = match kind {
            ElementKind::Tet4 => box_tet([2, 1, 1], 0.1, [0.0; 3]),
            ElementKind::Hex8 => box_hex([3, 1, 2], 0.1, [0.0; 3]),
        };
        for (i, p) in m.nodes.iter_mut().enumerate() {
            p[0] += 1e-9 * i as f64;
            p[1] = p[1] * 1e20 + 0.1 + 0.2;
            p[2] = -p[2] / 3.0;
        }
        m.nodes[0] = [-0.0, 1e-300, -1.7976931348623157e308];
        let big = [3, -2, 0, 5_000_000_000, 3, 7];
        for (e, t) in m.tags.iter_mut().enumerate() {
            *t = big[e % big.len()];
        }
        m
    }

    /// Writes `m` as `name` in a temp dir and reads it back.
    fn round_trip(m: &Mesh, name: &str) -> Mesh {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join(name);
        write_mesh(&p, m).unwrap_or_else(|e| panic!("{name}: {e}"));
        read_mesh(&p).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn same_bits(a: &Mesh, b: &Mesh) -> bool {
        a.kind == b.kind
            && a.elements == b.elements
            && a.tags == b.tags
            && a.nodes.len() == b.nodes.len()
            && a.nodes
                .iter()
                .zip(&b.nodes)
                .all(|(p, q)| p.iter().zip(q).all(|(x, y)| x.to_bits() == y.to_bits()))
    }

    #[test]
    fn every_format_round_trips_exactly() {
        for kind in [ElementKind::Tet4, ElementKind::Hex8] {
            let m = awkward(kind);
            let mut names = vec!["a.msh", "a.mesh", "a.vtk", "a.bin"];
            if kind == ElementKind::Tet4 {
                names.extend(["a.node", "b.1.ele"]);
            }
            for name in names {
                let back = round_trip(&m, name);
                let mut want = m.clone();
                if name.ends_with(".bin") {
                    want.tags = vec![0; want.tags.len()]; // .bin has no tags
                }
                assert!(same_bits(&back, &want), "{kind} {name}: {back:?}");
            }
            // gmsh 2.2.
            let dir = tempfile::tempdir().expect("tempdir");
            let p = dir.path().join("v2.msh");
            write_mesh_msh(&p, &m, MshVersion::V22).expect("write 2.2");
            assert!(read_mesh(&p).expect("read 2.2") == m, "{kind} msh 2.2");
        }
    }

    #[test]
    fn sources_and_index_base() {
        let m = awkward(ElementKind::Tet4);
        let dir = tempfile::tempdir().expect("tempdir");
        for (name, format, base) in [
            ("x.node", MeshFormat::Tetgen, Some(TETGEN_BASE)),
            ("x.msh", MeshFormat::Gmsh, None),
            ("x.mesh", MeshFormat::Medit, Some(1)),
            ("x.vtk", MeshFormat::Vtk, Some(0)),
            ("x.bin", MeshFormat::DiffpdBin, Some(0)),
        ] {
            let p = dir.path().join(name);
            write_mesh(&p, &m).expect("write");
            let (_, src) = read_mesh_with_source(&p).expect("read");
            assert_eq!((src.format, src.index_base), (format, base), "{name}");
        }
        let (node, _) = encode_tetgen(&m, 0).expect("tets");
        assert!(node.lines().nth(2).expect("first point").starts_with("0 "));
    }

    #[test]
    fn writers_reject_what_they_cannot_represent() {
        let dir = tempfile::tempdir().expect("tempdir");
        let hex = box_hex([1, 1, 1], 1.0, [0.0; 3]);
        let e = write_mesh(&dir.path().join("h.node"), &hex).unwrap_err();
        assert!(e.to_string().contains("tetrahedra only"), "{e}");
        let e = write_mesh(&dir.path().join("h.obj"), &hex).unwrap_err();
        assert!(matches!(e, MeshError::Format { .. }), "{e}");
        let mut bad = hex.clone();
        bad.elements[5] = 8;
        let e = write_mesh(&dir.path().join("h.vtk"), &bad).unwrap_err();
        assert!(matches!(e, MeshError::BadElement { element: 0, .. }), "{e}");
        let mut bad = hex.clone();
        bad.nodes[2][1] = f64::NAN;
        let e = write_mesh(&dir.path().join("h.mesh"), &bad).unwrap_err();
        assert!(matches!(e, MeshError::BadNode { node: 2, .. }), "{e}");
        let mut bad = hex.clone();
        bad.tags.push(1);
        assert!(write_mesh(&dir.path().join("h.msh"), &bad).is_err());
        let e = write_mesh(&dir.path().join("missing_dir/h.msh"), &hex).unwrap_err();
        assert!(matches!(e, MeshError::Io { .. }), "{e}");
    }

    #[test]
    fn msh41_layout_snapshot() {
        let mut m = box_tet([1, 1, 1], 1.0, [0.0; 3]);
        m.tags = vec![2, 2, 5, 5, 2, 2];
        let text = encode_msh41(&m);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            &lines[..7],
            &[
                "$MeshFormat",
                "4.1 0 8",
                "$EndMeshFormat",
                "$Entities",
                "0 0 0 2",
                "1 0 0 0 1 1 1 1 2 0",
                "2 0 0 0 1 1 1 1 5 0",
            ]
        );
        let el = lines
            .iter()
            .position(|l| *l == "$Elements")
            .expect("elements");
        assert_eq!(lines[el + 1], "3 6 1 6");
        assert_eq!(lines[el + 2], "3 1 4 2");
        assert_eq!(lines[el + 3], "1 1 2 4 8");
        assert_eq!(lines[el + 5], "3 2 4 2");
    }

    #[test]
    fn small_text_snapshots() {
        let m = Mesh {
            kind: ElementKind::Tet4,
            nodes: vec![[0.0; 3], [1.0, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 0.25]],
            elements: vec![0, 1, 2, 3],
            tags: vec![-4],
        };
        let (node, ele) = encode_tetgen(&m, 1).expect("tets");
        assert_eq!(
            node,
            "# 4 points, written by diffphd\n4 3 0 0\n1 0 0 0\n2 1 0 0\n3 0 0.5 0\n4 0 0 0.25\n"
        );
        assert_eq!(
            ele,
            "# 1 tetrahedra, attribute = region tag\n1 4 1\n1 1 2 3 4 -4\n"
        );
        assert_eq!(
            encode_medit(&m),
            "MeshVersionFormatted 2\n\nDimension 3\n\nVertices\n4\n0 0 0 0\n1 0 0 0\n0 0.5 0 0\n0 0 0.25 0\n\nTetrahedra\n1\n1 2 3 4 -4\n\nEnd\n"
        );
        assert_eq!(
            crate::mesh::vtk::encode_vtk(&m),
            "# vtk DataFile Version 3.0\ndiffphd tet4 mesh, 4 nodes, 1 elements\nASCII\nDATASET UNSTRUCTURED_GRID\nPOINTS 4 double\n0 0 0\n1 0 0\n0 0.5 0\n0 0 0.25\nCELLS 1 5\n4 0 1 2 3\nCELL_TYPES 1\n10\nCELL_DATA 1\nSCALARS tag int 1\nLOOKUP_TABLE default\n-4\n"
        );
        assert_eq!(
            encode_msh22(&m),
            "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Nodes\n4\n1 0 0 0\n2 1 0 0\n3 0 0.5 0\n4 0 0 0.25\n$EndNodes\n$Elements\n1\n1 4 2 -4 1 1 2 3 4\n$EndElements\n"
        );
        // Hexes are written in VTK order.
        let h = box_hex([1, 1, 1], 1.0, [0.0; 3]);
        assert!(encode_medit(&h).contains("\nHexahedra\n1\n1 2 4 3 5 6 8 7 0\n"));
        let mut out = String::new();
        for x in [1e-5, 123456.5, 1e15, -2.5e-300, 0.1] {
            push_real(&mut out, x);
            out.push(' ');
        }
        assert_eq!(out, "1e-5 123456.5 1e15 -2.5e-300 0.1 ");
    }

    fn arb_mesh() -> impl Strategy<Value = Mesh> {
        (
            prop_oneof![Just(ElementKind::Tet4), Just(ElementKind::Hex8)],
            proptest::collection::vec(
                proptest::array::uniform3(
                    proptest::num::f64::NORMAL
                        | proptest::num::f64::ZERO
                        | proptest::num::f64::SUBNORMAL,
                ),
                1..12,
            ),
            proptest::collection::vec((any::<prop::sample::Index>(), -3i64..4), 1..6),
        )
            .prop_map(|(kind, nodes, els)| {
                let nv = kind.nodes();
                let mut elements = Vec::new();
                let mut tags = Vec::new();
                let mut seen = std::collections::HashSet::new();
                for (k, (idx, tag)) in els.iter().enumerate() {
                    let el: Vec<usize> = (0..nv)
                        .map(|a| (idx.index(nodes.len()) + a * (k + 1)) % nodes.len())
                        .collect();
                    let mut set = el.clone();
                    set.sort_unstable();
                    // Duplicate elements are refused by every reader.
                    if seen.insert(set) {
                        elements.extend(el);
                        tags.push(*tag);
                    }
                }
                Mesh {
                    kind,
                    nodes,
                    elements,
                    tags,
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Any structurally valid mesh (repeated nodes, inverted elements and all) survives
        /// every text format bit for bit.
        #[test]
        fn random_meshes_round_trip(m in arb_mesh()) {
            let mut names = vec!["r.msh", "r.mesh", "r.vtk"];
            if m.kind == ElementKind::Tet4 {
                names.push("r.node");
            }
            for name in names {
                let back = round_trip(&m, name);
                prop_assert!(same_bits(&back, &m), "{}", name);
            }
            let bin = crate::mesh::diffpd_bin::encode_bin(&m).expect("bin");
            let back = crate::mesh::diffpd_bin::parse_bin(&bin, "r.bin").expect("read bin");
            prop_assert_eq!(&back.nodes, &m.nodes);
            prop_assert_eq!(&back.elements, &m.elements);
        }
    }
}
