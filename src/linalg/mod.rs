//! Sparse linear algebra: assembly of the per-axis PD matrix $\hat A$ (spec §5.1), METIS
//! nested-dissection ordering (§5.2), the persistent sparse Cholesky factor reused by the
//! forward global step, the contact Delassus operator and the backward adjoint (§5.3–5.5).
//!
//! The factor sits behind [`LinearSolver`] so that a GPU implementation can take over the
//! solves without the solver knowing (the `gpu` module implements it; linalg does not import it).

pub mod cholesky;
pub mod csc;
pub mod krylov;
pub mod ordering;
pub mod schwarz;
pub mod simplicial_split;
pub mod supernodal;
pub mod system;
#[cfg(test)]
pub(crate) mod test_matrices;
pub mod tree_solve;

pub use cholesky::{SparseCholesky, SymbolicFactor};
pub use csc::CscMatrix;
pub use system::{AxisDirichlet, GlobalSystem, SystemPlan};

/// Errors of factorization and ordering, carrying the failing index.
#[derive(Debug, thiserror::Error)]
pub enum LinalgError {
    #[error("matrix is not positive definite: non-positive pivot at (permuted) row {index}")]
    NotPositiveDefinite { index: usize },
    #[error("METIS_NodeND failed with status {status} on a graph of {n} vertices")]
    Metis { status: i32, n: usize },
    #[error("symbolic Cholesky analysis of a {n}x{n} matrix failed: {reason}")]
    Symbolic { n: usize, reason: &'static str },
    #[error("matrix of dimension {found} factored on an analysis of dimension {expected}")]
    DimensionMismatch { expected: usize, found: usize },
    #[error("matrix pattern ({nnz} stored entries, dimension {n}) differs from the pattern of the linear-algebra plan")]
    PatternMismatch { n: usize, nnz: usize },
    #[error("matrix stayed indefinite after {shifts} regularisation shifts of its diagonal")]
    StillIndefinite { shifts: usize },
    #[error("non-finite value in the global matrix at row {row}, column {col}")]
    NonFinite { row: usize, col: usize },
    /// A solve was asked of a system that has not been factored (yet).
    #[error("solve before the matrix was factored")]
    NotFactored,
    /// A [`LinearSolver`] backend (the GPU system) failed in a solve; `what` names the solve
    /// (`"GPU global solve"`, `"GPU multi-RHS solve"`), `error` is the backend's typed error
    /// (in the message, not a `source()`, so that a printed chain names it once).
    #[error("{what} failed: {error}")]
    Backend {
        what: &'static str,
        error: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The caller's [`crate::cancel::Cancel`] token tripped inside an iterative solve (a
    /// contact solve, an adjoint Krylov iteration); the solve's result is not defined.
    #[error(transparent)]
    Cancelled(#[from] crate::cancel::Cancelled),
}

/// A solver for the three per-axis systems $\hat A_d x_d = b_d$ (spec Eq. 33) with the
/// Dirichlet reduction of spec §4. Implemented by [`GlobalSystem`] on the CPU; the GPU
/// backend implements the same contract.
pub trait LinearSolver: Send + Sync {
    /// Number of nodes `n` (each axis system is `n × n` before Dirichlet reduction).
    fn num_nodes(&self) -> usize;
    /// Solve $A x = b$ for node-major `b` (length `3n`). Dirichlet DoFs of `x` take the
    /// values in `dirichlet_values` (node-major, only prescribed entries are read), and
    /// their coupling $A_{FD}\bar x_D$ is moved to the right-hand side.
    ///
    /// Fails only where the backend can (a device solve: [`LinalgError::Backend`]); the CPU
    /// factor's solves are infallible once factored.
    fn solve(&self, b: &[f64], dirichlet_values: &[f64], x: &mut [f64]) -> Result<(), LinalgError>;
    /// Solve $A_{FF} z_F = q_F$ with $z_D = 0$ (the adjoint systems of spec §7.2).
    fn solve_homogeneous(&self, q: &[f64], z: &mut [f64]) -> Result<(), LinalgError>;
    /// $y = A x$ with the *unreduced* matrix (all DoFs).
    fn apply_a(&self, x: &[f64], y: &mut [f64]);
    /// Whether the matrix couples the three axes ($A\ne\hat A\otimes I_3$), e.g. a Newton
    /// Hessian. The contact Delassus operator then needs three solves per contact node
    /// instead of one (see `contact::Delassus`). `false` for the PD matrix.
    fn axis_coupled(&self) -> bool {
        false
    }
    /// [`LinearSolver::solve_homogeneous`] for many right-hand sides with the same factor
    /// (the contact Delassus columns): `zs[c]` solves `qs[c]`. The default runs one solve
    /// per column in parallel; a device implementation solves them in one multi-RHS pass.
    fn solve_homogeneous_many(&self, qs: &[Vec<f64>]) -> Result<Vec<Vec<f64>>, LinalgError> {
        use rayon::prelude::*;
        qs.par_iter()
            .map(|q| {
                let mut z = vec![0.0; q.len()];
                self.solve_homogeneous(q, &mut z)?;
                Ok(z)
            })
            .collect()
    }
}
