//! gmsh `.msh` files, ASCII versions 2.2 (also 2.0/2.1, same layout) and 4.1.
//!
//! Reading: nodes are matched by tag (tags need not be contiguous). 4-node tetrahedra
//! (type 4) and 8-node hexahedra (type 5, converted from gmsh/VTK to lexicographic order with
//! [`HEX_VTK_TO_LEX`](crate::mesh::HEX_VTK_TO_LEX)) are read; points, lines, triangles and quads
//! are ignored; other volume elements are an error. Region tag: v2.2 the first element tag
//! (the physical group), v4.1 the first physical group of the element's volume entity from
//! `$Entities`, or the entity tag when there is none. Binary files are rejected with a clear
//! message.
//!
//! Writing: node tags are `1..=N` and element tags `1..=M` in mesh order. Every distinct
//! region tag gets one volume entity (entity tags `1, 2, ...` in ascending region-tag order)
//! whose physical group is the region tag; 4.1 `$Elements` has one block per run of
//! consecutive elements with the same tag, so element order is preserved. Hexahedra are
//! written in gmsh/VTK order. gmsh itself expects positive physical tags; region tag 0 is
//! written as physical tag 0, which this reader round-trips.

use crate::mesh::encode::{file_order, push_point};
use crate::mesh::lexer::{clip, num, point, values, Cursor};
use crate::mesh::records::RawElements;
use crate::mesh::{ElementKind, Mesh, MeshError};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::str::FromStr;

/// The two `$Nodes`/`$Elements` layouts: version 2.x and version 4.1.
#[derive(Clone, Copy, PartialEq)]
enum Layout {
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
pub fn parse_msh(text: &str, path: &str) -> Result<Mesh, MeshError> {
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
        "2" | "2.0" | "2.1" | "2.2" => Layout::V2,
        "4.1" => Layout::V4,
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
            ("$Nodes", Layout::V2) => nodes = Some(msh2_nodes(&mut c)?),
            ("$Nodes", Layout::V4) => nodes = Some(msh4_nodes(&mut c)?),
            ("$Elements", Layout::V2) => elements = Some(msh2_elements(&mut c)?),
            ("$Elements", Layout::V4) => elements = Some(msh4_elements(&mut c, &entity_phys)?),
            ("$Entities", Layout::V4) => entity_phys = msh4_entities(&mut c)?,
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
    c.plausible(ln, n, 8, "nodes")?;
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
    c.plausible(ln, n, 6, "elements")?;
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
    c.plausible(hl, total, 8, "nodes")?;
    c.plausible(hl, nblocks, 8, "node blocks")?;
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
    c.plausible(hl, total, 4, "elements")?;
    c.plausible(hl, nblocks, 8, "element blocks")?;
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
