//! Reading VTK XML unstructured grids (`.vtu`) into plain arrays: the inverse of
//! [`super::vtu`], and enough of the format to read what VTK/ParaView, PyVista and meshio write.
//!
//! Accepted: `VTKFile type="UnstructuredGrid"`, `byte_order="LittleEndian"`, `header_type`
//! `UInt32` (the default) or `UInt64`, no compressor or `vtkZLibDataCompressor`; `DataArray`s
//! of any VTK scalar type (`Int8` … `UInt64`, `Float32`, `Float64`) stored `format="ascii"`
//! (decimal text), `"binary"` (inline base64) or `"appended"` (`<AppendedData
//! encoding="raw">` or `"base64"`); several pieces are concatenated (points of piece `k`
//! numbered after those of the pieces before). Binary arrays follow VTK's layout: a header of
//! one integer (the byte count) without compression, or `[blocks, block size, last block
//! size (0 = full), compressed size of each block]` with zlib; in base64 the header is its own
//! base64 stream when compressed and shares the data's stream otherwise (as VTK writes it).
//!
//! Every size is checked before anything is allocated for it: a byte count against the bytes
//! that follow, a decompressed size against the values the piece declares and against
//! deflate's largest ratio (1032:1) times the compressed bytes. Errors carry the 1-based line
//! of the XML tag they concern; malformed input never panics.

use std::ops::Range;

/// Largest decompressed/compressed ratio accepted (deflate's bound is about 1032:1).
const MAX_ZLIB_RATIO: usize = 1100;

/// The values of one array, integers kept exact.
#[derive(Clone, Debug, PartialEq)]
pub enum VtuValues {
    Int(Vec<i64>),
    Float(Vec<f64>),
}

impl VtuValues {
    pub fn len(&self) -> usize {
        match self {
            VtuValues::Int(v) => v.len(),
            VtuValues::Float(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The values as `f64` (integers beyond 2^53 rounded).
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            VtuValues::Int(v) => v.iter().map(|&x| x as f64).collect(),
            VtuValues::Float(v) => v.clone(),
        }
    }
}

/// A named point or cell array.
#[derive(Clone, Debug, PartialEq)]
pub struct VtuArray {
    pub name: String,
    pub components: usize,
    pub values: VtuValues,
}

/// An unstructured grid as stored: every piece concatenated.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VtuGrid {
    pub points: Vec<[f64; 3]>,
    /// Node indices of all cells, cell after cell.
    pub connectivity: Vec<usize>,
    /// Range of each cell in `connectivity`.
    pub cells: Vec<Range<usize>>,
    /// VTK cell type of each cell.
    pub types: Vec<u8>,
    pub point_data: Vec<VtuArray>,
    pub cell_data: Vec<VtuArray>,
    /// Line of the `<Cells>` tag of the first piece (for error messages of callers).
    pub cells_line: usize,
}

/// A `.vtu` that cannot be read: the line of the XML tag concerned and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{msg}")]
pub struct VtuReadError {
    pub line: usize,
    pub msg: String,
}

fn err<T>(line: usize, msg: impl Into<String>) -> Result<T, VtuReadError> {
    Err(VtuReadError {
        line,
        msg: msg.into(),
    })
}

/// One XML start or end tag of the head.
struct Tag {
    name: String,
    attrs: Vec<(String, String)>,
    closing: bool,
    self_closing: bool,
    /// Byte position just past `>`.
    end: usize,
    line: usize,
}

impl Tag {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The XML part of the file (everything before the appended block) as a tag stream.
struct Scanner<'a> {
    text: &'a str,
    pos: usize,
}

