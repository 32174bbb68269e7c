//! VTK unstructured grids: legacy `.vtk` (ASCII) read and write, XML `.vtu` (ASCII) write.
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
//! **XML writer** ([`write_vtu`]): `VTKFile type="UnstructuredGrid" version="1.0"` with ASCII
//! `DataArray`s: `Points` (Float64), `Cells` (`connectivity` and `offsets` Int64, `types`
//! UInt8), point data arrays of 3-vectors (Float64), the region tag (`tag`, Int64) and any
//! cell scalars (Float64). ParaView reads both files directly.
//!
//! Errors follow the other readers: [`MeshError::Parse`] with the line number, no panics on
//! malformed input.

use super::readers::{clip, int_tag, num, real, values};
use super::writers::{check_structure, file_order, push_point, push_real, save};
use super::{ElementKind, Mesh, MeshError, HEX_VTK_TO_LEX};
use std::fmt::Write as _;
use std::path::Path;

/// Cell-data array names taken as the region tag, compared case-insensitively.
pub const TAG_ARRAY_NAMES: [&str; 7] = [
    "tag",
    "region",
    "gmsh:physical",
    "medit:ref",
    "cellentityids",
    "material",
    "materialids",
];

const VTK_TETRA: u8 = 10;
const VTK_VOXEL: u8 = 11;
const VTK_HEXAHEDRON: u8 = 12;

/// Name of a VTK volume cell type that is not supported, if `t` is one.
fn other_cell(t: i64) -> Option<&'static str> {
    Some(match t {
        13 => "wedge",
        14 => "pyramid",
        15 => "pentagonal prism",
        16 => "hexagonal prism",
        24 => "quadratic tetrahedron",
        25 => "quadratic hexahedron",
        26 => "quadratic wedge",
        27 => "quadratic pyramid",
        29 => "triquadratic hexahedron",
        42 => "polyhedron",
        71..=81 => "Lagrange or Bezier cell",
        _ => return None,
    })
}

/// Token stream of a legacy VTK file body (from line 4), with line numbers.
struct Tokens<'a> {
    path: &'a str,
    toks: Vec<(usize, &'a str)>,
    pos: usize,
}

impl<'a> Tokens<'a> {
    fn err(&self, line: usize, msg: impl Into<String>) -> MeshError {
        MeshError::Parse {
            path: self.path.to_string(),
            line,
            msg: msg.into(),
        }
    }

    /// Line of the current position (or of the last token at the end).
    fn line(&self) -> usize {
        self.toks
            .get(self.pos)
            .or(self.toks.last())
            .map_or(3, |t| t.0)
    }

