#!/usr/bin/env bash
# Refactoring guard: runs a fixed set of short simulate / grad / optimize runs at one thread
# and compares them with a recorded baseline: PLY frames and optimized.toml bitwise (cmp),
# the JSON logs number by number with every timing key left out, and the build's git commit
# (in the logs and in optimized.toml's header comment) ignored. Not a test.
#
# Frames are compared as PLY: every run that writes frames passes --set output.format="ply"
# (the default became "vtu" after the baseline of session 19 was recorded; the PLY frames hold
# the same positions rounded to float32). That override is the one difference allowed: it is
# dropped from the recorded `overrides` lists, the scene hashes of those runs (which cover the
# overrides) are not compared, and the `format = "ply"` line it adds to optimized.toml's
# [output] table is left out.
#
#   scripts/compare_outputs.sh record DIR   # write the baseline (run on the unchanged tree)
#   scripts/compare_outputs.sh check DIR    # re-run into a temp dir and compare with DIR
#
# BIN overrides the binary (default: target/release/diffphd, built here).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: compare_outputs.sh record|check DIR}
base=${2:?usage: compare_outputs.sh record|check DIR}
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet
  BIN=target/release/diffphd
fi
case "$mode" in
  record) out=$base ;;
  check) out=$(mktemp -d) ;;
  *) echo "mode must be record or check" >&2; exit 2 ;;
esac
# the checkout's own path appears in some logs (sweep runs): recorded, and replaced by <repo>
mkdir -p "$out"
pwd > "$out/repo.path"
mkdir -p "$out"

PLY='output.format="ply"'
run() { # name, then the command's arguments
  local name=$1; shift
  local ply=()
  case "$1" in simulate|optimize) ply=(--set "$PLY") ;; esac
  "$BIN" "$@" "${ply[@]}" --out "$out/$name" --threads 1 --quiet
}
for s in cantilever twist_bands_tet bouncing_ball; do
  run "sim_$s" simulate "scenes/$s.toml" --frames 4
  run "grad_$s" grad "scenes/$s.toml" --frames 3 \
    --set 'loss.term=[{type="random_linear", seed=1}]' \
    --set 'parameter=[{kind="youngs_modulus", log=true}, {kind="poisson_ratio"}]'
done
run grad_sysid_ball grad scenes/sysid_bouncing_ball.toml --frames 6
run opt_sysid_cantilever optimize scenes/sysid_cantilever.toml --frames 5 --max-iterations 3
run sim_cantilever_newton simulate scenes/cantilever.toml --frames 2 --solver newton
run sim_cantilever_diffpd simulate scenes/cantilever_diffpd.toml --frames 2
run sim_ball_diffpd_glue simulate scenes/bouncing_ball.toml --solver diffpd --frames 30
run grad_sysid_ball_diffpd grad scenes/sysid_bouncing_ball.toml --solver diffpd --frames 20
# Extended for the library reshaping (issue 34): contact scenes, muscles, checkpointing, the
# emulator backend, two threads, a resumed optimization and a two-run sweep.
run sim_napkin simulate scenes/napkin.toml --frames 22
run sim_stack simulate scenes/stack.toml --frames 6
run sim_strike simulate scenes/strike.toml --frames 6
run grad_routing_tendon grad scenes/routing_tendon.toml --frames 4
run grad_cantilever_checkpoint grad scenes/cantilever.toml --frames 6 \
  --set backward.checkpoint_every=3 \
  --set 'loss.term=[{type="random_linear", seed=2}]' \
  --set 'parameter=[{kind="youngs_modulus", log=true}]'
run grad_cantilever_diffpd_emulator grad scenes/cantilever_diffpd.toml --frames 2 --backend emulator \
  --set 'loss.term=[{type="random_linear", seed=3}]' \
  --set 'parameter=[{kind="youngs_modulus", log=true}]'
"$BIN" simulate scenes/twist_bands_tet.toml --frames 4 --out "$out/sim_twist_bands_2threads" --threads 2 --quiet \
  --set "$PLY"
run opt_resume_cantilever optimize scenes/sysid_cantilever.toml --frames 5 --max-iterations 2
run opt_resume_cantilever optimize scenes/sysid_cantilever.toml --frames 5 --max-iterations 4 --resume
"$BIN" sweep run tests/fixtures/sweeps/two_runs.sweep.toml --out "$out/sweep_two_runs" --jobs 1 --quiet

[ "$mode" = record ] && { echo "baseline recorded in $out"; exit 0; }

fail=0
python3 - "$base" "$out" "$PLY" <<'PY' || fail=1
import json, os, re, sys, filecmp
base, new, ply = sys.argv[1], sys.argv[2], sys.argv[3]
timing = re.compile(r"(seconds|_s$|elapsed|timestamp|date|wall|ms_per|git_commit)")
def lines(p):
    # optimized.toml: the header comment names the build's git commit; the PLY override
    # adds `format = "ply"` to its [output] table
    return [l for l in open(p, "rb").read().split(b"\n")
            if not l.startswith(b"# diffphd ") and l != b'format = "ply"']
def flat(x, path=""):
    if isinstance(x, dict):
        for k, v in x.items():
            if timing.search(k):
                continue
            yield from flat(v, f"{path}.{k}")
    elif isinstance(x, list):
        if path.endswith("overrides"):
            x = [v for v in x if v != ply]
        for i, v in enumerate(x):
            yield from flat(v, f"{path}[{i}]")
    elif isinstance(x, str):
        # paths into the output folder differ between the recorded and the checked run
        x = x.replace(OUT_NEW, "<out>").replace(OUT_BASE, "<out>")
        for repo in REPOS:
            x = x.replace(repo, "<repo>")
        yield path, x
    else:
        yield path, x
OUT_BASE, OUT_NEW = os.path.abspath(base), os.path.abspath(new)
# the checkouts that recorded and re-ran (a baseline without repo.path: none replaced)
REPOS = [open(os.path.join(d, "repo.path")).read().strip()
         for d in (base, new) if os.path.exists(os.path.join(d, "repo.path"))]
bad = 0
n = 0
for root, _, files in os.walk(base):
    for f in sorted(files):
        if f == "repo.path" and root == base:
            continue
        a = os.path.join(root, f)
        b = os.path.join(new, os.path.relpath(a, base))
        n += 1
        if not os.path.exists(b):
            print(f"MISSING {b}"); bad += 1; continue
        if f.endswith(".json"):
            jb = json.load(open(b))
            with_ply = json.dumps(ply) in json.dumps(jb)  # a run given the PLY override
            fa, fb = dict(flat(json.load(open(a)))), dict(flat(jb))
            for k in sorted(set(fa) | set(fb)):
                if k.endswith(".out") or k.endswith(".scene") or "directory" in k \
                        or k.endswith(".command_line[0]"):  # the binary's path
                    continue
                if with_ply and (k.endswith("scene_hash") or k.endswith("hash_without_threads")):
                    continue
                if fa.get(k) != fb.get(k):
                    print(f"DIFF {os.path.relpath(a, base)} {k}: {fa.get(k)!r} -> {fb.get(k)!r}")
                    bad += 1
        elif f.endswith(".toml"):
            if lines(a) != lines(b):
                print(f"DIFF {os.path.relpath(a, base)} (bytes)"); bad += 1
        elif not filecmp.cmp(a, b, shallow=False):
            print(f"DIFF {os.path.relpath(a, base)} (bytes)"); bad += 1
print(f"{n} files compared, {bad} differences")
sys.exit(1 if bad else 0)
PY
[ $fail = 0 ] && rm -rf "$out" && echo "IDENTICAL"
exit $fail
