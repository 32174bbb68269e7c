//! diffphd-mpm: material-point (MLS-MPM) bodies and rigid bodies coupled by a convex,
//! lagged compliant contact model with asynchronous time-splitting — the CPU reference of
//! the convex MPM–rigid seed (`shared/seeds/convex-mpm-rigid-paper.txt`, notes in
//! `shared/spec/convex-mpm-rigid-notes.md`).
//!
//! A math crate at the bottom of the layering: numbers in, numbers out, no file I/O and no
//! scene format. The `diffphd` library wires it into scenes, the rollout loop and frames.
//!
//! - [`mpm`]: particles, the background grid, quadratic B-splines, APIC/MLS-MPM transfers,
//!   constitutive models and plastic return mappings (seed §IV-B).
//! - [`rigid`]: rigid bodies (shapes, mass and inertia, signed distance, DoF drives).
//! - [`contact`]: the lagged compliant contact model and its convex per-substep problem,
//!   solved by the block-diagonal quasi-Newton method with exact line search (seed §IV-A–C).
//! - [`strong`]: the strongly coupled, fully implicit step of the seed's baseline \[10\]
//!   (one convex problem over grid velocities, rigid DoFs and contact; Newton, sparse Cholesky).

#![allow(clippy::needless_range_loop)]

pub mod contact;
pub mod mpm;
pub mod rigid;
pub mod strong;
