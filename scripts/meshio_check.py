#!/usr/bin/env python3
"""Read a multi-body VTU frame written by `diffphd simulate` with meshio (an independent
reader, `pip install meshio`) and check that it holds every body's cells and points.

    scripts/meshio_check.py [DIFFPHD_BINARY]

The scene (written to a temp dir): a tet box (3x2x2 cells, 72 tets, 36 nodes) and a hex box
(2x2x1 cells, 4 hexes, 18 nodes), `output.format = "vtu"`, 2 frames. Exit status 1 when a
body is missing.
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import meshio
import numpy as np

root = Path(__file__).resolve().parent.parent
binary = sys.argv[1] if len(sys.argv) > 1 else str(root / "target" / "release" / "diffphd")
SCENE = """schema_version = 1
[simulation]
dt = 0.01
frames = 2
[[body]]
name = "tets"
[body.mesh]
generator = "box"
element = "tet4"
cells = [3, 2, 2]
dx = 0.05
[body.material]
model = "corotated"
youngs_modulus = 1e5
poisson_ratio = 0.3
density = 1000.0
[[body.dirichlet]]
select = { face = "x_min" }
[[body]]
name = "hexes"
[body.mesh]
generator = "box"
element = "hex8"
cells = [2, 2, 1]
dx = 0.05
[body.material]
model = "corotated"
youngs_modulus = 2e5
poisson_ratio = 0.3
density = 1000.0
[body.initial]
translation = [0.0, 0.5, 0.0]
[[body.dirichlet]]
select = { face = "x_min" }
[output]
format = "vtu"
"""
with tempfile.TemporaryDirectory() as d:
    scene = Path(d) / "two_bodies.toml"
    scene.write_text(SCENE)
    subprocess.run([binary, "simulate", str(scene), "--out", str(Path(d) / "out"), "-q"], check=True)
    frame = Path(d) / "out" / "frame_00002.vtu"
    m = meshio.read(frame)
    print(f"meshio {meshio.__version__} read {frame.name}: {len(m.points)} points")
    counts = {}
    for block, tags in zip(m.cells, m.cell_data["tag"]):
        for body in np.unique(tags):
            n = int(np.sum(tags == body))
            counts[(int(body), block.type)] = counts.get((int(body), block.type), 0) + n
            print(f"  block {block.type}: body {int(body)}: {n} cells")
    youngs = np.concatenate(m.cell_data["youngs_modulus"])
    expect = {(0, "tetra"): 72, (1, "hexahedron"): 4}
    ok = counts == expect and len(m.points) == 36 + 18 and len(youngs) == 76
    ok = ok and set(np.unique(youngs)) == {1e5, 2e5}
    for name in ["strain_energy_density", "von_mises_stress"]:
        v = np.concatenate(m.cell_data[name])
        print(f"  {name}: {len(v)} cells, min {v.min():.3e}, max {v.max():.3e}")
        ok = ok and len(v) == 76 and bool(np.all(np.isfinite(v))) and v.min() >= 0.0
    hexes = m.cells_dict.get("hexahedron")
    # the hex body (translated to y = 0.5, the tet body spans y in [0, 0.1]) keeps its own points
    ok = ok and hexes is not None and bool(np.all(m.points[np.unique(hexes)][:, 1] > 0.4))
    print(f"  expected {expect}, 54 points, youngs_modulus per cell: {'OK' if ok else 'MISMATCH'}")
    sys.exit(0 if ok else 1)
