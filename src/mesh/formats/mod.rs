//! Mesh files: the volumetric readers ([`readers::read_mesh`] picks the format) and writers,
//! one file per format, the shared lexer and element records; triangle-surface files
//! ([`trisurf`]).

pub mod diffpd_bin;
pub(in crate::mesh) mod encode;
pub mod gmsh;
pub(in crate::mesh) mod lexer;
pub mod medit;
pub mod readers;
pub(in crate::mesh) mod records;
pub mod tetgen;
pub mod trisurf;
pub mod vtk;
pub mod writers;