impl Scanner<'_> {
    fn line_at(&self, pos: usize) -> usize {
        1 + self.text.as_bytes()[..pos.min(self.text.len())]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
    }

    /// The next start or end tag, skipping declarations, comments and text.
    fn next_tag(&mut self) -> Result<Option<Tag>, VtuReadError> {
        loop {
            let Some(lt) = self.text[self.pos..].find('<').map(|k| self.pos + k) else {
                self.pos = self.text.len();
                return Ok(None);
            };
            let rest = &self.text[lt..];
            let line = self.line_at(lt);
            let skip_to = |close: &str| -> Result<usize, VtuReadError> {
                rest.find(close)
                    .map(|k| lt + k + close.len())
                    .ok_or_else(|| VtuReadError {
                        line,
                        msg: format!("unterminated markup, expected '{close}'"),
                    })
            };
            if rest.starts_with("<?") {
                self.pos = skip_to("?>")?;
                continue;
            }
            if rest.starts_with("<!--") {
                self.pos = skip_to("-->")?;
                continue;
            }
            if rest.starts_with("<!") {
                self.pos = skip_to(">")?;
                continue;
            }
            return self.tag(lt, line).map(Some);
        }
    }

    fn tag(&mut self, lt: usize, line: usize) -> Result<Tag, VtuReadError> {
        let b = self.text.as_bytes();
        let mut i = lt + 1;
        let closing = b.get(i) == Some(&b'/');
        if closing {
            i += 1;
        }
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'>' && b[i] != b'/' {
            i += 1;
        }
        let name = self.text[start..i].to_string();
        if name.is_empty() {
            return err(line, "empty XML tag name");
        }
        let mut attrs = Vec::new();
        loop {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            match b.get(i) {
                None => return err(line, format!("unterminated tag <{name}")),
                Some(b'>') => {
                    self.pos = i + 1;
                    return Ok(Tag {
                        name,
                        attrs,
                        closing,
                        self_closing: false,
                        end: i + 1,
                        line,
                    });
                }
                Some(b'/') if b.get(i + 1) == Some(&b'>') => {
                    self.pos = i + 2;
                    return Ok(Tag {
                        name,
                        attrs,
                        closing,
                        self_closing: true,
                        end: i + 2,
                        line,
                    });
                }
                _ => {}
            }
            let k0 = i;
            while i < b.len() && b[i] != b'=' && b[i] != b'>' && !b[i].is_ascii_whitespace() {
                i += 1;
            }
            let key = self.text[k0..i].to_string();
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if b.get(i) != Some(&b'=') {
                return err(line, format!("<{name}>: attribute '{key}' has no value"));
            }
            i += 1;
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            let q = match b.get(i) {
                Some(&q @ (b'"' | b'\'')) => q,
                _ => return err(line, format!("<{name}>: attribute '{key}' is not quoted")),
            };
            let v0 = i + 1;
            let Some(len) = b[v0..].iter().position(|&c| c == q) else {
                return err(line, format!("<{name}>: unterminated value of '{key}'"));
            };
            attrs.push((key, unescape(&self.text[v0..v0 + len])));
            i = v0 + len + 1;
        }
    }
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// Where a `DataArray`'s values are.
enum Payload<'a> {
    Ascii(&'a str),
    /// Inline base64 (whitespace removed).
    Inline(Vec<u8>),
    Appended(usize),
}

/// A `DataArray` as declared, not yet decoded.
struct Declared<'a> {
    name: String,
    ty: String,
    components: usize,
    payload: Payload<'a>,
    line: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    None,
    PointData,
    CellData,
    Points,
    Cells,
    Other,
}

/// One `<Piece>` as declared.
struct PieceDecl<'a> {
    points: usize,
    cells: usize,
    line: usize,
    cells_line: usize,
    arrays: Vec<(Section, Declared<'a>)>,
}

/// How binary arrays are framed.
#[derive(Clone, Copy)]
struct Framing<'a> {
    header_bytes: usize,
    zlib: bool,
    appended: Appended<'a>,
}

/// The appended block (the bytes after `_`) and whether it is base64, if the file has one.
type Appended<'a> = Option<(&'a [u8], bool)>;

/// Parses a `.vtu` file's bytes (see the module docs).
pub fn parse_vtu_grid(bytes: &[u8]) -> Result<VtuGrid, VtuReadError> {
    let (head, appended) = split_appended(bytes)?;
    let head = String::from_utf8_lossy(head);
    let mut sc = Scanner {
        text: &head,
        pos: 0,
    };
    let Some(root) = sc.next_tag()? else {
        return err(1, "not an XML file: no tag found");
    };
    if root.name != "VTKFile" || root.closing {
        return err(
            root.line,
            format!("expected <VTKFile>, found <{}>", root.name),
        );
    }
    let ty = root.attr("type").unwrap_or("");
    if ty != "UnstructuredGrid" {
        return err(
            root.line,
            format!("only VTKFile type=\"UnstructuredGrid\" is supported, found \"{ty}\""),
        );
    }
    if let Some(o) = root.attr("byte_order") {
        if o != "LittleEndian" {
            return err(
                root.line,
                format!("byte_order=\"{o}\" is not supported (only LittleEndian)"),
            );
        }
    }
    let header_bytes = match root.attr("header_type").unwrap_or("UInt32") {
        "UInt32" => 4,
        "UInt64" => 8,
        h => return err(root.line, format!("unsupported header_type \"{h}\"")),
    };
    let zlib = match root.attr("compressor").unwrap_or("") {
        "" => false,
        "vtkZLibDataCompressor" => true,
        c => {
            return err(
                root.line,
                format!("compressor \"{c}\" is not supported (only vtkZLibDataCompressor)"),
            )
        }
    };
    let pieces = declare(&mut sc)?;
    if pieces.is_empty() {
        return err(sc.line_at(sc.pos), "no <Piece> in the file");
    }
    let framing = Framing {
        header_bytes,
        zlib,
        appended,
    };
    let mut grid = VtuGrid::default();
    for p in &pieces {
        decode_piece(p, framing, &mut grid)?;
    }
    grid.cells_line = pieces[0].cells_line;
    Ok(grid)
}

