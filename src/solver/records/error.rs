//! Solver failures.

/// Solver failures, always with the frame (time step, 1-based: the step producing frame
/// `frame`), the PD iteration and the element where one is known.
#[derive(Debug, thiserror::Error)]
pub enum SolverError {
    #[error("frame {frame}, PD iteration {iteration}: non-finite value (NaN/inf) in the local step of element {element}")]
    NonFiniteLocal {
        frame: usize,
        iteration: usize,
        element: usize,
    },
    #[error("frame {frame}, PD iteration {iteration}: the iterate became non-finite (diverged){}", element.map(|e| format!("; first element with a non-finite deformation gradient: {e}")).unwrap_or_default())]
    Diverged {
        frame: usize,
        iteration: usize,
        element: Option<usize>,
    },
    #[error("frame {frame}: PD did not converge in {iterations} iterations (position gate {position:.3e}, projection gate {projection:.3e}; ≤ 1 means met)")]
    NotConverged {
        frame: usize,
        iterations: usize,
        position: f64,
        projection: f64,
    },
    /// A Newton step (`method = "newton"`) missed its stopping test under
    /// `on_nonconvergence = "error"`: neither $\|\nabla g\|\le$ `newton_tol`$\cdot s$ nor the
    /// round-off stop (`crate::solver::newton` module docs) within `newton_max_iterations`.
    #[error("frame {frame}: Newton did not converge in {iterations} Newton iterations (relative gradient {relative_gradient:.3e} against solver.newton_tol {tol:.1e})")]
    NewtonNotConverged {
        frame: usize,
        iterations: usize,
        relative_gradient: f64,
        tol: f64,
    },
    /// A contact solve hit its wall-clock guard under `on_nonconvergence = "error"`.
    #[error("frame {frame}, iteration {iteration}: the contact solve hit its time cap contact.max_seconds = {max_seconds} s; the step did not converge (a last-resort wall-clock guard: where it stops depends on the machine's speed and load; contact.max_newton is the deterministic cap)")]
    ContactTimeLimit {
        frame: usize,
        iteration: usize,
        max_seconds: f64,
    },
    /// The accelerator failed in the step producing frame `frame` (its local step, global
    /// solve, or the Newton–Krylov phase's ΔA·z and $A^{-1}$ solves). The error is in the
    /// message, not a `source()`, so that a printed chain names it once.
    #[error("frame {frame}, PD iteration {iteration}: accelerator failed: {error}")]
    Offload {
        frame: usize,
        iteration: usize,
        error: crate::solver::offload::OffloadError,
    },
    /// The accelerator failed in the backward of step `frame` (ΔA·z, an $A^{-1}$ solve or the
    /// parameter gradients on the device).
    #[error("frame {frame}, adjoint: accelerator failed: {error}")]
    AdjointOffload {
        frame: usize,
        error: crate::solver::offload::OffloadError,
    },
    /// The accelerator (`--backend`) could not be attached to a simulator.
    #[error("accelerator: {0}")]
    Accelerator(crate::solver::offload::OffloadError),
    /// A body starts inside an obstacle deeper than `contact.margin` (issue 18).
    #[error("{0}")]
    InitialPenetration(Box<crate::contact::initial::Penetration>),
    /// With `[contact] bodies = true`, a body starts inside another body deeper than
    /// `contact.margin` (issue 18).
    #[error("{0}")]
    InitialOverlap(Box<crate::contact::initial::BodyOverlap>),
    #[error("unsupported combination: {0}")]
    Unsupported(String),
    #[error("global matrix: {0}")]
    Linalg(#[from] crate::linalg::LinalgError),
    /// A solve with the factor of $A$ failed (a device factor: [`LinalgError::Backend`]) in
    /// the step producing frame `frame`, at PD iteration `iteration`.
    ///
    /// [`LinalgError::Backend`]: crate::linalg::LinalgError::Backend
    #[error("frame {frame}, PD iteration {iteration}: {error}")]
    Solve {
        frame: usize,
        iteration: usize,
        error: crate::linalg::LinalgError,
    },
    /// The caller's [`crate::cancel::Cancel`] token tripped in the step (forward) or the
    /// backward of frame `frame`, at iteration `iteration` of the loop `stage`. The step's
    /// state is not defined; the simulator's factor and settings are unchanged, so it can
    /// run again.
    #[error("frame {frame}: cancelled at {stage} {iteration}")]
    Cancelled {
        frame: usize,
        stage: crate::cancel::Stage,
        iteration: usize,
    },
}

impl SolverError {
    /// A tripped poll in frame `frame`.
    pub fn cancelled(frame: usize, c: crate::cancel::Cancelled) -> Self {
        SolverError::Cancelled {
            frame,
            stage: c.stage,
            iteration: c.iteration,
        }
    }

    /// [`SolverError::Solve`], or [`SolverError::Cancelled`] for a cancelled solve.
    pub fn solve(frame: usize, iteration: usize, error: crate::linalg::LinalgError) -> Self {
        match error {
            crate::linalg::LinalgError::Cancelled(c) => Self::cancelled(frame, c),
            error => SolverError::Solve {
                frame,
                iteration,
                error,
            },
        }
    }

    /// [`SolverError::Linalg`], or [`SolverError::Cancelled`] for a cancelled solve.
    pub fn linalg(frame: usize, error: crate::linalg::LinalgError) -> Self {
        match error {
            crate::linalg::LinalgError::Cancelled(c) => Self::cancelled(frame, c),
            error => SolverError::Linalg(error),
        }
    }

    /// [`SolverError::Offload`], or [`SolverError::Cancelled`] for a cancelled stage.
    pub fn offload(
        frame: usize,
        iteration: usize,
        error: crate::solver::offload::OffloadError,
    ) -> Self {
        match error {
            crate::solver::offload::OffloadError::Solve(crate::linalg::LinalgError::Cancelled(
                c,
            )) => Self::cancelled(frame, c),
            error => SolverError::Offload {
                frame,
                iteration,
                error,
            },
        }
    }

    /// [`SolverError::AdjointOffload`], or [`SolverError::Cancelled`] for a cancelled
    /// backward solve.
    pub fn adjoint_offload(frame: usize, error: crate::solver::offload::OffloadError) -> Self {
        match error {
            crate::solver::offload::OffloadError::Solve(crate::linalg::LinalgError::Cancelled(
                c,
            )) => Self::cancelled(frame, c),
            error => SolverError::AdjointOffload { frame, error },
        }
    }

    /// Whether the step was cancelled by the caller's token ([`SolverError::Cancelled`]).
    pub fn is_cancelled(&self) -> bool {
        matches!(
            self,
            SolverError::Cancelled { .. }
                | SolverError::Linalg(crate::linalg::LinalgError::Cancelled(_))
        )
    }
}

impl SolverError {
    /// The CLI's exit code: 3 for a step that missed its stopping test (or its contact time
    /// cap) under `on_nonconvergence = "error"`, 2 for a start inside an obstacle or another
    /// body (bad input), 130 for a cancelled step (the exit code of an interrupt), 1
    /// otherwise.
    pub fn exit_code(&self) -> i32 {
        if self.is_cancelled() {
            return 130;
        }
        match self {
            SolverError::NotConverged { .. }
            | SolverError::NewtonNotConverged { .. }
            | SolverError::ContactTimeLimit { .. } => 3,
            SolverError::InitialPenetration(_) | SolverError::InitialOverlap(_) => 2,
            _ => 1,
        }
    }
}
