#!/usr/bin/env bash
# MPM–rigid coupling benchmark (issue 40, must-show 2; docs/BENCHMARKS.md "MPM–rigid
# coupling"): dough rolling (scenes/mpm_dough_rolling.toml) with the seed's weak coupling
# against the strongly coupled baseline of its reference [10] (mpm.coupling = "strong"), CPU
# against CPU through the CLI, side by side in one run. The strong coupling's Newton is serial
# (as [10]'s); the weak coupling's substep stages run on every core (and, in the tolerance
# study, also on one thread).
#
#   1. Tolerance study at [10]'s dt = 10 ms: eps_r in {1e-1, 5e-2, 1e-2, 1e-5}; weak with
#      N = dt/0.1 ms explicit substeps, strong with one implicit step per frame. Per run:
#      ms/step (log.json seconds_total / frames), solver iterations per step (weak: QN summed
#      over the substeps; strong: Newton), and the trajectory difference against the same
#      coupling at eps_r = 1e-5: the largest distance of the dough's centre of mass and the
#      largest |omega_y| difference of the pin over the frames (the pin's rotation is its only
#      free DoF, driven by friction).
#   2. The weak-strong gap as dt shrinks: dt in {10, 2.5, 1} ms at eps_r = 1e-5, the same
#      measures between the two couplings at the common times (multiples of 10 ms), and the
#      pin's mean omega_y over the last 30 % of the run (rolling without slip: v/r = 6.67).
# Prints a Markdown table (also written to $OUT/bench_mpm.md) and the speed-up weak/strong per
# tolerance against the seed's target (weak >= 10x faster at every tolerance).
#
# Usage: scripts/bench_mpm.sh [--tiny]
#   CONFIG=seed: the seed's Table I discretisation instead (scenes/mpm_dough_rolling_seed.toml:
#           h = 2 cm, 5,832 particles, N = 10 substeps of 1 ms, the table as the grid's sticky
#           floor so that only the pin makes contacts); SIZE does not apply, SUB defaults to
#           1e-3 and the dt study runs dt in {10, 5, 2} ms (N = 10, 5, 2).
#   --tiny: 20 ms of simulated time and the tolerance study only at eps_r 1e-1 and 1e-5, to
#           check that the script works (seconds; not a result).
# Env: BIN (default target/release/diffphd, built here), OUT (default a temp dir),
#      T (simulated time in s, default 0.1 = the scene's 100 ms),
#      SIZE (default 1): the dough's length and width times SIZE (thickness 2 cm, h = 1 cm,
#           8 particles per cell: 512*SIZE^2 particles; the pin's length, its start and the
#           domain follow). The seed's dough has 5,920 particles at h = 2 cm (Table I):
#           SIZE=3.4 gives 5,914 particles here (at h = 1 cm, so about 4x the seed's nodes).
#      SUB (default 1e-4): the weak coupling's substep length in s (N = dt / SUB). The seed runs
#           N = 10 (1 ms) at h = 2 cm; at h = 1 cm this dough's CFL bound 0.3 h / c_p is about
#           0.26 ms (c_p = sqrt(E(1-nu)/(rho(1+nu)(1-2nu))) = 11.6 m/s; mpm.substeps refuses a
#           larger substep), so SUB=2.5e-4 (N = 40) is the coarsest substep allowed here.
set -euo pipefail
cd "$(dirname "$0")/.."
tiny=0
[ "${1:-}" = "--tiny" ] && tiny=1
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet -p diffphd-cli
  BIN=target/release/diffphd
fi
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
T=${T:-0.1}
SIZE=${SIZE:-1}
CONFIG=${CONFIG:-reduced}
tols="1e-1 5e-2 1e-2 1e-5"
if [ "$CONFIG" = seed ]; then
  SUB=${SUB:-1e-3}
  dts="0.01 0.005 0.002"
  scene=scenes/mpm_dough_rolling_seed.toml
else
  SUB=${SUB:-1e-4}
  dts="0.01 0.0025 0.001"
  scene=scenes/mpm_dough_rolling.toml
fi
if [ $tiny = 1 ]; then
  T=0.02
  tols="1e-1 1e-5"
  dts="0.01 0.005"
fi
# The SIZE overrides (dough x, y extents; domain margins 4 cm; pin half-length = half-width + 1 cm).
size_set=()
[ "$CONFIG" = seed ] || read -r -a size_set < <(python3 - "$SIZE" <<'PY'
import sys
k = float(sys.argv[1])
ax, ay = 0.04 * k, 0.02 * k
f = lambda v: repr(round(v, 9))
print(f"--set mpm_body.0.shape.min=[{f(-ax)},{f(-ay)},-0.02] "
      f"--set mpm_body.0.shape.max=[{f(ax)},{f(ay)},0.0] "
      f"--set mpm.domain_min=[{f(-ax - 0.04)},{f(-ay - 0.04)},-0.06] "
      f"--set mpm.domain_max=[{f(ax + 0.04)},{f(ay + 0.04)},0.08] "
      f"--set rigid_body.0.shape.half_length={f(ay + 0.01)} "
      f"--set rigid_body.0.position=[{f(-0.5 * ax)},0.0,0.012499]")
PY
)

