//! The PD stages every method and the backward share (spec §6.2, §6.4): the local step
//! (`local`: per-sample projections and their gather), Anderson acceleration (`anderson`:
//! the algorithm and its host store) and the dual gate (`gate`). Numbers in, numbers out:
//! nothing here imports the step context or a method.

pub mod anderson;
pub mod gate;
pub mod local;
