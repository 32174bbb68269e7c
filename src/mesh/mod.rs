//! Volumetric meshes: element types, procedural generators, file readers and writers,
//! validation and quality reports, and voxelization of closed triangle surfaces.
//!
//! Conventions (used by every reader and generator, and by `crate::solver::model`):
//! - Nodes are rest positions `X_i` in metres, `[f64; 3]`.
//! - `Tet4`: 4 nodes, positively oriented: `det[X1-X0, X2-X0, X3-X0] > 0`.
//! - `Hex8`: 8 nodes in *lexicographic* (bit) order: local node `a` sits at the reference
//!   corner `(a & 1, (a >> 1) & 1, (a >> 2) & 1)`. Readers of VTK/gmsh/MEDIT hexahedra
//!   (bottom face counter-clockwise, then top face) convert with [`HEX_VTK_TO_LEX`].
//! - `tags[e]` is an integer region tag per element (gmsh physical tag, MEDIT reference,
//!   TetGen region attribute; 0 when the file has none).

// Formats: `readers` and `writers` dispatch on the file name to one module per format, and
// every format module builds on the shared lexer, structure checks and writer pieces.
pub mod check;
pub mod formats;
pub mod generate;
pub mod info;
pub mod kdtree;
pub mod points;
pub mod surface;
pub mod validate;

// The formats and generators under their historical paths (`mesh::gmsh`, `mesh::shapes`).
use formats::vtk::tokens as vtk_tokens;
pub use formats::vtk::{self, vtu};
pub use formats::{diffpd_bin, gmsh, medit, readers, tetgen, trisurf, writers};
use formats::{encode, lexer, records};
pub use generate::{crab, shapes, solids, voxelize};

use std::fmt;
use std::path::Path;

/// Volumetric mesh file formats known to [`readers::read_mesh`] and [`writers::write_mesh`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MeshFormat {
    /// TetGen `.node` + `.ele` (tets only).
    Tetgen,
    /// gmsh `.msh`, ASCII 2.2 or 4.1.
    Gmsh,
    /// MEDIT `.mesh`, ASCII.
    Medit,
    /// Legacy VTK `.vtk`, ASCII `UNSTRUCTURED_GRID`.
    Vtk,
    /// VTK XML `.vtu` unstructured grid: ASCII, raw or base64 binary, zlib-compressed.
    Vtu,
    /// DiffPD's binary `.bin` (`Mesh<3, 4|8>`).
    DiffpdBin,
}

impl MeshFormat {
    /// Format named by the file extension (case-insensitive): `node`/`ele`, `msh`, `mesh`,
    /// `vtk`, `vtu`, `bin`; `None` for anything else.
    pub fn from_path(path: &Path) -> Option<MeshFormat> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "node" | "ele" => MeshFormat::Tetgen,
            "msh" => MeshFormat::Gmsh,
            "mesh" => MeshFormat::Medit,
            "vtk" => MeshFormat::Vtk,
            "vtu" => MeshFormat::Vtu,
            "bin" => MeshFormat::DiffpdBin,
            _ => return None,
        })
    }
}

impl fmt::Display for MeshFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MeshFormat::Tetgen => "TetGen .node/.ele",
            MeshFormat::Gmsh => "gmsh .msh",
            MeshFormat::Medit => "MEDIT .mesh",
            MeshFormat::Vtk => "legacy VTK .vtk",
            MeshFormat::Vtu => "VTK XML .vtu",
            MeshFormat::DiffpdBin => "DiffPD .bin",
        })
    }
}

/// Element type of a mesh (one type per mesh).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElementKind {
    /// Linear tetrahedron, 1 quadrature sample.
    Tet4,
    /// Trilinear hexahedron, 2x2x2 Gauss samples (as in DiffPD).
    Hex8,
}

impl ElementKind {
    /// Nodes per element.
    pub fn nodes(self) -> usize {
        match self {
            ElementKind::Tet4 => 4,
            ElementKind::Hex8 => 8,
        }
    }
}

impl fmt::Display for ElementKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElementKind::Tet4 => write!(f, "tet4"),
            ElementKind::Hex8 => write!(f, "hex8"),
        }
    }
}

/// VTK hexahedron local index -> lexicographic local index used internally.
/// `lex[HEX_VTK_TO_LEX[k]] = vtk[k]`.
pub const HEX_VTK_TO_LEX: [usize; 8] = [0, 1, 3, 2, 4, 5, 7, 6];

/// A volumetric mesh with one element type.
#[derive(Clone, Debug, PartialEq)]
pub struct Mesh {
    pub kind: ElementKind,
    /// Rest positions.
    pub nodes: Vec<[f64; 3]>,
    /// Connectivity, `kind.nodes()` indices per element, flattened.
    pub elements: Vec<usize>,
    /// Region tag per element.
    pub tags: Vec<i64>,
}

impl Mesh {
    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }
    pub fn num_elements(&self) -> usize {
        self.elements.len() / self.kind.nodes()
    }
    /// Node indices of element `e`.
    pub fn element(&self, e: usize) -> &[usize] {
        let nv = self.kind.nodes();
        &self.elements[e * nv..(e + 1) * nv]
    }
    /// Centroid of element `e` (mean of its nodes).
    pub fn centroid(&self, e: usize) -> [f64; 3] {
        let mut c = [0.0; 3];
        let el = self.element(e);
        for &i in el {
            for (cd, xd) in c.iter_mut().zip(self.nodes[i]) {
                *cd += xd;
            }
        }
        for v in &mut c {
            *v /= el.len() as f64;
        }
        c
    }
    /// Axis-aligned bounding box `(min, max)` of the nodes.
    pub fn bounding_box(&self) -> ([f64; 3], [f64; 3]) {
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for p in &self.nodes {
            for d in 0..3 {
                lo[d] = lo[d].min(p[d]);
                hi[d] = hi[d].max(p[d]);
            }
        }
        (lo, hi)
    }
}

/// Errors raised while reading, generating or validating meshes. Every variant names the
/// file (where there is one), the line or the element/node index.
#[derive(Debug, thiserror::Error)]
pub enum MeshError {
    #[error("{path}: cannot read mesh file: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("{path}:{line}: {msg}")]
    Parse {
        path: String,
        line: usize,
        msg: String,
    },
    #[error("{path}: unsupported mesh format (expected .node/.ele, .msh, .mesh, .vtk, .vtu, .bin): {msg}")]
    Format { path: String, msg: String },
    #[error("element {element}: {msg}")]
    BadElement { element: usize, msg: String },
    #[error("node {node}: {msg}")]
    BadNode { node: usize, msg: String },
    #[error("{0}")]
    Invalid(String),
}
