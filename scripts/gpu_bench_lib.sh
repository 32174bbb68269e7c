# Shared by scripts/gpu_device.sh (on a lent GPU machine, staged binaries) and
# scripts/bench_gpu.sh (a machine with cargo): `bench NAME SCENE FRAMES [--set ...]` runs
# `grad` on the CPU (2 threads, the issue's baseline) and on the device ($BACKEND: cuda, or
# emulator for a dry run) with 2 and with every host thread, and prints forward/backward
# seconds per frame without the one-time setups, iteration counts, the device traffic, the
# speed-ups and the gradient difference. Needs: $D (the diffphd binary), $BACKEND, $OUT (each
# grad.json is copied there) and a function `limit SECONDS` (the per-run time limit).
bench() { # name scene frames [--set ...]
    local name=$1 scene=$2 frames=$3; shift 3
    # the device with 2 host threads (as the CPU baseline) and with every host core (its
    # host-side work: Newton-Krylov linearizations, energies, the direct fallback)
    for run in "$BACKEND:2" "cpu:2" "$BACKEND:$(nproc)"; do
        local b=${run%%:*} t=${run##*:} key=${run%%:*}
        [ "$t" = 2 ] || key="$b-t$t"
        timeout "$(limit 200)" $D grad "$scene" --frames "$frames" --threads "$t" --backend $b --quiet \
            --out "/tmp/bench-$name-$key" --overwrite "$@" || echo "$name $key failed: $?"
        cp "/tmp/bench-$name-$key/grad.json" "$OUT/grad-$name-$key.json" 2>/dev/null
    done
    python3 - "$name" "$frames" "$BACKEND" "$(nproc)" <<'PY'
import json, math, sys
name, frames, dev, cores = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
ev = {}
for b in ("cpu", dev, f"{dev}-t{cores}"):
    try:
        ev[b] = json.load(open(f"/tmp/bench-{name}-{b}/grad.json"))["evaluation"]
    except Exception as e:
        print(f"{name} {b}: no grad.json ({e})")
# per frame: the forward less its one-time setup (the CPU factor; on the device also the
# device factor's build and self-check), which is printed apart
per = lambda e: (e['forward_seconds'] - e['setup_seconds'] - e.get('accelerator_setup_seconds', 0.0)) / frames
for b, e in ev.items():
    print(f"{name} {b}: setup {e['setup_seconds']:.2f} s + device {e.get('accelerator_setup_seconds', 0.0):.2f} s, "
          f"forward {per(e):.3f} s/frame "
          f"({e['pd_iterations']} PD it.), backward {e['backward_seconds'] / frames:.3f} s/frame "
          f"({e['adjoint_iterations']} adjoint it.), loss {e['loss']:.12e}")
    fr = e.get("frames", [])
    if fr and "newton_krylov_steps" in fr[0]:
        print(f"  per frame: Newton-Krylov steps {[f['newton_krylov_steps'] for f in fr]}, host other s "
              f"{[round(f['seconds_other'], 2) for f in fr]}, direct fallback (factorizations) "
              f"{[(f['frame'], f['newton'].get('factorizations')) for f in fr if f.get('newton')]}")
    for ph in ("forward_traffic", "backward_traffic"):
        t = e.get(ph)
        if t:
            print(f"  {ph}: {t['launches']} launches ({t['launch_seconds']:.3f} s), {t['downloads']} downloads "
                  f"({t['download_seconds']:.3f} s), {t['uploads']} uploads ({t['upload_bytes'] / 1e6:.1f} MB, "
                  f"{t['upload_seconds']:.3f} s); top {t['kernels'][:4]}")
if "cpu" in ev and dev in ev:
    gc, gg = ev["cpu"]["gradient"], ev[dev]["gradient"]
    flat = lambda g: [v for x in (g if isinstance(g, list) else g.values()) for v in (x if isinstance(x, list) else [x])]
    a, c = flat(gc), flat(gg)
    num = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, c)))
    den = math.sqrt(sum(x * x for x in a)) or 1.0
    for d in (dev, f"{dev}-t{cores}"):
        if d in ev:
            print(f"{name}: {d} vs cpu (2 threads): speed-up forward "
                  f"{per(ev['cpu']) / per(ev[d]):.2f}x (setups apart), backward "
                  f"{ev['cpu']['backward_seconds'] / ev[d]['backward_seconds']:.2f}x")
    print(f"{name}: gradient {dev} vs cpu {num / den:.2e} relative")
PY
}

# `newton NAME SCENE FRAMES [--set ...]`: the Newton oracle (`--solver newton`, its default
# newton_tol 1e-10; the frontier benchmarks' oracle) and Newton at newton_tol 1e-6 on the CPU
# (2 threads), then every `grad.json` that `bench NAME` left in /tmp/bench-NAME-* against the
# oracle: gradient error ||g - g*|| / ||g*|| and seconds per frame (forward + backward, the
# one-time setups apart), with each run's speed-up over the two Newton runs. Run it after
# `bench NAME` in the same call (same machine) for the paper's claim: gradients as accurate as
# the oracle's at a speed-up over Newton.
newton() { # name scene frames [--set ...]
    local name=$1 scene=$2 frames=$3 tol; shift 3
    for tol in 1e-10 1e-6; do
        timeout "$(limit 300)" $D grad "$scene" --frames "$frames" --threads 2 --backend cpu --solver newton \
            --quiet --out "/tmp/newton-$name-$tol" --overwrite --set "solver.newton_tol=$tol" "$@" \
            || echo "$name newton $tol failed: $?"
        cp "/tmp/newton-$name-$tol/grad.json" "$OUT/grad-$name-newton-$tol.json" 2>/dev/null
    done
    python3 - "$name" "$frames" <<'PY'
import glob, json, math, os, sys
name, frames = sys.argv[1], int(sys.argv[2])
def ev(path):
    try:
        return json.load(open(path))["evaluation"]
    except Exception as e:
        print(f"{name}: no {path} ({e})")
oracle = ev(f"/tmp/newton-{name}-1e-10/grad.json")
if oracle is None:
    sys.exit(0)
flat = lambda g: [v for x in (g if isinstance(g, list) else g.values()) for v in (x if isinstance(x, list) else [x])]
gs = flat(oracle["gradient"])
norm = math.sqrt(sum(v * v for v in gs)) or 1.0
per = lambda e: ((e["forward_seconds"] - e["setup_seconds"] - e.get("accelerator_setup_seconds", 0.0))
                 + e["backward_seconds"]) / frames
runs = {"newton 1e-10 (oracle)": oracle, "newton 1e-6": ev(f"/tmp/newton-{name}-1e-6/grad.json")}
for d in sorted(glob.glob(f"/tmp/bench-{name}-*/grad.json")):
    runs[os.path.basename(os.path.dirname(d))[len(f"bench-{name}-"):]] = ev(d)
base = {k: per(v) for k, v in runs.items() if k.startswith("newton") and v}
for k, e in runs.items():
    if not e:
        continue
    g = flat(e["gradient"])
    err = math.sqrt(sum((a - b) ** 2 for a, b in zip(g, gs))) / norm
    ups = ", ".join(f"{b / per(e):.1f}x over {n}" for n, b in base.items())
    print(f"{name} {k}: {per(e):.3f} s/frame (forward + backward, setups apart), gradient error {err:.1e}; {ups}")
PY
}
