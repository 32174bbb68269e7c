//! The crate's integration tests, one binary (the workspace caps test binaries; see
//! docs/mpm.md for the measured known answers). Each module was a binary of its own;
//! the rigid-body ones sit in `rigid/` (module names stay flat, so do the test names).

mod contact_coupling;
mod contact_coupling_bspline;
mod contact_model;
mod contact_solver;
mod coupling_mpm;
mod mpm_constitutive;
mod mpm_sand_pile;
mod mpm_speed;
mod mpm_transfers;
mod mpm_uniaxial;
mod mpm_walls;
mod mpm_wave;
#[path = "rigid/rigid_dynamics.rs"]
mod rigid_dynamics;
#[path = "rigid/rigid_shapes.rs"]
mod rigid_shapes;
mod strong_coupling;
