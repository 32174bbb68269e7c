//! Hand-written readers for volumetric mesh files.
//!
//! [`read_mesh`] picks the format from the file name:
//!
//! - **TetGen** `.node` + `.ele` (the path may name either file, or the common stem such as
//!   `out.1`). `.node`: header `<#points> 3 [<#attributes> [<boundary-marker flag>]]`, then one
//!   line `<id> x y z [attributes...] [marker]` per point, numbered consecutively from 0 or 1
//!   (the first id decides which). `.ele`: header `<#tets> 4 [<#attributes>]`, then
//!   `<id> n0 n1 n2 n3 [attributes...]`; the first attribute (TetGen's region attribute, which
//!   must be integral) becomes the tag. `#` starts a comment. Only 4-node tets are accepted.
//! - **gmsh** `.msh`, ASCII versions 2.2 (also 2.0/2.1, same layout) and 4.1. Nodes are
//!   matched by tag (tags need not be contiguous). 4-node tetrahedra (type 4) and 8-node
//!   hexahedra (type 5, converted from gmsh/VTK to lexicographic order with
//!   [`HEX_VTK_TO_LEX`]) are read; points, lines, triangles and quads are ignored; other
//!   volume elements are an error. Region tag: v2.2 the first element tag (the physical
//!   group), v4.1 the first physical group of the element's volume entity from `$Entities`, or
//!   the entity tag when there is none. Binary files are rejected with a clear message.
//! - **MEDIT** `.mesh` (ASCII; keywords case-insensitive, `#` comments, 1-based indices):
//!   `Vertices` (`x y z ref`), `Tetrahedra` (`v1..v4 ref`) and `Hexahedra` (`v1..v8 ref`,
//!   ordered like VTK) with the reference id as tag. Surface keywords (`Triangles`, `Edges`,
//!   `Corners`, ...) are skipped. Each record must sit on one line, as all common writers do.
//!
//! - **legacy VTK** `.vtk` and **DiffPD** `.bin`: see [`crate::mesh::vtk`] and
//!   [`crate::mesh::diffpd_bin`].
//!
//! The readers return the mesh as stored: they do not reorient or validate elements (run
//! [`crate::mesh::validate::validate_and_fix`]) but guarantee that every node index is in
//! range, that coordinates are finite and that the file has exactly one element type.
//!
//! Every syntax problem is [`MeshError::Parse`] with the 1-based line number and what was
//! expected there; malformed or truncated input never panics. Files are decoded as UTF-8 with
//! invalid bytes replaced, so binary garbage ends in an ordinary parse error.

use super::{ElementKind, Mesh, MeshError, MeshFormat, HEX_VTK_TO_LEX};
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Reads a tet or hex mesh, choosing the format by extension: `.node`/`.ele` (or a stem with a
/// `<stem>.node` next to it) → TetGen, `.msh` → gmsh ASCII 2.2/4.1, `.mesh` → MEDIT ASCII,
/// `.vtk` → legacy VTK ASCII unstructured grid ([`crate::mesh::vtk`]), `.bin` → DiffPD binary
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
            super::vtk::parse_vtk(&read_text(path)?, &display(path))?,
            source(format, Some(0)),
        )),
        MeshFormat::DiffpdBin => {
            let bytes = std::fs::read(path).map_err(|err| MeshError::Io {
                path: display(path),
                err,
            })?;
            Ok((
                super::diffpd_bin::parse_bin(&bytes, &display(path))?,
                source(format, Some(0)),
            ))
        }
        MeshFormat::Vtu => Err(MeshError::Format {
            path: display(path),
            msg: ".vtu files can be written but not read; use legacy .vtk for input".into(),
        }),
    }
}

pub(super) fn display(path: &Path) -> String {
    path.display().to_string()
}

/// `path` with `suffix` appended to the file name (`out.1` + `.node` → `out.1.node`).
pub(super) fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s: OsString = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

pub(super) fn read_text(path: &Path) -> Result<String, MeshError> {
    let bytes = std::fs::read(path).map_err(|source| MeshError::Io {
        path: display(path),
        err: source,
    })?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A token for an error message: at most 40 characters, control characters escaped.
pub(super) fn clip(tok: &str) -> String {
    let mut s: String = tok.chars().take(40).flat_map(char::escape_debug).collect();
    if tok.chars().count() > 40 {
        s.push('…');
    }
    s
}

pub(super) fn num<T: FromStr>(tok: &str, what: &str) -> Result<T, String> {
    tok.parse::<T>()
        .map_err(|_| format!("expected {what}, found '{}'", clip(tok)))
}

pub(super) fn real(tok: &str, what: &str) -> Result<f64, String> {
    let v: f64 = num(tok, what)?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("{what} must be finite, found '{}'", clip(tok)))
    }
}

pub(super) fn point(t: &[&str]) -> Result<[f64; 3], String> {
    Ok([
        real(t[0], "x coordinate")?,
        real(t[1], "y coordinate")?,
        real(t[2], "z coordinate")?,
    ])
}

/// An integer tag written as an integer or as an integral real (`2`, `2.0`, `-1e0`).
pub(super) fn int_tag(tok: &str, what: &str) -> Result<i64, String> {
    if let Ok(v) = tok.parse::<i64>() {
        return Ok(v);
    }
    match tok.parse::<f64>() {
        Ok(v) if v.is_finite() && v.fract() == 0.0 && v.abs() <= 9.0e15 => Ok(v as i64),
        _ => Err(format!("expected integer {what}, found '{}'", clip(tok))),
    }
}

