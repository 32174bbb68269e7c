#!/usr/bin/env python3
"""Per-parameter gradient error of diffphd's defaults against the Newton oracle, as a function
of the backward tolerance (issue 37 item 2). Not a test; Python 3 standard library only.

For every scene (its own [loss] and [[parameter]]s, CI frame counts):
  oracle: `diffphd grad --solver newton` at newton_tol 1e-10 (the round-off stop ends steps
          whose gradient floor lies above that) with Newton's direct adjoint;
  runs:   `diffphd grad` at the defaults with backward.rel_tol = each --tols value;
  error per parameter i: |g_i - g*_i| / max(|g*_i|, 1e-3 ||g*||_inf)  (target <= 1e-3),
  and the backward seconds and adjoint iterations of each run.

  scripts/backward_tol.py [--bin target/release/diffphd] [--tols 1e-6,1e-7,1e-8,1e-9]
                          [--scenes cantilever,...] [--threads 1] [--out out/backward_tol]

Writes OUT/results.json and prints a markdown table.
"""
import argparse
import json
import os
import subprocess
import sys
import time

# CI frame counts (scripts/bench_frontier.py QUICK_FRAMES where it has one); cantilever_diffpd
# at its full 25 frames: issue 37's single dL/dE case.
FRAMES = {"cantilever": 5, "cantilever_diffpd": 25, "twist_bands_tet": 6, "bouncing_ball": 20,
          "sysid_cantilever": 5, "sysid_bouncing_ball": 6, "sysid_bouncing_ball_bands": 6,
          "routing_tendon": 4, "initial_state_flight": 5, "real2sim_probe": 5}
TARGET = 1e-3


def grad(bin_, scene, frames, threads, sets, out):
    cmd = [bin_, "grad", "scenes/%s.toml" % scene, "--frames", str(frames), "--threads",
           str(threads), "--quiet", "--overwrite", "--out", out]
    for s in sets:
        cmd += ["--set", s]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    path = os.path.join(out, "grad.json")
    if not os.path.exists(path):
        return {"code": p.returncode, "error": p.stderr.strip()[-300:], "wall": wall}
    ev = json.load(open(path))["evaluation"]
    return {"code": p.returncode, "gradient": ev["gradient"], "wall": wall,
            "forward_s": ev["forward_seconds"], "backward_s": ev["backward_seconds"],
            "adjoint_iterations": ev.get("adjoint_iterations"),
            "error": p.stderr.strip()[-300:] if p.returncode else None}


def per_parameter_error(g, g_ref):
    """max_i |g_i - g*_i| / max(|g*_i|, 1e-3 ||g*||_inf)."""
    ginf = max(abs(v) for v in g_ref)
    worst = 0.0
    for a, b in zip(g, g_ref):
        den = max(abs(b), 1e-3 * ginf)
        worst = max(worst, abs(a - b) / den if den > 0 else (0.0 if a == b else float("inf")))
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="target/release/diffphd")
    ap.add_argument("--tols", default="1e-6,1e-7,1e-8,1e-9")
    ap.add_argument("--scenes", default=",".join(FRAMES))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="out/backward_tol")
    a = ap.parse_args()
    tols = [float(t) for t in a.tols.split(",")]
    results = []
    for sc in a.scenes.split(","):
        frames = FRAMES.get(sc, 5)
        d = os.path.join(a.out, sc)
        o = grad(a.bin, sc, frames, a.threads,
                 ['solver.method="newton"', "solver.newton_tol=1e-10",
                  "solver.newton_max_iterations=200"], os.path.join(d, "oracle"))
        row = {"scene": sc, "frames": frames, "oracle": o, "runs": []}
        if "gradient" not in o or o["code"] != 0:
            print("%s: oracle failed (exit %s): %s" % (sc, o["code"], o.get("error")),
                  file=sys.stderr)
            results.append(row)
            continue
        for t in tols:
            r = grad(a.bin, sc, frames, a.threads, ["backward.rel_tol=%g" % t],
                     os.path.join(d, "tol_%g" % t))
            r["tol"] = t
            if "gradient" in r:
                r["per_parameter_error"] = per_parameter_error(r["gradient"], o["gradient"])
            row["runs"].append(r)
            print("%s tol %g: err %s bwd %.3fs" % (sc, t, r.get("per_parameter_error"),
                                                    r.get("backward_s", float("nan"))),
                  file=sys.stderr)
        results.append(row)
    os.makedirs(a.out, exist_ok=True)
    json.dump(results, open(os.path.join(a.out, "results.json"), "w"), indent=1)
    print("| scene | frames | params | " + " | ".join(
        "rel_tol %g: err / bwd s" % t for t in tols) + " |")
    print("|---|---:|---:|" + "---|" * len(tols))
    for row in results:
        o = row["oracle"]
        if "gradient" not in o or o["code"] != 0:
            print("| %s | %d | – | oracle failed (exit %s) |" % (row["scene"], row["frames"],
                                                               o["code"]))
            continue
        cells = []
        for r in row["runs"]:
            if "per_parameter_error" in r:
                cells.append("%s%.1e / %.3f" % ("**" if r["per_parameter_error"] > TARGET
                                                 else "", r["per_parameter_error"],
                                                 r["backward_s"])
                             + ("**" if r["per_parameter_error"] > TARGET else "")
                             + ("" if r["code"] == 0 else " (exit %d)" % r["code"]))
            else:
                cells.append("failed (exit %s)" % r["code"])
        print("| %s | %d | %d | %s |" % (row["scene"], row["frames"], len(o["gradient"]),
                                         " | ".join(cells)))


if __name__ == "__main__":
    main()
