//! The one place where the library's errors become Python exceptions: the classes of
//! `diffphd/_errors.py` (`SceneError`, `ModelError`, `BackendError`, `SolverError`,
//! `NotConvergedError`, `InputError`, `OutputError`, all `DiffphdError`s), carrying the
//! command line's one-line message and its exit code (`exit_code`).

use diffphd::session::SessionError;
use diffphd::solver::SolverError;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// An exception of class `class` (a name in `diffphd._errors`) with message `msg`.
pub fn py_err(py: Python<'_>, class: &str, msg: String) -> PyErr {
    let cls = py
        .import("diffphd._errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
    match cls {
        Ok(cls) => PyErr::from_type(cls, (msg,)),
        // the extension imported without its package: still an exception, never a crash
        Err(_) => PyRuntimeError::new_err(msg),
    }
}

/// The exception class of a session error.
fn class_of(e: &SessionError) -> &'static str {
    match e {
        SessionError::Scene(_) | SessionError::Problem { .. } => "SceneError",
        SessionError::Model { .. } => "ModelError",
        SessionError::Backend(_) => "BackendError",
        SessionError::Solver { source, .. } => match source {
            SolverError::NotConverged { .. }
            | SolverError::NewtonNotConverged { .. }
            | SolverError::ContactTimeLimit { .. } => "NotConvergedError",
            SolverError::InitialPenetration(_) | SolverError::InitialOverlap(_) => "SceneError",
            _ => "SolverError",
        },
        SessionError::Setup(_) | SessionError::State { .. } => "SolverError",
        SessionError::Write { .. } => "OutputError",
        SessionError::Threads { .. } => "DiffphdError",
    }
}

/// A session error as its Python exception, with `exit_code` set to the command line's.
pub fn session_err(py: Python<'_>, e: SessionError) -> PyErr {
    let err = py_err(py, class_of(&e), e.to_string());
    let _ = err.value(py).setattr("exit_code", e.exit_code());
    err
}
