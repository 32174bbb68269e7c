//! diffphd: differentiable Projective Dynamics (DiffPhD) for heterogeneous, hyperelastic,
//! contact-rich elastodynamics. See `ARCHITECTURE.md` for the data flow and the module map.
//!
//! Data flows one way: [`scene`] (validated TOML) → [`scene::resolve`] → [`model::Model`]
//! (mesh + per-element arrays) → [`linalg`] (assembled global matrix `A`, its persistent
//! plan and factor) → [`solver::Simulator::step`] rollout (tape) → loss →
//! [`solver::backward`] adjoint → gradients.

// Numerical kernels index several arrays with the same node/sample/axis index, mirroring
// the equations; iterator rewrites would obscure them.
#![allow(clippy::needless_range_loop)]

pub mod contact;
pub mod gpu;
pub mod io;
pub mod linalg;
pub mod material;
pub mod mesh;
pub mod model;
pub mod optimize;
pub mod output;
pub mod scene;
pub mod session;
pub mod solver;
pub mod sweep;