/// "1 value" / "3 values".
pub(super) fn values(n: usize) -> String {
    if n == 1 {
        "1 value".into()
    } else {
        format!("{n} values")
    }
}

/// Line reader over a whole file that skips blank (and comment) lines and remembers line
/// numbers; it also hands out single tokens for the free-format parts of MEDIT.
struct Cursor<'a> {
    path: &'a str,
    lines: std::iter::Enumerate<std::str::Lines<'a>>,
    comment: Option<char>,
    /// Line number of the last line read (0 before the first).
    last: usize,
    /// Unconsumed tokens of the current line in token mode.
    toks: Vec<&'a str>,
    pos: usize,
}

type Line<'a> = (usize, Vec<&'a str>);

impl<'a> Cursor<'a> {
    fn new(text: &'a str, path: &'a str, comment: Option<char>) -> Self {
        Cursor {
            path,
            lines: text.lines().enumerate(),
            comment,
            last: 0,
            toks: Vec::new(),
            pos: 0,
        }
    }

    fn err(&self, line: usize, msg: impl Into<String>) -> MeshError {
        MeshError::Parse {
            path: self.path.to_string(),
            line,
            msg: msg.into(),
        }
    }

    fn at<T>(&self, line: usize, r: Result<T, String>) -> Result<T, MeshError> {
        r.map_err(|m| self.err(line, m))
    }

    fn eof(&self, what: &str) -> MeshError {
        self.err(
            self.last.max(1),
            format!("unexpected end of file, expected {what}"),
        )
    }

    /// Next line with at least one token (after removing comments), with its number.
    /// Drops any unconsumed tokens of the current line.
    fn line(&mut self) -> Option<Line<'a>> {
        self.toks.clear();
        self.pos = 0;
        for (i, l) in self.lines.by_ref() {
            self.last = i + 1;
            let l = match self.comment {
                Some(c) => l.split(c).next().unwrap_or(""),
                None => l,
            };
            let t: Vec<&str> = l.split_whitespace().collect();
            if !t.is_empty() {
                return Some((i + 1, t));
            }
        }
        None
    }

    /// Next line, or an "unexpected end of file, expected {what}" error.
    fn need(&mut self, what: impl FnOnce() -> String) -> Result<Line<'a>, MeshError> {
        match self.line() {
            Some(l) => Ok(l),
            None => Err(self.eof(&what())),
        }
    }

    /// Next line, which must have exactly `n` tokens.
    fn need_n(&mut self, n: usize, what: &str) -> Result<Line<'a>, MeshError> {
        let (ln, t) = self.need(|| what.to_string())?;
        if t.len() != n {
            return Err(self.err(
                ln,
                format!("expected {what} ({}), found {}", values(n), values(t.len())),
            ));
        }
        Ok((ln, t))
    }

    /// Next token, possibly from a following line.
    fn token(&mut self) -> Option<(usize, &'a str)> {
        loop {
            if let Some(&t) = self.toks.get(self.pos) {
                self.pos += 1;
                return Some((self.last, t));
            }
            let (_, t) = self.line()?;
            self.toks = t;
        }
    }

    /// The first unconsumed token of the current line, if any.
    fn leftover(&self) -> Option<&'a str> {
        self.toks.get(self.pos).copied()
    }
}

// ---------------------------------------------------------------------------------------------
// TetGen
// ---------------------------------------------------------------------------------------------

/// Reads `<stem>.node` and `<stem>.ele`; also returns the numbering base (0 or 1).
fn read_tetgen(stem: &Path) -> Result<(Mesh, usize), MeshError> {
    let node_path = with_suffix(stem, ".node");
    let ele_path = with_suffix(stem, ".ele");
    let node_text = read_text(&node_path)?;
    let ele_text = read_text(&ele_path)?;
    let (nodes, base) = parse_tetgen_node(&node_text, &display(&node_path))?;
    let (elements, tags) = parse_tetgen_ele(&ele_text, &display(&ele_path), nodes.len(), base)?;
    Ok((
        Mesh {
            kind: ElementKind::Tet4,
            nodes,
            elements,
            tags,
        },
        base,
    ))
}

/// Parses a TetGen `.node`/`.ele` pair given as text (paths only label errors).
#[cfg(test)]
fn parse_tetgen(
    node_text: &str,
    node_path: &str,
    ele_text: &str,
    ele_path: &str,
) -> Result<Mesh, MeshError> {
    let (nodes, base) = parse_tetgen_node(node_text, node_path)?;
    let (elements, tags) = parse_tetgen_ele(ele_text, ele_path, nodes.len(), base)?;
    Ok(Mesh {
        kind: ElementKind::Tet4,
        nodes,
        elements,
        tags,
    })
}