/// Splits the file at `<AppendedData ...>_`: the XML head and, if present, the appended
/// bytes with whether they are base64.
fn split_appended(bytes: &[u8]) -> Result<(&[u8], Appended<'_>), VtuReadError> {
    let key = b"<AppendedData";
    let Some(at) = bytes.windows(key.len()).position(|w| w == key) else {
        return Ok((bytes, None));
    };
    let head = &bytes[..at];
    let line = 1 + head.iter().filter(|&&b| b == b'\n').count();
    let Some(gt) = bytes[at..].iter().position(|&b| b == b'>').map(|k| at + k) else {
        return err(line, "unterminated <AppendedData> tag");
    };
    let tag = String::from_utf8_lossy(&bytes[at..gt]);
    let base64 = if tag.contains("\"base64\"") || tag.contains("'base64'") {
        true
    } else if tag.contains("\"raw\"") || tag.contains("'raw'") {
        false
    } else {
        return err(line, "<AppendedData> needs encoding=\"raw\" or \"base64\"");
    };
    let Some(us) = bytes[gt..].iter().position(|&b| b == b'_').map(|k| gt + k) else {
        return err(line, "<AppendedData> has no '_' marker");
    };
    Ok((head, Some((&bytes[us + 1..], base64))))
}

fn attr_count(tag: &Tag, key: &str) -> Result<usize, VtuReadError> {
    let v = tag.attr(key).unwrap_or("");
    v.trim().parse().or_else(|_| {
        err(
            tag.line,
            format!("<{}>: {key}=\"{v}\" is not a count", tag.name),
        )
    })
}

/// Walks the head's tags and collects each piece's array declarations.
fn declare<'a>(sc: &mut Scanner<'a>) -> Result<Vec<PieceDecl<'a>>, VtuReadError> {
    let mut pieces: Vec<PieceDecl<'a>> = Vec::new();
    let mut section = Section::None;
    while let Some(tag) = sc.next_tag()? {
        match (tag.name.as_str(), tag.closing) {
            ("Piece", false) => {
                pieces.push(PieceDecl {
                    points: attr_count(&tag, "NumberOfPoints")?,
                    cells: attr_count(&tag, "NumberOfCells")?,
                    line: tag.line,
                    cells_line: tag.line,
                    arrays: Vec::new(),
                });
                section = Section::None;
            }
            ("PointData", false) => section = Section::PointData,
            ("CellData", false) => section = Section::CellData,
            ("Points", false) => section = Section::Points,
            ("Cells", false) => {
                section = Section::Cells;
                if let Some(p) = pieces.last_mut() {
                    p.cells_line = tag.line;
                }
            }
            ("FieldData", false) => section = Section::Other,
            ("PointData" | "CellData" | "Points" | "Cells" | "FieldData", true) => {
                section = Section::None
            }
            ("DataArray", false) => {
                let d = data_array(sc, &tag)?;
                let Some(p) = pieces.last_mut() else {
                    return err(tag.line, "<DataArray> outside a <Piece>");
                };
                if section != Section::Other && section != Section::None {
                    p.arrays.push((section, d));
                }
            }
            _ => {}
        }
    }
    Ok(pieces)
}

