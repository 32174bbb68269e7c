//! Triangle surfaces: readers and writers for `.obj`, `.off`, `.ply` and `.stl`, and a
//! watertightness report ([`SurfaceTopology`]).
//!
//! Readers ([`read_surface`], format by extension):
//! - **OBJ** (ASCII): `v x y z [w | r g b]` (first three numbers used), `f` with `v`, `v/vt`,
//!   `v//vn` or `v/vt/vn` references, 1-based or negative (relative) indices; polygons are
//!   fan-triangulated. `#` comments and all other statements (`vt`, `vn`, `g`, `o`, `s`,
//!   `usemtl`, `mtllib`, `l`, `p`, ...) are ignored.
//! - **OFF** (ASCII): `OFF` (also `COFF`, `NOFF`, `CNOFF`, `STOFF`, ...) with the counts
//!   `#vertices #faces #edges` on the same or the next line, vertex lines whose first three
//!   numbers are the position (extra colour/normal values ignored), face lines
//!   `k i0 .. i(k-1) [colour]`, 0-based; `#` comments. Polygons are fan-triangulated.
//! - **PLY** (ASCII, binary little- and big-endian), parsed with the `ply-rs-bw` crate:
//!   `vertex` element with `x y z` (any numeric type), `face` element with an integer list
//!   `vertex_indices` (or `vertex_index`); polygons are fan-triangulated.
//! - **STL**: binary (80-byte header, `u32` count, 50 bytes per facet; recognised by its exact
//!   size even when the header starts with `solid`) or ASCII (`solid ... facet normal ...
//!   outer loop vertex x y z ×3 endloop endfacet ... endsolid`, several solids allowed).
//!   STL stores no connectivity: vertices with bitwise-equal coordinates (`-0` = `0`) are
//!   merged, in first-appearance order.
//!
//! Every reader checks that indices are in range and coordinates finite, and returns
//! [`MeshError::Parse`] (with a line number, or line 1 and a byte offset for binary data) on
//! malformed input instead of panicking.
//!
//! Writers ([`write_surface`]): OBJ (1-based `f a b c`), OFF, binary PLY (little-endian,
//! `double x y z`, `list uchar int vertex_indices`), binary STL (`float32`, so coordinates are
//! rounded to single precision). [`encode_ply`] and [`encode_stl`] also write the ASCII
//! variants.

use crate::mesh::lexer::{clip, display, num, point, read_bytes, read_text, values};
use crate::mesh::MeshError;
use std::collections::HashMap;
use std::path::Path;

mod write;
pub use write::{encode_obj, encode_off, encode_ply, encode_stl, write_surface};

/// A triangle surface: vertex positions and triangles as vertex index triples.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TriSurface {
    pub vertices: Vec<[f64; 3]>,
    pub triangles: Vec<[usize; 3]>,
}

/// Surface file formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SurfaceFormat {
    Obj,
    Off,
    Ply,
    Stl,
}

impl SurfaceFormat {
    /// Format named by the extension (case-insensitive): `obj`, `off`, `ply`, `stl`.
    pub fn from_path(path: &Path) -> Option<SurfaceFormat> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "obj" => SurfaceFormat::Obj,
            "off" => SurfaceFormat::Off,
            "ply" => SurfaceFormat::Ply,
            "stl" => SurfaceFormat::Stl,
            _ => return None,
        })
    }
}

pub(super) fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

pub(super) fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

impl TriSurface {
    /// Axis-aligned bounding box `(min, max)` of the vertices used by triangles (all vertices
    /// when there are no triangles).
    pub fn bounding_box(&self) -> ([f64; 3], [f64; 3]) {
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        let mut add = |p: &[f64; 3]| {
            for d in 0..3 {
                lo[d] = lo[d].min(p[d]);
                hi[d] = hi[d].max(p[d]);
            }
        };
        if self.triangles.is_empty() {
            self.vertices.iter().for_each(&mut add);
        } else {
            for t in &self.triangles {
                for &v in t {
                    add(&self.vertices[v]);
                }
            }
        }
        (lo, hi)
    }

