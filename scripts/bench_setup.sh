#!/usr/bin/env bash
# Setup cost per loss evaluation (assembly + ordering + symbolic analysis + numeric
# factorization of the global matrix) over a short `diffphd optimize` of the sysID cantilever at several mesh sizes (2 frames):
# the first evaluation and the mean of the later ones. Not a test. Raw logs go to $OUT.
#
#   scripts/bench_setup.sh
#   SIZES="40x8x8 80x16x16" EVALS=6 scripts/bench_setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
BIN=target/release/diffphd
OUT=${OUT:-out/bench_setup}
SIZES=${SIZES:-"20x4x4 40x8x8 80x16x16"}
EVALS=${EVALS:-6}
THREADS=${THREADS:-1}
mkdir -p "$OUT"
echo "machine: $(uname -m), $(nproc) cores, threads=$THREADS"
printf "%-34s %7s %6s %12s %14s\n" scene nodes evals "first s" "later mean s"
run() { # name, scene, extra args
  local name=$1 scene=$2; shift 2
  $BIN optimize "$scene" --out "$OUT/$name" --threads "$THREADS" --quiet \
    --max-evaluations "$EVALS" "$@" >/dev/null || true
  python3 - "$OUT/$name/optimize.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); ev = d["evaluations"]
s = [e["setup_seconds"] for e in ev]
later = sum(s[1:]) / max(len(s) - 1, 1)
print(f"{sys.argv[2]:<34} {d['header']['nodes']:>7} {len(s):>6} {s[0]:>12.4f} {later:>14.4f}")
PY
}
for cells in $SIZES; do
  run "sysid_cantilever_$cells" scenes/sysid_cantilever.toml \
    --frames 2 --set "body.0.mesh.cells=[${cells//x/, }]"
done
