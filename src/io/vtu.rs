//! VTK XML unstructured-grid (`.vtu`) files from plain arrays, and the ParaView collection
//! (`.pvd`) that lists frames by time. Reading is [`super::vtu_read`].
//!
//! Layout: `VTKFile type="UnstructuredGrid" version="1.0" byte_order="LittleEndian"
//! header_type="UInt64"` with one `<Piece>`: `PointData` (3-vector Float64 arrays, then integer
//! arrays), `CellData` (the region `tag`, integer arrays, Float64 scalars), `Points` (Float64)
//! and `Cells` (`connectivity`, `offsets`, `types` UInt8). Integer arrays are Int32 when every
//! value fits in 32 bits and Int64 otherwise. The caller hands
//! connectivity already in VTK node order with its VTK cell type;
//! [`crate::mesh::vtk::encode_vtu`] does that for a mesh.
//!
//! Three encodings of the arrays ([`VtuEncoding`]), all read by VTK/ParaView/PyVista and
//! meshio (the layout is the one VTK's `vtkXMLUnstructuredGridWriter` documents in "VTK File
//! Formats", section "XML File Formats"):
//! - **ascii**: every `DataArray` inline as decimal text (`format="ascii"`), the shortest text
//!   that parses back to the same `f64`;
//! - **binary**: every `DataArray` is `format="appended" offset="o"`, its bytes in one
//!   `<AppendedData encoding="raw">` block after a `_` marker: at byte `o` past the marker a
//!   UInt64 byte count `n`, then the `n` bytes of the values, little-endian;
//! - **zlib** (`compressor="vtkZLibDataCompressor"`): as binary, but each array is cut into
//!   blocks of [`ZLIB_BLOCK`] bytes (the last one shorter), each compressed as a zlib stream
//!   (RFC 1950), and preceded by the UInt64 header `[blocks, block size, size of the last
//!   block (0 when it is full), compressed size of each block]`.

use super::text::push_real;
use std::fmt::Write as _;

/// A per-node 3-vector array.
pub type PointField<'a> = (&'a str, &'a [[f64; 3]]);
/// A per-cell scalar array.
pub type CellScalar<'a> = (&'a str, &'a [f64]);
/// A per-node or per-cell integer array (written as Int32 when every value fits, else Int64).
pub type IntArray<'a> = (&'a str, &'a [i64]);

/// Uncompressed size of one zlib block (VTK's default block size, 32 KiB).
pub const ZLIB_BLOCK: usize = 1 << 15;

/// zlib compression level of the blocks (6, zlib's own default).
const ZLIB_LEVEL: u8 = 6;

/// How the arrays of a `.vtu` file are stored (see the module docs); the scene's
/// `[output] vtu_encoding`.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum VtuEncoding {
    /// Decimal text inside each `DataArray`.
    Ascii,
    /// Raw little-endian bytes in one appended block.
    Binary,
    /// Raw bytes in zlib-compressed blocks in one appended block.
    #[default]
    Zlib,
}

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
    /// Per-node integer arrays (e.g. the node index, the body).
    pub point_ints: &'a [IntArray<'a>],
    /// Per-cell integer arrays (e.g. the body), written after `tag`.
    pub cell_ints: &'a [IntArray<'a>],
    pub cell_scalars: &'a [CellScalar<'a>],
}

impl<'a> VtuPiece<'a> {
    /// A piece with cells and positions and no data arrays besides the tags.
    pub fn new(
        cell_type: u8,
        nodes_per_cell: usize,
        connectivity: &'a [usize],
        tags: &'a [i64],
        positions: &'a [[f64; 3]],
    ) -> Self {
        VtuPiece {
            cell_type,
            nodes_per_cell,
            connectivity,
            tags,
            positions,
            point_fields: &[],
            point_ints: &[],
            cell_ints: &[],
            cell_scalars: &[],
        }
    }
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

/// The values of one `DataArray`.
enum Values {
    F64(Vec<f64>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U8(Vec<u8>),
}

impl Values {
    fn type_name(&self) -> &'static str {
        match self {
            Values::F64(_) => "Float64",
            Values::I32(_) => "Int32",
            Values::I64(_) => "Int64",
            Values::U8(_) => "UInt8",
        }
    }

