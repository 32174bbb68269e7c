#!/usr/bin/env bash
# The napkin ladder (issue 16, spec §9.2): contact-solve scaling, dense vs iterative.
#
#   scripts/bench_napkin.sh [RES] [MODE] [-- extra diffphd args]
#
# RES: 25 (default; 25×25×1 hexes, 1352 nodes) or 50 (50×50×1, 5202 nodes; dx halves, the
# napkin stays 0.4 m wide). MODE: "quick" (default: the ladder's rungs, the dense reference
# only on the cheap rungs plus a short high-contact window) or "full" (dense on every rung
# and the 125-frame runs; hours with the dense solver at 50 %).
#
# The rungs are variants of scenes/napkin.toml by --set (no copied TOML). The contact
# fraction (active contacts / nodes) grows as the napkin drapes; a one-layer napkin can
# reach 50 % (its whole bottom layer) only on a flat enough sphere:
#   6 %   sphere R 0.5 (shipped), 20 frames
#   24 %  sphere R 0.5, 38 frames
#   38 %  sphere R 0.5, 46 frames
#   50 %  sphere R 3 (top kept at z = 0.5), 46 frames
#   50 % / 125  the same for DiffPD's full 125 × 2 ms (compare: DiffPD 128 s forward)
#   het   the 50 % rung with the x < 0 half 0.1× softer (body.0.region.0.scale=0.1)
# (DiffPD's ladder instead limits the contact candidates to a disc of the bottom layer;
# here every bottom node may touch and the geometry decides.)
#
# Per run: `diffphd simulate` (forward, per-frame contact set-up / solve seconds, active
# contacts, products with W) and, for the iterative solver, `diffphd grad` (backward) with
# a seeded random-linear loss and dL/d(log E). Prints a markdown table and the fitted
# exponent p of contact-solve seconds per PD iteration against active rows (3 per
# frictional contact) over all frames with ≥ 20 active contacts (least squares in log-log).
# Seconds are wall-clock; on a shared machine they include waiting for the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
res=${1:-25}
mode=${2:-quick}
shift $(( $# > 2 ? 2 : $# ))
[ "${1:-}" = "--" ] && shift
cargo build --release --quiet
bin=target/release/diffphd
tmp=${BENCH_NAPKIN_DIR:-$(mktemp -d)}
mkdir -p "$tmp"
dx=$(python3 -c "print(0.4/$res)")
size=(--set "body.0.mesh.cells=[$res, $res, 1]" --set "body.0.mesh.dx=$dx")
r3=(--set obstacle.0.radius=3.0 --set "obstacle.0.center=[0.0, 0.0, -2.5]")
grep -v '^directory' scenes/napkin.toml > "$tmp/napkin.toml"
cat >> "$tmp/napkin.toml" <<'EOF'

[loss]
[[loss.term]]
type = "random_linear"
seed = 3

[[parameter]]
kind = "youngs_modulus"
log = true
EOF
echo "napkin ${res}x${res}x1, mode $mode, $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ)"

# run NAME SOLVER FRAMES BACKWARD(0/1) [--set ...]
run() {
  local name=$1 solver=$2 frames=$3 bwd=$4
  shift 4
  "$bin" simulate "$tmp/napkin.toml" -q --threads 1 --frames "$frames" --out "$tmp/$name.$solver" \
    "${size[@]}" --set "contact.solver=\"$solver\"" "$@" "${EXTRA[@]}"
  if [ "$bwd" = 1 ]; then
    "$bin" grad "$tmp/napkin.toml" --threads 1 --frames "$frames" --out "$tmp/$name.$solver.grad" \
      "${size[@]}" --set "contact.solver=\"$solver\"" "$@" "${EXTRA[@]}" > "$tmp/$name.$solver.grad.txt"
  fi
}
EXTRA=("$@")
rungs=(
  "6pct 20"
  "24pct 38"
  "38pct 46"
  "50pct 46 r3"
  "het50pct 46 r3 het"
)
[ "$mode" = full ] && rungs+=("50pct125 125 r3")
for r in "${rungs[@]}"; do
  read -r name frames geo het <<< "$r"
  args=()
  [ "${geo:-}" = r3 ] && args+=("${r3[@]}")
  [ "${het:-}" = het ] && args+=(--set body.0.region.0.scale=0.1)
  run "$name" iterative "$frames" 1 "${args[@]}"
  if [ "$mode" = full ] || [ "$name" = 6pct ] || [ "$name" = 24pct ]; then
    run "$name" dense "$frames" 0 "${args[@]}"
  fi
done
if [ "$mode" = quick ]; then
  # a short window at high contact for the dense reference: sphere R 3, 17 frames
  run hi17 dense 17 0 "${r3[@]}"
  run hi17 iterative 17 0 "${r3[@]}"
fi
python3 - "$tmp" "$res" <<'EOF'
import json, math, os, re, sys
tmp, res = sys.argv[1], int(sys.argv[2])
runs = sorted(d for d in os.listdir(tmp) if os.path.isdir(os.path.join(tmp, d)) and not d.endswith('.grad'))
print()
print('| run | solver | frames | nodes | max active (% nodes) | contact set-up s/frame | contact solve s/frame | PD s/frame (local+global+other) | forward s | backward s/frame | W products / PD iter. |')
print('|---|---|---|---|---|---|---|---|---|---|---|')
pts = {}
for d in runs:
    name, solver = d.rsplit('.', 1)
    log = json.load(open(os.path.join(tmp, d, 'log.json')))
    fr = log['frames']
    nodes = 2 * (res + 1) ** 2
    n = len(fr)
    act = max(f['contact']['active'] for f in fr)
    setup = sum(f['contact']['seconds_setup'] for f in fr) / n
    solve = sum(f['contact']['seconds_solve'] for f in fr) / n
    pd = sum(f['seconds_local'] + f['seconds_global'] + f['seconds_other'] for f in fr) / n
    its = sum(f['iterations'] for f in fr)
    prods = sum(f['contact'].get('products', 0) for f in fr)
    bwd = '—'
    g = os.path.join(tmp, d + '.grad.txt')
    if os.path.exists(g):
        m = re.search(r'backward ([0-9.]+)s', open(g).read())
        bwd = '%.3f' % (float(m.group(1)) / n)
    print(f"| {name} | {solver} | {n} | {nodes} | {act} ({100*act/nodes:.0f} %) | {setup:.3f} | {solve:.3f} | {pd:.3f} | {log['summary']['seconds_total']:.1f} | {bwd} | {prods/its if solver=='iterative' else 0:.1f} |")
    for f in fr:
        a = f['contact']['active']
        if a >= 20 and f['contact']['seconds_solve'] > 0:
            pts.setdefault(solver, []).append((3 * a, f['contact']['seconds_solve'] / f['iterations']))
print()
for solver, p in sorted(pts.items()):
    xs = [math.log(a) for a, _ in p]
    ys = [math.log(t) for _, t in p]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else float('nan')
    lo, hi = min(a for a, _ in p), max(a for a, _ in p)
    print(f"{solver}: p = {slope:.2f} (contact-solve s per PD iteration ∝ active rows^p; {len(p)} frames, {lo}–{hi} active rows)")
EOF
echo "raw logs: $tmp"
