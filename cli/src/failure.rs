//! The failure every command returns: an error with the process exit code it maps to (the
//! codes are listed in the crate's documentation).

/// A CLI failure with its exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub error: anyhow::Error,
}

impl Failure {
    pub fn input(e: impl Into<anyhow::Error>) -> Self {
        Failure {
            code: 2,
            error: e.into(),
        }
    }
    pub fn run(e: impl Into<anyhow::Error>) -> Self {
        Failure {
            code: 1,
            error: e.into(),
        }
    }
    /// Forward steps that missed their stopping test (exit code [`EXIT_NOT_CONVERGED`]).
    pub fn not_converged(e: impl Into<anyhow::Error>) -> Self {
        Failure {
            code: EXIT_NOT_CONVERGED,
            error: e.into(),
        }
    }
}

/// Exit code of a run whose forward steps missed their stopping test.
pub const EXIT_NOT_CONVERGED: i32 = 3;

impl Failure {
    /// A solver error as a failure: [`EXIT_NOT_CONVERGED`] for a step that missed its test
    /// under `on_nonconvergence = "error"`, 1 otherwise.
    pub fn solver(e: diffphd::solver::SolverError, context: String) -> Self {
        // a start inside an obstacle or another body is bad input (2), whichever command
        let code = e.exit_code();
        Failure {
            code,
            error: anyhow::Error::new(e).context(context),
        }
    }
}
