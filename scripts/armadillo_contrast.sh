#!/usr/bin/env bash
# Contrast sweep of the Armadillo twist (issue 6, the paper's headline stability experiment):
# runs scenes/armadillo_twist.toml at 1x, 10x, 100x and 1000x and prints, per contrast, the
# PD iterations of every frame, the non-converged frame count and the timings, as a Markdown
# table for docs/benchmarks-log.md (headline in docs/BENCHMARKS.md, "Sweeps").
# Usage: scripts/armadillo_contrast.sh [OUTDIR] [extra diffphd args, e.g. --frames 5]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
B=target/release/diffphd
OUT=${1:-out/armadillo_contrast}
shift || true
mkdir -p "$OUT"
for c in 1 10 100 1000; do
  lo=$(python3 -c "print(f'{$c ** -0.5:.10g}')")
  hi=$(python3 -c "print(f'{$c ** 0.5:.10g}')")
  "$B" simulate scenes/armadillo_twist.toml --quiet --overwrite --out "$OUT/c$c" --set 'output.format="ply"' \
    --set body.0.region.0.scale="$lo" --set body.0.region.1.scale="$hi" "$@" || true
done
python3 - "$OUT" <<'PY'
import glob, json, struct, sys
out = sys.argv[1]

def ply_positions(path):
    """node -> (x, y, z) of a diffphd PLY frame (binary: 7 floats + int per vertex)."""
    b = open(path, "rb").read()
    end = b.index(b"end_header\n") + 11
    n = int([l for l in b[:end].split(b"\n") if l.startswith(b"element vertex")][0].split()[2])
    rec = [struct.unpack("<7fi", b[end + 32 * i:end + 32 * i + 32]) for i in range(n)]
    return {r[7]: r[:3] for r in rec}

def max_displacement(d):
    frames = sorted(glob.glob(f"{d}/frame_*.ply"))
    if len(frames) < 2:
        return float("nan")
    a, b = ply_positions(frames[0]), ply_positions(frames[-1])
    return max(sum((b[k][i] - a[k][i]) ** 2 for i in range(3)) ** 0.5 for k in a)

print("| contrast | frames | converged | PD iterations per frame | total | mean | max | max displacement (mm) | local s | global s | total s |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for c in (1, 10, 100, 1000):
    try:
        log = json.load(open(f"{out}/c{c}/log.json"))
    except OSError:
        print(f"| {c}x | – | run missing | | | | | | | | |")
        continue
    fr = log["frames"]
    it = [f["iterations"] for f in fr]
    conv = sum(1 for f in fr if f["converged"])
    s = log["summary"]
    status = "" if log["status"] == "completed" else f" ({log['status']})"
    print(f"| {c}x | {len(fr)}{status} | {conv}/{len(fr)} | {' '.join(map(str, it))} | {sum(it)} | "
          f"{sum(it) / max(len(it), 1):.1f} | {max(it, default=0)} | {1e3 * max_displacement(f'{out}/c{c}'):.2f} | {s['seconds_local']:.1f} | "
          f"{s['seconds_global']:.1f} | {s['seconds_total']:.1f} |")
PY