    /// Signed enclosed volume by the divergence theorem, `Σ x0 · (x1 × x2) / 6`: positive for
    /// a closed surface with outward (counter-clockwise seen from outside) triangles. Only
    /// meaningful for a closed, consistently oriented surface.
    pub fn signed_volume(&self) -> f64 {
        self.triangles
            .iter()
            .map(|t| {
                let [a, b, c] = t.map(|v| self.vertices[v]);
                let n = cross(b, c);
                (a[0] * n[0] + a[1] * n[1] + a[2] * n[2]) / 6.0
            })
            .sum()
    }

    /// Total triangle area.
    pub fn area(&self) -> f64 {
        self.triangles
            .iter()
            .map(|t| {
                let [a, b, c] = t.map(|v| self.vertices[v]);
                let n = cross(sub(b, a), sub(c, a));
                0.5 * (n[0] * n[0] + n[1] * n[1] + n[2] * n[2]).sqrt()
            })
            .sum()
    }

    /// Merges vertices with bitwise-equal coordinates (`-0` = `0`), keeping the first of each,
    /// drops vertices no triangle uses, and renumbers. Returns the number of vertices removed.
    pub fn weld(&mut self) -> usize {
        let key = |p: &[f64; 3]| p.map(|c| (c + 0.0).to_bits());
        let mut used = vec![false; self.vertices.len()];
        for t in &self.triangles {
            for &v in t {
                used[v] = true;
            }
        }
        let mut first: HashMap<[u64; 3], usize> = HashMap::new();
        let mut new_id = vec![usize::MAX; self.vertices.len()];
        let mut verts = Vec::new();
        for (i, p) in self.vertices.iter().enumerate() {
            if !used[i] {
                continue;
            }
            new_id[i] = *first.entry(key(p)).or_insert_with(|| {
                verts.push(*p);
                verts.len() - 1
            });
        }
        for t in &mut self.triangles {
            *t = t.map(|v| new_id[v]);
        }
        let removed = self.vertices.len() - verts.len();
        self.vertices = verts;
        removed
    }
}

/// Edge and triangle defects of a triangle surface. A surface is *watertight* (closed
/// 2-manifold along its edges) when it has no boundary and no non-manifold edge.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SurfaceTopology {
    pub vertices: usize,
    pub triangles: usize,
    /// Distinct undirected edges of the non-degenerate triangles.
    pub edges: usize,
    /// Edges used by exactly one triangle (holes, cracks).
    pub boundary_edges: usize,
    /// Edges used by three or more triangles.
    pub non_manifold_edges: usize,
    /// Edges used by two triangles that traverse it in the same direction (inconsistent
    /// orientation; harmless for the parity inside test, wrong for volumes and normals).
    pub inconsistent_edges: usize,
    /// Triangles that repeat a vertex index (ignored everywhere else).
    pub degenerate_triangles: usize,
}

impl SurfaceTopology {
    /// No boundary and no non-manifold edge.
    pub fn is_watertight(&self) -> bool {
        self.boundary_edges == 0 && self.non_manifold_edges == 0
    }
}

/// Counts the edge defects of `surf` (vertex indices as stored: weld first to merge
/// duplicated vertices).
pub fn topology(surf: &TriSurface) -> SurfaceTopology {
    let mut edges: HashMap<(usize, usize), (u32, i32)> = HashMap::new();
    let mut degenerate = 0;
    for t in &surf.triangles {
        if t[0] == t[1] || t[1] == t[2] || t[0] == t[2] {
            degenerate += 1;
            continue;
        }
        for k in 0..3 {
            let (a, b) = (t[k], t[(k + 1) % 3]);
            let e = edges.entry((a.min(b), a.max(b))).or_insert((0, 0));
            e.0 += 1;
            e.1 += if a < b { 1 } else { -1 };
        }
    }
    let mut r = SurfaceTopology {
        vertices: surf.vertices.len(),
        triangles: surf.triangles.len(),
        edges: edges.len(),
        degenerate_triangles: degenerate,
        ..Default::default()
    };
    for &(count, dir) in edges.values() {
        match count {
            1 => r.boundary_edges += 1,
            2 if dir != 0 => r.inconsistent_edges += 1,
            2 => {}
            _ => r.non_manifold_edges += 1,
        }
    }
    r
}

