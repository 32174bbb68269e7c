//! MEDIT `.mesh` files (ASCII; keywords case-insensitive, `#` comments, 1-based indices).
//!
//! Reading: `Vertices` (`x y z ref`), `Tetrahedra` (`v1..v4 ref`) and `Hexahedra`
//! (`v1..v8 ref`, ordered like VTK) with the reference id as tag. Surface keywords
//! (`Triangles`, `Edges`, `Corners`, ...) are skipped. Each record must sit on one line, as
//! all common writers do.
//!
//! Writing: `MeshVersionFormatted 2` (double precision), `Vertices` with reference 0, then
//! `Tetrahedra` or `Hexahedra` (VTK order) with the region tag as reference.

use crate::mesh::encode::{file_order, push_point};
use crate::mesh::lexer::{clip, int_tag, num, point, values, Cursor};
use crate::mesh::records::RawElements;
use crate::mesh::{ElementKind, Mesh, MeshError};
use std::fmt::Write as _;

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
pub fn parse_medit(text: &str, path: &str) -> Result<Mesh, MeshError> {
    let mut c = Cursor::new(text, path, Some('#'));
    let mut nodes: Option<Vec<[f64; 3]>> = None;
    let mut raw = RawElements::new();
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
                nodes = Some(medit_vertices(&mut c, kw, kl)?);
            }
            "tetrahedra" => medit_elements(&mut c, &mut raw, ElementKind::Tet4, kw, kl)?,
            "hexahedra" => medit_elements(&mut c, &mut raw, ElementKind::Hex8, kw, kl)?,
            "end" => break,
            _ => medit_other_section(&mut c, &key, kw, kl)?,
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

/// The `Vertices` section after its keyword `kw` (at line `kl`): `x y z ref` records.
fn medit_vertices(c: &mut Cursor, kw: &str, kl: usize) -> Result<Vec<[f64; 3]>, MeshError> {
    let n = medit_count(c, kw, kl)?;
    c.plausible(kl, n, 8, "vertices")?;
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
    Ok(v)
}

/// A `Tetrahedra` or `Hexahedra` section: vertex indices (VTK order for hexahedra) and a
/// reference id per record.
fn medit_elements(
    c: &mut Cursor,
    raw: &mut RawElements,
    kind: ElementKind,
    kw: &str,
    kl: usize,
) -> Result<(), MeshError> {
    let name = match kind {
        ElementKind::Tet4 => "tetrahedron",
        ElementKind::Hex8 => "hexahedron",
    };
    let nv = kind.nodes();
    let n = medit_count(c, kw, kl)?;
    c.plausible(kl, n, 2 * (nv + 1), "elements")?;
    if n > 0 {
        raw.set_kind(c, kind, kl)?;
    }
    let mut ids = [0u64; 8];
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
    Ok(())
}

/// Any other section: surface sections are skipped record by record, empty unsupported
/// volume sections are accepted, anything else is an error.
fn medit_other_section(c: &mut Cursor, key: &str, kw: &str, kl: usize) -> Result<(), MeshError> {
    if let Some(width) = medit_skip_width(key) {
        let n = medit_count(c, kw, kl)?;
        for i in 0..n {
            let (ln, t) =
                c.need(|| format!("entry {} of {n} of '{}' (line {kl})", i + 1, clip(kw)))?;
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
        Ok(())
    } else if medit_unsupported(key) {
        if medit_count(c, kw, kl)? > 0 {
            return Err(c.err(
                kl,
                format!(
                    "'{}' elements are not supported; only Tetrahedra or Hexahedra",
                    clip(kw)
                ),
            ));
        }
        Ok(())
    } else {
        Err(c.err(kl, format!("unknown MEDIT keyword '{}'", clip(kw))))
    }
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
