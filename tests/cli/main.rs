//! The command line end to end: exit codes and messages, output folders, frames, provenance,
//! determinism, kill safety, scene keys and shipped scenes, the schema, sweeps and the mesh tools.
//!
//! One test binary; each module was a test binary of its own before the workspace split.
//! The files are grouped in folders (`docs/`: the documentation and the scene format,
//! `errors/`: bad input, failures and interruption, `outputs/`: what a run writes); the
//! module names, and so the test names, stay flat.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

#[path = "errors/cancel.rs"]
mod cancel;
#[path = "errors/cli_errors.rs"]
mod cli_errors;
#[path = "docs/cli_reference.rs"]
mod cli_reference;
#[path = "outputs/determinism.rs"]
mod determinism;
#[path = "docs/docs.rs"]
mod docs;
#[path = "errors/fuzz_corpus.rs"]
mod fuzz_corpus;
mod mesh_tools;
mod mpm_scenes;
#[path = "outputs/outdir.rs"]
mod outdir;
#[path = "outputs/output.rs"]
mod output;
#[path = "outputs/plot.rs"]
mod plot;
#[path = "errors/reliability.rs"]
mod reliability;
#[path = "outputs/reproduce.rs"]
mod reproduce;
#[path = "errors/rough_edges.rs"]
mod rough_edges;
#[path = "docs/scene_keys.rs"]
mod scene_keys;
mod scenes;
#[path = "docs/schema.rs"]
mod schema;
mod session;
mod sweep;
#[path = "docs/tutorial.rs"]
mod tutorial;
#[path = "outputs/vtu_frames.rs"]
mod vtu_frames;
