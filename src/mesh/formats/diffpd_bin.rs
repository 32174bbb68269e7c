//! DiffPD's binary mesh format (`Mesh<vertex_dim, element_dim>::SaveToFile`), little-endian:
//!
//! ```text
//! int32 vertex_dim (3)    int32 element_dim (4 = tet, 8 = hex)
//! int32 rows (= 3)        int32 cols (= #vertices)  float64[rows*cols]  all x, then all y, then all z
//! int32 rows (= element_dim) int32 cols (= #elements) int32[rows*cols]  corner 0 of every element, then corner 1, ...
//! ```
//!
//! Node indices are 0-based. DiffPD numbers hex corners `i = 4a + 2b + c` for the corner at
//! offset `(a, b, c)` along `(x, y, z)` (z fastest); this crate's lexicographic order is
//! `a + 2b + 4c` (x fastest), so hex corners are permuted by [`DIFFPD_TO_LEX`] (a bit reversal,
//! its own inverse). Tets are kept in file order. Region tags do not exist in the format: they
//! read as 0 and are not written.
//!
//! The reader checks every size against the file length before allocating, so truncated or
//! garbled files give [`MeshError::Parse`] (with the byte offset in the message; `line` is 1),
//! never a panic or a huge allocation.

use crate::mesh::check::{check_structure, duplicate_element, duplicate_message};
use crate::mesh::{ElementKind, Mesh, MeshError};

/// DiffPD hex corner `i` → lexicographic corner: `lex[DIFFPD_TO_LEX[i]] = diffpd[i]`.
pub const DIFFPD_TO_LEX: [usize; 8] = [0, 4, 2, 6, 1, 5, 3, 7];

/// Our local corner of each file corner.
fn file_corner_order(kind: ElementKind) -> &'static [usize] {
    match kind {
        ElementKind::Tet4 => &[0, 1, 2, 3],
        ElementKind::Hex8 => &DIFFPD_TO_LEX,
    }
}

struct Bytes<'a> {
    b: &'a [u8],
    pos: usize,
    path: &'a str,
}