/// A `DataArray`'s declaration; for inline arrays, its text up to `</DataArray>`.
fn data_array<'a>(sc: &mut Scanner<'a>, tag: &Tag) -> Result<Declared<'a>, VtuReadError> {
    let name = tag.attr("Name").unwrap_or("").to_string();
    let components = match tag.attr("NumberOfComponents") {
        None => 1,
        Some(_) => attr_count(tag, "NumberOfComponents")?,
    };
    if components == 0 || components > 64 {
        return err(
            tag.line,
            format!("DataArray '{name}': NumberOfComponents={components} is out of range 1..=64"),
        );
    }
    let ty = tag.attr("type").unwrap_or("").to_string();
    if type_size(&ty).is_none() {
        return err(
            tag.line,
            format!("DataArray '{name}': unsupported type \"{ty}\""),
        );
    }
    let format = tag.attr("format").unwrap_or("ascii");
    let text = if tag.self_closing {
        ""
    } else {
        let body = &sc.text[tag.end..];
        let Some(close) = body.find("</DataArray") else {
            return err(tag.line, format!("DataArray '{name}' has no </DataArray>"));
        };
        sc.pos = tag.end + close;
        &sc.text[tag.end..tag.end + close]
    };
    let payload = match format {
        "ascii" => Payload::Ascii(text),
        "binary" => Payload::Inline(text.bytes().filter(|b| !b.is_ascii_whitespace()).collect()),
        "appended" => Payload::Appended(attr_count(tag, "offset")?),
        f => {
            return err(
                tag.line,
                format!("DataArray '{name}': unknown format \"{f}\""),
            )
        }
    };
    Ok(Declared {
        name,
        ty,
        components,
        payload,
        line: tag.line,
    })
}

/// Bytes per value of a VTK scalar type name.
fn type_size(ty: &str) -> Option<usize> {
    Some(match ty {
        "Int8" | "UInt8" => 1,
        "Int16" | "UInt16" => 2,
        "Int32" | "UInt32" | "Float32" => 4,
        "Int64" | "UInt64" | "Float64" => 8,
        _ => return None,
    })
}

/// Decodes one piece's arrays and appends them to `grid`.
fn decode_piece(p: &PieceDecl<'_>, f: Framing<'_>, grid: &mut VtuGrid) -> Result<(), VtuReadError> {
    let find = |s: Section, name: &str| {
        p.arrays
            .iter()
            .find(|(sec, d)| *sec == s && (s == Section::Points || d.name == name))
            .map(|(_, d)| d)
    };
    let need = |s: Section, name: &str| {
        find(s, name).ok_or_else(|| VtuReadError {
            line: p.line,
            msg: format!("piece has no {name} array"),
        })
    };
    let pts = need(Section::Points, "Points")?;
    if pts.components != 3 {
        return err(pts.line, "Points must have 3 components");
    }
    let x = decode(pts, Some(3 * p.points), f)?.to_f64();
    if let Some(i) = x.iter().position(|c| !c.is_finite()) {
        return err(pts.line, format!("point {}: non-finite coordinate", i / 3));
    }
    let base = grid.points.len();
    grid.points
        .extend(x.chunks_exact(3).map(|c| [c[0], c[1], c[2]]));

    let offsets = ints(need(Section::Cells, "offsets")?, Some(p.cells), f)?;
    let types = ints(need(Section::Cells, "types")?, Some(p.cells), f)?;
    let conn_decl = need(Section::Cells, "connectivity")?;
    let total = offsets.last().copied().unwrap_or(0);
    let total = usize::try_from(total)
        .or_else(|_| err(conn_decl.line, format!("last offset {total} is negative")))?;
    let conn = ints(conn_decl, Some(total), f)?;
    let conn_base = grid.connectivity.len();
    let mut start = 0usize;
    for (c, (&o, &t)) in offsets.iter().zip(&types).enumerate() {
        let end = usize::try_from(o).unwrap_or(usize::MAX);
        if end < start || end > conn.len() {
            return err(
                conn_decl.line,
                format!("cell {c}: offset {o} is out of order or past the connectivity"),
            );
        }
        let Ok(t) = u8::try_from(t) else {
            return err(
                conn_decl.line,
                format!("cell {c}: cell type {t} is out of range"),
            );
        };
        grid.cells.push(conn_base + start..conn_base + end);
        grid.types.push(t);
        start = end;
    }
    for (k, &n) in conn.iter().enumerate() {
        match usize::try_from(n) {
            Ok(i) if i < p.points => grid.connectivity.push(base + i),
            _ => {
                return err(
                    conn_decl.line,
                    format!(
                        "connectivity value {k}: node index {n} is out of range ({} points)",
                        p.points
                    ),
                )
            }
        }
    }
    for (sec, d) in &p.arrays {
        let (n, out) = match sec {
            Section::PointData => (p.points, &mut grid.point_data),
            Section::CellData => (p.cells, &mut grid.cell_data),
            _ => continue,
        };
        let values = decode(d, Some(n * d.components), f)?;
        match out.iter_mut().find(|a| a.name == d.name) {
            Some(a) if a.components == d.components => append(&mut a.values, values),
            Some(_) => {
                return err(
                    d.line,
                    format!("array '{}' changes its components between pieces", d.name),
                )
            }
            None => out.push(VtuArray {
                name: d.name.clone(),
                components: d.components,
                values,
            }),
        }
    }
    Ok(())
}

