"""Type stubs of the extension module ``diffphd._diffphd`` (see docs/python.md)."""

from os import PathLike
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

__version__: str
git_commit: Optional[str]
cuda_feature: bool

_Set = Union[Mapping[str, Any], Sequence[str], str, None]
_ArrayLike = npt.ArrayLike

def cuda_status() -> Optional[str]:
    """Why ``backend="cuda"`` cannot run here, or None when it can."""

class Scene:
    """A scene (TOML) with ``set`` overrides, and its model as arrays."""

    def __init__(self, path: Union[str, PathLike], set: _Set = None) -> None: ...
    @staticmethod
    def from_toml(
        text: str, set: _Set = None, base_dir: Union[str, PathLike, None] = None
    ) -> "Scene": ...
    @property
    def path(self) -> str: ...
    @property
    def hash(self) -> str: ...
    @property
    def overrides(self) -> List[str]: ...
    @property
    def effective_toml(self) -> str: ...
    @property
    def frames(self) -> int: ...
    @property
    def dt(self) -> float: ...
    @property
    def num_nodes(self) -> int: ...
    @property
    def num_elements(self) -> int: ...
    @property
    def rest_positions(self) -> npt.NDArray[np.float64]: ...
    @property
    def initial_positions(self) -> npt.NDArray[np.float64]: ...
    @property
    def initial_velocities(self) -> npt.NDArray[np.float64]: ...
    @property
    def elements(self) -> npt.NDArray[np.int64]: ...
    @property
    def element_nodes(self) -> npt.NDArray[np.int64]: ...
    @property
    def element_offsets(self) -> npt.NDArray[np.int64]: ...
    @property
    def surface(self) -> npt.NDArray[np.int64]: ...
    @property
    def youngs_modulus(self) -> npt.NDArray[np.float64]: ...
    @property
    def fixed_nodes(self) -> npt.NDArray[np.int64]: ...
    @property
    def bodies(self) -> List[Dict[str, Any]]: ...
    @property
    def regions(self) -> List[Dict[str, Any]]: ...
    @property
    def parameters(self) -> List[Dict[str, Any]]: ...
    @property
    def muscles(self) -> List[Dict[str, Any]]: ...
    def simulate(
        self,
        frames: Optional[int] = None,
        threads: Optional[int] = None,
        backend: str = "cpu",
        x0: Optional[_ArrayLike] = None,
        v0: Optional[_ArrayLike] = None,
        youngs: Optional[_ArrayLike] = None,
    ) -> "Rollout": ...
    def grad(
        self,
        values: Optional[Mapping[str, float]] = None,
        threads: Optional[int] = None,
        backend: str = "cpu",
    ) -> Dict[str, Any]: ...
    # The native half of diffphd.torch (use diffphd.torch.rollout/step).
    def _inputs(self) -> List[Dict[str, Any]]: ...
    def _record(
        self,
        theta: Optional[_ArrayLike] = None,
        x0: Optional[_ArrayLike] = None,
        v0: Optional[_ArrayLike] = None,
        threads: Optional[int] = None,
    ) -> "Tape": ...
    def _record_step(
        self,
        frame: int,
        x_t: _ArrayLike,
        v_t: _ArrayLike,
        controls_t: Optional[_ArrayLike] = None,
        theta: Optional[_ArrayLike] = None,
        threads: Optional[int] = None,
    ) -> "Tape": ...

class Tape:
    """A recorded rollout or step at parameter values theta, and its reverse sweep."""

    @property
    def positions(self) -> npt.NDArray[np.float64]: ...
    @property
    def velocities(self) -> npt.NDArray[np.float64]: ...
    @property
    def start(self) -> int: ...
    def gradient(
        self, dx: Optional[_ArrayLike] = None, dv: Optional[_ArrayLike] = None
    ) -> Dict[str, npt.NDArray[np.float64]]: ...

class Rollout:
    """States of frames 0..T, the run log, and the frame writer."""

    @property
    def positions(self) -> npt.NDArray[np.float64]: ...
    @property
    def velocities(self) -> npt.NDArray[np.float64]: ...
    @property
    def contact_forces(self) -> Optional[npt.NDArray[np.float64]]: ...
    @property
    def log(self) -> Dict[str, Any]: ...
    def __len__(self) -> int: ...
    def write_frames(self, dir: Union[str, PathLike], every: int = 1) -> List[str]: ...
