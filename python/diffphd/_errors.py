"""Exception classes of diffphd. Every error of the library arrives as one of these,
carrying the command line's one-line message and, as ``exit_code``, the exit code
``diffphd`` would have returned (2 bad input, 1 failed run, 3 not converged)."""


class DiffphdError(Exception):
    """Base class of every diffphd error."""

    exit_code = 1


class SceneError(DiffphdError, ValueError):
    """The scene file, a ``set`` override, a ``[[parameter]]`` or ``[loss]`` is invalid
    (the message names the file and key), or a body starts inside an obstacle."""

    exit_code = 2


class ModelError(SceneError):
    """The scene resolved to an invalid model (mesh, selector, per-element file)."""


class InputError(DiffphdError, ValueError):
    """A Python argument is invalid: wrong shape or dtype, a non-finite value, an unknown
    parameter name (the message names the argument and index)."""

    exit_code = 2


class BackendError(DiffphdError, RuntimeError):
    """The backend cannot run here (e.g. ``backend="cuda"`` without CUDA) or not this scene."""

    exit_code = 2


class SolverError(DiffphdError, RuntimeError):
    """The simulation failed: divergence, a non-finite state, a failed factorization."""


class NotConvergedError(SolverError):
    """Steps missed the solver's stopping test under ``solver.on_nonconvergence = "fail"``
    (then ``rollout`` holds the completed rollout) or ``"error"``."""

    exit_code = 3


class OutputError(DiffphdError, OSError):
    """A file could not be written."""
