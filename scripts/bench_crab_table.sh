#!/usr/bin/env bash
# The paper's Table 3 on the Crab (issue 38 item 7, must-show 3): Newton-Cholesky, DiffPD,
# DiffPD + Schwarz (our "MAS" row: two-level additive Schwarz, Nicolaides coarse space,
# `solver.diffpd_linear = "schwarz"`, docs/scene-format.md) and DiffPhD (the PD
# defaults, mode = "accurate"; and a second row with the scene's mode = "paper", the
# paper's gate at REL_TOL), forward and backward seconds and
# the gradient error against a tight Newton oracle. Not a test; a benchmark.
#
#   scripts/bench_crab_table.sh                          # CPU-benchmark size (below)
#   RES=12 FRAMES=1 ROW_TIMEOUT=600 scripts/bench_crab_table.sh   # smoke size
#
# Size: RES (default 55: 178,938 tets, 39,890 nodes, 119,670 DoF; docs/paper-scenes.md,
# the paper's element count), FRAMES (default 5 of the scene's 30; h = 30 ms). Each run is
# stopped after ROW_TIMEOUT seconds (default 7200) and then reported as "time cap"; ROWS (names,
# space-separated: oracle newton diffpd diffpd_schwarz diffphd diffphd_paper; default all)
# picks the rows, the others are reported "not run". Parameters: E (log) of the whole crab
# and of the stiff region; loss: random_linear (seed 1) on the last frame.
#
# Set-up: SETUP=held (default): the reference code's -- the feet (every node within 3 mm of
# the ground, which the crab stands 0.5 mm above) held by Dirichlet conditions, the ground
# removed, the top of the carapace pulled upward by the scene's ramped 4 N: all four methods
# solve the same model. SETUP=ground: the scene as it is (standing on a frictionless ground
# plane): Newton and DiffPhD model the ground by NCP contact, DiffPD (both rows) by its own
# active-set glue contact (diffpd-notes §1.9) -- a different model, so their gradient error
# against the Newton oracle is then partly model difference; measured at RES=12, 2 frames
# (2026-12-06): the Newton oracle (tol 1e-12) missed its test in both frames (100
# iterations) and Newton at 1e-6 too, while DiffPD took ~10k L-BFGS iterations per frame.
#
# Accuracy: DiffPD (both rows) and DiffPhD (paper) run at REL_TOL (default 1e-4, the
# scene's and the paper's gate), DiffPhD (defaults) at its residual test 1e-8; every
# backward at REL_TOL; the "Newton" row runs at
# NEWTON_TOL (default 1e-6); the oracle is Newton at ORACLE_TOL (default 1e-12, adjoint
# 1e-12). The gradient error is max_i |g_i - g_oracle,i| / max|g_oracle|. "n/c": a forward
# or backward frame missed its stopping test (the run goes on with on_nonconvergence =
# "warn"), or a Schwarz-PCG solve stopped at its 1000-iteration cap; a failed run prints
# its last error line.
#
# Expected wall time at the default size: measured at RES=55, FRAMES=2, THREADS=1 on a
# 2-core AMD EPYC VM (2026-12-07, docs/benchmarks-log.md "The Crab table at the CPU-benchmark
# size"): oracle 239 s, Newton 232 s, DiffPD 2,207 s (frame 1 at its 5,000-iteration cap),
# DiffPD + Schwarz stopped by a 1,200-s cap inside frame 1, DiffPhD 292 s, DiffPhD paper
# 23 s. So the default 5 frames take about 10 min (oracle), 9 (Newton), 90 (DiffPD), 12
# (DiffPhD) and the Schwarz row its whole cap: about 2 h plus that cap at one thread. The
# FRAMES=2 run is the one in docs/BENCHMARKS.md.
# Why the Schwarz row is slow: DiffPD needs thousands of L-BFGS iterations per frame on the
# 1000x crab and each now costs a PCG solve; measured at RES=12, held, frame 1 (2026-12-06,
# 2 shared cores, load ~20, not a benchmark): 213 PCG iterations per solve on average at
# rel_tol 1e-4 (max 220; the homogeneous crab: 58), ~0.2 s per L-BFGS iteration against
# ~0.011 s with the Cholesky solve. The smoke size RES=12 FRAMES=2 took ~3 min without the
# Schwarz row and >13 min with it under that load.
#
# Output: $OUT/table.json (machine, date, commit, size, rows) and $OUT/table.md.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/diffphd}
if [[ -z "${NO_BUILD:-}" ]]; then cargo build --release --quiet -p diffphd-cli || exit 1; fi
RES=${RES:-55}
FRAMES=${FRAMES:-5}
REL_TOL=${REL_TOL:-1e-4}
NEWTON_TOL=${NEWTON_TOL:-1e-6}
ORACLE_TOL=${ORACLE_TOL:-1e-12}
THREADS=${THREADS:-0}
ROW_TIMEOUT=${ROW_TIMEOUT:-7200}
SETUP=${SETUP:-held}
OUT=${OUT:-out/bench_crab_table/res${RES}_$SETUP}
mkdir -p "$OUT"
common=(--frames "$FRAMES" --threads "$THREADS" --quiet --overwrite
  --set "body.0.mesh.resolution=$RES"
  --set 'solver.on_nonconvergence="warn"'
  --set 'loss.term=[{type="random_linear", seed=1}]'
  --set 'parameter=[{kind="youngs_modulus", log=true}, {kind="youngs_modulus", region=0, log=true}]')
