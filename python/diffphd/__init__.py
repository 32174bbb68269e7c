"""diffphd from Python: differentiable Projective Dynamics scenes, rollouts and gradients
as NumPy arrays, over the diffphd Rust library (the same code as the ``diffphd`` command
line, not a wrapper around it).

>>> import diffphd
>>> scene = diffphd.Scene("scenes/cantilever.toml", set={"simulation.frames": 5})
>>> r = scene.simulate(threads=2)
>>> r.positions.shape            # (frames + 1, nodes, 3)
(6, 756, 3)

See docs/python.md for the API and the errors.
"""

from ._errors import (
    BackendError,
    DiffphdError,
    InputError,
    ModelError,
    NotConvergedError,
    OutputError,
    SceneError,
    SolverError,
)
from ._diffphd import Rollout, Scene, __version__, cuda_feature, cuda_status, git_commit
from ._from_arrays import scene_from_arrays

__all__ = [
    "BackendError",
    "DiffphdError",
    "InputError",
    "ModelError",
    "NotConvergedError",
    "OutputError",
    "Rollout",
    "Scene",
    "SceneError",
    "SolverError",
    "__version__",
    "cuda_feature",
    "cuda_status",
    "git_commit",
    "scene_from_arrays",
]
