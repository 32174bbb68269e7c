#!/usr/bin/env python3
"""Identifiability of the Dice Real2Sim (issue 38 item 4; docs/paper-scenes.md "Dice"): the
loss Hessian at the ground truth, by central differences of adjoint gradients (`diffphd
grad`), in the optimizer's working variables u = (x / 5 mm, y / 5 mm, ln E) of
scenes/dice.toml's parameters, for the chamfer term alone and for the contact-force term
alone (their sum is the Hessian of the fitted loss); eigenvalues, eigenvectors and
condition numbers, written to OUT/hessian.json and printed.

The observations are noise-free (sigma 0): a ground-truth run's surface frames and forces.

    scripts/dice_hessian.py [OUT] [--ci] [--step 0.02]

--ci: the CI size of tests/optimize/dice.rs (dx 6 mm, 10 frames at 0.1 m/s, probe radius
12 mm); default: the
scene's own (paper) size. Needs a release build (DIFFPHD overrides target/release/diffphd).
Wall time (2 cores, loaded): CI size ~1 min, paper size ~10 min.
"""

import argparse
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("DIFFPHD", os.path.join(ROOT, "target/release/diffphd"))
SCENE = os.path.join(ROOT, "scenes/dice.toml")
TRUTH = (0.004, 0.003, 2e5)
SCALE = 0.005  # the offsets' `scale` in scenes/dice.toml
CI = ["body.0.mesh.dx=0.006", "simulation.frames=10", "obstacle.0.radius=0.012",
      "obstacle.0.motion.velocity=[0.0, 0.0, -0.1]"]
Z = {True: 0.0432, False: 0.0362}  # probe centre height (CI: the 12 mm probe 0.9 mm above)


def run(args):
    r = subprocess.run([BIN] + args + ["--quiet"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"diffphd {' '.join(args)}: {r.stderr}")


def sets(extra):
    out = []
    for s in extra:
        out += ["--set", s]
    return out


def eig_sym(a):
    """Eigenvalues/vectors of a small symmetric matrix (Jacobi rotations)."""
    n = len(a)
    a = [row[:] for row in a]
    v = [[float(i == j) for j in range(n)] for i in range(n)]
    for _ in range(100):
        off = max((abs(a[i][j]), i, j) for i in range(n) for j in range(n) if i < j)
        if off[0] < 1e-30 * max(abs(a[i][i]) for i in range(n)):
            break
        _, p, q = off
        th = 0.5 * math.atan2(2 * a[p][q], a[q][q] - a[p][p])
        c, s = math.cos(th), math.sin(th)
        for k in range(n):
            akp, akq = a[k][p], a[k][q]
            a[k][p], a[k][q] = c * akp - s * akq, s * akp + c * akq
        for k in range(n):
            apk, aqk = a[p][k], a[q][k]
            a[p][k], a[q][k] = c * apk - s * aqk, s * apk + c * aqk
        for k in range(n):
            vkp, vkq = v[k][p], v[k][q]
            v[k][p], v[k][q] = c * vkp - s * vkq, s * vkp + c * vkq
    vals = [a[i][i] for i in range(n)]
    order = sorted(range(n), key=lambda i: vals[i])
    return [vals[i] for i in order], [[v[k][i] for k in range(n)] for i in order]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", default="out/dice_hessian")
    ap.add_argument("--ci", action="store_true")
    ap.add_argument("--step", type=float, default=0.02, help="FD step in u")
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    size = CI if a.ci else []
    x, y, e = TRUTH
    z = Z[a.ci]
    truth = [f"obstacle.0.center=[{x}, {y}, {z}]", f"body.0.material.youngs_modulus={e}"]
    # noise-free observations
    run(["simulate", SCENE, "--out", f"{out}/truth", "--overwrite",
         "--set", 'output.format="ply"'] + sets(size + truth))
    run(["simulate", SCENE, "--out", f"{out}/truth_force", "--overwrite",
         "--set", 'output.vtu_encoding="ascii"'] + sets(size + truth))
    frames = 10 if a.ci else 20
    caps = ",".join(str(f) for f in range(2 if a.ci else 4, frames + 1, 2 if a.ci else 4))
    os.makedirs(f"{out}/caps", exist_ok=True)
    subprocess.run([sys.executable, f"{ROOT}/scripts/real2sim_captures.py", f"{out}/truth",
                    f"{out}/caps", "--frames", caps, "--sigma", "0", "--seed", "1"],
                   check=True, capture_output=True)
    subprocess.run([sys.executable, f"{ROOT}/scripts/real2sim_forces.py", f"{out}/truth_force",
                    f"{out}/force.csv", "--frames", f"1-{frames}", "--sigma", "0"],
                   check=True, capture_output=True)
    obs = [f'loss.term.0.capture_dir="{out}/caps"', f'loss.term.1.file="{out}/force.csv"']

    def grad_u(u, weights):
        """dL/du at u (working variables) with term weights (chamfer, force)."""
        px, py, le = x + SCALE * u[0], y + SCALE * u[1], math.exp(math.log(e) + u[2])
        # the parameters are offsets from the scene's centre: put the centre at the point
        # and read the gradient at offset 0
        s = size + obs + [f"obstacle.0.center=[{px}, {py}, {z}]",
                          f"body.0.material.youngs_modulus={le}",
                          f"loss.term.0.weight={weights[0]}", f"loss.term.1.weight={weights[1]}"]
        run(["grad", SCENE, "--out", f"{out}/grad", "--overwrite"] + sets(s))
        # grad.json's gradient is in the working variables θ: offsets in m, ln E (log)
        g = json.load(open(f"{out}/grad/grad.json"))["evaluation"]["gradient"]
        return [g[0] * SCALE, g[1] * SCALE, g[2]]

    report = {"size": "ci" if a.ci else "paper", "step_u": a.step,
              "variables": ["x / 5 mm", "y / 5 mm", "ln E"], "terms": {}}
    w_force = 0.02
    hs = {}
    for name, w in [("chamfer", (1.0, 0.0)), ("force", (0.0, w_force))]:
        h = [[0.0] * 3 for _ in range(3)]
        for j in range(3):
            up = [0.0] * 3
            dn = [0.0] * 3
            up[j], dn[j] = a.step, -a.step
            gp, gm = grad_u(up, w), grad_u(dn, w)
            for i in range(3):
                h[i][j] = (gp[i] - gm[i]) / (2 * a.step)
        h = [[0.5 * (h[i][j] + h[j][i]) for j in range(3)] for i in range(3)]
        hs[name] = h
    hs["chamfer+force"] = [[hs["chamfer"][i][j] + hs["force"][i][j] for j in range(3)]
                           for i in range(3)]
    for name, h in hs.items():
        vals, vecs = eig_sym(h)
        cond = abs(vals[-1]) / abs(vals[0]) if vals[0] != 0 else float("inf")
        report["terms"][name] = {"hessian": h, "eigenvalues": vals, "eigenvectors": vecs,
                                 "condition": cond}
        print(f"{name}: eigenvalues {', '.join(f'{v:.3e}' for v in vals)}; condition {cond:.3g}")
        for v, vec in zip(vals, vecs):
            print(f"   {v:.3e}: ({', '.join(f'{c:+.3f}' for c in vec)})")
    json.dump(report, open(f"{out}/hessian.json", "w"), indent=1)


if __name__ == "__main__":
    main()
