//! Inverse problems over the forward/adjoint core: declared parameters, loss and gradient
//! evaluation ([`problem::Problem`]), used by `gradcheck` and `optimize`; `grad --verify`'s
//! finite-difference check and the frozen-`e_ref` warning ([`verify`]).

pub mod classes;
pub mod gradcheck;
pub mod lbfgs;
pub mod params;
pub mod problem;
pub mod regularize;
pub mod transform;
pub mod verify;
pub mod writeback;
