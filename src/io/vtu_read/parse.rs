//! The reader: the XML head's `Piece`s and their `DataArray` declarations, then each piece's
//! arrays decoded and concatenated into a [`VtuGrid`].

use super::decode::{append, decode, ints, type_size, Appended, Declared, Framing, Payload};
use super::grid::{err, VtuArray, VtuGrid, VtuReadError};
use super::xml::{Scanner, Tag};

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
