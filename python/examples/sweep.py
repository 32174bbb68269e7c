"""A parameter sweep: Young's modulus over a range of values, one rollout each, into a
NumPy table (a structured array: ``pandas.DataFrame(table)`` makes it a DataFrame), and the free end's height over time as a matplotlib plot (PNG).

    python python/examples/sweep.py [scene.toml] [--frames T] [--out sweep.png]

The scene (default: scenes/cantilever.toml, a beam clamped at one end under gravity) has
one body; its modulus `body.0.material.youngs_modulus` is set per run (regions scale it).
The free end is the body's nodes at the largest x.
"""

import argparse
import pathlib

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import diffphd  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODULI = [1e5, 2e5, 5e5, 1e6, 2e6]  # Pa
COLUMNS = [("youngs_modulus", "f8"), ("tip_dz_final", "f8"), ("tip_dz_min", "f8"),
           ("elastic_energy_final", "f8"), ("iterations", "i8")]


def run(scene_path, moduli=MODULI, frames=None):
    rows, curves = [], {}
    for e in moduli:
        scene = diffphd.Scene(scene_path, set={"body.0.material.youngs_modulus": e})
        r = scene.simulate(frames=frames)
        rest = scene.rest_positions
        tip = rest[:, 0] >= rest[:, 0].max() - 1e-9
        z = r.positions[:, tip, 2].mean(axis=1) - rest[tip, 2].mean()  # (T+1,) height change
        last = r.log["frames"][-1]
        rows.append((e, z[-1], z.min(),                       # m, below rest < 0
                     last["diagnostics"]["elastic_energy"],    # J, the log's diagnostics
                     sum(f["iterations"] for f in r.log["frames"])))
        curves[e] = (np.arange(len(z)) * scene.dt, z)
    return np.array(rows, dtype=COLUMNS), curves


def plot(curves, path):
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)  # 640 x 400 pixels
    for e, (t, z) in curves.items():
        ax.plot(t, 1e3 * z, label=f"E = {e:.0e} Pa")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("free end height change (mm)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scene", nargs="?", default=str(ROOT / "scenes/cantilever.toml"))
    ap.add_argument("--frames", type=int, default=None)
    ap.add_argument("--out", default="sweep.png")
    args = ap.parse_args(argv)
    table, curves = run(args.scene, frames=args.frames)
    print("  ".join(f"{name:>20}" for name, _ in COLUMNS))
    for row in table:
        print("  ".join(f"{x:>20.6g}" for x in row.tolist()))
    plot(curves, args.out)
    print(f"plot: {args.out}")
    return table


if __name__ == "__main__":
    main()
