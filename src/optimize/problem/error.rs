//! The errors of setting up an inverse problem.

use crate::solver::SolverError;

/// Errors while setting up a problem (they name the scene key).
#[derive(Debug, thiserror::Error)]
pub enum ProblemError {
    #[error("{key}: {msg}")]
    Setup { key: String, msg: String },
    #[error("while simulating the reference trajectory: {0}")]
    Reference(String),
    #[error(transparent)]
    Model(#[from] crate::scene::ModelError),
    #[error(transparent)]
    Solver(#[from] SolverError),
}

/// A setup error at the scene key `key`.
pub(super) fn setup(key: &str, msg: impl Into<String>) -> ProblemError {
    ProblemError::Setup {
        key: key.into(),
        msg: msg.into(),
    }
}
