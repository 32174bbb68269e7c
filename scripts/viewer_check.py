#!/usr/bin/env python3
"""Open diffphd `.vtu` frames the way viewers do and check that every documented field is there.

Usage: viewer_check.py [--bodies N] [--contact] [--require] FRAME.vtu [FRAME.vtu ...]

For each frame, with meshio and with PyVista (VTK's own XML reader), whichever is importable:
  * the point arrays `velocity` (3 components), `node` and `body`, and with --contact
    `contact_force` (3 components), are present with one value per point;
  * the cell arrays `tag`, `body`, `youngs_modulus`, `strain_energy_density` and
    `von_mises_stress` are present with one value per cell;
  * `node` is 0, 1, ... in order, and every body 0..N-1 (with --bodies N) owns points and cells,
    i.e. every body of a multi-body frame was read (meshio keeps only the last of several
    pieces, so a frame written as several pieces fails here).
The fields are those listed in docs/scene-format.md, section `[output]`.

Exit status: 0 all checks passed (or, without --require, no reader importable: says so),
1 a check failed, 2 bad arguments or a reader missing with --require. Prints one line per
frame and reader.
"""
import argparse
import sys

POINT_FIELDS = {"velocity": 3, "node": 1, "body": 1}
CELL_FIELDS = ["tag", "body", "youngs_modulus", "strain_energy_density", "von_mises_stress"]


def comps(a):
    return 1 if a.ndim == 1 else a.shape[1]


def check_arrays(point_data, cell_data, n_points, n_cells, args):
    """Problems found in the arrays of one frame, as strings."""
    import numpy as np

    problems = []
    want_points = dict(POINT_FIELDS)
    if args.contact:
        want_points["contact_force"] = 3
    for name, c in want_points.items():
        if name not in point_data:
            problems.append(f"point array '{name}' missing (has {sorted(point_data)})")
            continue
        a = np.asarray(point_data[name])
        if a.shape[0] != n_points or comps(a) != c:
            problems.append(f"point array '{name}' has shape {a.shape}, expected ({n_points}, {c})")
    for name in CELL_FIELDS:
        if name not in cell_data:
            problems.append(f"cell array '{name}' missing (has {sorted(cell_data)})")
            continue
        a = np.asarray(cell_data[name])
        if a.shape[0] != n_cells or comps(a) != 1:
            problems.append(f"cell array '{name}' has shape {a.shape}, expected ({n_cells},)")
    if problems:
        return problems
    if not np.array_equal(np.asarray(point_data["node"]).ravel(), np.arange(n_points)):
        problems.append("point array 'node' is not 0, 1, ..., n-1")
    if args.bodies is not None:
        for where, data in (("point", point_data), ("cell", cell_data)):
            found = sorted(set(int(b) for b in np.asarray(data["body"]).ravel()))
            if found != list(range(args.bodies)):
                problems.append(f"{where} array 'body' holds bodies {found}, expected 0..{args.bodies - 1}")
    return problems


def with_meshio(path, args):
    import meshio

    m = meshio.read(path)
    n_cells = sum(len(b.data) for b in m.cells)
    # meshio splits cell data per cell block (one block per run of one cell type).
    cell_data = {k: __import__("numpy").concatenate([v.ravel() for v in vs]) for k, vs in m.cell_data.items()}
    return check_arrays(m.point_data, cell_data, len(m.points), n_cells, args), (len(m.points), n_cells)


def with_pyvista(path, args):
    import pyvista as pv

    g = pv.read(path)
    pd = {k: g.point_data[k] for k in g.point_data.keys()}
    cd = {k: g.cell_data[k] for k in g.cell_data.keys()}
    return check_arrays(pd, cd, g.n_points, g.n_cells, args), (g.n_points, g.n_cells)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("frames", nargs="+")
    p.add_argument("--bodies", type=int, help="number of bodies the frames hold")
    p.add_argument("--contact", action="store_true", help="frames of a scene with obstacles")
    p.add_argument("--require", action="store_true", help="fail when meshio or PyVista is missing")
    args = p.parse_args()
    readers = []
    for name, fn in (("meshio", with_meshio), ("pyvista", with_pyvista)):
        try:
            __import__(name)
            readers.append((name, fn))
        except ImportError:
            msg = f"viewer_check: {name} is not importable"
            if args.require:
                print(msg, file=sys.stderr)
                return 2
            print(msg + "; skipped")
    failed = 0
    for path in args.frames:
        sizes = {}
        for name, fn in readers:
            try:
                problems, sizes[name] = fn(path, args)
            except Exception as e:  # a reader that cannot open the file is a failure
                problems = [f"cannot read: {type(e).__name__}: {e}"]
            status = "ok" if not problems else "FAIL: " + "; ".join(problems)
            failed += bool(problems)
            print(f"{path}: {name}: {status}")
        if len(set(sizes.values())) > 1:
            print(f"{path}: readers disagree on (points, cells): {sizes}")
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
