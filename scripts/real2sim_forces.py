#!/usr/bin/env python3
"""Synthetic load-cell measurements for a Real2Sim fit with a `contact_force` loss term
(docs/scene-format.md, "Contact-force term").

Reads the `.vtu` frames a ground-truth run of `diffphd simulate` wrote with
`output.vtu_encoding = "ascii"` (`frame_NNNNN.vtu`), sums each frame's nodal
`contact_force` point array (the total force the obstacles exert on the bodies; use it on
scenes with one obstacle), adds isotropic Gaussian noise of standard deviation SIGMA (N) per
component and writes `frame, fx, fy, fz` lines to OUT. Reproducible: the noise comes from
Python's `random.Random(SEED)`.

    scripts/real2sim_forces.py TRUTH_DIR OUT.csv --frames 1-20 --sigma 2e-3 --seed 1

Only the standard library is used.
"""

import argparse
import os
import random
import re
import sys


def frame_force(path):
    """Sum over nodes of the ASCII `contact_force` point array of one `.vtu` frame."""
    with open(path, encoding="ascii", errors="replace") as f:
        text = f.read()
    m = re.search(r'<DataArray[^>]*Name="contact_force"[^>]*>([^<]*)</DataArray>', text)
    if not m:
        sys.exit(f"{path}: no ASCII contact_force array (simulate with "
                 "--set output.vtu_encoding='\"ascii\"')")
    vals = [float(v) for v in m.group(1).split()]
    return [sum(vals[d::3]) for d in range(3)]


def frames_arg(s):
    out = []
    for part in s.split(","):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("truth")
    ap.add_argument("out")
    ap.add_argument("--frames", type=frames_arg, required=True, help="e.g. 1-20 or 4,8,12")
    ap.add_argument("--sigma", type=float, default=0.0, help="noise per component (N)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    lines = ["frame,fx,fy,fz"]
    for t in a.frames:
        f = frame_force(os.path.join(a.truth, f"frame_{t:05d}.vtu"))
        g = [v + rng.gauss(0.0, a.sigma) for v in f]
        lines.append(f"{t}, {g[0]:.9e}, {g[1]:.9e}, {g[2]:.9e}")
    with open(a.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"{a.out}: {len(a.frames)} frames, peak |F| "
          f"{max(abs(float(x)) for l in lines[1:] for x in l.split(',')[1:]):.4g} N")


if __name__ == "__main__":
    main()
