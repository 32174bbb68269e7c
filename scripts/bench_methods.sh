#!/usr/bin/env bash
# Side-by-side benchmark of the solver methods (issue 7): DiffPhD (PD + Anderson), DiffPD
# (PD + L-BFGS, Liu 2017) and Newton on the PD energy (the oracle), on the same scene file.
# One `diffphd grad` run per (scene, method): forward and backward seconds, PD/Newton
# iterations, loss, gradient norm and the relative gradient difference to the Newton oracle
# (max over parameters of |g - g_newton| / max(|g_newton|, 1e-8 max|g_newton|)).
# Not a test. Raw grad.json files go to $OUT.
#
#   scripts/bench_methods.sh
#   FRAMES=10 SCENES="scenes/cantilever.toml" METHODS="diffphd newton newton:ppn" scripts/bench_methods.sh
#   THREADS="1 2" scripts/bench_methods.sh          # thread sweep
#   EXTRA="--set solver.rel_tol=1e-8" scripts/bench_methods.sh   # extra args for every run
#
# A method is `name` or `name:newton_filter` (e.g. newton:ppn, newton:abs). Newton models
# the same NCP contact as diffphd; diffpd uses DiffPD's own active-set glue contact (a
# different model: its rel.diff to Newton on contact scenes is a model difference).
set -uo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet || exit 1
BIN=target/release/diffphd
OUT=${OUT:-out/bench_methods}
THREADS=${THREADS:-0}
FRAMES=${FRAMES:-20}
METHODS=${METHODS:-"newton diffphd diffpd"}
EXTRA=${EXTRA:-}
SCENES=${SCENES:-"scenes/cantilever.toml scenes/twist_bands_tet.toml scenes/bouncing_ball.toml"}
mkdir -p "$OUT"
echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); frames=$FRAMES; extra=[$EXTRA]; $(date -u +%Y-%m-%dT%H:%MZ)"
printf "%-18s %-11s %3s %8s %8s %8s %8s %9s %14s %10s %10s\n" scene method thr "fwd s" "bwd s" "fwd x" "bwd x" iters loss "|grad|" "rel.diff"
for s in $SCENES; do
  name=$(basename "$s" .toml)
  for t in $THREADS; do
    rows=()
    for m in $METHODS; do
      meth=${m%%:*}
      sets=(--set 'loss.term=[{type="random_linear", seed=1}]'
            --set 'parameter=[{kind="youngs_modulus", log=true}, {kind="poisson_ratio"}, {kind="density"}]')
      if [[ "$m" == *:* ]]; then sets+=(--set "solver.newton_filter=\"${m#*:}\""); fi
      dir="$OUT/$name/t$t/${m/:/_}"
      mkdir -p "$dir"
      $BIN grad "$s" --out "$dir" --threads "$t" --frames "$FRAMES" --solver "$meth" --quiet --overwrite \
        "${sets[@]}" $EXTRA 2> "$dir/stderr.txt"
      echo $? > "$dir/rc"
      rows+=("$m=$dir")
    done
    python3 - "$name" "$t" "${rows[@]}" <<'PY'
import json, sys, os
name, thr, rows = sys.argv[1], sys.argv[2], sys.argv[3:]
res = {}
for r in rows:
    m, d = r.split("=", 1)
    rc = int(open(os.path.join(d, "rc")).read())
    if rc != 0 or not os.path.exists(os.path.join(d, "grad.json")):
        err = open(os.path.join(d, "stderr.txt")).read().strip().splitlines()
        res[m] = (None, err[-1] if err else f"exit {rc}", rc)
        continue
    res[m] = (json.load(open(os.path.join(d, "grad.json")))["evaluation"], None, rc)
oracle = next((v[0] for k, v in res.items() if k == "newton" and v[0]), None)
base = res.get("diffphd", (None,))[0]
for m, (ev, err, rc) in res.items():
    if ev is None:
        print("%-18s %-11s %3s  %s (exit %d)" % (name, m, thr, err[:100], rc))
        continue
    g = ev["gradient"]
    gn = sum(x * x for x in g) ** 0.5
    if oracle:
        go = oracle["gradient"]; sc = max(abs(x) for x in go)
        rd = "%10.2e" % max(abs(a - b) / max(abs(b), 1e-8 * sc) for a, b in zip(g, go))
    else:
        rd = "%10s" % "n/a"
    fx = bx = "-"
    if base:
        fx = "%.2f" % (ev["forward_seconds"] / base["forward_seconds"])
        bx = "%.2f" % (ev["backward_seconds"] / max(base["backward_seconds"], 1e-12))
    print("%-18s %-11s %3s %8.3f %8.3f %8s %8s %9d %14.8e %10.3e %s" % (
        name, m, thr, ev["forward_seconds"], ev["backward_seconds"], fx, bx,
        ev["pd_iterations"], ev["loss"], gn, rd))
PY
  done
done
echo "fwd x / bwd x: seconds relative to diffphd (>1 = slower than diffphd). iters: PD iterations (diffphd, diffpd) or Newton iterations (newton), summed over frames."