case "$SETUP" in
  held) common+=(--set 'obstacle=[]'
          --set 'body.0.dirichlet=[{select={box={min=[-1,-1,-1],max=[1,1,0.003]}}}]') ;;
  ground) ;;
  *) echo "SETUP must be held or ground, not $SETUP" >&2; exit 2 ;;
esac
# name | --solver | extra sets
rows=(
  "oracle|newton|--set solver.newton_tol=$ORACLE_TOL --set backward.rel_tol=$ORACLE_TOL --set backward.abs_tol=0"
  "newton|newton|--set solver.newton_tol=$NEWTON_TOL --set backward.rel_tol=$REL_TOL"
  "diffpd|diffpd|--set solver.rel_tol=$REL_TOL --set backward.rel_tol=$REL_TOL"
  "diffpd_schwarz|diffpd|--set solver.rel_tol=$REL_TOL --set backward.rel_tol=$REL_TOL --set solver.diffpd_linear=\"schwarz\""
  "diffphd|diffphd|--set solver.mode=\"accurate\" --set backward.rel_tol=$REL_TOL"
  "diffphd_paper|diffphd|--set solver.rel_tol=$REL_TOL --set backward.rel_tol=$REL_TOL"
)
for r in "${rows[@]}"; do
  IFS='|' read -r name solver extra <<< "$r"
  dir="$OUT/$name"
  case " ${ROWS:-$name} " in *" $name "*) ;; *) continue ;; esac
  mkdir -p "$dir"
  echo "$(date -u +%H:%M:%S) $name ..." >&2
  start=$(date +%s.%N)
  # shellcheck disable=SC2086
  timeout "$ROW_TIMEOUT" $BIN grad scenes/crab.toml --out "$dir" --solver "$solver" "${common[@]}" $extra \
    2> "$dir/stderr.txt"
  echo $? > "$dir/rc"
  echo "$(date +%s.%N) - $start" | bc > "$dir/wall"
done
python3 - "$OUT" "$RES" "$FRAMES" "$REL_TOL" "$NEWTON_TOL" "$ORACLE_TOL" "$SETUP" <<'PY'
import json, os, subprocess, sys, platform
out, res, frames, rel, ntol, otol, setup = sys.argv[1:8]
names = ["oracle", "newton", "diffpd", "diffpd_schwarz", "diffphd", "diffphd_paper"]
labels = {"oracle": "Newton oracle (tol %s)" % otol, "newton": "Newton-Cholesky",
          "diffpd": "DiffPD", "diffpd_schwarz": "DiffPD + Schwarz (2-level, Nicolaides)",
          "diffphd": "DiffPhD (defaults: mode accurate)",
          "diffphd_paper": "DiffPhD (scene: mode paper, gate %s)" % rel}
