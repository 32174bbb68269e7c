//! The command line end to end: exit codes and messages, output folders, frames, provenance,
//! determinism, kill safety, scene keys and shipped scenes, the schema, sweeps and the mesh tools.
//!
//! One test binary; each module was a test binary of its own before the workspace split.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod cancel;
mod cli_errors;
mod cli_reference;
mod determinism;
mod docs;
mod mesh_tools;
mod mpm_scenes;
mod outdir;
mod output;
mod plot;
mod reliability;
mod reproduce;
mod rough_edges;
mod scene_keys;
mod scenes;
mod schema;
mod session;
mod sweep;
mod tutorial;
mod vtu_frames;