    fn peek(&self) -> Option<&'a str> {
        self.toks.get(self.pos).map(|t| t.1)
    }

    fn next(&mut self, what: &str) -> Result<(usize, &'a str), MeshError> {
        match self.toks.get(self.pos) {
            Some(&t) => {
                self.pos += 1;
                Ok(t)
            }
            None => Err(self.err(
                self.line(),
                format!("unexpected end of file, expected {what}"),
            )),
        }
    }

    fn parse<T>(
        &mut self,
        what: &str,
        f: impl Fn(&str, &str) -> Result<T, String>,
    ) -> Result<T, MeshError> {
        let (ln, t) = self.next(what)?;
        f(t, what).map_err(|m| self.err(ln, m))
    }

    fn count(&mut self, what: &str) -> Result<usize, MeshError> {
        self.parse(what, num::<usize>)
    }

    /// Skips `n` value tokens (checking that they are not keywords of a new section).
    fn skip_values(&mut self, n: usize, what: &str) -> Result<(), MeshError> {
        for i in 0..n {
            let (ln, t) = self.next(&format!("value {} of {n} of {what}", i + 1))?;
            if t.starts_with(|c: char| c.is_ascii_alphabetic()) && !is_number_word(t) {
                return Err(self.err(
                    ln,
                    format!(
                        "expected value {} of {n} of {what}, found '{}' (count too large?)",
                        i + 1,
                        clip(t)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Reads a data type token and rejects string data, whose token count is not fixed.
    fn data_type(&mut self, what: &str) -> Result<(), MeshError> {
        let (ln, t) = self.next(&format!("data type of {what}"))?;
        if t.eq_ignore_ascii_case("string") || t.eq_ignore_ascii_case("utf8_string") {
            return Err(self.err(ln, format!("string arrays are not supported ({what})")));
        }
        Ok(())
    }

    /// Skips a VTK 5 `METADATA` block (`COMPONENT_NAMES` with `ncomp` names, `INFORMATION n`
    /// with `n` `NAME`/`DATA` line pairs) if one starts here.
    fn skip_metadata(&mut self, ncomp: usize) -> Result<(), MeshError> {
        if !self
            .peek()
            .is_some_and(|t| t.eq_ignore_ascii_case("METADATA"))
        {
            return Ok(());
        }
        self.pos += 1;
        loop {
            match self.peek() {
                Some(t) if t.eq_ignore_ascii_case("COMPONENT_NAMES") => {
                    self.pos += 1;
                    for _ in 0..ncomp {
                        self.next("component name")?;
                    }
                }
                Some(t) if t.eq_ignore_ascii_case("INFORMATION") => {
                    self.pos += 1;
                    let n = self.count("number of INFORMATION entries")?;
                    // Each entry is a `NAME ... LOCATION ...` line and a `DATA ...` line.
                    for _ in 0..n.saturating_mul(2) {
                        let (ln, _) = self.next("INFORMATION entry")?;
                        while self.toks.get(self.pos).is_some_and(|t| t.0 == ln) {
                            self.pos += 1;
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }
}

/// `nan`, `inf`, `infinity` (any case): words that are values, not keywords.
fn is_number_word(t: &str) -> bool {
    let t = t.trim_start_matches(['+', '-']);
    t.eq_ignore_ascii_case("nan")
        || t.eq_ignore_ascii_case("inf")
        || t.eq_ignore_ascii_case("infinity")
}

/// Cell connectivity as read: `(start, len)` into `conn` per cell.
struct Cells {
    conn: Vec<usize>,
    ranges: Vec<(usize, usize)>,
    line: usize,
}

fn read_cells(tk: &mut Tokens, version_major: u32, nn: usize) -> Result<Cells, MeshError> {
    let line = tk.line();
    let a = tk.count("number of cells (or offsets) after CELLS")?;
    let b = tk.count("connectivity size after CELLS")?;
    let idx = |tk: &mut Tokens, what: &str| -> Result<usize, MeshError> {
        let (ln, t) = tk.next(what)?;
        let i: usize = num(t, what).map_err(|m| tk.err(ln, m))?;
        if i >= nn {
            return Err(tk.err(
                ln,
                format!("point index {i} out of range (file has {nn} points)"),
            ));
        }
        Ok(i)
    };
    let new_layout =
        version_major >= 5 && tk.peek().is_some_and(|t| t.eq_ignore_ascii_case("OFFSETS"));
    let mut conn = Vec::with_capacity(b.min(1 << 20));
    let mut ranges = Vec::new();
    if new_layout {
        tk.pos += 1;
        tk.data_type("OFFSETS")?;
        let mut offsets = Vec::with_capacity(a.min(1 << 22));
        for i in 0..a {
            let (ln, t) = tk.next(&format!("offset {} of {a}", i + 1))?;
            let o: usize = num(t, "offset").map_err(|m| tk.err(ln, m))?;
            if o > b || offsets.last().is_some_and(|&p| o < p) || (i == 0 && o != 0) {
                return Err(tk.err(
                    ln,
                    format!("offset {o} is not a non-decreasing index into {b} connectivity entries starting at 0"),
                ));
            }
            offsets.push(o);
        }
        if offsets.last().is_some_and(|&o| o != b) {
            return Err(tk.err(
                tk.line(),
                format!("last offset must equal the connectivity size {b}"),
            ));
        }
        let (ln, t) = tk.next("'CONNECTIVITY'")?;
        if !t.eq_ignore_ascii_case("CONNECTIVITY") {
            return Err(tk.err(ln, format!("expected 'CONNECTIVITY', found '{}'", clip(t))));
        }
        tk.data_type("CONNECTIVITY")?;
        for i in 0..b {
            conn.push(idx(tk, &format!("connectivity entry {} of {b}", i + 1))?);
        }
        ranges.extend(offsets.windows(2).map(|w| (w[0], w[1] - w[0])));
    } else {
        let mut read = 0usize;
        for c in 0..a {
            let (ln, t) = tk.next(&format!("cell {} of {a}", c + 1))?;
            let k: usize = num(t, "number of points of a cell").map_err(|m| tk.err(ln, m))?;
            read = read.saturating_add(k).saturating_add(1);
            if read > b {
                return Err(tk.err(
                    ln,
                    format!("cells use more than the {b} values declared after CELLS"),
                ));
            }
            ranges.push((conn.len(), k));
            for i in 0..k {
                conn.push(idx(
                    tk,
                    &format!("point {} of {k} of cell {}", i + 1, c + 1),
                )?);
            }
        }
        if read != b {
            return Err(tk.err(
                tk.line(),
                format!("CELLS declares {b} values but the {a} cells use {read}"),
            ));
        }
    }
    Ok(Cells { conn, ranges, line })
}

/// Skips one attribute section or returns the region tags if it is a tag array.
/// `n` is the number of points or cells of the enclosing `*_DATA` block.
fn attribute(
    tk: &mut Tokens,
    key: &str,
    n: usize,
    cell: bool,
) -> Result<Option<Vec<i64>>, MeshError> {
    let is_tag = |name: &str| cell && TAG_ARRAY_NAMES.iter().any(|t| t.eq_ignore_ascii_case(name));
    let read_tags = |tk: &mut Tokens, name: &str| -> Result<Vec<i64>, MeshError> {
        let mut v = Vec::with_capacity(n.min(1 << 22));
        for i in 0..n {
            let (ln, t) = tk.next(&format!("value {} of {n} of '{}'", i + 1, clip(name)))?;
            v.push(int_tag(t, "region tag").map_err(|m| tk.err(ln, m))?);
        }
        Ok(v)
    };
    match key.to_ascii_uppercase().as_str() {
        "SCALARS" => {
            let (_, name) = tk.next("array name after SCALARS")?;
            tk.data_type(name)?;
            let mut ncomp = 1;
            if tk.peek().is_some_and(|t| t.parse::<usize>().is_ok()) {
                ncomp = tk.count("number of components")?;
                if !(1..=4).contains(&ncomp) {
                    return Err(tk.err(
                        tk.line(),
                        format!("SCALARS must have 1 to 4 components, found {ncomp}"),
                    ));
                }
            }
            if tk
                .peek()
                .is_some_and(|t| t.eq_ignore_ascii_case("LOOKUP_TABLE"))
            {
                tk.pos += 1;
                tk.next("lookup table name")?;
            }
            let out = if is_tag(name) && ncomp == 1 {
                Some(read_tags(tk, name)?)
            } else {
                tk.skip_values(n.saturating_mul(ncomp), name)?;
                None
            };
            tk.skip_metadata(ncomp)?;
            Ok(out)
        }
        k @ ("VECTORS" | "NORMALS" | "TENSORS" | "TENSORS6") => {
            let (_, name) = tk.next(&format!("array name after {k}"))?;
            tk.data_type(name)?;
            let w = match k {
                "TENSORS" => 9,
                "TENSORS6" => 6,
                _ => 3,
            };
            tk.skip_values(n.saturating_mul(w), name)?;
            tk.skip_metadata(w)?;
            Ok(None)
        }
        "TEXTURE_COORDINATES" => {
            let (_, name) = tk.next("array name")?;
            let dim = tk.count("texture dimension")?;
            tk.data_type(name)?;
            tk.skip_values(n.saturating_mul(dim), name)?;
            tk.skip_metadata(dim)?;
            Ok(None)
        }
        "COLOR_SCALARS" => {
            let (_, name) = tk.next("array name")?;
            let w = tk.count("number of color components")?;
            tk.skip_values(n.saturating_mul(w), name)?;
            Ok(None)
        }
        "LOOKUP_TABLE" => {
            let (_, name) = tk.next("lookup table name")?;
            let size = tk.count("lookup table size")?;
            tk.skip_values(size.saturating_mul(4), name)?;
            Ok(None)
        }
        "GLOBAL_IDS" | "PEDIGREE_IDS" => {
            let (_, name) = tk.next("array name")?;
            tk.data_type(name)?;
            tk.skip_values(n, name)?;
            tk.skip_metadata(1)?;
            Ok(None)
        }
        "FIELD" => {
            tk.next("field name")?;
            let arrays = tk.count("number of field arrays")?;
            let mut found = None;
            for _ in 0..arrays {
                let (_, name) = tk.next("field array name")?;
                let nc = tk.count("number of components")?;
                let nt = tk.count("number of tuples")?;
                tk.data_type(name)?;
                if found.is_none() && is_tag(name) && nc == 1 && nt == n {
                    found = Some(read_tags(tk, name)?);
                } else {
                    tk.skip_values(nc.saturating_mul(nt), name)?;
                }
                tk.skip_metadata(nc)?;
            }
            Ok(found)
        }
        _ => Err(tk.err(
            tk.toks.get(tk.pos.saturating_sub(1)).map_or(1, |t| t.0),
            format!("unknown or unsupported keyword '{}'", clip(key)),
        )),
    }
}

/// Parses a legacy ASCII VTK unstructured grid given as text (see the module docs).
pub fn parse_vtk(text: &str, path: &str) -> Result<Mesh, MeshError> {
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
                let n = tk.count("number of points")?;
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
                cells = Some(read_cells(&mut tk, version_major, p.len())?);
            }
            "CELL_TYPES" => {
                let n = tk.count("number of cell types")?;
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
                if let Some(t) = attribute(&mut tk, k, n, is_cell)? {
                    if tags.is_none() {
                        tags = Some(t);
                    }
                }
            }
        }
    }

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
    }
    let Some(kind) = kind else {
        return Err(tk.err(
            tl,
            "file contains no tetrahedra (10), voxels (11) or hexahedra (12)".to_string(),
        ));
    };
    Ok(Mesh {
        kind,
        nodes: points,
        elements,
        tags: out_tags,
    })
}

fn vtk_cell_type(kind: ElementKind) -> u8 {
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

/// One `<Piece>` of a `.vtu` file: a single-kind mesh, its node positions, per-node
/// 3-vector arrays and per-element scalar arrays (see [`encode_vtu_pieces`]).
#[derive(Clone, Copy, Debug)]
pub struct VtuPiece<'a> {
    pub mesh: &'a Mesh,
    pub positions: &'a [[f64; 3]],
    pub point_fields: &'a [(&'a str, &'a [[f64; 3]])],
    pub cell_scalars: &'a [(&'a str, &'a [f64])],
}

/// VTK XML unstructured-grid text of `mesh` with node positions `positions` (e.g. a deformed
/// frame; `&mesh.nodes` for the rest state), per-node 3-vector arrays and per-element scalar
/// arrays. Errors when an array length does not match, a position is not finite, or the mesh
/// fails [`check_structure`].
pub fn encode_vtu(
    mesh: &Mesh,
    positions: &[[f64; 3]],
    point_fields: &[(&str, &[[f64; 3]])],
    cell_scalars: &[(&str, &[f64])],
) -> Result<String, MeshError> {
    encode_vtu_pieces(&[VtuPiece {
        mesh,
        positions,
        point_fields,
        cell_scalars,
    }])
}

/// VTK XML unstructured-grid text of several meshes (e.g. the bodies of a scene, possibly of
/// different element kinds) as ONE `<Piece>`: points concatenated in entry order, each
/// entry's connectivity shifted by the points before it, cell types per entry's kind, and
/// every array concatenated the same way (the `tag` cell array keeps each entry's tags).
/// One piece because readers such as meshio keep only the last of several pieces. Every
/// entry must carry the same array names in the same order.
pub fn encode_vtu_pieces(pieces: &[VtuPiece<'_>]) -> Result<String, MeshError> {
    let mut out = String::from("<?xml version=\"1.0\"?>\n<VTKFile type=\"UnstructuredGrid\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">\n<UnstructuredGrid>\n");
    let names = |q: &VtuPiece<'_>| -> (Vec<String>, Vec<String>) {
        (
            q.point_fields.iter().map(|f| f.0.to_string()).collect(),
            q.cell_scalars.iter().map(|f| f.0.to_string()).collect(),
        )
    };
    for (k, p) in pieces.iter().enumerate() {
        if k > 0 && names(p) != names(&pieces[0]) {
            return Err(MeshError::Invalid(format!(
                "vtu piece {k} has different arrays than piece 0"
            )));
        }
        check_piece(p)?;
    }
    if !pieces.is_empty() {
        encode_merged(&mut out, pieces);
    }
    out.push_str("</UnstructuredGrid>\n</VTKFile>\n");
    Ok(out)
}

fn check_piece(piece: &VtuPiece<'_>) -> Result<(), MeshError> {
    let VtuPiece {
        mesh,
        positions,
        point_fields,
        cell_scalars,
    } = *piece;
    check_structure(mesh)?;
    let nn = mesh.num_nodes();
    let ne = mesh.num_elements();
    if positions.len() != nn {
        return Err(MeshError::Invalid(format!(
            "{} positions for a mesh of {nn} nodes",
            positions.len()
        )));
    }
    if let Some(i) = positions
        .iter()
        .position(|p| p.iter().any(|c| !c.is_finite()))
    {
        return Err(MeshError::BadNode {
            node: i,
            msg: format!("non-finite position {:?}", positions[i]),
        });
    }
    for (name, f) in point_fields {
        if f.len() != nn {
            return Err(MeshError::Invalid(format!(
                "point field '{name}' has {} values for {nn} nodes",
                f.len()
            )));
        }
    }
    for (name, f) in cell_scalars {
        if f.len() != ne {
            return Err(MeshError::Invalid(format!(
                "cell scalar '{name}' has {} values for {ne} elements",
                f.len()
            )));
        }
    }
    Ok(())
}

/// One `<Piece>` of checked, non-empty `pieces` with the same array names.
fn encode_merged(out: &mut String, pieces: &[VtuPiece<'_>]) {
    let nn: usize = pieces.iter().map(|p| p.mesh.num_nodes()).sum();
    let ne: usize = pieces.iter().map(|p| p.mesh.num_elements()).sum();
    let first = &pieces[0];
    let _ = writeln!(
        out,
        "<Piece NumberOfPoints=\"{nn}\" NumberOfCells=\"{ne}\">"
    );
    if !first.point_fields.is_empty() {
        let _ = writeln!(
            out,
            "<PointData Vectors=\"{}\">",
            xml_escape(first.point_fields[0].0)
        );
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
        for t in &p.mesh.tags {
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
        for e in 0..p.mesh.num_elements() {
            let ids: Vec<String> = file_order(p.mesh, e)
                .iter()
                .map(|n| (n + base).to_string())
                .collect();
            let _ = writeln!(out, "{}", ids.join(" "));
        }
        base += p.mesh.num_nodes();
    }
    out.push_str("</DataArray>\n<DataArray type=\"Int64\" Name=\"offsets\" format=\"ascii\">\n");
    let mut offset = 0;
    for p in pieces {
        let nv = p.mesh.kind.nodes();
        for _ in 0..p.mesh.num_elements() {
            offset += nv;
            let _ = writeln!(out, "{offset}");
        }
    }
    out.push_str("</DataArray>\n<DataArray type=\"UInt8\" Name=\"types\" format=\"ascii\">\n");
    for p in pieces {
        let ty = vtk_cell_type(p.mesh.kind);
        for _ in 0..p.mesh.num_elements() {
            let _ = writeln!(out, "{ty}");
        }
    }
    out.push_str("</DataArray>\n</Cells>\n</Piece>\n");
}

/// Writes a `.vtu` volume frame (see [`encode_vtu`]) atomically.
pub fn write_vtu(
    path: &Path,
    mesh: &Mesh,
    positions: &[[f64; 3]],
    point_fields: &[(&str, &[[f64; 3]])],
    cell_scalars: &[(&str, &[f64])],
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

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/meshes")
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
