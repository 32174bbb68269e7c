#!/usr/bin/env python3
"""Synthetic "captured" frames for a Real2Sim fit (docs/optimize.md, "Captured geometry").

Reads the surface frames a ground-truth run of `diffphd simulate` wrote (binary or ASCII PLY,
`frame_NNNNN.ply`), keeps the vertex positions of the requested frames, adds isotropic
Gaussian noise of standard deviation SIGMA (m), shuffles the points (a capture has no
correspondence with the mesh) and writes them as ASCII PLY point clouds (no faces) named
`frame_NNNNN.ply` into OUT, so a chamfer loss term can read them with
`capture_dir = "OUT"`. Reproducible: the noise comes from Python's `random.Random(SEED)`.

    scripts/real2sim_captures.py TRUTH_DIR OUT --frames 3,6,9 --sigma 2e-4 --seed 1

Only the standard library is used.
"""

import argparse
import os
import random
import struct
import sys

SCALARS = {
    "char": "b", "int8": "b", "uchar": "B", "uint8": "B",
    "short": "h", "int16": "h", "ushort": "H", "uint16": "H",
    "int": "i", "int32": "i", "uint": "I", "uint32": "I",
    "float": "f", "float32": "f", "double": "d", "float64": "d",
}


def read_ply_vertices(path):
    """x, y, z of the `vertex` element of a PLY file (ASCII or binary, scalar properties)."""
    with open(path, "rb") as f:
        data = f.read()
    end = data.find(b"end_header")
    if not data.startswith(b"ply") or end < 0:
        sys.exit(f"{path}: not a PLY file")
    body = data[data.index(b"\n", end) + 1:]
    fmt, count, props, current = None, 0, [], None
    for line in data[:end].decode("ascii", "replace").splitlines():
        t = line.split()
        if not t:
            continue
        if t[0] == "format":
            fmt = t[1]
        elif t[0] == "element":
            current = t[1]
            if current == "vertex":
                count = int(t[2])
        elif t[0] == "property" and current == "vertex":
            if t[1] == "list":
                sys.exit(f"{path}: list properties on vertices are not supported")
            props.append((t[2], SCALARS[t[1]]))
    names = [p[0] for p in props]
    ix = [names.index(c) for c in ("x", "y", "z")]
    out = []
    if fmt == "ascii":
        lines = body.decode("ascii", "replace").splitlines()
        for k in range(count):
            v = lines[k].split()
            out.append(tuple(float(v[i]) for i in ix))
    else:
        order = "<" if fmt == "binary_little_endian" else ">"
        rec = struct.Struct(order + "".join(p[1] for p in props))
        for k in range(count):
            v = rec.unpack_from(body, k * rec.size)
            out.append(tuple(float(v[i]) for i in ix))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("truth", help="folder of frame_NNNNN.ply files written by simulate")
    ap.add_argument("out", help="folder for the captured point clouds")
    ap.add_argument("--frames", required=True, help="comma-separated simulated frames")
    ap.add_argument("--sigma", type=float, default=2e-4, help="noise standard deviation (m)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    for frame in (int(f) for f in a.frames.split(",")):
        name = f"frame_{frame:05d}.ply"
        pts = read_ply_vertices(os.path.join(a.truth, name))
        noisy = [tuple(c + rng.gauss(0.0, a.sigma) for c in p) for p in pts]
        rng.shuffle(noisy)
        with open(os.path.join(a.out, name), "w") as f:
            f.write("ply\nformat ascii 1.0\n")
            f.write(f"comment synthetic capture: frame {frame}, sigma {a.sigma:g} m, seed {a.seed}\n")
            f.write(f"element vertex {len(noisy)}\n")
            f.write("property double x\nproperty double y\nproperty double z\nend_header\n")
            for p in noisy:
                f.write(f"{p[0]:.9e} {p[1]:.9e} {p[2]:.9e}\n")
        print(f"{name}: {len(noisy)} points")


if __name__ == "__main__":
    main()
