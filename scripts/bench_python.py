#!/usr/bin/env python3
"""Overhead of the Python package over the command line (issue 36, "must show" 4): the wall
time of `grad` on one scene from Python (`diffphd.Scene(...).grad()`, scene loading included)
and from the binary (`diffphd grad`, process start, loading and the grad.json write included),
interleaved (CLI, Python, CLI, Python, ...) so that a change of machine load hits both, with
the median of each and their ratio, and the largest relative difference of the two gradients
(they must agree: the same library, the same thread count).

    scripts/bench_python.sh [--scene scenes/cantilever_diffpd.toml] [--repeats 7] [--threads 1]

Run it on an idle machine (timings with other jobs on the cores are not benchmarks); write
the numbers into docs/BENCHMARKS.md with the machine, date, load (uptime) and commit. Needs
the venv with the package built (scripts/py_env.sh + maturin develop --release) and
target/release/diffphd (cargo build --release -p diffphd-cli); DIFFPHD_CLI overrides it.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scene", default=str(ROOT / "scenes" / "cantilever_diffpd.toml"))
    ap.add_argument("--repeats", type=int, default=7, help="runs of each (>= 5)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if args.repeats < 5:
        ap.error("--repeats must be >= 5")
    import diffphd  # after argument parsing: --help works without the package

    cli = os.environ.get("DIFFPHD_CLI", str(ROOT / "target" / "release" / "diffphd"))
    t_cli, t_py, errs = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            out = Path(tmp) / f"g{i}"
            t0 = time.perf_counter()
            subprocess.run([cli, "grad", args.scene, "--threads", str(args.threads), "--quiet", "--out", str(out)],
                           check=True, capture_output=True)
            t_cli.append(time.perf_counter() - t0)
            ref = json.loads((out / "grad.json").read_text())["evaluation"]["gradient"]
            t0 = time.perf_counter()
            g = diffphd.Scene(args.scene).grad(threads=args.threads)["gradient"]
            t_py.append(time.perf_counter() - t0)
            scale = max(abs(x) for x in ref) or 1.0
            errs.append(max(abs(a - b) for a, b in zip(g.tolist(), ref)) / scale)
            print(f"run {i}: cli {t_cli[-1]:.3f} s, python {t_py[-1]:.3f} s, gradient difference {errs[-1]:.1e}")
    mc, mp = statistics.median(t_cli), statistics.median(t_py)
    print(f"scene {args.scene}, threads {args.threads}, {args.repeats} runs each, interleaved")
    print(f"median cli {mc:.3f} s, median python {mp:.3f} s, python/cli {mp / mc:.3f} ({100 * (mp / mc - 1):+.1f} %)")
    print(f"largest relative gradient difference over the runs {max(errs):.1e}")
    print(f"load: {os.getloadavg()}, diffphd {diffphd.__version__} ({diffphd.git_commit})")
    return 0 if max(errs) <= 1e-12 else 1


if __name__ == "__main__":
    sys.exit(main())
