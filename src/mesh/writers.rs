//! Hand-written writers for volumetric mesh files, the inverse of [`crate::mesh::readers`].
//!
//! [`write_mesh`] picks the format from the extension of the output path (see
//! [`MeshFormat::from_path`]):
//!
//! - **TetGen** `.node`/`.ele` (tets only): both `<stem>.node` and `<stem>.ele` are written.
//!   `.node`: header `<#points> 3 0 0`, then `<id> x y z`; `.ele`: header `<#tets> 4 1`, then
//!   `<id> n0 n1 n2 n3 <tag>` (the region tag as the one tetrahedron attribute). Numbering
//!   starts at [`TETGEN_BASE`] (1, TetGen's own default) unless [`encode_tetgen`] is told
//!   otherwise.
//! - **gmsh** `.msh`: ASCII 4.1 by default, 2.2 with [`encode_msh22`]. Node tags are `1..=N`
//!   and element tags `1..=M` in mesh order. Every distinct region tag gets one volume entity
//!   (entity tags `1, 2, ...` in ascending region-tag order) whose physical group is the region
//!   tag; 4.1 `$Elements` has one block per run of consecutive elements with the same tag, so
//!   element order is preserved. Hexahedra are written in gmsh/VTK order.
//!   Note: gmsh itself expects positive physical tags; region tag 0 is written as physical
//!   tag 0, which this crate's reader round-trips.
//! - **MEDIT** `.mesh`: `MeshVersionFormatted 2` (double precision), `Vertices` with reference
//!   0, then `Tetrahedra` or `Hexahedra` (VTK order) with the region tag as reference.
//! - **legacy VTK** `.vtk`, **VTK XML** `.vtu` and **DiffPD** `.bin`: see
//!   [`crate::mesh::vtk`] and [`crate::mesh::diffpd_bin`].
//!
//! Coordinates are written with the shortest decimal representation that parses back to the
//! same `f64` (exponent notation outside `[1e-4, 1e15)`), so every write/read round trip is
//! exact. Writers refuse meshes that are structurally broken (index out of range, wrong tag
//! count, non-finite coordinate) with [`MeshError::Invalid`]; files are written atomically.

use super::readers::display;
use super::{ElementKind, Mesh, MeshError, MeshFormat, HEX_VTK_TO_LEX};
use std::collections::BTreeMap;
use std::fmt::Write as _;
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
            let stem = path.with_extension("");
            save(&with_ext(&stem, "node"), node.as_bytes())?;
            save(&with_ext(&stem, "ele"), ele.as_bytes())
        }
        MeshFormat::Gmsh => write_mesh_msh(path, mesh, MshVersion::V41),
        MeshFormat::Medit => save(path, encode_medit(mesh).as_bytes()),
        MeshFormat::Vtk => save(path, super::vtk::encode_vtk(mesh).as_bytes()),
        MeshFormat::Vtu => super::vtk::write_vtu(path, mesh, &mesh.nodes, &[], &[]),
        MeshFormat::DiffpdBin => save(path, &super::diffpd_bin::encode_bin(mesh)?),
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

/// Writes `bytes` atomically, mapping errors to [`MeshError::Io`].
pub(super) fn save(path: &Path, bytes: &[u8]) -> Result<(), MeshError> {
    crate::io::write_atomic(path, bytes).map_err(|err| MeshError::Io {
        path: display(path),
        err,
    })
}

/// Rejects meshes that no writer can represent: connectivity length not a multiple of the
/// nodes per element, tag count different from the element count, node index out of range,
/// non-finite coordinate.
pub fn check_structure(mesh: &Mesh) -> Result<(), MeshError> {
    let nv = mesh.kind.nodes();
    if !mesh.elements.len().is_multiple_of(nv) {
        return Err(MeshError::Invalid(format!(
            "connectivity has {} indices, not a multiple of {nv} ({})",
            mesh.elements.len(),
            mesh.kind
        )));
    }
    let ne = mesh.num_elements();
    if mesh.tags.len() != ne {
        return Err(MeshError::Invalid(format!(
            "mesh has {} tags for {ne} elements",
            mesh.tags.len()
        )));
    }
    let nn = mesh.num_nodes();
    if let Some(k) = mesh.elements.iter().position(|&n| n >= nn) {
        return Err(MeshError::BadElement {
            element: k / nv,
            msg: format!(
                "node index {} out of range (mesh has {nn} nodes)",
                mesh.elements[k]
            ),
        });
    }
    if let Some(i) = mesh
        .nodes
        .iter()
        .position(|p| p.iter().any(|c| !c.is_finite()))
    {
        return Err(MeshError::BadNode {
            node: i,
            msg: format!("non-finite coordinates {:?}", mesh.nodes[i]),
        });
    }
    Ok(())
}