def load(name):
    d = os.path.join(out, name)
    if not os.path.exists(os.path.join(d, "rc")):
        return {"error": "not run (ROWS)", "rc": None}
    rc = int(open(os.path.join(d, "rc")).read())
    g = os.path.join(d, "grad.json")
    if rc not in (0, 3) or not os.path.exists(g):
        err = open(os.path.join(d, "stderr.txt")).read().strip().splitlines()
        if rc == 124:
            return {"error": "time cap (ROW_TIMEOUT s): n/c", "rc": rc}
        return {"error": err[-1] if err else "exit %d" % rc, "rc": rc}
    ev = json.load(open(g))["evaluation"]
    row = {"rc": rc, "forward_seconds": ev["forward_seconds"],
           "setup_seconds": ev["setup_seconds"], "backward_seconds": ev["backward_seconds"],
           "iterations": ev["pd_iterations"], "adjoint_iterations": ev["adjoint_iterations"],
           "nonconverged_forward_frames": ev["nonconverged_forward_frames"],
           "nonconverged_backward_frames": ev["nonconverged_backward_frames"],
           "loss": ev["loss"], "gradient": ev["gradient"]}
    pcg = {"solves": 0, "iterations": 0, "not_converged": 0, "max_iterations": 0}
    recs = [fr.get("schwarz") for fr in ev.get("frames", [])]
    recs += [(fr.get("adjoint") or {}).get("schwarz") for fr in ev.get("frames", [])]
    for s in recs:
        if s:
            for k in ("solves", "iterations", "not_converged"):
                pcg[k] += s[k]
            pcg["max_iterations"] = max(pcg["max_iterations"], s["max_iterations"])
    if pcg["solves"]:
        row["schwarz_pcg"] = pcg
    row["nc"] = bool(row["nonconverged_forward_frames"] or row["nonconverged_backward_frames"]
                     or pcg["not_converged"])
    return row
rows = {n: load(n) for n in names}
oracle = rows["oracle"].get("gradient")
for n, r in rows.items():
    if "gradient" in r and oracle:
        sc = max(abs(v) for v in oracle) or 1.0
        r["gradient_error"] = max(abs(a - b) for a, b in zip(r["gradient"], oracle)) / sc
def git(*a):
    try:
        return subprocess.run(["git", *a], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""
cpu = ""
try:
    cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
except (OSError, StopIteration):
    pass
meta = {"machine": "%s, %d cores, %s" % (platform.machine(), os.cpu_count(), cpu),
        "load": open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else None,
        "commit": git("rev-parse", "--short", "HEAD"), "dirty": bool(git("status", "--porcelain", "-uno")),
        "resolution": int(res), "frames": int(frames), "setup": setup, "rel_tol": float(rel),
        "newton_tol": float(ntol), "oracle_tol": float(otol)}
json.dump({"meta": meta, "rows": rows}, open(os.path.join(out, "table.json"), "w"), indent=1)
md = ["Crab (%s), resolution %s, %s frames; %s; commit %s%s; load %s" % (
          setup, res, frames, meta["machine"], meta["commit"], " (dirty)" if meta["dirty"] else "",
          " ".join(meta["load"] or [])),
      "", "| method | forward s (setup s) | backward s | iterations fwd / adj | gradient error | note |",
      "|---|---|---|---|---|---|"]
for n in names:
    r = rows[n]
    if "error" in r:
        md.append("| %s | – | – | – | – | %s%s |" % (labels[n], "" if r["rc"] is None else "failed: ",
                                                  r["error"][:120].replace("|", "/")))
        continue
    note = []
    if r["nonconverged_forward_frames"]:
        note.append("n/c forward frames %s" % r["nonconverged_forward_frames"])
    if r["nonconverged_backward_frames"]:
        note.append("n/c backward frames %s" % r["nonconverged_backward_frames"])
    p = r.get("schwarz_pcg")
    if p:
        note.append("PCG %d solves, %d its (max %d), %d n/c" % (
            p["solves"], p["iterations"], p["max_iterations"], p["not_converged"]))
    ge = r.get("gradient_error")
    md.append("| %s | %.2f (%.2f) | %.2f | %d / %d | %s | %s |" % (
        labels[n], r["forward_seconds"], r["setup_seconds"], r["backward_seconds"],
        r["iterations"], r["adjoint_iterations"],
        "oracle" if n == "oracle" else ("%.2e" % ge if ge is not None else "n/a"),
        "; ".join(note) or ("n/c" if r["nc"] else "")))
open(os.path.join(out, "table.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