/// Node positions and the numbering base (0 or 1) of a `.node` file.
fn parse_tetgen_node(text: &str, path: &str) -> Result<(Vec<[f64; 3]>, usize), MeshError> {
    let mut c = Cursor::new(text, path, Some('#'));
    let header = "header '<#points> <dimension> [<#attributes> [<boundary markers 0/1>]]'";
    let (hl, h) = c.need(|| header.to_string())?;
    if !(2..=4).contains(&h.len()) {
        return Err(c.err(hl, format!("expected {header}, found {}", values(h.len()))));
    }
    let n: usize = c.at(hl, num(h[0], "number of points"))?;
    let dim: usize = c.at(hl, num(h[1], "dimension"))?;
    if dim != 3 {
        return Err(c.err(hl, format!("dimension must be 3, found {dim}")));
    }
    let nattr: usize = match h.get(2) {
        Some(t) => c.at(hl, num(t, "number of point attributes"))?,
        None => 0,
    };
    let nbm: usize = match h.get(3) {
        Some(t) => c.at(hl, num(t, "boundary marker flag (0 or 1)"))?,
        None => 0,
    };
    if nbm > 1 {
        return Err(c.err(
            hl,
            format!("boundary marker flag must be 0 or 1, found {nbm}"),
        ));
    }
    if n == 0 {
        return Err(c.err(
            hl,
            "file declares 0 points (points stored in .poly/.smesh files are not supported)",
        ));
    }
    let per = nattr.saturating_add(3 + nbm);
    let mut nodes = Vec::with_capacity(n.min(1 << 20));
    let mut base = 0usize;
    for i in 0..n {
        let (ln, t) = c.need(|| format!("point {} of {n}", i + 1))?;
        let id: usize = c.at(ln, num(t[0], "point number"))?;
        if i == 0 {
            if id > 1 {
                return Err(c.err(
                    ln,
                    format!("first point number must be 0 or 1 (it selects 0- or 1-based numbering), found {id}"),
                ));
            }
            base = id;
        } else if id != base + i {
            return Err(c.err(
                ln,
                format!(
                    "expected point number {} (points must be numbered consecutively), found {id}",
                    base + i
                ),
            ));
        }
        let rest = t.len() - 1;
        if rest != per {
            return Err(c.err(
                ln,
                format!(
                    "expected {per} values after point number (x y z, {nattr} attribute(s), {nbm} boundary marker(s)), found {rest}"
                ),
            ));
        }
        let p = c.at(ln, point(&t[1..4]))?;
        for a in &t[4..4 + nattr] {
            c.at(ln, num::<f64>(a, "point attribute"))?;
        }
        if nbm == 1 {
            c.at(ln, num::<i64>(t[4 + nattr], "integer boundary marker"))?;
        }
        nodes.push(p);
    }
    if let Some((ln, t)) = c.line() {
        return Err(c.err(
            ln,
            format!("unexpected '{}' after the {n} declared points", clip(t[0])),
        ));
    }
    Ok((nodes, base))
}

/// Connectivity (0-based) and region tags of an `.ele` file whose `.node` file has `nn`
/// points numbered from `base`.
fn parse_tetgen_ele(
    text: &str,
    path: &str,
    nn: usize,
    base: usize,
) -> Result<(Vec<usize>, Vec<i64>), MeshError> {
    let mut c = Cursor::new(text, path, Some('#'));
    let header = "header '<#tetrahedra> <nodes per tetrahedron> [<#attributes>]'";
    let (hl, h) = c.need(|| header.to_string())?;
    if !(2..=3).contains(&h.len()) {
        return Err(c.err(hl, format!("expected {header}, found {}", values(h.len()))));
    }
    let nt: usize = c.at(hl, num(h[0], "number of tetrahedra"))?;
    let npt: usize = c.at(hl, num(h[1], "nodes per tetrahedron"))?;
    if npt != 4 {
        return Err(c.err(
            hl,
            format!("only 4-node tetrahedra are supported, found {npt} nodes per tetrahedron"),
        ));
    }
    let nattr: usize = match h.get(2) {
        Some(t) => c.at(hl, num(t, "number of tetrahedron attributes"))?,
        None => 0,
    };
    if nt == 0 {
        return Err(c.err(hl, "file declares 0 tetrahedra"));
    }
    let mut elements = Vec::with_capacity(nt.min(1 << 20) * 4);
    let mut tags = Vec::with_capacity(nt.min(1 << 20));
    for i in 0..nt {
        let (ln, t) = c.need(|| format!("tetrahedron {} of {nt}", i + 1))?;
        c.at(ln, num::<i64>(t[0], "tetrahedron number"))?;
        let rest = t.len() - 1;
        if rest < 4 {
            return Err(c.err(
                ln,
                format!("expected 4 node indices after element id, found {rest}"),
            ));
        }
        if rest - 4 != nattr {
            return Err(c.err(
                ln,
                format!(
                    "expected {nattr} attribute(s) after the 4 node indices (header line {hl}), found {}",
                    rest - 4
                ),
            ));
        }
        for tok in &t[1..5] {
            let idx: usize = c.at(ln, num(tok, "node index"))?;
            if idx < base || idx - base >= nn {
                return Err(c.err(
                    ln,
                    format!(
                        "node index {idx} out of range: the .node file has {nn} points numbered from {base} (valid {base}..={})",
                        nn - 1 + base
                    ),
                ));
            }
            elements.push(idx - base);
        }
        tags.push(match t.get(5) {
            Some(tok) => c.at(ln, int_tag(tok, "region attribute"))?,
            None => 0,
        });
    }
    if let Some((ln, t)) = c.line() {
        return Err(c.err(
            ln,
            format!(
                "unexpected '{}' after the {nt} declared tetrahedra",
                clip(t[0])
            ),
        ));
    }
    Ok((elements, tags))
}