/// Appends `x` in the shortest form that parses back to the same `f64`.
pub(super) fn push_real(out: &mut String, x: f64) {
    let a = x.abs();
    // Writing to a String cannot fail.
    let _ = if x == 0.0 || (1e-4..1e15).contains(&a) {
        write!(out, "{x}")
    } else {
        write!(out, "{x:e}")
    };
}

/// Appends `x y z`.
pub(super) fn push_point(out: &mut String, p: &[f64; 3]) {
    for (d, &c) in p.iter().enumerate() {
        if d > 0 {
            out.push(' ');
        }
        push_real(out, c);
    }
}

/// Element `e` in file order (VTK/gmsh/MEDIT order for hexes).
pub(super) fn file_order(mesh: &Mesh, e: usize) -> Vec<usize> {
    let el = mesh.element(e);
    match mesh.kind {
        ElementKind::Tet4 => el.to_vec(),
        ElementKind::Hex8 => HEX_VTK_TO_LEX.iter().map(|&l| el[l]).collect(),
    }
}

/// TetGen `.node` and `.ele` texts, numbered from `base`. Errors for hex meshes.
pub fn encode_tetgen(mesh: &Mesh, base: usize) -> Result<(String, String), MeshError> {
    if mesh.kind != ElementKind::Tet4 {
        return Err(MeshError::Invalid(format!(
            "TetGen .node/.ele files hold tetrahedra only; this mesh is {}",
            mesh.kind
        )));
    }
    let mut node = format!(
        "# {} points, written by diffphd\n{} 3 0 0\n",
        mesh.num_nodes(),
        mesh.num_nodes()
    );
    for (i, p) in mesh.nodes.iter().enumerate() {
        let _ = write!(node, "{} ", i + base);
        push_point(&mut node, p);
        node.push('\n');
    }
    let ne = mesh.num_elements();
    let mut ele = format!("# {ne} tetrahedra, attribute = region tag\n{ne} 4 1\n");
    for e in 0..ne {
        let _ = write!(ele, "{}", e + base);
        for &n in mesh.element(e) {
            let _ = write!(ele, " {}", n + base);
        }
        let _ = writeln!(ele, " {}", mesh.tags[e]);
    }
    Ok((node, ele))
}

/// Distinct region tags in ascending order with their gmsh entity tag (`1, 2, ...`).
fn entities(mesh: &Mesh) -> BTreeMap<i64, usize> {
    let mut map: BTreeMap<i64, usize> = mesh.tags.iter().map(|&t| (t, 0)).collect();
    for (k, v) in map.values_mut().enumerate() {
        *v = k + 1;
    }
    map
}

fn msh_type(kind: ElementKind) -> u32 {
    match kind {
        ElementKind::Tet4 => 4,
        ElementKind::Hex8 => 5,
    }
}

