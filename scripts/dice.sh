#!/usr/bin/env bash
# Dice Real2Sim (issue 38 item 4, scenes/dice.toml), end to end:
#  1. ground truth: the scene simulated with the probe at (0.004, 0.003) and E = 2e5 Pa;
#  2. captures: every fourth frame's surface as a noisy point cloud (sigma 0.2 mm, seed SEED),
#     written to scenes/dice/ by scripts/real2sim_captures.py, and the probe's load cell: the
#     total contact force of every frame plus noise (sigma_F 2 mN per component, seed SEED),
#     scenes/dice/force.csv, by scripts/real2sim_forces.py;
#  3. the fit from the scene's misaligned guess (12 mm, 2x E), staged as in
#     tests/optimize/dice.rs (docs/paper-scenes.md "Dice", "A continuation"):
#     0. `grad` scan of the shapes' loss (force weight 0) over 5 x 5 probe offsets 6 mm apart;
#     1. `optimize` with both terms from the best point (E from the force);
#     2. scan 0.75 mm apart around stage 1's probe, at its E;
#     3. `optimize` of the location from the shapes alone, E held;
#     4. `optimize` of E with both terms, the location held;
#     and the recovered contact location and E against the truth.
# Usage: scripts/dice.sh [OUT] [SEED]   (default out/dice, seed 1). Needs a release build.
# Run it for seeds 1 2 3 to see the spread over noise draws (issue 38: >= 3 seeds).
# Wall time at this (the paper's) size: 14 min on the 2-core VM (seed 1, 2026-12-07). At this
# size the stages do not reach the CI size's accuracy: seed 1 ends 3.1 mm and 7.1 % off
# (docs/paper-scenes.md "Dice", "A continuation").
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/dice}
SEED=${2:-1}
BIN=${DIFFPHD:-target/release/diffphd}
SCENE=scenes/dice.toml
mkdir -p "$OUT"
"$BIN" simulate "$SCENE" --out "$OUT/truth" --overwrite --quiet --set 'output.format="ply"' \
    --set 'obstacle.0.center=[0.004, 0.003, 0.0362]' --set body.0.material.youngs_modulus=2e5
"$BIN" simulate "$SCENE" --out "$OUT/truth_force" --overwrite --quiet \
    --set 'output.vtu_encoding="ascii"' \
    --set 'obstacle.0.center=[0.004, 0.003, 0.0362]' --set body.0.material.youngs_modulus=2e5
rm -f scenes/dice/frame_*.ply
python3 scripts/real2sim_captures.py "$OUT/truth" scenes/dice \
    --frames 4,8,12,16,20 --sigma 2e-4 --seed "$SEED"
python3 scripts/real2sim_forces.py "$OUT/truth_force" scenes/dice/force.csv \
    --frames 1-20 --sigma 2e-3 --seed "$SEED"

# The probe centre of obstacle 0 of a scene file, "x y z".
center() {
  python3 - "$1" <<'PY'
import sys, tomllib
c = tomllib.load(open(sys.argv[1], "rb"))["obstacle"][0]["center"]
print(*c)
PY
}
# The body's Young's modulus of a scene file.
modulus() {
  python3 - "$1" <<'PY'
import sys, tomllib
print(tomllib.load(open(sys.argv[1], "rb"))["body"][0]["material"]["youngs_modulus"])
PY
}
# scan SCENE STEP: the offset "ox oy" (m, from the scene's probe centre) of the least
# shapes-only loss over 5 x 5 offsets STEP apart.
scan() {
  local scene=$1 step=$2 cx cy cz
  read -r cx cy cz < <(center "$scene")
  for i in -2 -1 0 1 2; do
    for j in -2 -1 0 1 2; do
      read -r ox oy px py < <(python3 -c "s=$step; print(s*$i, s*$j, $cx+s*$i, $cy+s*$j)")
      "$BIN" grad "$scene" --out "$OUT/scan" --overwrite --quiet \
          --set loss.term.1.weight=0 --set "obstacle.0.center=[$px, $py, $cz]"
      python3 -c "import json; print(json.load(open('$OUT/scan/grad.json'))['evaluation']['loss'], $ox, $oy)"
    done
  done | sort -g | head -1 | cut -d' ' -f2-
}

read -r gx gy < <(scan "$SCENE" 0.006)
echo "stage 0: grid offset ($gx, $gy) m"
"$BIN" optimize "$SCENE" --out "$OUT/stage1" --overwrite --quiet \
    --set parameter.0.initial="$gx" --set parameter.1.initial="$gy" \
    --set optimize.max_evaluations=20
E1=$(modulus "$OUT/stage1/optimized.toml")
read -r fx fy < <(scan "$OUT/stage1/optimized.toml" 0.00075)
echo "stage 1: E = $E1 Pa; stage 2: fine offset ($fx, $fy) m"
"$BIN" optimize "$OUT/stage1/optimized.toml" --out "$OUT/stage3" --overwrite --quiet \
    --set loss.term.1.weight=0 --set optimize.max_evaluations=25 \
    --set parameter.0.initial="$fx" --set parameter.1.initial="$fy" \
    --set parameter.2.lower="$(python3 -c "print($E1*(1-1e-4))")" \
    --set parameter.2.upper="$(python3 -c "print($E1*(1+1e-4))")"
"$BIN" optimize "$OUT/stage3/optimized.toml" --out "$OUT/fit" --overwrite --quiet \
    --set loss.term.1.weight=0.02 --set optimize.max_evaluations=15 \
    --set parameter.0.lower=-1e-7 --set parameter.0.upper=1e-7 \
    --set parameter.1.lower=-1e-7 --set parameter.1.upper=1e-7 \
    --set parameter.2.lower=2e4 --set parameter.2.upper=2e6
python3 - "$OUT/fit/optimize.json" "$OUT/stage3/optimized.toml" <<'PY'
import json, sys, tomllib
log = json.load(open(sys.argv[1]))
cx, cy, _ = tomllib.load(open(sys.argv[2], "rb"))["obstacle"][0]["center"]
x, y, e = log["best"]["parameters"]
px, py = (cx + x) * 1e3, (cy + y) * 1e3
dx, dy = px - 4.0, py - 3.0
print(f"probe at ({px:.3f}, {py:.3f}) mm (truth (4, 3); miss {(dx*dx+dy*dy)**0.5:.3f} mm); "
      f"E = {e:.4g} Pa (truth 2e5, {100*abs(e/2e5-1):.2f} % off)")
PY