// ---------------------------------------------------------------------------------------------
// Element collection shared by gmsh and MEDIT
// ---------------------------------------------------------------------------------------------

/// Volume elements as read (file node ids), resolved against the node table at the end so
/// that section order does not matter.
struct RawElements {
    kind: Option<(ElementKind, usize)>,
    /// File node ids in lexicographic local order.
    ids: Vec<u64>,
    /// Line of each element.
    lines: Vec<usize>,
    tags: Vec<i64>,
}

impl RawElements {
    fn new() -> Self {
        RawElements {
            kind: None,
            ids: Vec::new(),
            lines: Vec::new(),
            tags: Vec::new(),
        }
    }

    /// Checks that `kind` matches the elements read so far.
    fn set_kind(&mut self, c: &Cursor, kind: ElementKind, line: usize) -> Result<(), MeshError> {
        match self.kind {
            None => {
                self.kind = Some((kind, line));
                Ok(())
            }
            Some((k, _)) if k == kind => Ok(()),
            Some((k, first)) => Err(c.err(
                line,
                format!(
                    "mesh mixes element types: {kind} here but {k} at line {first}; only one element type per mesh is supported"
                ),
            )),
        }
    }

    /// Adds an element whose node ids are in file (gmsh/VTK/MEDIT) order.
    fn push(&mut self, kind: ElementKind, file_order: &[u64], tag: i64, line: usize) {
        match kind {
            ElementKind::Tet4 => self.ids.extend_from_slice(file_order),
            ElementKind::Hex8 => {
                let mut lex = [0u64; 8];
                for (k, &id) in file_order.iter().enumerate() {
                    lex[HEX_VTK_TO_LEX[k]] = id;
                }
                self.ids.extend_from_slice(&lex);
            }
        }
        self.lines.push(line);
        self.tags.push(tag);
    }