# run NAME COUPLING DT TOL [THREADS]  (THREADS: the run's --threads; default every core)
run() {
  local name=$1 coupling=$2 dt=$3 tol=$4 threads=${5:-0}
  local frames substeps
  frames=$(python3 -c "print(round($T / $dt))")
  if [ "$coupling" = weak ]; then
    substeps=$(python3 -c "print(round($dt / $SUB))")
  else
    substeps=1
  fi
  "$BIN" simulate "$scene" --out "$OUT/$name" --quiet \
    --set simulation.dt="$dt" --set simulation.frames="$frames" \
    --set mpm.substeps="$substeps" --set mpm.rel_tol="$tol" --set mpm.coupling="$coupling" \
    --threads "$threads" --set mpm.max_iterations=200000 --set output.every="$frames" ${size_set[@]+"${size_set[@]}"}
}

echo "machine: $(uname -n), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "commit $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ), CONFIG=$CONFIG, SIZE=$SIZE, SUB=$SUB" | tee "$OUT/bench_mpm.env"
for tol in $tols; do
  for c in weak strong; do
    run "${c}_dt0.01_tol$tol" "$c" 0.01 "$tol"
  done
  run "weak1_dt0.01_tol$tol" weak 0.01 "$tol" 1
done
for dt in $dts; do
  [ "$dt" = 0.01 ] && continue
  for c in weak strong; do
    run "${c}_dt${dt}_tol1e-5" "$c" "$dt" 1e-5
  done
done

SUB=$SUB python3 - "$OUT" "$tols" "$dts" <<'PY' | tee "$OUT/bench_mpm.md"
import json, sys
out, tols, dts = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def load(c, dt, tol):
    return json.load(open(f"{out}/{c}_dt{dt}_tol{tol}/log.json"))
def series(log):
    # (time, dough centre of mass, pin omega_y) per frame, frame 0 included
    return [(f["time"], f["energies"]["mpm_center_of_mass"], f["bodies"][0]["angular_velocity"][1])
            for f in log["frames"]]
def diff(a, b):
    tb = {round(t, 9): (x, w) for t, x, w in series(b)}
    dx = dw = 0.0
    for t, x, w in series(a):
        k = round(t, 9)
        if k in tb:
            xb, wb = tb[k]
            dx = max(dx, sum((x[i] - xb[i]) ** 2 for i in range(3)) ** 0.5)
            dw = max(dw, abs(w - wb))
    return dx, dw
def late(log):
    t_end = log["frames"][-1]["time"]
    w = [f["bodies"][0]["angular_velocity"][1] for f in log["frames"] if f["time"] >= 0.7 * t_end]
    return sum(w) / len(w)
def stats(log):
    f = log["frames"][1:]
    n = len(f)
    return 1e3 * log["seconds_total"] / n, sum(x["qn_iterations_total"] for x in f) / n, \
        max(x["qn_iterations_max"] for x in f)
h0 = load("weak", "0.01", tols[0])["header"]
print(f"Dough: {h0['particles']} particles, {h0['grid_nodes']} grid nodes, h = {h0['spacing']} m.\n")
for c in ("weak", "strong"):
    n = [f["contacts"] for f in load(c, "0.01", tols[-1])["frames"][1:]]
    print(f"{c}, eps_r = {tols[-1]}: particle contacts per step (largest substep) mean "
          f"{sum(n) / len(n):.1f}, max {max(n)}\n")
sub = float(__import__("os").environ["SUB"])
print(f"### Tolerance study, dt = 10 ms (weak: N = {round(0.01 / sub)} substeps of {1e3 * sub:g} ms; strong: 1 implicit step)\n")
print("| eps_r | coupling | ms/step | iterations/step (mean) | per solve (mean) | max per solve | "
      "COM diff vs 1e-5 [mm] | omega_y diff vs 1e-5 [rad/s] | weak speed-up, 1 thread / all |")
print("|---|---|---|---|---|---|---|---|---|")
for tol in tols:
    ms = {}
    for c in ("weak1", "weak", "strong"):
        log, ref = load(c, "0.01", tol), load(c.rstrip("1"), "0.01", "1e-5")
        m, it, mx = stats(log)
        ms[c] = m
        dx, dw = diff(log, ref)
        sp = "" if c != "strong" else f"{ms['strong'] / ms['weak1']:.2f}x / {ms['strong'] / ms['weak']:.2f}x"
        per = it / log["header"]["substeps"]
        name = f"{c.rstrip('1')} ({log['header']['threads']} thr.)"
        print(f"| {tol} | {name} | {m:.1f} | {it:.1f} | {per:.2f} | {mx} | {1e3 * dx:.4f} | {dw:.4f} | {sp} |")
print("\n### Weak-strong gap vs dt (eps_r = 1e-5; compared at the common times, multiples of 10 ms)\n")
print("| dt [ms] | weak N | weak ms/step | strong ms/step | COM gap [mm] | omega_y gap [rad/s] | "
      "mean omega_y, last 30 %, weak / strong [rad/s] |")
print("|---|---|---|---|---|---|---|")
for dt in dts:
    w, s = load("weak", dt, "1e-5"), load("strong", dt, "1e-5")
    dx, dw = diff(w, s)
    print(f"| {1e3 * float(dt):g} | {round(float(dt) / sub)} | {stats(w)[0]:.1f} | {stats(s)[0]:.1f} | "
          f"{1e3 * dx:.4f} | {dw:.4f} | {late(w):.3f} / {late(s):.3f} |")
PY
echo "logs and table in $OUT"
