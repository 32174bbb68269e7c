#!/usr/bin/env bash
# Benchmark: per-phase timings of the forward (local step, global solve, other) and the
# backward, on the paper-size scenes. Not a test. Prints one table; raw logs go to $OUT.
#
#   scripts/bench.sh                 # all scenes, default threads
#   THREADS=1 scripts/bench.sh       # one thread
#   SCENES="scenes/cantilever.toml" scripts/bench.sh
#
# Backward timings use `diffphd grad` with DiffPD's timing loss (a seeded random linear
# functional of the final state) and the gradient w.r.t. log E and nu.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
BIN=target/release/diffphd
OUT=${OUT:-out/bench}
THREADS=${THREADS:-0}
SCENES=${SCENES:-"scenes/cantilever.toml scenes/cantilever_diffpd.toml scenes/twist_bands_tet.toml"}
mkdir -p "$OUT"
echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), threads=$THREADS"
printf "%-28s %6s %8s %7s %9s %9s %9s %9s %10s %10s %9s\n" scene nodes samples frames iters "local s" "global s" "other s" "fwd s" "bwd s" "bwd ms/f"
for s in $SCENES; do
  name=$(basename "$s" .toml)
  $BIN simulate "$s" --out "$OUT/$name" --threads "$THREADS" --quiet --overwrite
  $BIN grad "$s" --out "$OUT/$name/grad" --threads "$THREADS" --quiet --overwrite \
    --set 'loss.term=[{type="random_linear", seed=1}]' \
    --set 'parameter=[{kind="youngs_modulus", log=true}, {kind="poisson_ratio"}]'
  python3 - "$OUT/$name/log.json" "$OUT/$name/grad/grad.json" "$name" <<'PY'
import json, sys
log = json.load(open(sys.argv[1])); g = json.load(open(sys.argv[2]))["evaluation"]
h, s = log["header"], log["summary"]
fwd = s["seconds_local"] + s["seconds_global"] + s["seconds_other"]
n = len(g["frames"])
print("%-28s %6d %8d %7d %9d %9.3f %9.3f %9.3f %10.3f %10.3f %9.1f" % (
    sys.argv[3], h["nodes"], h["samples"], s["frames_done"], s["total_iterations"],
    s["seconds_local"], s["seconds_global"], s["seconds_other"], fwd,
    g["backward_seconds"], 1e3 * g["backward_seconds"] / max(n, 1)))
PY
done