fn append(a: &mut VtuValues, b: VtuValues) {
    match (a, b) {
        (VtuValues::Int(a), VtuValues::Int(b)) => a.extend(b),
        (VtuValues::Float(a), VtuValues::Float(b)) => a.extend(b),
        (a, b) => {
            let mut v = a.to_f64();
            v.extend(b.to_f64());
            *a = VtuValues::Float(v);
        }
    }
}

/// An integer array (a float array with integral values is accepted).
fn ints(d: &Declared<'_>, count: Option<usize>, f: Framing<'_>) -> Result<Vec<i64>, VtuReadError> {
    match decode(d, count, f)? {
        VtuValues::Int(v) => Ok(v),
        VtuValues::Float(v) => v
            .iter()
            .map(|&x| {
                if x.fract() == 0.0 && x.abs() < 9e15 {
                    Ok(x as i64)
                } else {
                    err(
                        d.line,
                        format!("array '{}' holds the non-integer {x}", d.name),
                    )
                }
            })
            .collect(),
    }
}

/// The values of one array; `count` is the number of values the piece declares for it.
fn decode(
    d: &Declared<'_>,
    count: Option<usize>,
    f: Framing<'_>,
) -> Result<VtuValues, VtuReadError> {
    let size = type_size(&d.ty).unwrap_or(8);
    let bytes = match &d.payload {
        Payload::Ascii(text) => return ascii(d, text, count),
        Payload::Inline(b64) => stream(d, b64, true, count.map(|c| c * size), f)?,
        Payload::Appended(off) => {
            let Some((block, is_b64)) = f.appended else {
                return err(
                    d.line,
                    format!(
                        "DataArray '{}' is appended but the file has no <AppendedData>",
                        d.name
                    ),
                );
            };
            let Some(rest) = block.get(*off..) else {
                return err(
                    d.line,
                    format!(
                        "DataArray '{}': offset {off} is past the appended data",
                        d.name
                    ),
                );
            };
            stream(d, rest, is_b64, count.map(|c| c * size), f)?
        }
    };
    if !bytes.len().is_multiple_of(size) || count.is_some_and(|c| c * size != bytes.len()) {
        return err(
            d.line,
            format!(
                "DataArray '{}' holds {} bytes, expected {} values of {size} bytes",
                d.name,
                bytes.len(),
                count.map_or("whole".to_string(), |c| c.to_string())
            ),
        );
    }
    Ok(from_le(&d.ty, &bytes))
}

fn ascii(d: &Declared<'_>, text: &str, count: Option<usize>) -> Result<VtuValues, VtuReadError> {
    let toks: Vec<&str> = text.split_ascii_whitespace().collect();
    if let Some(c) = count {
        if toks.len() != c {
            return err(
                d.line,
                format!(
                    "DataArray '{}' has {} values, expected {c}",
                    d.name,
                    toks.len()
                ),
            );
        }
    }
    let bad = |t: &str| VtuReadError {
        line: d.line,
        msg: format!(
            "DataArray '{}': '{}' is not a {}",
            d.name,
            t.chars().take(24).collect::<String>(),
            d.ty
        ),
    };
    if d.ty.starts_with("Float") {
        toks.iter()
            .map(|t| t.parse::<f64>().map_err(|_| bad(t)))
            .collect::<Result<_, _>>()
            .map(VtuValues::Float)
    } else {
        toks.iter()
            .map(|t| t.parse::<i64>().map_err(|_| bad(t)))
            .collect::<Result<_, _>>()
            .map(VtuValues::Int)
    }
}

