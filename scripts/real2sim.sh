#!/usr/bin/env bash
# Real2Sim fit of scenes/real2sim_probe.toml (issue 16, item 5), end to end:
#  1. ground truth: the scene simulated with the probe at (0.045, 0.006) and E = 4e4 Pa;
#  2. captures: every second frame's surface as a noisy point cloud (sigma 0.2 mm, seed 1),
#     written to scenes/real2sim_probe/ by scripts/real2sim_captures.py;
#  3. the fit: `diffphd optimize` from the scene's misaligned guess.
# Usage: scripts/real2sim.sh [OUT]   (default out/real2sim). Needs a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/real2sim}
BIN=${DIFFPHD:-target/release/diffphd}
SCENE=scenes/real2sim_probe.toml
mkdir -p "$OUT"
"$BIN" simulate "$SCENE" --out "$OUT/truth" --overwrite --quiet --set 'output.format="ply"' \
    --set 'obstacle.0.center=[0.045, 0.006, -0.018]' --set body.0.material.youngs_modulus=4e4
rm -f scenes/real2sim_probe/frame_*.ply
python3 scripts/real2sim_captures.py "$OUT/truth" scenes/real2sim_probe \
    --frames 2,4,6,8,10,12,14,16,18,20 --sigma 2e-4 --seed 1
"$BIN" optimize "$SCENE" --out "$OUT/fit" --overwrite
python3 - "$OUT/fit/optimize.json" <<'PY'
import json, sys
log = json.load(open(sys.argv[1]))
x, y, e = log["best"]["parameters"]
print(f"probe offset ({x*1e3:.3f}, {y*1e3:.3f}) mm (truth (8, 8)); E = {e:.1f} Pa (truth 4e4, "
      f"{100*abs(e/4e4-1):.2f} % off); {len(log['evaluations'])} evaluations")
PY
