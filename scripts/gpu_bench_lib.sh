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

# `paper NAME SCENE FRAMES CAP "RUNS" [key=value ...]` (issue 38 item 2, the paper-scale
# parts): first the memory estimate and the global-solve path the size takes (the staged
# examples/device_memory, $MEM; no device), then `grad` of SCENE at the size the key=value
# overrides set, each run under CAP seconds (`limit`). RUNS, in order, among: `dev` (the
# device, $BACKEND, every host core), `pd` (the CPU, the same PD method, every core: the
# gradient parity of "the gradient against the CPU path on few frames") and `best` (the CPU's
# default method, `auto`, every core: "the speed-up over the best CPU method on all of that
# host's cores"). Per run: exit status (124: stopped at its cap), wall seconds, the host's
# peak RSS (/usr/bin/time, where present), the device's peak memory (nvidia-smi sampled every
# 0.5 s, on cuda), the "GPU path:" line (device, path and why, setup seconds) and the
# evaluation's seconds per frame (setups apart), iterations, traffic and gradient. Writes
# $OUT/paper-NAME.json as soon as the part ends (each run's grad.json and stderr beside it in
# /tmp/paper-NAME-RUN/).
paper() { # name scene frames cap "runs" [key=value ...]
    local name=$1 scene=$2 frames=$3 cap=${PAPER_CAP:-$4} runs=$5; shift 5  # PAPER_CAP: every run's cap
    local kv=("$@") sets=() r b dir smi rc t0
    local s
    for s in "${kv[@]}"; do sets+=(--set "$s"); done
    echo "## paper $name: ${kv[*]} ($frames frames, runs: $runs, cap ${cap} s each), $(left) s left"
    mkdir -p "/tmp/paper-$name"
    if [ -x "${MEM:-}" ]; then
        timeout "$(limit 120)" "$MEM" "$scene" "${kv[@]}" > "/tmp/paper-$name/estimate.txt" 2>&1 \
            || echo "device_memory failed: $?" >> "/tmp/paper-$name/estimate.txt"
        cat "/tmp/paper-$name/estimate.txt"
    fi
    for r in $runs; do
        local solver=()
        case $r in
            dev) b=$BACKEND ;;
            pd) b=cpu; solver=(--solver diffphd) ;;
            best) b=cpu ;;
            *) echo "paper: unknown run $r"; continue ;;
        esac
        dir=/tmp/paper-$name-$r
        rm -rf "$dir" && mkdir -p "$dir"
        smi=
        if [ "$b" = cuda ] && command -v nvidia-smi > /dev/null; then
            nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 \
                > "$dir/gpu-mib.txt" 2> /dev/null &
            smi=$!
        fi
        local timer=()
        [ -x /usr/bin/time ] && timer=(/usr/bin/time -f '%M' -o "$dir/rss-kib")
        t0=$(date +%s.%N)
        "${timer[@]}" timeout "$(limit "$cap")" $D grad "$scene" --frames "$frames" --threads "$(nproc)" \
            --backend "$b" "${solver[@]}" --out "$dir/run" --overwrite "${sets[@]}" 2> "$dir/stderr" > /dev/null
        rc=$?
        echo "$rc $(date +%s.%N) $t0" > "$dir/rc"
        [ -n "$smi" ] && kill "$smi" 2> /dev/null
        echo "paper $name $r: exit $rc, $(grep -h '^GPU path' "$dir/stderr" | cut -c1-160)"
        tail -2 "$dir/stderr"
    done
    python3 - "$name" "$scene" "$frames" "$BACKEND" "$runs" "$OUT/paper-$name.json" "${kv[@]}" <<'PY'
import json, math, os, re, sys
name, scene, frames, dev, runs, out = sys.argv[1:7]
frames = int(frames)
res = {"part": name, "scene": scene, "overrides": sys.argv[7:], "frames": frames,
       "backend": dev, "host_threads": os.cpu_count(), "runs": {}}
est = f"/tmp/paper-{name}/estimate.txt"
if os.path.exists(est):
    text = open(est).read()
    res["estimate"] = text.splitlines()
    m = re.search(r"(\d+) nodes \((\d+) DoF\), (\d+) elements", text)
    if m:
        res["nodes"], res["dof"], res["elements"] = map(int, m.groups())