/// Reads a triangle surface, choosing the format by extension (see the module docs).
pub fn read_surface(path: &Path) -> Result<TriSurface, MeshError> {
    let name = display(path);
    match SurfaceFormat::from_path(path) {
        Some(SurfaceFormat::Obj) => parse_obj(&read_text(path)?, &name),
        Some(SurfaceFormat::Off) => parse_off(&read_text(path)?, &name),
        Some(f @ (SurfaceFormat::Ply | SurfaceFormat::Stl)) => {
            let bytes = read_bytes(path)?;
            if f == SurfaceFormat::Ply {
                parse_ply(&bytes, &name)
            } else {
                parse_stl(&bytes, &name)
            }
        }
        None => Err(MeshError::Format {
            path: name,
            msg: "unknown surface extension (expected .obj, .off, .ply or .stl)".into(),
        }),
    }
}

fn perr(path: &str, line: usize, msg: impl std::fmt::Display) -> MeshError {
    MeshError::Parse {
        path: path.to_string(),
        line,
        msg: msg.to_string(),
    }
}

/// Fan-triangulates polygon `poly` into `out`.
fn fan(poly: &[usize], out: &mut Vec<[usize; 3]>) {
    for k in 1..poly.len().saturating_sub(1) {
        out.push([poly[0], poly[k], poly[k + 1]]);
    }
}

/// Parses an ASCII OBJ surface given as text.
pub fn parse_obj(text: &str, path: &str) -> Result<TriSurface, MeshError> {
    let mut s = TriSurface::default();
    let mut poly = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let ln = i + 1;
        let line = line.split('#').next().unwrap_or("");
        let mut t = line.split_whitespace();
        match t.next() {
            Some("v") => {
                let v: Vec<&str> = t.collect();
                if v.len() < 3 {
                    return Err(perr(
                        path,
                        ln,
                        format!("expected vertex 'v x y z', found {}", values(v.len())),
                    ));
                }
                s.vertices
                    .push(point(&v[..3]).map_err(|m| perr(path, ln, m))?);
            }
            Some("f") => {
                poly.clear();
                for tok in t {
                    let idx = tok.split('/').next().unwrap_or("");
                    let k: i64 = num(idx, "vertex index").map_err(|m| perr(path, ln, m))?;
                    let n = s.vertices.len() as i64;
                    // Negative indices count back from the last vertex read so far.
                    let j = if k < 0 { n + k } else { k - 1 };
                    if !(0..n).contains(&j) {
                        return Err(perr(
                            path,
                            ln,
                            format!("vertex index {k} out of range ({n} vertices defined so far)"),
                        ));
                    }
                    poly.push(j as usize);
                }
                if poly.len() < 3 {
                    return Err(perr(
                        path,
                        ln,
                        format!("face needs at least 3 vertices, found {}", poly.len()),
                    ));
                }
                fan(&poly, &mut s.triangles);
            }
            _ => {}
        }
    }
    if s.triangles.is_empty() {
        return Err(perr(path, text.lines().count().max(1), "file has no faces"));
    }
    Ok(s)
}

