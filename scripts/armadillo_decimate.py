#!/usr/bin/env python3
"""Decimate CGAL's armadillo.off and write it in metres, z up, as an OFF surface for TetGen.

Usage: armadillo_decimate.py IN.off OUT.off [REDUCTION]
  REDUCTION: fraction of triangles removed by quadric decimation (default 0.7).
Needs numpy and fast-simplification (PyPI, MIT): pip install fast-simplification==0.2.0
Transform: (x, y, z) of the file (y up, ~152 units tall) becomes 0.001 * (x, -z, y)
(a +90 degree rotation about x, y-up to z-up, and a scale to metres: 15 cm tall).
"""
import sys

import fast_simplification
import numpy as np


def read_off(path):
    tokens = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                tokens.extend(line.split())
    if tokens[0] != "OFF":
        raise SystemExit(f"{path}: not an OFF file")
    nv, nf = int(tokens[1]), int(tokens[2])
    pos = 4
    v = np.array(tokens[pos:pos + 3 * nv], dtype=float).reshape(nv, 3)
    pos += 3 * nv
    faces = []
    for _ in range(nf):
        k = int(tokens[pos])
        if k != 3:
            raise SystemExit(f"{path}: only triangles are supported (found a {k}-gon)")
        faces.append([int(t) for t in tokens[pos + 1:pos + 4]])
        pos += 1 + k
    return v, np.array(faces, dtype=np.int64)


def main():
    src, out = sys.argv[1], sys.argv[2]
    reduction = float(sys.argv[3]) if len(sys.argv) > 3 else 0.7
    v, f = read_off(src)
    v2, f2 = fast_simplification.simplify(v, f, target_reduction=reduction)
    v2 = 0.001 * np.stack([v2[:, 0], -v2[:, 2], v2[:, 1]], axis=1)
    with open(out, "w") as o:
        o.write(f"OFF\n{len(v2)} {len(f2)} 0\n")
        for p in v2:
            o.write(f"{p[0]:.9g} {p[1]:.9g} {p[2]:.9g}\n")
        for t in f2:
            o.write(f"3 {t[0]} {t[1]} {t[2]}\n")
    print(f"{out}: {len(v2)} vertices, {len(f2)} triangles", file=sys.stderr)


if __name__ == "__main__":
    main()
