//! The lagged compliant contact model and the convex per-substep contact problem
//! (seed §IV-B–C, `shared/spec/convex-mpm-rigid-notes.md` §1.3–1.4).
//!
//! - [`model`]: one contact point of Drake's `SapHuntCrossleyConstraint` in its *lagged*
//!   approximation: cost ℓ, impulse γ = −∂ℓ/∂v_c and the 3×3 Hessian G = ∂²ℓ/∂v_c².
//! - [`line_search`]: the exact line search (1-D Newton, bisection fallback).
//! - [`grid`]: the convex problem over grid nodes with a lumped (diagonal) mass,
//!   `min_v ½‖v − v*‖²_M + Σ_c ℓ_c(R_cᵀ Σ_k w_ck v_k − b_c)`, solved by the seed's
//!   block-diagonal quasi-Newton method (Algorithm 1).
//! - [`dense`]: the same kind of problem over a dense SPD mass and dense contact Jacobians,
//!   solved by full Newton with a Cholesky factorisation — the reference for [`grid`] and the
//!   rigid-body contact solve.
//! - [`coupling`]: the asynchronous time-splitting driver (seed Eq. 3–4) over a minimal
//!   [`coupling::GridContactProblem`] interface to an MPM substepper.

pub mod coupling;
pub mod dense;
pub mod grid;
pub mod line_search;
pub mod model;

pub use coupling::{
    assemble_substep_problem, assemble_substep_problem_in, coupled_step, coupled_step_in,
    CoupledStepReport, CouplingError, CouplingWorkspace, GridContactProblem, SubstepProblem,
};
pub use dense::{DenseContact, DenseProblem};
pub use grid::{GridContact, GridProblem, QnWorkspace, Solution, SolverOptions, Wrench};
pub use model::{LaggedContact, LaggedParams};

use thiserror::Error;

/// Errors of the contact model and the convex solves. Each names what was wrong and where.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ContactError {
    /// A contact parameter is out of its domain (`name` is the parameter's field name).
    #[error("contact parameter `{name}` = {value} is invalid: {reason}")]
    InvalidParameter {
        /// Field name of the parameter.
        name: &'static str,
        /// Offending value.
        value: f64,
        /// What the domain is.
        reason: &'static str,
    },
    /// Array lengths of a problem disagree.
    #[error("problem dimension mismatch: {what} has length {got}, expected {expected}")]
    DimensionMismatch {
        /// Which array.
        what: &'static str,
        /// Its length.
        got: usize,
        /// The expected length.
        expected: usize,
    },
    /// A contact references a node (or DoF) that does not exist.
    #[error("contact {contact} references node {node}, but the problem has {num_nodes} nodes")]
    NodeOutOfRange {
        /// Contact index.
        contact: usize,
        /// Node index.
        node: usize,
        /// Number of nodes.
        num_nodes: usize,
    },
    /// A lumped mass is not positive and finite.
    #[error("node {node} has mass {mass}; lumped masses must be positive and finite")]
    NonPositiveMass {
        /// Node index.
        node: usize,
        /// The mass.
        mass: f64,
    },
    /// A Hessian (block) was not positive definite; indicates non-finite input.
    #[error("the Hessian block of node {node} is not positive definite (non-finite input?)")]
    NotPositiveDefinite {
        /// Node (block) index; 0 for the dense Hessian.
        node: usize,
    },
    /// The solve did not meet its stopping test within the iteration budget.
    #[error("{solver} did not converge in {iterations} iterations: scaled residual {residual:.3e} > tolerance {tolerance:.3e}")]
    NotConverged {
        /// Which solver.
        solver: &'static str,
        /// Iterations done.
        iterations: usize,
        /// Final ‖D∇ℓ‖.
        residual: f64,
        /// The tolerance it had to meet.
        tolerance: f64,
    },
}
