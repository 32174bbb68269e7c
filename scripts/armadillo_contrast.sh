#!/usr/bin/env bash
# Contrast sweep of the Armadillo twist (issue 6, the paper's headline stability experiment):
# runs scenes/armadillo_twist.toml at 1x, 10x, 100x and 1000x and prints, per contrast, the
# PD iterations of every frame, the non-converged frame count and the timings, as a Markdown
# table for docs/BENCHMARKS.md.
# Usage: scripts/armadillo_contrast.sh [OUTDIR] [extra diffphd args, e.g. --frames 5]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
B=target/release/diffphd
OUT=${1:-out/armadillo_contrast}
shift || true
mkdir -p "$OUT"
for c in 1 10 100 1000; do
  mid=$(python3 -c "print(f'{$c ** 0.5:.10g}')")
  "$B" simulate scenes/armadillo_twist.toml --quiet --out "$OUT/c$c" \
    --set body.0.region.0.scale="$mid" --set body.0.region.1.scale="$c" "$@" || true
done
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
print("| contrast | frames | converged | PD iterations per frame | total | mean | max | local s | global s | total s |")
print("|---|---|---|---|---|---|---|---|---|---|")
for c in (1, 10, 100, 1000):
    try:
        log = json.load(open(f"{out}/c{c}/log.json"))
    except OSError:
        print(f"| {c}x | – | run missing | | | | | | | |")
        continue
    fr = log["frames"]
    it = [f["iterations"] for f in fr]
    conv = sum(1 for f in fr if f["converged"])
    s = log["summary"]
    status = "" if log["status"] == "completed" else f" ({log['status']})"
    print(f"| {c}x | {len(fr)}{status} | {conv}/{len(fr)} | {' '.join(map(str, it))} | {sum(it)} | "
          f"{sum(it) / max(len(it), 1):.1f} | {max(it, default=0)} | {s['seconds_local']:.1f} | "
          f"{s['seconds_global']:.1f} | {s['seconds_total']:.1f} |")
PY
