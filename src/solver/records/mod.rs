//! What the solver reports and reads: resolved settings (`config`), per-step statistics
//! (`stats`), errors (`error`) and the per-element output fields (`cell_fields`).

pub mod cell_fields;
pub mod config;
pub mod error;
pub mod stats;