ev = {}
for r in runs.split():
    d = f"/tmp/paper-{name}-{r}"
    run = {}
    try:
        rc, t1, t0 = open(f"{d}/rc").read().split()
        run["exit"] = int(rc)
        run["stopped_at_cap"] = int(rc) in (124, 137)
        run["wall_seconds"] = float(t1) - float(t0)
    except Exception as e:
        run["error"] = f"no exit status ({e})"
    try:
        run["host_peak_rss_gib"] = int(open(f"{d}/rss-kib").read().split()[-1]) / 2**20
    except Exception:
        pass
    try:
        mib = [int(x) for x in open(f"{d}/gpu-mib.txt").read().split() if x.strip().isdigit()]
        run["device_peak_gib"] = max(mib) / 1024 if mib else None
    except Exception:
        pass
    try:
        err = open(f"{d}/stderr").read().splitlines()
        run["gpu_path"] = next((l[len("GPU path: "):] for l in err if l.startswith("GPU path: ")), None)
        run["last_stderr"] = [l for l in err if l.strip()][-2:]
    except Exception:
        pass
    try:
        g = json.load(open(f"{d}/run/grad.json"))
        e = g["evaluation"]
        ev[r] = e
        setup = e["setup_seconds"] + e.get("accelerator_setup_seconds", 0.0)
        run.update({
            "method": g.get("method"), "method_reason": g.get("method_reason"),
            "adjoint_reason": e.get("adjoint_reason"),
            "setup_seconds": e["setup_seconds"],
            "device_setup_seconds": e.get("accelerator_setup_seconds", 0.0),
            "forward_seconds_per_frame": (e["forward_seconds"] - setup) / frames,
            "backward_seconds_per_frame": e["backward_seconds"] / frames,
            "pd_iterations": e["pd_iterations"], "adjoint_iterations": e["adjoint_iterations"],
            "adjoint_methods": [f["adjoint"]["method"] for f in e.get("frames", []) if "adjoint" in f],
            "nonconverged_forward_frames": e.get("nonconverged_forward_frames"),
            "nonconverged_backward_frames": e.get("nonconverged_backward_frames"),
            "loss": e["loss"], "gradient": e["gradient"],
        })
        for ph in ("forward_traffic", "backward_traffic"):
            t = e.get(ph)
            if t:
                run[ph] = {k: t[k] for k in ("launches", "downloads", "uploads", "upload_bytes") if k in t}
    except Exception as ex:
        run["grad_json"] = f"none ({ex})"
    res["runs"][r] = run
flat = lambda g: [v for x in (g if isinstance(g, list) else g.values()) for v in (x if isinstance(x, list) else [x])]
def rel(a, b):
    a, b = flat(a), flat(b)
    den = math.sqrt(sum(x * x for x in b)) or 1.0
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b))) / den
if "dev" in ev and "pd" in ev:
    res["gradient_dev_vs_cpu_pd"] = rel(ev["dev"]["gradient"], ev["pd"]["gradient"])
    res["loss_dev_vs_cpu_pd"] = abs(ev["dev"]["loss"] - ev["pd"]["loss"]) / max(abs(ev["pd"]["loss"]), 1e-300)
if "dev" in ev:
    R = res["runs"]
    for base in ("best", "pd"):
        if base in ev:
            f = lambda k: R[base][k] / R["dev"][k] if R["dev"][k] > 0 else None
            tot = lambda r: R[r]["forward_seconds_per_frame"] + R[r]["backward_seconds_per_frame"]
            res[f"speedup_over_cpu_{base}"] = {
                "forward": f("forward_seconds_per_frame"), "backward": f("backward_seconds_per_frame"),
                "total": tot(base) / tot("dev") if tot("dev") > 0 else None}
json.dump(res, open(out, "w"), indent=1)
short = {k: v for k, v in res.items() if k not in ("runs", "estimate")}
print(json.dumps(short))
for r, v in res["runs"].items():
    print(r, {k: v.get(k) for k in ("exit", "method", "forward_seconds_per_frame", "backward_seconds_per_frame",
                                   "pd_iterations", "adjoint_iterations", "host_peak_rss_gib", "device_peak_gib")})
PY
}
