//! Pieces shared by the mesh writers: atomic saving, node order of an element in the files
//! (VTK order for hexahedra) and, from [`crate::io::text`], exact decimal text of numbers.

pub use crate::io::text::push_point;

use crate::mesh::lexer::display;
use crate::mesh::{ElementKind, Mesh, MeshError, HEX_VTK_TO_LEX};
use std::path::Path;

/// Writes `bytes` atomically, mapping errors to [`MeshError::Io`].
pub fn save(path: &Path, bytes: &[u8]) -> Result<(), MeshError> {
    crate::io::write_atomic(path, bytes).map_err(|err| MeshError::Io {
        path: display(path),
        err,
    })
}

/// Element `e` in file order (VTK/gmsh/MEDIT order for hexes).
pub fn file_order(mesh: &Mesh, e: usize) -> Vec<usize> {
    let el = mesh.element(e);
    match mesh.kind {
        ElementKind::Tet4 => el.to_vec(),
        ElementKind::Hex8 => HEX_VTK_TO_LEX.iter().map(|&l| el[l]).collect(),
    }
}