/// gmsh ASCII 4.1 text (see the module documentation for the layout).
pub fn encode_msh41(mesh: &Mesh) -> String {
    let nn = mesh.num_nodes();
    let ne = mesh.num_elements();
    let ents = entities(mesh);
    let mut out = String::from("$MeshFormat\n4.1 0 8\n$EndMeshFormat\n$Entities\n");
    let _ = writeln!(out, "0 0 0 {}", ents.len());
    for (&tag, &ent) in &ents {
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for e in (0..ne).filter(|&e| mesh.tags[e] == tag) {
            for &n in mesh.element(e) {
                for d in 0..3 {
                    lo[d] = lo[d].min(mesh.nodes[n][d]);
                    hi[d] = hi[d].max(mesh.nodes[n][d]);
                }
            }
        }
        let _ = write!(out, "{ent} ");
        push_point(&mut out, &lo);
        out.push(' ');
        push_point(&mut out, &hi);
        let _ = writeln!(out, " 1 {tag} 0");
    }
    out.push_str("$EndEntities\n$Nodes\n");
    let first_entity = ents.values().next().copied().unwrap_or(1);
    if nn == 0 {
        out.push_str("0 0 0 0\n");
    } else {
        let _ = writeln!(out, "1 {nn} 1 {nn}\n3 {first_entity} 0 {nn}");
        for i in 1..=nn {
            let _ = writeln!(out, "{i}");
        }
        for p in &mesh.nodes {
            push_point(&mut out, p);
            out.push('\n');
        }
    }
    out.push_str("$EndNodes\n$Elements\n");
    // Runs of consecutive elements with the same tag.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for e in 0..ne {
        match runs.last_mut() {
            Some((start, len)) if mesh.tags[*start] == mesh.tags[e] => *len += 1,
            _ => runs.push((e, 1)),
        }
    }
    let _ = writeln!(out, "{} {ne} {} {ne}", runs.len(), ne.min(1));
    let ty = msh_type(mesh.kind);
    for (start, len) in runs {
        let ent = ents[&mesh.tags[start]];
        let _ = writeln!(out, "3 {ent} {ty} {len}");
        for e in start..start + len {
            let _ = write!(out, "{}", e + 1);
            for n in file_order(mesh, e) {
                let _ = write!(out, " {}", n + 1);
            }
            out.push('\n');
        }
    }
    out.push_str("$EndElements\n");
    out
}

/// gmsh ASCII 2.2 text: `$Nodes` `id x y z`, `$Elements` `id type 2 <tag> <entity> nodes...`
/// (physical tag = region tag, elementary tag = entity as in [`encode_msh41`]).
pub fn encode_msh22(mesh: &Mesh) -> String {
    let ents = entities(mesh);
    let mut out = String::from("$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Nodes\n");
    let _ = writeln!(out, "{}", mesh.num_nodes());
    for (i, p) in mesh.nodes.iter().enumerate() {
        let _ = write!(out, "{} ", i + 1);
        push_point(&mut out, p);
        out.push('\n');
    }
    let ne = mesh.num_elements();
    let _ = writeln!(out, "$EndNodes\n$Elements\n{ne}");
    let ty = msh_type(mesh.kind);
    for e in 0..ne {
        let tag = mesh.tags[e];
        let _ = write!(out, "{} {ty} 2 {tag} {}", e + 1, ents[&tag]);
        for n in file_order(mesh, e) {
            let _ = write!(out, " {}", n + 1);
        }
        out.push('\n');
    }
    out.push_str("$EndElements\n");
    out
}

/// MEDIT ASCII text (see the module documentation).
pub fn encode_medit(mesh: &Mesh) -> String {
    let mut out = String::from("MeshVersionFormatted 2\n\nDimension 3\n\nVertices\n");
    let _ = writeln!(out, "{}", mesh.num_nodes());
    for p in &mesh.nodes {
        push_point(&mut out, p);
        out.push_str(" 0\n");
    }
    let key = match mesh.kind {
        ElementKind::Tet4 => "Tetrahedra",
        ElementKind::Hex8 => "Hexahedra",
    };
    let ne = mesh.num_elements();
    let _ = writeln!(out, "\n{key}\n{ne}");
    for e in 0..ne {
        for n in file_order(mesh, e) {
            let _ = write!(out, "{} ", n + 1);
        }
        let _ = writeln!(out, "{}", mesh.tags[e]);
    }
    out.push_str("\nEnd\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::generate::{box_hex, box_tet};
    use crate::mesh::readers::{read_mesh, read_mesh_with_source};
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
                for (k, (idx, tag)) in els.iter().enumerate() {
                    for a in 0..nv {
                        elements.push((idx.index(nodes.len()) + a * (k + 1)) % nodes.len());
                    }
                    tags.push(*tag);
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