/// Parses an ASCII OFF surface given as text.
pub fn parse_off(text: &str, path: &str) -> Result<TriSurface, MeshError> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split('#').next().unwrap_or("")))
        .filter(|(_, l)| !l.trim().is_empty());
    let last = text.lines().count().max(1);
    let eof = |what: &str| {
        perr(
            path,
            last,
            format!("unexpected end of file, expected {what}"),
        )
    };
    let (ln, first) = lines.next().ok_or_else(|| eof("'OFF'"))?;
    let mut toks = first.split_whitespace();
    let head = toks.next().unwrap_or("");
    let upper = head.to_ascii_uppercase();
    // 4OFF (4D) and nOFF (n-dimensional) are not 3D surfaces.
    if !upper.ends_with("OFF") || upper.contains('4') || head.starts_with('n') {
        return Err(perr(
            path,
            ln,
            format!("expected 'OFF' header, found '{}'", clip(head)),
        ));
    }
    let mut counts: Vec<&str> = toks.collect();
    let mut cl = ln;
    if counts.is_empty() {
        let (l, c) = lines
            .next()
            .ok_or_else(|| eof("'#vertices #faces #edges'"))?;
        counts = c.split_whitespace().collect();
        cl = l;
    }
    if !(2..=3).contains(&counts.len()) {
        return Err(perr(
            path,
            cl,
            format!(
                "expected '#vertices #faces #edges', found {}",
                values(counts.len())
            ),
        ));
    }
    let nv: usize = num(counts[0], "number of vertices").map_err(|m| perr(path, cl, m))?;
    let nf: usize = num(counts[1], "number of faces").map_err(|m| perr(path, cl, m))?;
    let mut s = TriSurface {
        vertices: Vec::with_capacity(nv.min(1 << 22)),
        triangles: Vec::with_capacity(nf.min(1 << 22)),
    };
    for i in 0..nv {
        let (l, v) = lines
            .next()
            .ok_or_else(|| eof(&format!("vertex {} of {nv}", i + 1)))?;
        let t: Vec<&str> = v.split_whitespace().collect();
        if t.len() < 3 {
            return Err(perr(
                path,
                l,
                format!(
                    "expected vertex {} of {nv} as 'x y z', found {}",
                    i + 1,
                    values(t.len())
                ),
            ));
        }
        s.vertices
            .push(point(&t[..3]).map_err(|m| perr(path, l, m))?);
    }
    let mut poly = Vec::new();
    for i in 0..nf {
        let (l, f) = lines
            .next()
            .ok_or_else(|| eof(&format!("face {} of {nf}", i + 1)))?;
        let t: Vec<&str> = f.split_whitespace().collect();
        let k: usize = num(t[0], "number of face vertices").map_err(|m| perr(path, l, m))?;
        if k < 3 || t.len() - 1 < k {
            return Err(perr(
                path,
                l,
                format!(
                    "expected face {} of {nf} as 'k i0 .. i(k-1)' with k >= 3, found {}",
                    i + 1,
                    values(t.len())
                ),
            ));
        }
        poly.clear();
        for tok in &t[1..=k] {
            let j: usize = num(tok, "vertex index").map_err(|m| perr(path, l, m))?;
            if j >= nv {
                return Err(perr(
                    path,
                    l,
                    format!("vertex index {j} out of range (file has {nv} vertices, 0-based)"),
                ));
            }
            poly.push(j);
        }
        fan(&poly, &mut s.triangles);
    }
    if s.triangles.is_empty() {
        return Err(perr(path, ln, "file has no faces"));
    }
    Ok(s)
}

/// A parsed PLY file and the positions of its `vertex` element (every vertex needs finite
/// numeric `x y z`).
type PlyVertices = (
    ply_rs_bw::ply::Ply<ply_rs_bw::ply::DefaultElement>,
    Vec<[f64; 3]>,
);

/// Parses a PLY file (ASCII or binary) and reads the positions of its vertices.
pub(in crate::mesh) fn parse_ply_vertices(
    bytes: &[u8],
    path: &str,
) -> Result<PlyVertices, MeshError> {
    use ply_rs_bw::ply::Property;
    let parser = ply_rs_bw::parser::Parser::<ply_rs_bw::ply::DefaultElement>::new();
    let mut r = bytes;
    let ply = parser
        .read_ply(&mut r)
        .map_err(|e| perr(path, 1, format!("not a readable PLY file: {e}")))?;
    let verts = ply
        .payload
        .get("vertex")
        .ok_or_else(|| perr(path, 1, "PLY file has no 'vertex' element"))?;
    let scalar = |p: Option<&Property>| -> Option<f64> {
        Some(match p? {
            Property::Char(v) => *v as f64,
            Property::UChar(v) => *v as f64,
            Property::Short(v) => *v as f64,
            Property::UShort(v) => *v as f64,
            Property::Int(v) => *v as f64,
            Property::UInt(v) => *v as f64,
            Property::Float(v) => *v as f64,
            Property::Double(v) => *v,
            _ => return None,
        })
    };
    let mut out = Vec::with_capacity(verts.len());
    for (k, v) in verts.iter().enumerate() {
        let mut p = [0.0; 3];
        for (d, name) in ["x", "y", "z"].iter().enumerate() {
            p[d] = scalar(v.get(*name))
                .filter(|c| c.is_finite())
                .ok_or_else(|| {
                    perr(
                        path,
                        1,
                        format!("vertex {k}: missing, non-numeric or non-finite '{name}'"),
                    )
                })?;
        }
        out.push(p);
    }
    Ok((ply, out))
}

