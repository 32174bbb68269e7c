//! Triangle-surface writers ([`write_surface`], format by extension): OBJ (1-based
//! `f a b c`), OFF, PLY (binary little-endian or ASCII, `double x y z`,
//! `list uchar int vertex_indices`) and STL (binary or ASCII, `float32`).

use super::{cross, sub, SurfaceFormat, TriSurface};
use crate::mesh::encode::{push_point, save};
use crate::mesh::lexer::display;
use crate::mesh::MeshError;
use std::fmt::Write as _;
use std::path::Path;

/// Writes a surface in the format named by the extension (OBJ, OFF, binary PLY, binary STL).
pub fn write_surface(path: &Path, surf: &TriSurface) -> Result<(), MeshError> {
    check_surface(surf)?;
    let bytes = match SurfaceFormat::from_path(path) {
        Some(SurfaceFormat::Obj) => encode_obj(surf).into_bytes(),
        Some(SurfaceFormat::Off) => encode_off(surf).into_bytes(),
        Some(SurfaceFormat::Ply) => encode_ply(surf, true),
        Some(SurfaceFormat::Stl) => encode_stl(surf, true),
        None => {
            return Err(MeshError::Format {
                path: display(path),
                msg: "unknown surface extension (expected .obj, .off, .ply or .stl)".into(),
            })
        }
    };
    save(path, &bytes)
}

/// Rejects triangles with out-of-range indices and non-finite vertices.
fn check_surface(surf: &TriSurface) -> Result<(), MeshError> {
    let nv = surf.vertices.len();
    if let Some(t) = surf
        .triangles
        .iter()
        .position(|t| t.iter().any(|&v| v >= nv))
    {
        return Err(MeshError::Invalid(format!(
            "triangle {t} has a vertex index out of range ({nv} vertices)"
        )));
    }
    if let Some(i) = surf
        .vertices
        .iter()
        .position(|p| p.iter().any(|c| !c.is_finite()))
    {
        return Err(MeshError::BadNode {
            node: i,
            msg: "non-finite surface vertex".into(),
        });
    }
    Ok(())
}

/// OBJ text: `v x y z` lines then `f a b c` (1-based).
pub fn encode_obj(surf: &TriSurface) -> String {
    let mut out = format!(
        "# diffphd surface: {} vertices, {} triangles\n",
        surf.vertices.len(),
        surf.triangles.len()
    );
    for p in &surf.vertices {
        out.push_str("v ");
        push_point(&mut out, p);
        out.push('\n');
    }
    for t in &surf.triangles {
        let _ = writeln!(out, "f {} {} {}", t[0] + 1, t[1] + 1, t[2] + 1);
    }
    out
}

/// OFF text (0-based faces `3 a b c`).
pub fn encode_off(surf: &TriSurface) -> String {
    let mut out = format!("OFF\n{} {} 0\n", surf.vertices.len(), surf.triangles.len());
    for p in &surf.vertices {
        push_point(&mut out, p);
        out.push('\n');
    }
    for t in &surf.triangles {
        let _ = writeln!(out, "3 {} {} {}", t[0], t[1], t[2]);
    }
    out
}

/// PLY bytes, binary little-endian or ASCII: `double x y z`, `list uchar int vertex_indices`.
pub fn encode_ply(surf: &TriSurface, binary: bool) -> Vec<u8> {
    let format = if binary {
        "binary_little_endian"
    } else {
        "ascii"
    };
    let mut out = format!(
        "ply\nformat {format} 1.0\ncomment diffphd surface\nelement vertex {}\nproperty double x\nproperty double y\nproperty double z\nelement face {}\nproperty list uchar int vertex_indices\nend_header\n",
        surf.vertices.len(),
        surf.triangles.len()
    )
    .into_bytes();
    if binary {
        for p in &surf.vertices {
            for c in p {
                out.extend_from_slice(&c.to_le_bytes());
            }
        }
        for t in &surf.triangles {
            out.push(3);
            for &v in t {
                out.extend_from_slice(&(v as i32).to_le_bytes());
            }
        }
    } else {
        let mut s = String::new();
        for p in &surf.vertices {
            push_point(&mut s, p);
            s.push('\n');
        }
        for t in &surf.triangles {
            let _ = writeln!(s, "3 {} {} {}", t[0], t[1], t[2]);
        }
        out.extend_from_slice(s.as_bytes());
    }
    out
}

/// STL bytes (binary or ASCII), one facet per triangle with its unit normal; coordinates are
/// written as `f32` in binary files and with full precision in ASCII ones.
pub fn encode_stl(surf: &TriSurface, binary: bool) -> Vec<u8> {
    let normal = |t: &[usize; 3]| {
        let [a, b, c] = t.map(|v| surf.vertices[v]);
        let n = cross(sub(b, a), sub(c, a));
        let l = (n[0] * n[0] + n[1] * n[1] + n[2] * n[2]).sqrt();
        if l > 0.0 {
            n.map(|x| x / l)
        } else {
            [0.0; 3]
        }
    };
    if binary {
        let mut out = vec![0u8; 80];
        out[..18].copy_from_slice(b"diffphd binary STL");
        out.extend_from_slice(&(surf.triangles.len() as u32).to_le_bytes());
        for t in &surf.triangles {
            for c in normal(t) {
                out.extend_from_slice(&(c as f32).to_le_bytes());
            }
            for &v in t {
                for c in surf.vertices[v] {
                    out.extend_from_slice(&(c as f32).to_le_bytes());
                }
            }
            out.extend_from_slice(&[0, 0]);
        }
        out
    } else {
        let mut s = String::from("solid diffphd\n");
        for t in &surf.triangles {
            s.push_str("facet normal ");
            push_point(&mut s, &normal(t));
            s.push_str("\nouter loop\n");
            for &v in t {
                s.push_str("vertex ");
                push_point(&mut s, &surf.vertices[v]);
                s.push('\n');
            }
            s.push_str("endloop\nendfacet\n");
        }
        s.push_str("endsolid diffphd\n");
        s.into_bytes()
    }
}
