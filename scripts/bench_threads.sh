#!/usr/bin/env bash
# Two threads against one (issue 37 item 3 / must-show 2): `diffphd grad` with the defaults on
# the frontier scenes of at least 8k DoF (cantilever_diffpd 8,019, plant 29,763, armadillo_twist
# 44,241; the other three frontier scenes are below 8k), 1 and 2 threads interleaved, REPEAT
# runs each, the fastest run per thread count kept (the minimum is the least loaded).
# Prints, per scene, the forward, backward (+ the gradient's error estimate) and process
# seconds at 1 and 2 threads, the speed-up, and per phase the serial fraction by Amdahl's law
# for two threads, f = 2·T2/T1 − 1 (0: the phase halves, 1: it does not move). Not a test.
# Bits: the same scene gives the same frames and gradients at 1 and 2 threads
# (tests/cli/outputs/determinism.rs); the script checks the gradients of its runs too.
#
#   scripts/bench_threads.sh                              # all three, FRAMES=10, REPEAT=3
#   SCENES="cantilever_diffpd" FRAMES=5 REPEAT=1 scripts/bench_threads.sh
#   DIFFPHD_ANCHOR_MESHES=/path/to/meshes scripts/bench_threads.sh   # the plant's mesh
#
# BIN overrides the binary (default: target/release/diffphd, built here); OUT the folder of
# the runs (default out/bench_threads). The plant needs DiffPD's plant.bin
# ($DIFFPHD_ANCHOR_MESHES/plant.bin, as scripts/bench_frontier.sh); without it the plant is
# skipped with a note.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet -p diffphd-cli
  BIN=target/release/diffphd
fi
SCENES=${SCENES:-"cantilever_diffpd plant armadillo_twist"}
FRAMES=${FRAMES:-10}
REPEAT=${REPEAT:-3}
OUT=${OUT:-out/bench_threads}
mkdir -p "$OUT"
echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD)$(git diff --quiet || echo +dirty); frames=$FRAMES repeat=$REPEAT"
for s in $SCENES; do
  sets=()
  if [ "$s" = plant ]; then
    mesh=${DIFFPHD_PLANT_MESH:-${DIFFPHD_ANCHOR_MESHES:-}/plant.bin}
    if [ ! -f "$mesh" ]; then
      echo "note: plant skipped (no plant.bin: set DIFFPHD_ANCHOR_MESHES)"
      continue
    fi
    sets=(--set "body.0.mesh.file=\"$mesh\"")
  fi
  for r in $(seq 1 "$REPEAT"); do
    for t in 1 2; do
      d="$OUT/$s/t$t/r$r"
      mkdir -p "$d"
      start=$(date +%s.%N)
      "$BIN" grad "scenes/$s.toml" --frames "$FRAMES" --threads "$t" "${sets[@]}" \
        --quiet --overwrite --final-state --out "$d"
      end=$(date +%s.%N)
      echo "$start $end" > "$d/wall"
    done
  done
done
python3 - "$OUT" "$SCENES" "$REPEAT" <<'EOF'
import json, os, sys
out, scenes, repeat = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
PH = [("forward", "forward_seconds"), ("  local", "forward_local_seconds"),
      ("  global", "forward_global_seconds"), ("  other", "forward_other_seconds"),
      ("backward", "backward_seconds"), ("estimate", None), ("process", None)]
def load(scene, t, r):
    d = os.path.join(out, scene, "t%d" % t, "r%d" % r)
    g = json.load(open(os.path.join(d, "grad.json")))
    ev = g["evaluation"]
    a, b = map(float, open(os.path.join(d, "wall")).read().split())
    row = {k: ev[k] for _, k in PH if k}
    row["estimate"] = (ev.get("error_estimate") or {}).get("seconds", 0.0)
    row["process"] = b - a
    return row, (ev["gradient"], (g.get("final_state") or {}).get("positions")), g.get("final_state")
for scene in scenes:
    if not os.path.isdir(os.path.join(out, scene)):
        continue
    runs = {t: [load(scene, t, r) for r in range(1, repeat + 1)] for t in (1, 2)}
    grads = {t: [x[1] for x in runs[t]] for t in (1, 2)}
    same = all(g == grads[1][0] for t in (1, 2) for g in grads[t])
    fs = runs[1][0][2]
    dof = len(fs["positions"]) if fs and "positions" in fs else "?"
    print("\n### %s: %s DoF; final states and gradients at 1 and 2 threads: %s" % (
        scene, dof, "bitwise identical" if same else "DIFFER"))
    print("\n| phase | 1 thread s | 2 threads s | speed-up | serial fraction f |")
    print("|---|---:|---:|---:|---:|")
    best = {t: {} for t in (1, 2)}
    for name, key in PH:
        k = key or name
        for t in (1, 2):
            best[t][name] = min(x[0][k] for x in runs[t])
    tot = {t: best[t]["forward"] + best[t]["backward"] + best[t]["estimate"] for t in (1, 2)}
    for name in [p for p, _ in PH] + ["fwd+bwd+est"]:
        t1 = tot[1] if name == "fwd+bwd+est" else best[1][name]
        t2 = tot[2] if name == "fwd+bwd+est" else best[2][name]
        if t1 <= 0:
            continue
        print("| %s | %.2f | %.2f | %.2f | %.2f |" % (name.strip(), t1, t2, t1 / t2,
                                                     2 * t2 / t1 - 1))
EOF