/// Parses a PLY surface (ASCII or binary) with the `ply-rs-bw` crate.
pub fn parse_ply(bytes: &[u8], path: &str) -> Result<TriSurface, MeshError> {
    use ply_rs_bw::ply::Property;
    let (ply, vertices) = parse_ply_vertices(bytes, path)?;
    let mut s = TriSurface {
        vertices,
        triangles: vec![],
    };
    let nv = s.vertices.len();
    let faces = ply
        .payload
        .get("face")
        .ok_or_else(|| perr(path, 1, "PLY file has no 'face' element"))?;
    let mut poly = Vec::new();
    for (k, f) in faces.iter().enumerate() {
        let list = f.get("vertex_indices").or_else(|| f.get("vertex_index"));
        let ids: Option<Vec<i64>> = match list {
            Some(Property::ListChar(v)) => Some(v.iter().map(|&x| x as i64).collect()),
            Some(Property::ListUChar(v)) => Some(v.iter().map(|&x| x as i64).collect()),
            Some(Property::ListShort(v)) => Some(v.iter().map(|&x| x as i64).collect()),
            Some(Property::ListUShort(v)) => Some(v.iter().map(|&x| x as i64).collect()),
            Some(Property::ListInt(v)) => Some(v.iter().map(|&x| x as i64).collect()),
            Some(Property::ListUInt(v)) => Some(v.iter().map(|&x| x as i64).collect()),
            _ => None,
        };
        let Some(ids) = ids else {
            return Err(perr(
                path,
                1,
                format!("face {k}: no integer list property 'vertex_indices'"),
            ));
        };
        if ids.len() < 3 {
            return Err(perr(
                path,
                1,
                format!("face {k} has {} vertices", ids.len()),
            ));
        }
        poly.clear();
        for &i in &ids {
            if i < 0 || i as usize >= nv {
                return Err(perr(
                    path,
                    1,
                    format!("face {k}: vertex index {i} out of range (file has {nv} vertices)"),
                ));
            }
            poly.push(i as usize);
        }
        fan(&poly, &mut s.triangles);
    }
    if s.triangles.is_empty() {
        return Err(perr(path, 1, "file has no faces"));
    }
    Ok(s)
}

/// Adds STL vertex `p`, merging bitwise-equal coordinates.
fn stl_vertex(s: &mut TriSurface, seen: &mut HashMap<[u64; 3], usize>, p: [f64; 3]) -> usize {
    *seen
        .entry(p.map(|c| (c + 0.0).to_bits()))
        .or_insert_with(|| {
            s.vertices.push(p);
            s.vertices.len() - 1
        })
}