impl Bytes<'_> {
    fn err(&self, msg: String) -> MeshError {
        MeshError::Parse {
            path: self.path.to_string(),
            line: 1,
            msg: format!("byte {}: {msg}", self.pos),
        }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&[u8], MeshError> {
        if self.b.len() - self.pos < n {
            return Err(self.err(format!(
                "file ends after {} bytes, {n} more needed for {what}",
                self.b.len()
            )));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn i32(&mut self, what: &str) -> Result<i32, MeshError> {
        let s = self.take(4, what)?;
        Ok(i32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }

    /// A matrix header `rows cols`; `rows` must equal `want_rows`; returns `cols`, after
    /// checking that `rows * cols * elem` bytes remain.
    fn matrix(&mut self, want_rows: i32, elem: usize, what: &str) -> Result<usize, MeshError> {
        let rows = self.i32(&format!("the row count of the {what} matrix"))?;
        if rows != want_rows {
            return Err(self.err(format!(
                "{what} matrix has {rows} rows, expected {want_rows}"
            )));
        }
        let cols = self.i32(&format!("the column count of the {what} matrix"))?;
        let Ok(cols) = usize::try_from(cols) else {
            return Err(self.err(format!("negative {what} count {cols}")));
        };
        let need = cols.saturating_mul(rows as usize).saturating_mul(elem);
        if self.b.len() - self.pos < need {
            return Err(self.err(format!(
                "{what} matrix of {rows} x {cols} needs {need} bytes but only {} remain",
                self.b.len() - self.pos
            )));
        }
        Ok(cols)
    }
}

/// Parses a DiffPD `.bin` mesh (see the module docs); `path` only labels errors.
pub fn parse_bin(bytes: &[u8], path: &str) -> Result<Mesh, MeshError> {
    let mut r = Bytes {
        b: bytes,
        pos: 0,
        path,
    };
    let vdim = r.i32("vertex_dim")?;
    if vdim != 3 {
        return Err(r.err(format!("vertex_dim must be 3 (3D mesh), found {vdim}")));
    }
    let edim = r.i32("element_dim")?;
    let kind = match edim {
        4 => ElementKind::Tet4,
        8 => ElementKind::Hex8,
        _ => {
            return Err(r.err(format!(
                "element_dim must be 4 (tet) or 8 (hex), found {edim}"
            )))
        }
    };
    let nn = r.matrix(3, 8, "vertex")?;
    let raw = r.take(nn * 24, "vertex coordinates")?;
    let coord = |d: usize, i: usize| {
        let k = 8 * (d * nn + i);
        let mut a = [0u8; 8];
        a.copy_from_slice(&raw[k..k + 8]);
        f64::from_le_bytes(a)
    };
    let mut nodes = Vec::with_capacity(nn);
    for i in 0..nn {
        let p = [coord(0, i), coord(1, i), coord(2, i)];
        if p.iter().any(|c| !c.is_finite()) {
            return Err(r.err(format!("vertex {i} has non-finite coordinates {p:?}")));
        }
        nodes.push(p);
    }
    let nv = kind.nodes();
    let ne = r.matrix(edim, 4, "element")?;
    let raw = r.take(ne * nv * 4, "element indices")?;
    let mut elements = vec![0usize; ne * nv];
    for (k, &local) in file_corner_order(kind).iter().enumerate() {
        for e in 0..ne {
            let o = 4 * (k * ne + e);
            let v = i32::from_le_bytes([raw[o], raw[o + 1], raw[o + 2], raw[o + 3]]);
            let Some(i) = usize::try_from(v).ok().filter(|&i| i < nn) else {
                return Err(r.err(format!(
                    "element {e} corner {k}: vertex index {v} out of range (file has {nn} vertices)"
                )));
            };
            elements[e * nv + local] = i;
        }
    }
    if r.pos != bytes.len() {
        return Err(r.err(format!(
            "{} unexpected bytes after the element matrix",
            bytes.len() - r.pos
        )));
    }
    if ne == 0 {
        return Err(r.err("file has no elements".into()));
    }
    let mesh = Mesh {
        kind,
        nodes,
        elements,
        tags: vec![0; ne],
    };
    if let Some((a, b)) = duplicate_element(&mesh) {
        return Err(MeshError::Parse {
            path: path.to_string(),
            line: 1,
            msg: duplicate_message(a, b, None),
        });
    }
    Ok(mesh)
}

/// Encodes `mesh` as a DiffPD `.bin` file (region tags are dropped). Errors when a count or
/// index does not fit in `int32` or the mesh fails [`check_structure`].
pub fn encode_bin(mesh: &Mesh) -> Result<Vec<u8>, MeshError> {
    check_structure(mesh)?;
    let nn = mesh.num_nodes();
    let ne = mesh.num_elements();
    let nv = mesh.kind.nodes();
    let too_big = |what: &str, n: usize| {
        MeshError::Invalid(format!(
            "{what} count {n} does not fit the .bin format's int32"
        ))
    };
    let nn32 = i32::try_from(nn).map_err(|_| too_big("vertex", nn))?;
    let ne32 = i32::try_from(ne).map_err(|_| too_big("element", ne))?;
    let mut out = Vec::with_capacity(24 + 24 * nn + 4 * nv * ne);
    for v in [3, nv as i32, 3, nn32] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for d in 0..3 {
        for p in &mesh.nodes {
            out.extend_from_slice(&p[d].to_le_bytes());
        }
    }
    for v in [nv as i32, ne32] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for &local in file_corner_order(mesh.kind) {
        for e in 0..ne {
            // nn fits in i32, so every (checked) index does too.
            out.extend_from_slice(&(mesh.element(e)[local] as i32).to_le_bytes());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::generate::{box_hex, box_tet};
    use crate::mesh::info::mesh_info;
    use crate::mesh::readers::read_mesh;
    use proptest::prelude::*;
    use std::path::Path;

    #[test]
    fn hex_corner_order_is_diffpd_and_round_trips() {
        let m = box_hex([2, 3, 1], 0.25, [1.0, 0.0, -1.0]);
        let b = encode_bin(&m).expect("encode");
        assert_eq!(b.len(), 16 + 24 * m.num_nodes() + 8 + 32 * m.num_elements());
        // Corner i of element 0 in the file sits at offset (i>>2, (i>>1)&1, i&1) * dx.
        let nn = m.num_nodes();
        let ne = m.num_elements();
        let el_start = 16 + 24 * nn + 8;
        for i in 0..8 {
            let o = el_start + 4 * (i * ne);
            let v = i32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]) as usize;
            let want = [
                1.0 + 0.25 * (i >> 2) as f64,
                0.25 * ((i >> 1) & 1) as f64,
                -1.0 + 0.25 * (i & 1) as f64,
            ];
            assert_eq!(m.nodes[v], want, "corner {i}");
        }
        assert_eq!(parse_bin(&b, "m.bin").expect("parse"), m);
        let t = box_tet([1, 2, 1], 1.0, [0.0; 3]);
        assert_eq!(
            parse_bin(&encode_bin(&t).expect("tets"), "t.bin").expect("parse"),
            t
        );
    }

    #[test]
    fn truncated_and_garbled_files_are_errors() {
        let b = encode_bin(&box_hex([2, 1, 1], 1.0, [0.0; 3])).expect("encode");
        for n in 0..b.len() {
            let e = parse_bin(&b[..n], "t.bin").unwrap_err();
            assert!(matches!(e, MeshError::Parse { .. }), "{n}: {e}");
        }
        let mut long = b.clone();
        long.push(0);
        assert!(parse_bin(&long, "t.bin")
            .unwrap_err()
            .to_string()
            .contains("1 unexpected bytes"));
        let set = |at: usize, v: i32| {
            let mut c = b.clone();
            c[at..at + 4].copy_from_slice(&v.to_le_bytes());
            c
        };
        let msg = |c: Vec<u8>| parse_bin(&c, "t.bin").unwrap_err().to_string();
        assert!(msg(set(0, 2)).contains("vertex_dim must be 3"));
        assert!(msg(set(4, 6)).contains("element_dim must be 4 (tet) or 8 (hex)"));
        assert!(msg(set(12, -5)).contains("negative vertex count"));
        assert!(msg(set(12, i32::MAX)).contains("needs"));
        let first_index = 16 + 24 * 12 + 8;
        assert!(msg(set(first_index, 12)).contains("vertex index 12 out of range"));
        assert!(msg(set(first_index, -1)).contains("vertex index -1 out of range"));
        let mut nan = b.clone();
        nan[16..24].copy_from_slice(&f64::NAN.to_le_bytes());
        assert!(msg(nan).contains("non-finite"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), head in 0usize..3) {
            let mut b = match head {
                0 => vec![],
                1 => [3i32, 8, 3, 2].iter().flat_map(|v| v.to_le_bytes()).collect(),
                _ => [3i32, 4, 3, 4].iter().flat_map(|v| v.to_le_bytes()).collect(),
            };
            b.extend_from_slice(&bytes);
            match parse_bin(&b, "r.bin") {
                Ok(m) => prop_assert!(m.elements.iter().all(|&i| i < m.nodes.len())),
                Err(e) => {
                    let is_parse = matches!(e, MeshError::Parse { .. });
                    prop_assert!(is_parse, "{}", e);
                }
            }
        }
    }

    /// The paper's voxel meshes (read from `../shared/anchor-meshes`, never copied here).
    #[test]
    fn reads_the_diffpd_anchor_meshes() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/anchor-meshes");
        if !dir.is_dir() {
            // CI copies shared/ beside the clone: there the meshes must be found
            assert!(
                !std::env::var("CI").is_ok_and(|v| v == "true"),
                "CI=true and {} is absent",
                dir.display()
            );
            eprintln!("skipping: {} is absent", dir.display());
            return;
        }
        // (file, vertices, voxels, dx)
        for (name, nv, ne, dx) in [
            ("lock.bin", 3044, 1288, 0.0625),
            ("bunny_watertight.bin", 2354, 1601, 0.05),
            ("torus_analytic.bin", 1068, 568, 0.0625),
            ("spot.bin", 816, 475, 1.0 / 15.0),
            ("plant.bin", 9921, 3863, 0.5 / 43.0),
        ] {
            let m = read_mesh(&dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!((m.num_nodes(), m.num_elements()), (nv, ne), "{name}");
            let info = mesh_info(&m, None);
            assert!(
                info.defects.is_empty(),
                "{name}: {:?}",
                info.defects.first()
            );
            // Axis-aligned cubes in lexicographic order: scaled Jacobian 1, volume dx³.
            let q = info.min_scaled_jacobian.expect("hex");
            assert!((q - 1.0).abs() < 1e-9, "{name}: {q}");
            let v = dx * dx * dx;
            assert!((info.min_element_volume - v).abs() < 1e-9 * v, "{name}");
            assert!((info.max_element_volume - v).abs() < 1e-9 * v, "{name}");
        }
    }
}