    /// Builds the mesh, mapping file node ids through `index` (id → position in `nodes`).
    fn finish(
        self,
        c: &Cursor,
        nodes: Vec<[f64; 3]>,
        index: impl Fn(u64) -> Option<usize>,
        what: &str,
    ) -> Result<Mesh, MeshError> {
        let Some((kind, _)) = self.kind else {
            return Err(c.err(c.last.max(1), format!("file contains no {what}")));
        };
        let nv = kind.nodes();
        let mut elements = Vec::with_capacity(self.ids.len());
        for (e, chunk) in self.ids.chunks(nv).enumerate() {
            for &id in chunk {
                match index(id) {
                    Some(i) => elements.push(i),
                    None => {
                        let line = self.lines.get(e).copied().unwrap_or(1);
                        return Err(c.err(
                            line,
                            format!(
                                "element refers to node {id}, which is not defined (file has {} nodes)",
                                nodes.len()
                            ),
                        ));
                    }
                }
            }
        }
        Ok(Mesh {
            kind,
            nodes,
            elements,
            tags: self.tags,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// gmsh
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum MshVersion {
    V2,
    V4,
}

/// Supported gmsh element types: type 4 (4-node tet) and 5 (8-node hex).
fn msh_supported(ty: i64) -> Option<ElementKind> {
    match ty {
        4 => Some(ElementKind::Tet4),
        5 => Some(ElementKind::Hex8),
        _ => None,
    }
}

/// Name of a gmsh volume element type that is not supported, if `ty` is one.
fn msh_other_volume(ty: i64) -> Option<&'static str> {
    Some(match ty {
        6 => "6-node prism",
        7 => "5-node pyramid",
        11 => "10-node tetrahedron",
        12 => "27-node hexahedron",
        13 => "18-node prism",
        14 => "14-node pyramid",
        17 => "20-node hexahedron",
        18 => "15-node prism",
        19 => "13-node pyramid",
        29..=31 => "high-order tetrahedron",
        92 | 93 => "high-order hexahedron",
        _ => return None,
    })
}

fn unsupported_volume(ty: i64, name: &str) -> String {
    format!(
        "unsupported volume element type {ty} ({name}); only 4-node tetrahedra (type 4) and 8-node hexahedra (type 5) are supported"
    )
}

/// Parses an ASCII gmsh file (version 2.2 or 4.1) given as text.
fn parse_msh(text: &str, path: &str) -> Result<Mesh, MeshError> {
    let mut c = Cursor::new(text, path, None);
    let (ln, t) = c.need(|| "'$MeshFormat'".into())?;
    if t[0] != "$MeshFormat" {
        return Err(c.err(
            ln,
            format!(
                "expected '$MeshFormat' (gmsh version 2 or 4 file), found '{}'",
                clip(t[0])
            ),
        ));
    }
    let (ln, t) = c.need(|| "version line '<version> <file-type> <data-size>'".into())?;
    if t.len() != 3 {
        return Err(c.err(
            ln,
            format!(
                "expected version line '<version> <file-type> <data-size>', found {}",
                values(t.len())
            ),
        ));
    }
    let file_type: i64 = c.at(ln, num(t[1], "file type (0 = ASCII, 1 = binary)"))?;
    if file_type == 1 {
        return Err(c.err(
            ln,
            "binary .msh files are not supported; save the mesh as ASCII (gmsh option Mesh.Binary = 0)",
        ));
    }
    if file_type != 0 {
        return Err(c.err(
            ln,
            format!("file type must be 0 (ASCII) or 1 (binary), found {file_type}"),
        ));
    }
    let version = match t[0] {
        "2" | "2.0" | "2.1" | "2.2" => MshVersion::V2,
        "4.1" => MshVersion::V4,
        v => {
            return Err(c.err(
                ln,
                format!(
                    "unsupported msh version '{}'; supported are ASCII 2.2 and 4.1",
                    clip(v)
                ),
            ))
        }
    };
    expect_end(&mut c, "$EndMeshFormat")?;

    let mut nodes: Option<NodeTable> = None;
    let mut entity_phys: HashMap<i64, i64> = HashMap::new();
    let mut elements: Option<RawElements> = None;
    while let Some((ln, t)) = c.line() {
        let name = t[0];
        if !name.starts_with('$') || t.len() != 1 {
            return Err(c.err(
                ln,
                format!(
                    "expected a section header such as '$Nodes', found '{}'",
                    clip(name)
                ),
            ));
        }
        if name.starts_with("$End") {
            return Err(c.err(
                ln,
                format!("'{}' without a matching section start", clip(name)),
            ));
        }
        match (name, version) {
            ("$Nodes", _) if nodes.is_some() => {
                return Err(c.err(ln, "second $Nodes section; only one is supported"))
            }
            ("$Elements", _) if elements.is_some() => {
                return Err(c.err(ln, "second $Elements section; only one is supported"))
            }
            ("$Nodes", MshVersion::V2) => nodes = Some(msh2_nodes(&mut c)?),
            ("$Nodes", MshVersion::V4) => nodes = Some(msh4_nodes(&mut c)?),
            ("$Elements", MshVersion::V2) => elements = Some(msh2_elements(&mut c)?),
            ("$Elements", MshVersion::V4) => elements = Some(msh4_elements(&mut c, &entity_phys)?),
            ("$Entities", MshVersion::V4) => entity_phys = msh4_entities(&mut c)?,
            _ => skip_section(&mut c, name, ln)?,
        }
    }
    let Some((nodes, index)) = nodes else {
        return Err(c.err(c.last.max(1), "file has no $Nodes section"));
    };
    let Some(elements) = elements else {
        return Err(c.err(c.last.max(1), "file has no $Elements section"));
    };
    elements.finish(
        &c,
        nodes,
        |id| index.get(&id).copied(),
        "tetrahedra (type 4) or hexahedra (type 5)",
    )
}

fn expect_end(c: &mut Cursor, marker: &str) -> Result<(), MeshError> {
    let (ln, t) = c.need(|| format!("'{marker}'"))?;
    if t[0] != marker || t.len() != 1 {
        return Err(c.err(ln, format!("expected '{marker}', found '{}'", clip(t[0]))));
    }
    Ok(())
}

/// Skips an unknown section `$Name ... $EndName` that started at line `start`.
fn skip_section(c: &mut Cursor, name: &str, start: usize) -> Result<(), MeshError> {
    let end = format!("$End{}", &name[1..]);
    while let Some((_, t)) = c.line() {
        if t[0] == end {
            return Ok(());
        }
    }
    Err(c.err(
        start,
        format!(
            "section '{}' starting here has no '{}'",
            clip(name),
            clip(&end)
        ),
    ))
}

/// Guards a data line of a section against running into the next section marker.
fn not_marker(c: &Cursor, ln: usize, t: &[&str], what: &str) -> Result<(), MeshError> {
    if t[0].starts_with('$') {
        return Err(c.err(
            ln,
            format!(
                "expected {what}, found '{}' (count in the section header too large?)",
                clip(t[0])
            ),
        ));
    }
    Ok(())
}

type NodeTable = (Vec<[f64; 3]>, HashMap<u64, usize>);

fn add_node(
    c: &Cursor,
    ln: usize,
    table: &mut NodeTable,
    id: u64,
    p: [f64; 3],
) -> Result<(), MeshError> {
    let idx = table.0.len();
    if table.1.insert(id, idx).is_some() {
        return Err(c.err(ln, format!("node {id} is defined twice")));
    }
    table.0.push(p);
    Ok(())
}

/// msh 2.2 `$Nodes`: count, then `id x y z` lines.
fn msh2_nodes(c: &mut Cursor) -> Result<NodeTable, MeshError> {
    let (ln, t) = c.need_n(1, "number of nodes")?;
    let n: usize = c.at(ln, num(t[0], "number of nodes"))?;
    let mut table: NodeTable = (Vec::with_capacity(n.min(1 << 20)), HashMap::new());
    for i in 0..n {
        let (ln, t) = c.need(|| format!("node {} of {n} ('id x y z')", i + 1))?;
        not_marker(c, ln, &t, "node line 'id x y z'")?;
        if t.len() != 4 {
            return Err(c.err(
                ln,
                format!(
                    "expected node line 'id x y z' (4 values), found {}",
                    values(t.len())
                ),
            ));
        }
        let id: u64 = c.at(ln, num(t[0], "node id"))?;
        let p = c.at(ln, point(&t[1..4]))?;
        add_node(c, ln, &mut table, id, p)?;
    }
    expect_end(c, "$EndNodes")?;
    Ok(table)
}

/// msh 2.2 `$Elements`: count, then `id type ntags tags... nodes...` lines.
fn msh2_elements(c: &mut Cursor) -> Result<RawElements, MeshError> {
    let (ln, t) = c.need_n(1, "number of elements")?;
    let n: usize = c.at(ln, num(t[0], "number of elements"))?;
    let mut raw = RawElements::new();
    let mut ids = [0u64; 8];
    for i in 0..n {
        let (ln, t) = c.need(|| format!("element {} of {n}", i + 1))?;
        not_marker(c, ln, &t, "element line 'id type ntags tags... nodes...'")?;
        if t.len() < 3 {
            return Err(c.err(
                ln,
                format!(
                    "expected element line 'id type ntags tags... nodes...', found {}",
                    values(t.len())
                ),
            ));
        }
        c.at(ln, num::<u64>(t[0], "element id"))?;
        let ty: i64 = c.at(ln, num(t[1], "element type"))?;
        let ntags: usize = c.at(ln, num(t[2], "number of tags"))?;
        let Some(kind) = msh_supported(ty) else {
            if let Some(name) = msh_other_volume(ty) {
                return Err(c.err(ln, unsupported_volume(ty, name)));
            }
            continue; // points, lines, surface elements
        };
        if t.len() - 3 < ntags {
            return Err(c.err(
                ln,
                format!(
                    "expected {ntags} tags after element type, found {}",
                    t.len() - 3
                ),
            ));
        }
        let nv = kind.nodes();
        let rest = t.len() - 3 - ntags;
        if rest != nv {
            return Err(c.err(
                ln,
                format!("expected {nv} node indices after element id, type and {ntags} tags, found {rest}"),
            ));
        }
        let tag = match ntags {
            0 => 0,
            _ => c.at(ln, num::<i64>(t[3], "integer physical tag"))?,
        };
        for (slot, tok) in ids.iter_mut().zip(&t[3 + ntags..]) {
            *slot = c.at(ln, num(tok, "node id"))?;
        }
        raw.set_kind(c, kind, ln)?;
        raw.push(kind, &ids[..nv], tag, ln);
    }
    expect_end(c, "$EndElements")?;
    Ok(raw)
}

/// msh 4.1 `$Entities`: map from volume entity tag to its first physical tag (volumes with no
/// physical group are left out). Points, curves and surfaces are skipped line by line.
fn msh4_entities(c: &mut Cursor) -> Result<HashMap<i64, i64>, MeshError> {
    let what = "entity counts '<#points> <#curves> <#surfaces> <#volumes>'";
    let (ln, t) = c.need_n(4, what)?;
    let mut counts = [0usize; 4];
    for (k, tok) in counts.iter_mut().zip(&t) {
        *k = c.at(ln, num(tok, "entity count"))?;
    }
    let lower = counts[0]
        .saturating_add(counts[1])
        .saturating_add(counts[2]);
    for i in 0..lower {
        let (ln, t) = c.need(|| {
            format!(
                "entity line {} of {lower} (points, curves, surfaces)",
                i + 1
            )
        })?;
        not_marker(c, ln, &t, "entity line")?;
    }
    let mut map = HashMap::new();
    for i in 0..counts[3] {
        let (ln, t) = c.need(|| format!("volume entity {} of {}", i + 1, counts[3]))?;
        not_marker(c, ln, &t, "volume entity line")?;
        if t.len() < 9 {
            return Err(c.err(
                ln,
                format!(
                    "expected volume entity 'tag minX minY minZ maxX maxY maxZ #physicals physicals... #surfaces surfaces...', found {}",
                    values(t.len())
                ),
            ));
        }
        let tag: i64 = c.at(ln, num(t[0], "volume entity tag"))?;
        for tok in &t[1..7] {
            c.at(ln, num::<f64>(tok, "bounding box coordinate"))?;
        }
        let nphys: usize = c.at(ln, num(t[7], "number of physical tags"))?;
        if t.len() - 8 <= nphys {
            return Err(c.err(
                ln,
                format!(
                    "expected {nphys} physical tag(s) and a bounding surface count after the bounding box, found {}",
                    values(t.len() - 8)
                ),
            ));
        }
        if nphys > 0 {
            let phys: i64 = c.at(ln, num(t[8], "integer physical tag"))?;
            map.insert(tag, phys);
        }
    }
    expect_end(c, "$EndEntities")?;
    Ok(map)
}

/// Four integers of a msh 4.1 block or section header.
fn header4<T: FromStr + Copy + Default>(
    c: &mut Cursor,
    what: &str,
) -> Result<(usize, [T; 4]), MeshError> {
    let (ln, t) = c.need_n(4, what)?;
    not_marker(c, ln, &t, what)?;
    let mut out = [T::default(); 4];
    for (o, tok) in out.iter_mut().zip(&t) {
        *o = c.at(ln, num(tok, &format!("integer in {what}")))?;
    }
    Ok((ln, out))
}

/// msh 4.1 `$Nodes`: entity blocks, each with its node tags then its coordinates.
fn msh4_nodes(c: &mut Cursor) -> Result<NodeTable, MeshError> {
    let (hl, [nblocks, total, _, _]) = header4::<usize>(
        c,
        "nodes header '<#entity blocks> <#nodes> <min tag> <max tag>'",
    )?;
    let mut table: NodeTable = (Vec::with_capacity(total.min(1 << 20)), HashMap::new());
    let mut ids = Vec::new();
    for _ in 0..nblocks {
        let (bl, [dim, _, parametric, count]) = header4::<i64>(
            c,
            "node block header '<entity dim> <entity tag> <parametric> <#nodes>'",
        )?;
        if !(0..=3).contains(&dim) || !(0..=1).contains(&parametric) || count < 0 {
            return Err(c.err(
                bl,
                "invalid node block header (entity dim 0-3, parametric 0/1, count >= 0 expected)",
            ));
        }
        let width = 3 + if parametric == 1 { dim as usize } else { 0 };
        ids.clear();
        for i in 0..count {
            let (ln, t) =
                c.need(|| format!("node tag {} of {count} in block at line {bl}", i + 1))?;
            not_marker(c, ln, &t, "node tag")?;
            if t.len() != 1 {
                return Err(c.err(
                    ln,
                    format!("expected a single node tag, found {}", values(t.len())),
                ));
            }
            ids.push((c.at(ln, num::<u64>(t[0], "node tag"))?, ln));
        }
        for (i, &(id, _)) in ids.iter().enumerate() {
            let (ln, t) = c.need(|| {
                format!(
                    "coordinates of node {} of {count} in block at line {bl}",
                    i + 1
                )
            })?;
            not_marker(c, ln, &t, "node coordinates")?;
            if t.len() != width {
                return Err(c.err(
                    ln,
                    format!(
                        "expected node coordinates ({}), found {}",
                        values(width),
                        values(t.len())
                    ),
                ));
            }
            let p = c.at(ln, point(&t[..3]))?;
            add_node(c, ln, &mut table, id, p)?;
        }
    }
    if table.0.len() != total {
        return Err(c.err(
            hl,
            format!(
                "header declares {total} nodes but the blocks hold {}",
                table.0.len()
            ),
        ));
    }
    expect_end(c, "$EndNodes")?;
    Ok(table)
}

/// msh 4.1 `$Elements`: entity blocks of one element type each.
fn msh4_elements(
    c: &mut Cursor,
    entity_phys: &HashMap<i64, i64>,
) -> Result<RawElements, MeshError> {
    let (hl, [nblocks, total, _, _]) = header4::<usize>(
        c,
        "elements header '<#entity blocks> <#elements> <min tag> <max tag>'",
    )?;
    let mut raw = RawElements::new();
    let mut seen = 0usize;
    let mut ids = [0u64; 8];
    for _ in 0..nblocks {
        let (bl, [dim, etag, ty, count]) = header4::<i64>(
            c,
            "element block header '<entity dim> <entity tag> <element type> <#elements>'",
        )?;
        if count < 0 {
            return Err(c.err(bl, format!("negative element count {count}")));
        }
        seen = seen.saturating_add(count as usize);
        let kind = match msh_supported(ty) {
            Some(k) => Some(k),
            None if dim == 3 => {
                let name = msh_other_volume(ty).unwrap_or("unknown volume element");
                return Err(c.err(bl, unsupported_volume(ty, name)));
            }
            None => None,
        };
        let tag = entity_phys.get(&etag).copied().unwrap_or(etag);
        for i in 0..count {
            let (ln, t) =
                c.need(|| format!("element {} of {count} in block at line {bl}", i + 1))?;
            not_marker(c, ln, &t, "element line 'tag nodes...'")?;
            let Some(kind) = kind else { continue };
            let nv = kind.nodes();
            c.at(ln, num::<u64>(t[0], "element tag"))?;
            if t.len() - 1 != nv {
                return Err(c.err(
                    ln,
                    format!(
                        "expected {nv} node indices after element id, found {}",
                        t.len() - 1
                    ),
                ));
            }
            for (slot, tok) in ids.iter_mut().zip(&t[1..]) {
                *slot = c.at(ln, num(tok, "node tag"))?;
            }
            raw.set_kind(c, kind, ln)?;
            raw.push(kind, &ids[..nv], tag, ln);
        }
    }
    if seen != total {
        return Err(c.err(
            hl,
            format!("header declares {total} elements but the blocks hold {seen}"),
        ));
    }
    expect_end(c, "$EndElements")?;
    Ok(raw)
}

// ---------------------------------------------------------------------------------------------
// MEDIT
// ---------------------------------------------------------------------------------------------

/// Tokens per record of MEDIT sections that are skipped.
fn medit_skip_width(kw: &str) -> Option<usize> {
    Some(match kw {
        "corners"
        | "ridges"
        | "requiredvertices"
        | "requirededges"
        | "requiredtriangles"
        | "requiredquadrilaterals" => 1,
        "normalatvertices" | "tangentatvertices" => 2,
        "edges" | "normals" | "tangents" | "normalattrianglevertices" | "tangentatedges" => 3,
        "triangles" | "normalatquadrilateralvertices" => 4,
        "quadrilaterals" => 5,
        _ => return None,
    })
}

/// MEDIT volume sections that are not supported (an error unless empty).
fn medit_unsupported(kw: &str) -> bool {
    matches!(
        kw,
        "prisms" | "pyramids" | "tetrahedrap2" | "hexahedraq2" | "tetrahedra10" | "hexahedra27"
    )
}

/// Reads the entity count after a MEDIT section keyword; it must end its line.
fn medit_count(c: &mut Cursor, kw: &str, kw_line: usize) -> Result<usize, MeshError> {
    let Some((ln, tok)) = c.token() else {
        return Err(c.eof(&format!("number of entries after '{}'", clip(kw))));
    };
    let n: usize = c.at(
        ln,
        num(
            tok,
            &format!("number of entries after '{}' (line {kw_line})", clip(kw)),
        ),
    )?;
    if let Some(extra) = c.leftover() {
        return Err(c.err(
            ln,
            format!(
                "unexpected '{}' after the count of '{}' (records start on the next line)",
                clip(extra),
                clip(kw)
            ),
        ));
    }
    Ok(n)
}

/// Parses an ASCII MEDIT `.mesh` file given as text.
fn parse_medit(text: &str, path: &str) -> Result<Mesh, MeshError> {
    let mut c = Cursor::new(text, path, Some('#'));
    let mut nodes: Option<Vec<[f64; 3]>> = None;
    let mut raw = RawElements::new();
    let mut ids = [0u64; 8];
    while let Some((kl, kw)) = c.token() {
        let key = kw.to_ascii_lowercase();
        match key.as_str() {
            "meshversionformatted" => {
                let Some((ln, tok)) = c.token() else {
                    return Err(c.eof("version number after 'MeshVersionFormatted'"));
                };
                c.at(
                    ln,
                    num::<i64>(tok, "version number after 'MeshVersionFormatted'"),
                )?;
            }
            "dimension" => {
                let Some((ln, tok)) = c.token() else {
                    return Err(c.eof("dimension after 'Dimension'"));
                };
                let d: i64 = c.at(ln, num(tok, "dimension after 'Dimension'"))?;
                if d != 3 {
                    return Err(c.err(
                        ln,
                        format!("only 3D meshes are supported, found Dimension {d}"),
                    ));
                }
            }
            "vertices" => {
                if nodes.is_some() {
                    return Err(c.err(kl, "second 'Vertices' section"));
                }
                let n = medit_count(&mut c, kw, kl)?;
                let mut v = Vec::with_capacity(n.min(1 << 20));
                for i in 0..n {
                    let (ln, t) = c.need(|| format!("vertex {} of {n} ('x y z ref')", i + 1))?;
                    if t.len() != 4 {
                        return Err(c.err(
                            ln,
                            format!(
                                "expected vertex {} of {n} as 'x y z ref' (4 values), found {}",
                                i + 1,
                                values(t.len())
                            ),
                        ));
                    }
                    let p = c.at(ln, point(&t[..3]))?;
                    c.at(ln, int_tag(t[3], "vertex reference"))?;
                    v.push(p);
                }
                nodes = Some(v);
            }
            "tetrahedra" | "hexahedra" => {
                let (kind, name) = if key == "tetrahedra" {
                    (ElementKind::Tet4, "tetrahedron")
                } else {
                    (ElementKind::Hex8, "hexahedron")
                };
                let nv = kind.nodes();
                let n = medit_count(&mut c, kw, kl)?;
                if n > 0 {
                    raw.set_kind(&c, kind, kl)?;
                }
                for i in 0..n {
                    let (ln, t) = c.need(|| format!("{name} {} of {n}", i + 1))?;
                    if t.len() != nv + 1 {
                        return Err(c.err(
                            ln,
                            format!(
                                "expected {name} {} of {n} as {nv} vertex indices and a reference id, found {}",
                                i + 1,
                                values(t.len())
                            ),
                        ));
                    }
                    for (slot, tok) in ids.iter_mut().zip(&t[..nv]) {
                        *slot = c.at(ln, num(tok, "vertex index"))?;
                    }
                    let tag = c.at(ln, int_tag(t[nv], "reference id"))?;
                    raw.push(kind, &ids[..nv], tag, ln);
                }
            }
            "end" => break,
            _ => {
                if let Some(width) = medit_skip_width(&key) {
                    let n = medit_count(&mut c, kw, kl)?;
                    for i in 0..n {
                        let (ln, t) = c.need(|| {
                            format!("entry {} of {n} of '{}' (line {kl})", i + 1, clip(kw))
                        })?;
                        if t.len() != width {
                            return Err(c.err(
                                ln,
                                format!(
                                    "expected entry {} of {n} of '{}' ({}), found {}",
                                    i + 1,
                                    clip(kw),
                                    values(width),
                                    values(t.len())
                                ),
                            ));
                        }
                    }
                } else if medit_unsupported(&key) {
                    if medit_count(&mut c, kw, kl)? > 0 {
                        return Err(c.err(
                            kl,
                            format!(
                                "'{}' elements are not supported; only Tetrahedra or Hexahedra",
                                clip(kw)
                            ),
                        ));
                    }
                } else {
                    return Err(c.err(kl, format!("unknown MEDIT keyword '{}'", clip(kw))));
                }
            }
        }
    }
    let Some(nodes) = nodes else {
        return Err(c.err(c.last.max(1), "file has no 'Vertices' section"));
    };
    let nn = nodes.len() as u64;
    raw.finish(
        &c,
        nodes,
        |id| (1..=nn).contains(&id).then(|| (id - 1) as usize),
        "Tetrahedra or Hexahedra",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::validate::{element_volume, validate_and_fix};
    use proptest::prelude::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/meshes")
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