/// Values of type `ty` from little-endian bytes (a multiple of its size).
fn from_le(ty: &str, b: &[u8]) -> VtuValues {
    macro_rules! conv {
        ($t:ty, $n:expr, $to:expr) => {
            b.chunks_exact($n)
                .map(|c| {
                    let mut a = [0u8; $n];
                    a.copy_from_slice(c);
                    $to(<$t>::from_le_bytes(a))
                })
                .collect()
        };
    }
    match ty {
        "Float32" => VtuValues::Float(conv!(f32, 4, f64::from)),
        "Float64" => VtuValues::Float(conv!(f64, 8, |x| x)),
        "Int8" => VtuValues::Int(conv!(i8, 1, i64::from)),
        "UInt8" => VtuValues::Int(conv!(u8, 1, i64::from)),
        "Int16" => VtuValues::Int(conv!(i16, 2, i64::from)),
        "UInt16" => VtuValues::Int(conv!(u16, 2, i64::from)),
        "Int32" => VtuValues::Int(conv!(i32, 4, i64::from)),
        "UInt32" => VtuValues::Int(conv!(u32, 4, i64::from)),
        // UInt64 values above i64::MAX wrap; they are refused later as out-of-range indices.
        "UInt64" => VtuValues::Int(conv!(u64, 8, |x: u64| x as i64)),
        _ => VtuValues::Int(conv!(i64, 8, |x| x)),
    }
}

/// A source of binary bytes: raw, or base64 text decoded on demand.
struct Source<'a> {
    data: &'a [u8],
    base64: bool,
}

impl Source<'_> {
    /// The first `n` bytes of the stream starting at `at` (a byte offset for raw data, a
    /// character offset for base64), and the position just past them.
    fn take(&self, at: usize, n: usize) -> Option<(Vec<u8>, usize)> {
        if self.base64 {
            let chars = n.div_ceil(3).checked_mul(4)?;
            let text = self.data.get(at..at.checked_add(chars)?)?;
            let mut out = base64_decode(text)?;
            if out.len() < n {
                return None;
            }
            out.truncate(n);
            Some((out, at + chars))
        } else {
            let b = self.data.get(at..at.checked_add(n)?)?;
            Some((b.to_vec(), at + n))
        }
    }

    /// Bytes available from `at`, as decoded bytes (an upper bound for base64).
    fn available(&self, at: usize) -> usize {
        let r = self.data.len().saturating_sub(at);
        if self.base64 {
            r / 4 * 3
        } else {
            r
        }
    }
}

/// The decoded bytes of one binary array (header, then data or zlib blocks).
fn stream(
    d: &Declared<'_>,
    data: &[u8],
    base64: bool,
    expected: Option<usize>,
    f: Framing<'_>,
) -> Result<Vec<u8>, VtuReadError> {
    let src = Source { data, base64 };
    let hb = f.header_bytes;
    let short = |what: &str| VtuReadError {
        line: d.line,
        msg: format!("DataArray '{}': binary data ends inside its {what}", d.name),
    };
    let word = |b: &[u8], k: usize| -> usize {
        let mut a = [0u8; 8];
        a[..hb].copy_from_slice(&b[k * hb..(k + 1) * hb]);
        usize::try_from(u64::from_le_bytes(a)).unwrap_or(usize::MAX)
    };
    if !f.zlib {
        let (h, _) = src.take(0, hb).ok_or_else(|| short("header"))?;
        let n = word(&h, 0);
        if n > src.available(0).saturating_sub(hb) {
            return err(
                d.line,
                format!(
                    "DataArray '{}': byte count {n} is past the end of the data",
                    d.name
                ),
            );
        }
        let (all, _) = if base64 {
            src.take(0, hb + n).ok_or_else(|| short("data"))?
        } else {
            src.take(hb, n)
                .map(|(b, e)| {
                    let mut v = vec![0u8; hb];
                    v.extend(b);
                    (v, e)
                })
                .ok_or_else(|| short("data"))?
        };
        return Ok(all[hb..].to_vec());
    }
    let (h3, _) = src
        .take(0, 3 * hb)
        .ok_or_else(|| short("compression header"))?;
    let (blocks, block, last) = (word(&h3, 0), word(&h3, 1), word(&h3, 2));
    if blocks > src.available(0) / hb {
        return err(
            d.line,
            format!(
                "DataArray '{}': {blocks} compressed blocks is more than the data holds",
                d.name
            ),
        );
    }
    let (h, mut at) = src
        .take(0, (3 + blocks) * hb)
        .ok_or_else(|| short("compression header"))?;
    if !base64 {
        at = (3 + blocks) * hb;
    }
    let total = match blocks {
        0 => 0,
        b => (b - 1)
            .checked_mul(block)
            .and_then(|s| s.checked_add(if last == 0 { block } else { last }))
            .unwrap_or(usize::MAX),
    };
    let compressed: usize = (0..blocks)
        .map(|k| word(&h, 3 + k))
        .fold(0, usize::saturating_add);
    if expected.is_some_and(|e| e != total)
        || total
            > compressed
                .saturating_mul(MAX_ZLIB_RATIO)
                .saturating_add(4096)
        || compressed > src.available(at)
    {
        return err(
            d.line,
            format!(
                "DataArray '{}': compression header declares {total} bytes in {compressed} compressed bytes, expected {}",
                d.name,
                expected.map_or("a plausible size".to_string(), |e| format!("{e} bytes"))
            ),
        );
    }
    let (packed, _) = src
        .take(at, compressed)
        .ok_or_else(|| short("compressed blocks"))?;
    let mut out = Vec::with_capacity(total);
    let mut pos = 0;
    for k in 0..blocks {
        let c = word(&h, 3 + k);
        let want = if k + 1 == blocks && last != 0 {
            last
        } else {
            block
        };
        let part =
            miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(&packed[pos..pos + c], want)
                .map_err(|e| VtuReadError {
                    line: d.line,
                    msg: format!(
                        "DataArray '{}': block {k} is not a valid zlib stream ({:?})",
                        d.name, e.status
                    ),
                })?;
        if part.len() != want {
            return err(
                d.line,
                format!(
                    "DataArray '{}': block {k} holds {} bytes, expected {want}",
                    d.name,
                    part.len()
                ),
            );
        }
        out.extend(part);
        pos += c;
    }
    Ok(out)
}

