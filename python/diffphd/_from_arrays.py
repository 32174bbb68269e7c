"""A one-body scene from arrays: the mesh (vertices, elements), per-element Young's modulus,
fixed nodes and obstacles become a scene (a MEDIT mesh, a per-element modulus file and the
TOML text, in a private folder kept until the interpreter exits), loaded like any scene
file, so every scene key, ``set`` override and message works as for a file."""

import json
import math
import os
import tempfile
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from ._diffphd import Scene
from ._errors import InputError

_FOLDER: Optional[tempfile.TemporaryDirectory] = None

# the library's hex node order (lexicographic, as Scene.elements gives it) -> VTK/MEDIT order
_LEX_TO_VTK = [0, 1, 3, 2, 4, 5, 7, 6]


def _folder() -> str:
    global _FOLDER
    if _FOLDER is None:
        _FOLDER = tempfile.TemporaryDirectory(prefix="diffphd-arrays-")
    return tempfile.mkdtemp(dir=_FOLDER.name)


def _toml_value(v: Any, what: str) -> str:
    """A Python value as TOML text (numbers exact, strings quoted)."""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        x = float(v)
        if not math.isfinite(x):
            raise InputError(f"{what}: {x} is not a finite number")
        return repr(x)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{k} = {_toml_value(x, f'{what}.{k}')}" for k, x in v.items()) + " }"
    if isinstance(v, (Sequence, np.ndarray)):
        return "[" + ", ".join(_toml_value(x, f"{what}[{i}]") for i, x in enumerate(v)) + "]"
    raise InputError(f"{what}: cannot use a {type(v).__name__} as a scene value")


def _real(a: Any, name: str, ndim: int) -> np.ndarray:
    try:
        arr = np.asarray(a)
    except Exception as e:  # ragged lists and the like
        raise InputError(f"{name}: not an array of numbers ({e})") from None
    if arr.dtype.kind not in "fiu":
        raise InputError(f"{name}: expected real numbers (float64), got dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise InputError(f"{name}: expected {ndim} dimension(s), got shape {arr.shape}")
    arr = arr.astype(np.float64)
    bad = np.argwhere(~np.isfinite(arr))
    if len(bad):
        idx = ", ".join(str(i) for i in bad[0])
        raise InputError(f"{name}[{idx}] = {arr[tuple(bad[0])]} is not a finite number")
    return arr


def _indices(a: Any, name: str, ndim: int, n: int) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype.kind not in "iu":
        raise InputError(f"{name}: expected integer node indices, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise InputError(f"{name}: expected {ndim} dimension(s), got shape {arr.shape}")
    bad = np.argwhere((arr < 0) | (arr >= n))
    if len(bad):
        idx = ", ".join(str(i) for i in bad[0])
        raise InputError(f"{name}[{idx}] = {arr[tuple(bad[0])]} is not a node index (0 <= i < {n})")
    return arr.astype(np.int64)


def scene_from_arrays(
    vertices: Any,
    elements: Any,
    youngs_modulus: Any = 1.0e6,
    fixed: Any = None,
    obstacles: Optional[Sequence[Mapping[str, Any]]] = None,
    poisson_ratio: float = 0.45,
    density: float = 1000.0,
    material: str = "corotated",
    dt: float = 0.01,
    frames: int = 1,
    gravity: Sequence[float] = (0.0, 0.0, -9.81),
    set: Any = None,
) -> Scene:
    """A one-body scene from arrays.

    ``vertices`` (n, 3) rest positions (m); ``elements`` (m, 4) tetrahedra or (m, 8)
    hexahedra of 0-based node indices, hexahedra in the order ``Scene.elements`` gives
    (lexicographic: node ``i + 2j + 4k`` at corner (i, j, k)); ``youngs_modulus`` a number or
    (m,) per element (Pa); ``fixed`` node indices held in place (all axes); ``obstacles``
    ``[[obstacle]]`` tables as dicts (``{"type": "plane", "point": [0, 0, 0], "normal":
    [0, 0, 1], "friction": 0.5}``); the rest are ``[simulation]`` and ``[body.material]``
    keys. ``set`` overrides any key as for a scene file (``solver.rel_tol``, ...)."""
    x = _real(vertices, "vertices", 2)
    if x.shape[1] != 3:
        raise InputError(f"vertices: expected shape (n, 3), got {x.shape}")
    n = len(x)
    el = _indices(elements, "elements", 2, n)
    k = el.shape[1]
    if k not in (4, 8):
        raise InputError(f"elements: expected 4 (tet4) or 8 (hex8) nodes per element, got shape {el.shape}")
    m = len(el)
    e = np.asarray(youngs_modulus)
    per_element = e.ndim == 1
    e = _real(youngs_modulus, "youngs_modulus", 1 if per_element else 0)
    if per_element and e.shape != (m,):
        raise InputError(f"youngs_modulus: expected shape ({m},) or a number, got {e.shape}")
    bad = np.argwhere(e.reshape(-1) <= 0)
    if len(bad):
        at = f"[{bad[0][0]}]" if per_element else ""
        raise InputError(f"youngs_modulus{at} = {e.reshape(-1)[bad[0][0]]} must be positive")
    fixed_nodes = None if fixed is None else np.unique(_indices(fixed, "fixed", 1, n))

    folder = _folder()
    section, order = ("Tetrahedra", slice(None)) if k == 4 else ("Hexahedra", _LEX_TO_VTK)
    with open(os.path.join(folder, "body.mesh"), "w") as f:
        f.write(f"MeshVersionFormatted 2\nDimension 3\nVertices\n{n}\n")
        np.savetxt(f, np.hstack([x, np.zeros((n, 1))]), fmt=["%.17g", "%.17g", "%.17g", "%d"])
        f.write(f"{section}\n{m}\n")
        np.savetxt(f, np.hstack([el[:, order] + 1, np.zeros((m, 1), np.int64)]), fmt="%d")
        f.write("End\n")
    lines = [
        "schema_version = 1",
        "[simulation]",
        f"dt = {_toml_value(float(dt), 'dt')}",
        f"frames = {int(frames)}",
        f"gravity = {_toml_value([float(g) for g in gravity], 'gravity')}",
        "[[body]]",
        'name = "body"',
        "[body.mesh]",
        'file = "body.mesh"',
        "[body.material]",
        f"model = {_toml_value(material, 'material')}",
        f"youngs_modulus = {_toml_value(float(e.mean()), 'youngs_modulus')}",
        f"poisson_ratio = {_toml_value(float(poisson_ratio), 'poisson_ratio')}",
        f"density = {_toml_value(float(density), 'density')}",
    ]
    if per_element:
        np.savetxt(os.path.join(folder, "youngs.txt"), e, fmt="%.17g")
        lines.append('youngs_modulus_file = "youngs.txt"')
    if fixed_nodes is not None and len(fixed_nodes):
        np.savetxt(os.path.join(folder, "fixed.txt"), fixed_nodes, fmt="%d")
        lines += ["[[body.dirichlet]]", 'select = { nodes_file = "fixed.txt" }']
    for i, ob in enumerate(obstacles or []):
        if not isinstance(ob, Mapping):
            raise InputError(f"obstacles[{i}]: expected a dict of [[obstacle]] keys")
        lines.append("[[obstacle]]")
        lines += [f"{key} = {_toml_value(v, f'obstacles[{i}].{key}')}" for key, v in ob.items()]
    lines += ["[output]", 'directory = "out/arrays"', ""]
    text = "\n".join(lines)
    path = os.path.join(folder, "scene.toml")
    with open(path, "w") as f:
        f.write(text)
    return Scene(path, set=set)
