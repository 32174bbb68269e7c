//! Contact: obstacles, body-body contact, the contact adjoint, scale, stacks, strikes and
//! inverse problems through contact.
//!
//! One test binary; each module was a test binary of its own before the workspace split.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod compliance;
mod contact;
mod contact_bodies;
mod contact_gradients;
mod contact_scale;
mod contact_stack;
mod contact_strike;
mod inverse_contact;
mod paper_scenes;
mod static_friction;
