//! The PD method (spec §6): the step's iteration (`forward`: local step, global solve,
//! Anderson acceleration, the dual gate), its accurate Newton–Krylov phase, and the same
//! iteration on an accelerator's resident vectors.

pub(crate) mod adjoint;
pub mod anderson;
pub(in crate::solver) mod device_contact;
pub mod forward;
pub mod gate;
pub mod local;
pub mod newton_krylov;
pub(in crate::solver) mod resident;
pub mod stepper;
