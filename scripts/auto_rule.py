#!/usr/bin/env python3
"""The inputs and the choice of `solver.method = "auto"` (src/solver/auto.rs) for every shipped
scene: one frame of `simulate --set solver.method=auto` each, read back from log.json
`header.method_quantities` / `header.solver_method` / `header.method_reason`. Deterministic
(no timings). Prints a Markdown table (docs/scene-format.md, "method = auto" → "The rule
checked").

  scripts/auto_rule.py [--bin target/release/diffphd] [--plant-mesh PATH/plant.bin]
                       [--scenes a,b,...] [--extra PATH.toml ...]

The Plant's mesh is not in the repository: --plant-mesh, else $DIFFPHD_ANCHOR_MESHES/plant.bin.
MPM scenes (mpm_*) have no PD/Newton choice and are skipped.
"""
import argparse, json, os, pathlib, subprocess, sys, tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--bin", default="target/release/diffphd")
ap.add_argument("--plant-mesh", default=None)
ap.add_argument("--scenes", default=None)
ap.add_argument("--extra", nargs="*", default=[])
a = ap.parse_args()
plant = a.plant_mesh or (
    os.path.join(os.environ["DIFFPHD_ANCHOR_MESHES"], "plant.bin")
    if "DIFFPHD_ANCHOR_MESHES" in os.environ else None)
names = a.scenes.split(",") if a.scenes else sorted(
    p.stem for p in pathlib.Path("scenes").glob("*.toml") if not p.stem.startswith("mpm_"))
paths = [f"scenes/{n}.toml" for n in names] + a.extra
print("| scene | free DoF | nnz(L) | factor flops F | ρ = 9F/4Z | contrast | stiffness number s | contact cand. | choice | rule |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
for p in paths:
    name = pathlib.Path(p).stem
    sets = ["--set", "solver.method=auto"]
    if name == "plant":
        if not plant:
            print(f"| {name} | – | – | – | – | – | – | – | – | mesh not given (--plant-mesh) |")
            continue
        sets += ["--set", f'body.0.mesh.file="{plant}"']
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([a.bin, "simulate", p, "--frames", "1", "--threads", "1", "--quiet",
                            "--out", d + "/o", *sets], capture_output=True, text=True)
        try:
            h = json.load(open(d + "/o/log.json"))["header"]
        except (OSError, KeyError, ValueError):
            print(f"| {name} | – | – | – | – | – | – | – | – | failed: {r.stderr.strip()[:80]} |")
            continue
    q = h.get("method_quantities")
    if q is None:
        print(f"| {name} | – | – | – | – | – | – | {h['solver_method']} | (not auto) |")
        continue
    rho = 9 * q["factor_flops"] / (4 * max(q["nnz_factor"], 1))
    rule = h["method_reason"].split(":")[0]
    print(f"| {name} | {q['free_dofs']:,} | {q['nnz_factor']:,} | {q['factor_flops']:.3e} | "
          f"{rho:.0f} | {q['stiffness_contrast']:.3g} | {q['stiffness_number']:.0f} | {q['contact_candidates']} | "
          f"{h['solver_method']} | {rule} |")
    sys.stdout.flush()
