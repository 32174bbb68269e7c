#!/usr/bin/env bash
# Run ON the lent GPU machine (see scripts/gpu_stage.sh, which builds what this needs into
# .gpu/ here): doctor, the device parity suites and the CPU-vs-CUDA timings, results in $OUT.
# Each part has its own time limit so that one slow part cannot eat the lease; the whole
# script is sized to finish inside ~9 minutes. BIG=1 adds the ≥ 1M-tet box (forward only,
# one frame: its factorization alone is minutes).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/gpu-out}"; mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
mkdir -p /tmp/gpubin && for f in .gpu/bin/*.gz; do gunzip -c "$f" > "/tmp/gpubin/$(basename "$f" .gz)"; done
chmod +x /tmp/gpubin/*
# NVRTC: the CUDA toolkit's (the image has nvcc 13.0, matching driver 580) or a pip wheel's
NVRTC_DIRS="$(python3 - <<'PY' 2>/dev/null
import glob, os, site
seen = []
for root in ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"] + site.getsitepackages():
    for f in glob.glob(os.path.join(root, "**", "libnvrtc.so*"), recursive=True):
        d = os.path.dirname(f)
        if d not in seen:
            seen.append(d)
print(":".join(seen))
PY
)"
export LD_LIBRARY_PATH="${NVRTC_DIRS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:/usr/local/nvidia/lib64"
echo "NVRTC search path: $NVRTC_DIRS"
echo "# $(date -u +%FT%TZ) commit $(cat .gpu/commit) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
D=/tmp/gpubin/diffphd
export DIFFPHD_REPO="$PWD" DIFFPHD_BIN="$D"   # the test binaries were built elsewhere
BACKEND="${BACKEND:-cuda}"   # BACKEND=emulator: a dry run of this script on a machine without a GPU
timeout 60 $D doctor --compile sm_90 || echo "doctor failed: $?"
# 1. parity on the device (the test binaries' `cuda::` modules; emulator ones skipped here)
for t in /tmp/gpubin/gpu*; do
    echo "## $(basename "$t")"
    timeout 180 "$t" "${BACKEND}::" --test-threads 1 2>&1 | tail -40 || echo "FAILED: $(basename "$t")"
done
# 2. forward/backward seconds per frame, CPU (2 threads) vs CUDA, same scene and settings
bench() { # name scene frames [--set ...]
    local name=$1 scene=$2 frames=$3; shift 3
    for b in cpu "$BACKEND"; do
        timeout 240 $D grad "$scene" --frames "$frames" --threads 2 --backend $b --quiet \
            --out "/tmp/bench-$name-$b" --overwrite "$@" || echo "$name $b failed: $?"
        cp "/tmp/bench-$name-$b/grad.json" "$OUT/grad-$name-$b.json" 2>/dev/null
    done
    python3 - "$name" "$frames" "$BACKEND" <<'PY'
import json, math, sys
name, frames, dev = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ev = {}
for b in ("cpu", dev):
    try:
        ev[b] = json.load(open(f"/tmp/bench-{name}-{b}/grad.json"))["evaluation"]
    except Exception as e:
        print(f"{name} {b}: no grad.json ({e})")
for b, e in ev.items():
    print(f"{name} {b}: setup {e['setup_seconds']:.2f} s, forward {e['forward_seconds'] / frames:.3f} s/frame "
          f"({e['pd_iterations']} PD it.), backward {e['backward_seconds'] / frames:.3f} s/frame "
          f"({e['adjoint_iterations']} adjoint it.), loss {e['loss']:.12e}")
if len(ev) == 2:
    gc, gg = ev["cpu"]["gradient"], ev[dev]["gradient"]
    flat = lambda g: [v for x in (g if isinstance(g, list) else g.values()) for v in (x if isinstance(x, list) else [x])]
    a, c = flat(gc), flat(gg)
    num = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, c)))
    den = math.sqrt(sum(x * x for x in a)) or 1.0
    print(f"{name}: gradient {dev} vs cpu {num / den:.2e} relative; speed-up forward "
          f"{ev['cpu']['forward_seconds'] / ev[dev]['forward_seconds']:.2f}x, backward "
          f"{ev['cpu']['backward_seconds'] / ev[dev]['backward_seconds']:.2f}x")
PY
}
bench cantilever_diffpd scenes/cantilever_diffpd.toml 10
bench armadillo scenes/armadillo_twist.toml 2
if [ "${BIG:-0}" = 1 ]; then
    timeout 300 $D simulate scenes/cantilever.toml --frames 1 --backend "$BACKEND" --quiet --overwrite \
        --out /tmp/big --set 'body.0.mesh.cells=[110, 40, 40]' --set 'body.0.mesh.element="tet4"' \
        && cp /tmp/big/log.json "$OUT/log-big-cuda.json"
fi
echo "# done $(date -u +%FT%TZ)"
