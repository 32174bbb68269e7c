//! TetGen `.node` + `.ele` files (tetrahedra only).
//!
//! Reading: `.node` has the header `<#points> 3 [<#attributes> [<boundary-marker flag>]]`,
//! then one line `<id> x y z [attributes...] [marker]` per point, numbered consecutively from
//! 0 or 1 (the first id decides which). `.ele` has the header `<#tets> 4 [<#attributes>]`,
//! then `<id> n0 n1 n2 n3 [attributes...]`; the first attribute (TetGen's region attribute,
//! which must be integral) becomes the tag. `#` starts a comment.
//!
//! Writing: `.node` with the header `<#points> 3 0 0`, then `<id> x y z`; `.ele` with the
//! header `<#tets> 4 1`, then `<id> n0 n1 n2 n3 <tag>`, numbered from a given base.

use crate::mesh::check::{duplicate_element, duplicate_message};
use crate::mesh::encode::push_point;
use crate::mesh::lexer::{
    clip, display, int_tag, num, point, read_text, values, with_suffix, Cursor,
};
use crate::mesh::{ElementKind, Mesh, MeshError};
use std::fmt::Write as _;
use std::path::Path;

/// Reads `<stem>.node` and `<stem>.ele`; also returns the numbering base (0 or 1).
pub fn read_tetgen(stem: &Path) -> Result<(Mesh, usize), MeshError> {
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
pub fn parse_tetgen(
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
    c.plausible(hl, n, per.saturating_add(1).saturating_mul(2), "points")?;
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
    c.plausible(hl, nt, 2 * (5 + nattr), "tetrahedra")?;
    let mut elements = Vec::with_capacity(nt.min(1 << 20) * 4);
    let mut tags = Vec::with_capacity(nt.min(1 << 20));
    let mut lines = Vec::with_capacity(nt.min(1 << 20));
    for i in 0..nt {
        let (ln, t) = c.need(|| format!("tetrahedron {} of {nt}", i + 1))?;
        lines.push(ln);
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
    let probe = Mesh {
        kind: ElementKind::Tet4,
        nodes: Vec::new(),
        elements,
        tags,
    };
    if let Some((a, b)) = duplicate_element(&probe) {
        return Err(c.err(
            lines[b],
            duplicate_message(a, b, Some((lines[a], lines[b]))),
        ));
    }
    Ok((probe.elements, probe.tags))
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