    /// Little-endian bytes of the values.
    fn bytes(&self) -> Vec<u8> {
        match self {
            Values::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Values::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Values::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Values::U8(v) => v.clone(),
        }
    }

    /// Decimal text of value `i`.
    fn push_text(&self, out: &mut String, i: usize) {
        match self {
            Values::F64(v) => push_real(out, v[i]),
            Values::I32(v) => {
                let _ = write!(out, "{}", v[i]);
            }
            Values::I64(v) => {
                let _ = write!(out, "{}", v[i]);
            }
            Values::U8(v) => {
                let _ = write!(out, "{}", v[i]);
            }
        }
    }

    /// Integers as Int32 when every value fits (half the bytes of Int64; VTK, PyVista and
    /// meshio read either), Int64 otherwise.
    fn ints(v: Vec<i64>) -> Values {
        match v.iter().map(|&x| i32::try_from(x)).collect() {
            Ok(small) => Values::I32(small),
            Err(_) => Values::I64(v),
        }
    }

    fn len(&self) -> usize {
        match self {
            Values::F64(v) => v.len(),
            Values::I32(v) => v.len(),
            Values::I64(v) => v.len(),
            Values::U8(v) => v.len(),
        }
    }
}

/// One `DataArray`: name, components and values; `rows` are the ASCII line lengths when
/// they differ from `components` (connectivity: one cell per line).
struct Array {
    name: String,
    components: usize,
    values: Values,
    rows: Option<Vec<usize>>,
}

impl Array {
    fn new(name: &str, components: usize, values: Values) -> Self {
        Array {
            name: name.to_string(),
            components,
            values,
            rows: None,
        }
    }
}

/// VTK XML unstructured-grid bytes of several entries (e.g. the bodies of a scene, possibly
/// of different cell types) as ONE `<Piece>`: points concatenated in entry order, each
/// entry's connectivity shifted by the points before it, offsets and cell types per entry,
/// and every array concatenated the same way (the `tag` cell array keeps each entry's tags).
/// One piece because readers such as meshio keep only the last of several pieces. Every
/// entry must carry the same array names in the same order.
pub fn encode_vtu_pieces(
    pieces: &[VtuPiece<'_>],
    encoding: VtuEncoding,
) -> Result<Vec<u8>, VtuError> {
    for (k, p) in pieces.iter().enumerate() {
        if k > 0 && names(p) != names(&pieces[0]) {
            return Err(VtuError::Arrays { piece: k });
        }
        check_piece(p)?;
    }
    let mut out = Writer::new(encoding);
    if !pieces.is_empty() {
        let m = merge(pieces);
        out.piece(&m);
    }
    Ok(out.finish())
}

/// The array names of a piece, in order: point 3-vectors, point ints, cell ints, cell scalars.
fn names(p: &VtuPiece<'_>) -> [Vec<String>; 4] {
    let n = |v: &mut dyn Iterator<Item = &str>| v.map(str::to_string).collect::<Vec<_>>();
    [
        n(&mut p.point_fields.iter().map(|f| f.0)),
        n(&mut p.point_ints.iter().map(|f| f.0)),
        n(&mut p.cell_ints.iter().map(|f| f.0)),
        n(&mut p.cell_scalars.iter().map(|f| f.0)),
    ]
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
    let length = |what: String, found: usize, n: usize, of: &str| {
        if found == n {
            Ok(())
        } else {
            Err(VtuError::Length {
                what,
                found,
                expected: format!("{n} {of}"),
            })
        }
    };
    for (name, f) in piece.point_fields {
        length(format!("point field '{name}'"), f.len(), nn, "nodes")?;
    }
    for (name, f) in piece.point_ints {
        length(format!("point array '{name}'"), f.len(), nn, "nodes")?;
    }
    for (name, f) in piece.cell_ints {
        length(format!("cell array '{name}'"), f.len(), ne, "elements")?;
    }
    for (name, f) in piece.cell_scalars {
        length(format!("cell scalar '{name}'"), f.len(), ne, "elements")?;
    }
    Ok(())
}

/// The arrays of the merged piece.
struct Merged {
    points: usize,
    cells: usize,
    point_data: Vec<Array>,
    cell_data: Vec<Array>,
    positions: Array,
    cells_arrays: [Array; 3],
}

/// Concatenates checked pieces with the same array names into one piece's arrays.
fn merge(pieces: &[VtuPiece<'_>]) -> Merged {
    let first = &pieces[0];
    let mut point_data = Vec::new();
    for (k, (name, _)) in first.point_fields.iter().enumerate() {
        let v = flat3(pieces, |p| p.point_fields[k].1);
        point_data.push(Array::new(name, 3, Values::F64(v)));
    }
    for (k, (name, _)) in first.point_ints.iter().enumerate() {
        let v = pieces.iter().flat_map(|p| p.point_ints[k].1).copied();
        point_data.push(Array::new(name, 1, Values::ints(v.collect())));
    }
    let tags = pieces.iter().flat_map(|p| p.tags).copied().collect();
    let mut cell_data = vec![Array::new("tag", 1, Values::ints(tags))];
    for (k, (name, _)) in first.cell_ints.iter().enumerate() {
        let v = pieces.iter().flat_map(|p| p.cell_ints[k].1).copied();
        cell_data.push(Array::new(name, 1, Values::ints(v.collect())));
    }
    for (k, (name, _)) in first.cell_scalars.iter().enumerate() {
        let v = pieces.iter().flat_map(|p| p.cell_scalars[k].1).copied();
        cell_data.push(Array::new(name, 1, Values::F64(v.collect())));
    }
    let mut conn = Vec::new();
    let mut offsets = Vec::new();
    let mut types = Vec::new();
    let mut rows = Vec::new();
    let (mut base, mut end) = (0, 0);
    for p in pieces {
        conn.extend(p.connectivity.iter().map(|&n| (n + base) as i64));
        for _ in p.tags {
            end += p.nodes_per_cell;
            offsets.push(end as i64);
            types.push(p.cell_type);
            rows.push(p.nodes_per_cell);
        }
        base += p.positions.len();
    }
    let mut connectivity = Array::new("connectivity", 1, Values::ints(conn));
    connectivity.rows = Some(rows);
    Merged {
        points: base,
        cells: offsets.len(),
        point_data,
        cell_data,
        positions: Array::new("Points", 3, Values::F64(flat3(pieces, |p| p.positions))),
        cells_arrays: [
            connectivity,
            Array::new("offsets", 1, Values::ints(offsets)),
            Array::new("types", 1, Values::U8(types)),
        ],
    }
}

/// The 3-vectors `get` picks from every piece, concatenated and flattened.
fn flat3<'a>(pieces: &[VtuPiece<'a>], get: impl Fn(&VtuPiece<'a>) -> &'a [[f64; 3]]) -> Vec<f64> {
    pieces
        .iter()
        .flat_map(|p| get(p).iter().flatten().copied())
        .collect()
}

/// The XML text and, for the binary encodings, the appended block being built.
struct Writer {
    encoding: VtuEncoding,
    xml: String,
    appended: Vec<u8>,
}

impl Writer {
    fn new(encoding: VtuEncoding) -> Self {
        let compressor = if encoding == VtuEncoding::Zlib {
            " compressor=\"vtkZLibDataCompressor\""
        } else {
            ""
        };
        let xml = format!(
            "<?xml version=\"1.0\"?>\n<VTKFile type=\"UnstructuredGrid\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\"{compressor}>\n<UnstructuredGrid>\n"
        );
        Writer {
            encoding,
            xml,
            appended: Vec::new(),
        }
    }

    fn piece(&mut self, m: &Merged) {
        let _ = writeln!(
            self.xml,
            "<Piece NumberOfPoints=\"{}\" NumberOfCells=\"{}\">",
            m.points, m.cells
        );
        if !m.point_data.is_empty() {
            let vectors = m.point_data.iter().find(|a| a.components == 3);
            let attr = vectors.map_or(String::new(), |a| {
                format!(" Vectors=\"{}\"", xml_escape(&a.name))
            });
            let _ = writeln!(self.xml, "<PointData{attr}>");
            for a in &m.point_data {
                self.array(a);
            }
            self.xml.push_str("</PointData>\n");
        }
        self.xml.push_str("<CellData Scalars=\"tag\">\n");
        for a in &m.cell_data {
            self.array(a);
        }
        self.xml.push_str("</CellData>\n<Points>\n");
        self.array(&m.positions);
        self.xml.push_str("</Points>\n<Cells>\n");
        for a in &m.cells_arrays {
            self.array(a);
        }
        self.xml.push_str("</Cells>\n</Piece>\n");
    }

    /// One `DataArray`: inline text, or a reference into the appended block.
    fn array(&mut self, a: &Array) {
        let components = if a.components == 1 {
            String::new()
        } else {
            format!(" NumberOfComponents=\"{}\"", a.components)
        };
        let head = format!(
            "<DataArray type=\"{}\" Name=\"{}\"{components}",
            a.values.type_name(),
            xml_escape(&a.name)
        );
        if self.encoding == VtuEncoding::Ascii {
            let _ = writeln!(self.xml, "{head} format=\"ascii\">");
            let rows = a
                .rows
                .clone()
                .unwrap_or_else(|| vec![a.components.max(1); a.values.len() / a.components.max(1)]);
            let mut i = 0;
            for r in rows {
                for k in 0..r {
                    if k > 0 {
                        self.xml.push(' ');
                    }
                    a.values.push_text(&mut self.xml, i + k);
                }
                self.xml.push('\n');
                i += r;
            }
            self.xml.push_str("</DataArray>\n");
        } else {
            let _ = writeln!(
                self.xml,
                "{head} format=\"appended\" offset=\"{}\"/>",
                self.appended.len()
            );
            let bytes = a.values.bytes();
            if self.encoding == VtuEncoding::Zlib {
                push_zlib_blocks(&mut self.appended, &bytes);
            } else {
                self.appended
                    .extend_from_slice(&(bytes.len() as u64).to_le_bytes());
                self.appended.extend_from_slice(&bytes);
            }
        }
    }

    fn finish(mut self) -> Vec<u8> {
        self.xml.push_str("</UnstructuredGrid>\n");
        let mut out = self.xml.into_bytes();
        if self.encoding != VtuEncoding::Ascii {
            out.extend_from_slice(b"<AppendedData encoding=\"raw\">\n_");
            out.extend_from_slice(&self.appended);
            out.extend_from_slice(b"\n</AppendedData>\n");
        }
        out.extend_from_slice(b"</VTKFile>\n");
        out
    }
}

/// Appends `bytes` in VTK's compressed-block layout: the UInt64 header `[blocks, ZLIB_BLOCK,
/// size of the last block (0 when full), compressed size of each block]`, then the blocks,
/// each a zlib stream.
fn push_zlib_blocks(out: &mut Vec<u8>, bytes: &[u8]) {
    let blocks: Vec<Vec<u8>> = bytes
        .chunks(ZLIB_BLOCK)
        .map(|b| miniz_oxide::deflate::compress_to_vec_zlib(b, ZLIB_LEVEL))
        .collect();
    let last = bytes.len() % ZLIB_BLOCK;
    let header = [blocks.len(), ZLIB_BLOCK, last]
        .into_iter()
        .chain(blocks.iter().map(Vec::len));
    for h in header {
        out.extend_from_slice(&(h as u64).to_le_bytes());
    }
    for b in &blocks {
        out.extend_from_slice(b);
    }
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

/// ParaView collection file listing `(time, file)` pairs.
pub fn encode_pvd(frames: &[(f64, String)]) -> String {
    let mut s = String::from(
        "<?xml version=\"1.0\"?>\n<VTKFile type=\"Collection\" version=\"1.0\">\n<Collection>\n",
    );
    for (t, f) in frames {
        s.push_str(&format!(
            "<DataSet timestep=\"{t:e}\" part=\"0\" file=\"{}\"/>\n",
            xml_escape(f)
        ));
    }
    s.push_str("</Collection>\n</VTKFile>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::vtu_read::{parse_vtu_grid, VtuValues};

    fn piece<'a>(positions: &'a [[f64; 3]], conn: &'a [usize]) -> VtuPiece<'a> {
        VtuPiece::new(10, 4, conn, &[7], positions)
    }

    fn ascii(pieces: &[VtuPiece<'_>]) -> Result<String, VtuError> {
        encode_vtu_pieces(pieces, VtuEncoding::Ascii).map(|b| String::from_utf8(b).unwrap())
    }

    const TET: [[f64; 3]; 4] = [[0.0; 3], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];

    #[test]
    fn arrays_that_do_not_fit_are_errors_naming_what() {
        let x = TET;
        let ok = ascii(&[piece(&x, &[0, 1, 2, 3])]).expect("valid");
        assert!(ok.contains("Name=\"tag\" format=\"ascii\">\n7\n</DataArray>"));
        let e = ascii(&[piece(&x, &[0, 1, 2, 4])]).unwrap_err();
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
        let e = ascii(&[piece(&x, &[0, 1, 2])]).unwrap_err();
        assert!(
            e.to_string().starts_with("connectivity has 3 values"),
            "{e}"
        );
        let mut bad = x;
        bad[2][1] = f64::NAN;
        let e = ascii(&[piece(&bad, &[0, 1, 2, 3])]).unwrap_err();
        assert!(matches!(e, VtuError::NonFinite { node: 2, .. }), "{e}");
        let v = [[0.0; 3]; 3];
        let fields = [("velocity", &v[..])];
        let mut p = piece(&x, &[0, 1, 2, 3]);
        p.point_fields = &fields;
        let e = ascii(&[p]).unwrap_err();
        assert!(
            e.to_string()
                .contains("point field 'velocity' has 3 values"),
            "{e}"
        );
        let ids = [1i64, 2];
        let ints = [("node", &ids[..])];
        let mut r = piece(&x, &[0, 1, 2, 3]);
        r.point_ints = &ints;
        let e = ascii(&[r]).unwrap_err();
        assert!(
            e.to_string()
                .contains("point array 'node' has 2 values for 4 nodes"),
            "{e}"
        );
        let q = piece(&x, &[0, 1, 2, 3]);
        let e = ascii(&[q, p]).unwrap_err();
        assert!(matches!(e, VtuError::Arrays { piece: 1 }), "{e}");
        let pvd = encode_pvd(&[(0.5, "frame_00001.vtu".into())]);
        assert!(pvd.contains("timestep=\"5e-1\" part=\"0\" file=\"frame_00001.vtu\""));
    }

    /// Two entries (a tet and a hex) with every kind of array, in one piece.
    fn two_entries<R>(f: impl FnOnce(&[VtuPiece<'_>]) -> R) -> R {
        let hex: Vec<[f64; 3]> = (0..8)
            .map(|a| {
                [
                    (a & 1) as f64 + 0.25,
                    ((a >> 1) & 1) as f64,
                    (a >> 2) as f64 * 1e-7,
                ]
            })
            .collect();
        let v0 = [[0.1, -2.0, 1.0 / 3.0]; 4];
        let v1 = [[5e-300, 1e300, -0.0]; 8];
        let (n0, n1) = ([0i64, 1, 2, 3], [4i64, 5, 6, 7, 8, 9, 10, 11]);
        let (b0, b1) = ([0i64; 4], [1i64; 8]);
        let (c0, c1) = ([0i64], [1i64]);
        let (e0, e1) = ([2.5e6], [f64::MAX]);
        let pf0 = [("velocity", &v0[..])];
        let pf1 = [("velocity", &v1[..])];
        let pi0 = [("node", &n0[..]), ("body", &b0[..])];
        let pi1 = [("node", &n1[..]), ("body", &b1[..])];
        let ci0 = [("body", &c0[..])];
        let ci1 = [("body", &c1[..])];
        let cs0 = [("youngs_modulus", &e0[..])];
        let cs1 = [("youngs_modulus", &e1[..])];
        let hex_conn: Vec<usize> = (0..8).collect();
        let pieces = [
            VtuPiece {
                point_fields: &pf0,
                point_ints: &pi0,
                cell_ints: &ci0,
                cell_scalars: &cs0,
                ..VtuPiece::new(10, 4, &[0, 1, 2, 3], &[3], &TET)
            },
            VtuPiece {
                point_fields: &pf1,
                point_ints: &pi1,
                cell_ints: &ci1,
                cell_scalars: &cs1,
                ..VtuPiece::new(12, 8, &hex_conn, &[-4], &hex)
            },
        ];
        f(&pieces)
    }

    /// Writer → reader gives back every number exactly, in each encoding.
    #[test]
    fn every_encoding_round_trips_exactly() {
        for enc in [VtuEncoding::Ascii, VtuEncoding::Binary, VtuEncoding::Zlib] {
            let (bytes, want) = two_entries(|p| {
                let pts: Vec<[f64; 3]> =
                    p.iter().flat_map(|q| q.positions.iter().copied()).collect();
                let vel: Vec<f64> = p
                    .iter()
                    .flat_map(|q| q.point_fields[0].1.iter().flatten().copied())
                    .collect();
                (encode_vtu_pieces(p, enc).expect("encode"), (pts, vel))
            });
            let g = parse_vtu_grid(&bytes).unwrap_or_else(|e| panic!("{enc:?}: {e}"));
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(g.points.as_flattened()),
                bits(want.0.as_flattened()),
                "{enc:?}"
            );
            assert_eq!(g.types, vec![10, 12]);
            assert_eq!(g.cells, vec![0..4, 4..12]);
            assert_eq!(g.connectivity, (0..12).collect::<Vec<_>>());
            let names: Vec<&str> = g.point_data.iter().map(|a| a.name.as_str()).collect();
            assert_eq!(names, ["velocity", "node", "body"], "{enc:?}");
            assert_eq!(bits(&g.point_data[0].values.to_f64()), bits(&want.1));
            assert_eq!(g.point_data[0].components, 3);
            assert_eq!(g.point_data[1].values, VtuValues::Int((0..12).collect()));
            let cells: Vec<(&str, &VtuValues)> = g
                .cell_data
                .iter()
                .map(|a| (a.name.as_str(), &a.values))
                .collect();
            assert_eq!(
                cells,
                [
                    ("tag", &VtuValues::Int(vec![3, -4])),
                    ("body", &VtuValues::Int(vec![0, 1])),
                    ("youngs_modulus", &VtuValues::Float(vec![2.5e6, f64::MAX])),
                ],
                "{enc:?}"
            );
        }
    }

    /// The bytes VTK's readers key on: the root element's attributes, `format="appended"`
    /// with increasing offsets, the `_` marker, and each array's UInt64 byte count (raw) or
    /// compression header (zlib).
    #[test]
    fn binary_headers_follow_vtks_appended_layout() {
        let x = TET;
        let raw = encode_vtu_pieces(&[piece(&x, &[0, 1, 2, 3])], VtuEncoding::Binary).unwrap();
        let text = String::from_utf8_lossy(&raw);
        assert!(text.starts_with("<?xml version=\"1.0\"?>\n<VTKFile type=\"UnstructuredGrid\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">\n"));
        assert!(!text.contains("compressor"));
        assert!(text
            .contains("<DataArray type=\"Int32\" Name=\"tag\" format=\"appended\" offset=\"0\"/>"));
        // tag: 8 bytes of header + 4 of data (Int32: it fits); then Points at 12.
        assert!(text.contains("<DataArray type=\"Float64\" Name=\"Points\" NumberOfComponents=\"3\" format=\"appended\" offset=\"12\"/>"), "{text}");
        let marker = b"<AppendedData encoding=\"raw\">\n_";
        let at = raw.windows(marker.len()).position(|w| w == marker).unwrap() + marker.len();
        assert_eq!(&raw[at..at + 8], &4u64.to_le_bytes());
        assert_eq!(&raw[at + 8..at + 12], &7i32.to_le_bytes());
        assert_eq!(
            &raw[at + 12..at + 20],
            &96u64.to_le_bytes(),
            "4 points × 3 × 8 bytes"
        );
        assert!(raw.ends_with(b"\n</AppendedData>\n</VTKFile>\n"));

        let z = encode_vtu_pieces(&[piece(&x, &[0, 1, 2, 3])], VtuEncoding::Zlib).unwrap();
        let zt = String::from_utf8_lossy(&z);
        assert!(zt.contains("header_type=\"UInt64\" compressor=\"vtkZLibDataCompressor\">"));
        let at = z.windows(marker.len()).position(|w| w == marker).unwrap() + marker.len();
        let word = |k: usize| u64::from_le_bytes(z[at + 8 * k..at + 8 * k + 8].try_into().unwrap());
        // One block of 4 bytes (partial, so the last-block size is 4), then its zlib size.
        assert_eq!((word(0), word(1), word(2)), (1, ZLIB_BLOCK as u64, 4));
        let c = word(3) as usize;
        let block = &z[at + 32..at + 32 + c];
        assert_eq!(block[0], 0x78, "zlib stream header");
        let back = miniz_oxide::inflate::decompress_to_vec_zlib(block).unwrap();
        assert_eq!(back, 7i32.to_le_bytes());
        // A tag beyond 32 bits makes the array Int64.
        let wide = [1i64 << 40];
        let w = VtuPiece::new(10, 4, &[0, 1, 2, 3], &wide, &x);
        let wt = String::from_utf8(encode_vtu_pieces(&[w], VtuEncoding::Ascii).unwrap()).unwrap();
        assert!(
            wt.contains(
                "<DataArray type=\"Int64\" Name=\"tag\" format=\"ascii\">\n1099511627776\n"
            ),
            "{wt}"
        );
    }

    /// Arrays larger than one block are cut into full blocks and a partial last one; an
    /// exact multiple of the block size has a last-block size of 0, as VTK writes it.
    #[test]
    fn zlib_blocks_split_at_the_block_size() {
        for (n, blocks, last) in [
            (ZLIB_BLOCK * 2 + 5, 3, 5),
            (ZLIB_BLOCK * 2, 2, 0),
            (0, 0, 0),
        ] {
            let data: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
            let mut out = Vec::new();
            push_zlib_blocks(&mut out, &data);
            let word = |k: usize| u64::from_le_bytes(out[8 * k..8 * k + 8].try_into().unwrap());
            assert_eq!(
                (word(0), word(1), word(2)),
                (blocks, ZLIB_BLOCK as u64, last)
            );
            let mut at = 8 * (3 + blocks as usize);
            let mut back = Vec::new();
            for k in 0..blocks as usize {
                let c = word(3 + k) as usize;
                back.extend(
                    miniz_oxide::inflate::decompress_to_vec_zlib(&out[at..at + c]).unwrap(),
                );
                at += c;
            }
            assert_eq!(at, out.len());
            assert_eq!(back, data);
        }
    }
}
