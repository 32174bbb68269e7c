//! Captured geometry as point sets (the frames of a Real2Sim fit, `type = "chamfer"` loss
//! terms): [`read_points`] returns the vertex positions of a point cloud or a mesh file,
//! format by extension.
//!
//! - **PLY** (ASCII or binary, via the triangle-surface reader's parser): every vertex of the
//!   `vertex` element (numeric `x y z`); a `face` element is allowed and ignored, so the
//!   frames `diffphd simulate` writes are valid captures.
//! - **OBJ** (ASCII): every `v x y z` line; faces and all other statements are ignored.
//! - **OFF**, **STL**: the vertices of the surface (these formats need faces).
//!
//! Refused with a [`MeshError`] naming the file (and the line where there is one): a missing
//! or unreadable file, an unknown extension, a malformed or non-finite coordinate, and a file
//! with no point.

use super::lexer::{display, point, read_bytes, read_text, values};
use super::trisurf::{read_surface, SurfaceFormat};
use super::MeshError;
use std::path::Path;

/// Vertex positions of a PLY/OBJ point cloud or mesh (OFF, STL: surface vertices).
pub fn read_points(path: &Path) -> Result<Vec<[f64; 3]>, MeshError> {
    let name = display(path);
    let pts = match SurfaceFormat::from_path(path) {
        Some(SurfaceFormat::Ply) => {
            super::trisurf::parse_ply_vertices(&read_bytes(path)?, &name)?.1
        }
        Some(SurfaceFormat::Obj) => parse_obj_points(&read_text(path)?, &name)?,
        Some(SurfaceFormat::Off | SurfaceFormat::Stl) => read_surface(path)?.vertices,
        None => {
            return Err(MeshError::Format {
                path: name,
                msg: "unknown point-cloud extension (expected .ply, .obj, .off or .stl)".into(),
            })
        }
    };
    if pts.is_empty() {
        return Err(MeshError::Parse {
            path: name,
            line: 1,
            msg: "the file has no points (an empty point cloud)".into(),
        });
    }
    Ok(pts)
}

/// The `v x y z` lines of an OBJ text (extra values such as `w` or colours ignored).
pub fn parse_obj_points(text: &str, path: &str) -> Result<Vec<[f64; 3]>, MeshError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        let mut t = line.split_whitespace();
        if t.next() != Some("v") {
            continue;
        }
        let v: Vec<&str> = t.collect();
        let err = |msg: String| MeshError::Parse {
            path: path.to_string(),
            line: i + 1,
            msg,
        };
        if v.len() < 3 {
            return Err(err(format!(
                "expected vertex 'v x y z', found {}",
                values(v.len())
            )));
        }
        out.push(point(&v[..3]).map_err(|m| err(m.to_string()))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn obj_points_and_errors() {
        let p = parse_obj_points(
            "# cloud\nv 1 2 3\nv 4 5 6 1.0\nvn 0 0 1\nf 1 2 2\n",
            "a.obj",
        )
        .unwrap();
        assert_eq!(p, vec![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
        let e = parse_obj_points("v 1 2 3\nv 1 nan 3\n", "b.obj")
            .unwrap_err()
            .to_string();
        assert!(e.contains("b.obj:2") && e.contains("finite"), "{e}");
        let e = parse_obj_points("v 1 2\n", "c.obj")
            .unwrap_err()
            .to_string();
        assert!(e.contains("c.obj:1"), "{e}");
    }

    #[test]
    fn ply_points_without_faces() {
        let text = "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\nproperty float z\nend_header\n0 0 0\n1 0.5 2\n";
        let (_, p) = crate::mesh::trisurf::parse_ply_vertices(text.as_bytes(), "c.ply").unwrap();
        assert_eq!(p, vec![[0.0, 0.0, 0.0], [1.0, 0.5, 2.0]]);
    }
}