/// Parses a binary or ASCII STL file (see the module docs).
pub fn parse_stl(bytes: &[u8], path: &str) -> Result<TriSurface, MeshError> {
    let binary_count = (bytes.len() >= 84)
        .then(|| u32::from_le_bytes([bytes[80], bytes[81], bytes[82], bytes[83]]) as usize)
        .filter(|&n| n.checked_mul(50).and_then(|b| b.checked_add(84)) == Some(bytes.len()));
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(256)]).into_owned();
    let mut s = TriSurface::default();
    let mut seen = HashMap::new();
    if let Some(n) = binary_count {
        for f in 0..n {
            let rec = &bytes[84 + 50 * f..84 + 50 * f + 50];
            let mut tri = [0usize; 3];
            for (k, slot) in tri.iter_mut().enumerate() {
                let mut p = [0.0; 3];
                for (d, c) in p.iter_mut().enumerate() {
                    let o = 12 + 12 * k + 4 * d;
                    *c = f32::from_le_bytes([rec[o], rec[o + 1], rec[o + 2], rec[o + 3]]) as f64;
                }
                if p.iter().any(|c| !c.is_finite()) {
                    return Err(perr(
                        path,
                        1,
                        format!("byte {}: facet {f} has a non-finite vertex", 84 + 50 * f),
                    ));
                }
                *slot = stl_vertex(&mut s, &mut seen, p);
            }
            s.triangles.push(tri);
        }
    } else if head.trim_start().starts_with("solid") {
        let text = String::from_utf8_lossy(bytes);
        let mut corners: Vec<usize> = Vec::with_capacity(3);
        let mut in_facet = false;
        let mut last = 1;
        for (i, line) in text.lines().enumerate() {
            let ln = i + 1;
            last = ln;
            let t: Vec<&str> = line.split_whitespace().collect();
            let Some(&key) = t.first() else { continue };
            match key {
                "solid" | "endsolid" | "outer" | "endloop" => {}
                "facet" => {
                    if in_facet {
                        return Err(perr(
                            path,
                            ln,
                            "'facet' inside a facet (missing 'endfacet')",
                        ));
                    }
                    in_facet = true;
                    corners.clear();
                }
                "vertex" => {
                    if !in_facet || t.len() != 4 || corners.len() == 3 {
                        return Err(perr(
                            path,
                            ln,
                            "expected 'vertex x y z' as one of the 3 vertices of a facet",
                        ));
                    }
                    let p = point(&t[1..4]).map_err(|m| perr(path, ln, m))?;
                    corners.push(stl_vertex(&mut s, &mut seen, p));
                }
                "endfacet" => {
                    if !in_facet || corners.len() != 3 {
                        return Err(perr(
                            path,
                            ln,
                            format!("facet ends with {} vertices, expected 3", corners.len()),
                        ));
                    }
                    s.triangles.push([corners[0], corners[1], corners[2]]);
                    in_facet = false;
                }
                other => {
                    return Err(perr(
                        path,
                        ln,
                        format!("unexpected '{}' in ASCII STL", clip(other)),
                    ))
                }
            }
        }
        if in_facet {
            return Err(perr(path, last, "unexpected end of file inside a facet"));
        }
    } else {
        return Err(perr(
            path,
            1,
            format!(
                "neither ASCII STL (starting with 'solid') nor binary STL (84 + 50 x count bytes; file has {} bytes)",
                bytes.len()
            ),
        ));
    }
    if s.triangles.is_empty() {
        return Err(perr(path, 1, "file has no facets"));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::shapes::{icosphere, torus};
    use proptest::prelude::*;

    /// An icosphere whose coordinates are exactly representable in `f32` (so STL round trips
    /// are exact too).
    fn sphere32() -> TriSurface {
        let mut s = icosphere(1.5, [0.25, -1.0, 2.0], 2);
        for p in &mut s.vertices {
            *p = p.map(|c| c as f32 as f64);
        }
        s
    }

    /// Same triangles with the same corner coordinates (STL renumbers vertices in
    /// first-appearance order), and no unused vertex.
    fn same_geometry(a: &TriSurface, b: &TriSurface) -> bool {
        let corners = |s: &TriSurface| -> Vec<[[f64; 3]; 3]> {
            s.triangles
                .iter()
                .map(|t| t.map(|v| s.vertices[v]))
                .collect()
        };
        a.vertices.len() == b.vertices.len() && corners(a) == corners(b)
    }

    #[test]
    fn every_format_round_trips() {
        let s = sphere32();
        let dir = tempfile::tempdir().expect("tempdir");
        for name in ["s.obj", "s.off", "s.ply", "s.stl"] {
            let p = dir.path().join(name);
            write_surface(&p, &s).expect("write");
            let back = read_surface(&p).expect("read");
            if name.ends_with(".stl") {
                assert!(same_geometry(&back, &s), "{name}");
            } else {
                assert!(back == s, "{name}");
            }
        }
        // The ASCII variants of PLY and STL.
        assert!(parse_ply(&encode_ply(&s, false), "a.ply").expect("ascii ply") == s);
        let stl = parse_stl(&encode_stl(&s, false), "a.stl").expect("ascii stl");
        assert!(same_geometry(&stl, &s));
        // Full double precision through OBJ, OFF and PLY.
        let t = torus(1.0, 0.3, [0.1, 0.2, 0.3], 12, 6);
        assert!(parse_obj(&encode_obj(&t), "t.obj").expect("obj") == t);
        assert!(parse_off(&encode_off(&t), "t.off").expect("off") == t);
        assert!(parse_ply(&encode_ply(&t, true), "t.ply").expect("ply") == t);
        assert!(parse_ply(&encode_ply(&t, false), "t.ply").expect("ply") == t);
    }

    #[test]
    fn obj_off_and_ply_details() {
        let obj = "# quad and a negative-index triangle\nv 0 0 0\nv 1 0 0 1.0\nv 1 1 0 0.5 0.5 0.5\nv 0 1 0\nvn 0 0 1\nvt 0 0\ng part\nusemtl red\nf 1/1/1 2//1 3/1 4\nf -4 -2 -1\n";
        let s = parse_obj(obj, "q.obj").expect("obj");
        assert_eq!(s.vertices.len(), 4);
        assert_eq!(s.triangles, vec![[0, 1, 2], [0, 2, 3], [0, 2, 3]]);
        let off =
            "OFF 4 2 0\n# comment\n0 0 0\n1 0 0\n1 1 0 255 0 0\n0 1 0\n4 0 1 2 3\n3 0 2 3 1 0 0\n";
        let s = parse_off(off, "q.off").expect("off");
        assert_eq!(s.triangles, vec![[0, 1, 2], [0, 2, 3], [0, 2, 3]]);
        assert!(parse_off(&off.replace("OFF 4 2 0", "COFF\n4 2 0"), "c.off").is_ok());
        // A huge vertex count in a face line is an error, not an overflow.
        let huge = off.replace("4 0 1 2 3", "18446744073709551615 0 1 2");
        assert!(parse_off(&huge, "h.off").is_err());
        let ply = "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty float z\nproperty uchar red\nelement face 1\nproperty list uchar uint vertex_index\nend_header\n0 0 0 9\n1 0 0 9\n0 1 0 9\n3 0 1 2\n";
        let s = parse_ply(ply.as_bytes(), "q.ply").expect("ply");
        assert_eq!(s.triangles, vec![[0, 1, 2]]);
        let errs: Vec<(Result<TriSurface, MeshError>, usize, &str)> = vec![
            (parse_obj("v 0 0\n", "e.obj"), 1, "expected vertex 'v x y z', found 2 values"),
            (parse_obj("v 0 0 0\nf 1 2 3\n", "e.obj"), 2, "vertex index 2 out of range"),
            (parse_obj("v 0 0 0\nv 1 0 0\nf 1 2\n", "e.obj"), 3, "face needs at least 3 vertices"),
            (parse_obj("v 0 0 0\nf 1 a 3\n", "e.obj"), 2, "expected vertex index, found 'a'"),
            (parse_obj("v 0 0 0\n", "e.obj"), 1, "file has no faces"),
            (parse_off("OFF\n3 1\n0 0 0\n1 0 0\n", "e.off"), 4, "unexpected end of file, expected vertex 3 of 3"),
            (parse_off("OFF\n3 1\n0 0 0\n1 0 0\n0 1 0\n3 0 1 3\n", "e.off"), 6, "vertex index 3 out of range"),
            (parse_off("4OFF\n", "e.off"), 1, "expected 'OFF' header"),
            (parse_ply(b"ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nend_header\n0\n", "e.ply"), 1, "vertex 0: missing"),
            (parse_ply(b"not a ply", "e.ply"), 1, "not a readable PLY file"),
            (parse_stl(b"hello", "e.stl"), 1, "neither ASCII STL"),
            (parse_stl(b"solid x\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nendloop\nendfacet\n", "e.stl"), 7, "facet ends with 2 vertices"),
            (parse_stl(b"solid x\nfacet normal 0 0 1\nouter loop\nvertex 0 0 nan\n", "e.stl"), 4, "z coordinate must be finite"),
        ];
        for (r, line, want) in errs {
            match r {
                Err(MeshError::Parse { line: l, msg, .. }) => {
                    assert!(msg.starts_with(want), "got '{msg}', want '{want}'");
                    assert_eq!(l, line, "{msg}");
                }
                other => panic!("want '{want}', got {other:?}"),
            }
        }
    }

    #[test]
    fn stl_welds_and_binary_solid_header_is_binary() {
        let s = sphere32();
        let mut b = encode_stl(&s, true);
        b[..5].copy_from_slice(b"solid"); // some exporters do this
        let back = parse_stl(&b, "b.stl").expect("binary");
        assert!(same_geometry(&back, &s));
        assert_eq!(topology(&back).boundary_edges, 0);
    }

    #[test]
    fn topology_counts_defects() {
        let mut s = icosphere(1.0, [0.0; 3], 1);
        let t = topology(&s);
        assert!(t.is_watertight());
        assert_eq!((t.triangles, t.edges, t.vertices), (80, 120, 42));
        assert!((s.signed_volume() - s.clone().signed_volume()).abs() == 0.0);
        let removed = s.triangles.pop().expect("tri");
        assert_eq!(topology(&s).boundary_edges, 3);
        s.triangles.push(removed);
        s.triangles.push(removed); // third use of 3 edges
        let t = topology(&s);
        assert_eq!(t.non_manifold_edges, 3);
        s.triangles.pop();
        s.triangles[0].swap(1, 2); // flip one triangle
        assert_eq!(topology(&s).inconsistent_edges, 3);
        s.triangles[0] = [5, 5, 6];
        assert_eq!(topology(&s).degenerate_triangles, 1);
        // Welding merges duplicated vertices and drops unused ones.
        let mut dup = TriSurface {
            vertices: vec![
                [0.0; 3],
                [1.0, 0.0, 0.0],
                [0.0, 1.0, 0.0],
                [-0.0, 0.0, 0.0],
                [7.0; 3],
            ],
            triangles: vec![[0, 1, 2], [3, 2, 1]],
        };
        assert_eq!(dup.weld(), 2);
        assert_eq!(dup.triangles, vec![[0, 1, 2], [0, 2, 1]]);
    }

    fn check(r: Result<TriSurface, MeshError>) {
        match r {
            Ok(s) => {
                assert!(s.triangles.iter().flatten().all(|&v| v < s.vertices.len()));
                assert!(s.vertices.iter().flatten().all(|c| c.is_finite()));
            }
            Err(MeshError::Parse { line, .. }) => assert!(line >= 1),
            Err(e) => panic!("unexpected error kind {e:?}"),
        }
    }

    #[test]
    fn truncation_never_panics() {
        let s = icosphere(1.0, [0.0; 3], 0);
        let texts = [encode_obj(&s), encode_off(&s)];
        for t in &texts {
            for (i, _) in t.char_indices() {
                check(parse_obj(&t[..i], "t.obj"));
                check(parse_off(&t[..i], "t.off"));
            }
        }
        for bytes in [
            encode_ply(&s, true),
            encode_ply(&s, false),
            encode_stl(&s, true),
            encode_stl(&s, false),
        ] {
            for n in 0..bytes.len() {
                check(parse_ply(&bytes[..n], "t.ply"));
                check(parse_stl(&bytes[..n], "t.stl"));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn mutated_surfaces_never_panic(
            which in 0usize..6,
            edits in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<u8>()), 1..8),
        ) {
            let s = icosphere(1.0, [0.0; 3], 0);
            let mut b = match which {
                0 => encode_obj(&s).into_bytes(),
                1 => encode_off(&s).into_bytes(),
                2 => encode_ply(&s, true),
                3 => encode_ply(&s, false),
                4 => encode_stl(&s, true),
                _ => encode_stl(&s, false),
            };
            for (at, op, byte) in edits {
                if b.is_empty() { break; }
                let i = at.index(b.len());
                let c = if which == 2 || which == 4 { byte } else { b"0123456789 -.\nfv/"[byte as usize % 17] };
                match op {
                    0 => b[i] = c,
                    1 => b.insert(i, c),
                    _ => { b.remove(i); }
                }
            }
            let t = String::from_utf8_lossy(&b);
            check(parse_obj(&t, "m.obj"));
            check(parse_off(&t, "m.off"));
            check(parse_ply(&b, "m.ply"));
            check(parse_stl(&b, "m.stl"));
        }
    }
}