/// Standard base64 (RFC 4648, with `=` padding) of a whole number of 4-character groups.
fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    for g in text.chunks_exact(4) {
        let pad = g.iter().rev().take_while(|&&c| c == b'=').count().min(2);
        let mut acc = 0u32;
        for &c in &g[..4 - pad] {
            acc = (acc << 6) | val(c)?;
        }
        acc <<= 6 * pad as u32;
        let b = acc.to_be_bytes();
        out.extend_from_slice(&b[1..4 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::vtu::{encode_vtu_pieces, VtuEncoding, VtuPiece};

    const TET: [[f64; 3]; 4] = [[0.0; 3], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];

    fn b64(bytes: &[u8]) -> String {
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut s = String::new();
        for c in bytes.chunks(3) {
            let n = c
                .iter()
                .enumerate()
                .fold(0u32, |a, (i, &b)| a | (b as u32) << (16 - 8 * i));
            for k in 0..=c.len() {
                s.push(A[(n >> (18 - 6 * k) & 63) as usize] as char);
            }
            s.push_str(&"=".repeat(3 - c.len()));
        }
        s
    }

    #[test]
    fn base64_decodes_with_and_without_padding() {
        for data in [&b""[..], b"a", b"ab", b"abc", b"\x00\xff\x10\x80"] {
            assert_eq!(base64_decode(b64(data).as_bytes()).unwrap(), data);
        }
        assert!(base64_decode(b"ab$=").is_none());
        assert!(base64_decode(b"abc").is_none());
    }

    /// A file in the style meshio and VTK write inline: base64, UInt32 headers, zlib with the
    /// header as its own base64 stream, Float32 points and Int32 cells, two pieces.
    #[test]
    fn inline_base64_uint32_headers_and_two_pieces_read() {
        let zblock = |data: &[u8]| -> String {
            let c = miniz_oxide::deflate::compress_to_vec_zlib(data, 6);
            let h: Vec<u8> = [1u32, 32768, data.len() as u32, c.len() as u32]
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect();
            format!("{}{}", b64(&h), b64(&c))
        };
        let plain = |data: &[u8]| -> String {
            let mut b = (data.len() as u32).to_le_bytes().to_vec();
            b.extend_from_slice(data);
            b64(&b)
        };
        let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let i32s = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let pts: Vec<f32> = TET.iter().flatten().map(|&x| x as f32 * 2.0).collect();
        let piece = |enc: &dyn Fn(&[u8]) -> String| {
            format!(
                "<Piece NumberOfPoints=\"4\" NumberOfCells=\"1\">\n<CellData><DataArray type=\"Int32\" Name=\"material\" format=\"binary\">\n{}\n</DataArray></CellData>\n<Points><DataArray type=\"Float32\" NumberOfComponents=\"3\" format=\"binary\">{}</DataArray></Points>\n<Cells><DataArray type=\"Int32\" Name=\"connectivity\" format=\"binary\">{}</DataArray>\n<DataArray type=\"Int32\" Name=\"offsets\" format=\"ascii\"> 4 </DataArray>\n<DataArray type=\"UInt8\" Name=\"types\" format=\"binary\">{}</DataArray></Cells></Piece>\n",
                enc(&i32s(&[9])), enc(&f32s(&pts)), enc(&i32s(&[0, 1, 2, 3])), enc(&[10])
            )
        };
        for (zlib, enc) in [(true, &zblock as &dyn Fn(&[u8]) -> String), (false, &plain)] {
            let comp = if zlib {
                " compressor=\"vtkZLibDataCompressor\""
            } else {
                ""
            };
            let xml = format!(
                "<?xml version=\"1.0\"?>\n<!-- a comment -->\n<VTKFile type='UnstructuredGrid' version=\"0.1\" byte_order=\"LittleEndian\"{comp}>\n<UnstructuredGrid>\n{}{}</UnstructuredGrid>\n</VTKFile>\n",
                piece(enc),
                piece(enc)
            );
            let g =
                parse_vtu_grid(xml.as_bytes()).unwrap_or_else(|e| panic!("line {}: {e}", e.line));
            assert_eq!(g.points.len(), 8);
            assert_eq!(g.points[5], [2.0, 0.0, 0.0]);
            assert_eq!(g.connectivity, [0, 1, 2, 3, 4, 5, 6, 7]);
            assert_eq!(g.cells, [0..4, 4..8]);
            assert_eq!(g.cell_data[0].values, VtuValues::Int(vec![9, 9]));
        }
    }

    /// Truncated, corrupted or lying files end in a one-line error with a line number, never
    /// a panic or a huge allocation.
    #[test]
    fn damaged_files_are_errors_with_a_line() {
        let conn = [0, 1, 2, 3];
        let p = VtuPiece::new(10, 4, &conn, &[1], &TET);
        for enc in [VtuEncoding::Ascii, VtuEncoding::Binary, VtuEncoding::Zlib] {
            let good = encode_vtu_pieces(&[p], enc).unwrap();
            assert!(parse_vtu_grid(&good).is_ok());
            for cut in (0..good.len()).step_by(7) {
                if let Err(e) = parse_vtu_grid(&good[..cut]) {
                    assert!(e.line >= 1 && !e.msg.contains('\n'), "{e}");
                }
            }
            for k in (0..good.len()).step_by(3) {
                let mut bad = good.clone();
                bad[k] ^= 0x5a;
                let _ = parse_vtu_grid(&bad);
            }
        }
        let e =
            parse_vtu_grid(b"<?xml version=\"1.0\"?>\n<VTKFile type=\"PolyData\">").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(
            e.msg.contains("only VTKFile type=\"UnstructuredGrid\""),
            "{}",
            e.msg
        );
        let huge = "<VTKFile type=\"UnstructuredGrid\" header_type=\"UInt64\">\n<Piece NumberOfPoints=\"1000000000000\" NumberOfCells=\"0\">\n<Points><DataArray type=\"Float64\" NumberOfComponents=\"3\" format=\"appended\" offset=\"0\"/></Points></Piece>\n<AppendedData encoding=\"raw\">_\u{ff}\u{ff}\u{ff}\u{ff}\u{ff}\u{ff}\u{ff}\u{7f}";
        let e = parse_vtu_grid(huge.as_bytes()).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.msg.contains("past the end of the data"), "{}", e.msg);
        let text = "<VTKFile type=\"UnstructuredGrid\">\n<Piece NumberOfPoints=\"4\" NumberOfCells=\"1\">\n<Points><DataArray type=\"Float64\" NumberOfComponents=\"3\" format=\"ascii\">0 0 0 1 0 0 0 1 0 0 0 1</DataArray></Points>\n<Cells><DataArray type=\"Int64\" Name=\"connectivity\" format=\"ascii\">0 1 2 9</DataArray>\n<DataArray type=\"Int64\" Name=\"offsets\" format=\"ascii\">4</DataArray><DataArray type=\"UInt8\" Name=\"types\" format=\"ascii\">10</DataArray></Cells></Piece></VTKFile>";
        let e = parse_vtu_grid(text.as_bytes()).unwrap_err();
        assert_eq!(e.line, 4);
        assert!(
            e.msg.contains("node index 9 is out of range (4 points)"),
            "{}",
            e.msg
        );
        let e = parse_vtu_grid(text.replace("0 1 2 9", "0 1 2").as_bytes()).unwrap_err();
        assert!(
            e.msg.contains("'connectivity' has 3 values, expected 4"),
            "{}",
            e.msg
        );
        let e = parse_vtu_grid(text.replace("1 0 0 0 1", "1 0 x 0 1").as_bytes()).unwrap_err();
        assert!(e.msg.contains("'x' is not a Float64"), "{}", e.msg);
    }
}
