//! The PD method (spec §6): the step (`forward`: its start, the phases of `mode = "accurate"`,
//! its end), the PD iteration written once over a backend (`iterate`: local step, global
//! solve, Anderson acceleration, the dual gate), its two backends (`host`, `resident`: the
//! vectors in host memory or on an accelerator), its accurate Newton–Krylov phase
//! (`newton_krylov`) and its adjoint. The stages it shares with the other methods (local
//! step, Anderson, the gate) are `solver::stages`.

pub(crate) mod adjoint;
pub mod forward;
pub(in crate::solver) mod host;
pub(in crate::solver) mod iterate;
pub mod newton_krylov;
pub(in crate::solver) mod resident;
pub mod stepper;
