//! Rigid bodies.
