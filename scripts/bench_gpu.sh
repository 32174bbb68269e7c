#!/usr/bin/env bash
# Per-operation GPU vs CPU timings (examples/gpu_ops.rs): local step + gather, one-axis global
# solve on both device paths, the backward's ΔA·z, each with its relative difference to the
# CPU result. On a GPU machine: scripts/bench_gpu.sh cuda (builds with --features cuda and
# puts the pinned NVRTC on LD_LIBRARY_PATH). Without a GPU: scripts/bench_gpu.sh emulator
# (checks the pipeline runs; the emulator's timings say nothing about GPU speed).
# Sizes: a cantilever_diffpd-sized hex box (8k DoF), a 50k-DoF tet box, and with
# BIG=1 a >= 1M-tet box (110x40x40 cells x 6 tets = 1.06M tets); QUICK=1: only a tiny box
# (a check that the pipeline runs). Operations: local step + gather, one-axis solve, a 64-RHS
# solve (the contact Delassus columns), ΔA·z.
# Then (GRAD=1, the default) whole `grad` runs, forward/backward seconds per frame on the CPU
# (2 threads) against the device (scripts/gpu_bench_lib.sh): cantilever_diffpd (10 frames),
# armadillo_twist (2), the cantilever scene as a 64x16x16 tet4 box (56k DoF, 2) and with BIG=1
# the cantilever scene as a 420x20x20 tet4 box (1,008,000 tets, 557k DoF, 1 frame; the CPU
# side alone takes about 4 minutes on 2 threads of an H100 host). grad.json files in $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
DEVICE="${1:-emulator}"
FEATURES=()
if [ "$DEVICE" = cuda ]; then
    FEATURES=(--features cuda)
    NVRTC_DIR="$(scripts/nvrtc_env.sh)"
    export LD_LIBRARY_PATH="$NVRTC_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
cargo build --release --example gpu_ops --bin diffphd "${FEATURES[@]}"
echo "# $(date -u +%F) $(git rev-parse --short HEAD) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "${QUICK:-0}" = 1 ]; then
    # a tiny box: checks that every operation runs and agrees (no timing value)
    target/release/examples/gpu_ops 4 2 2 hex8 "$DEVICE"
    exit 0
fi
target/release/examples/gpu_ops 32 8 8 hex8 "$DEVICE"
target/release/examples/gpu_ops 60 15 15 tet4 "$DEVICE"
if [ "${BIG:-0}" = 1 ]; then
    target/release/examples/gpu_ops 110 40 40 tet4 "$DEVICE"
fi
[ "${GRAD:-1}" = 1 ] || exit 0
D=target/release/diffphd BACKEND="$DEVICE" OUT="${OUT:-target/bench-gpu}"
mkdir -p "$OUT"
limit() { echo "${RUN_LIMIT:-3600}"; }   # no deadline here: each run may take up to RUN_LIMIT s
source scripts/gpu_bench_lib.sh
bench cantilever_diffpd scenes/cantilever_diffpd.toml 10
bench armadillo scenes/armadillo_twist.toml 2
bench box56k scenes/cantilever.toml 2 --set 'body.0.mesh.cells=[64, 16, 16]' \
    --set 'body.0.mesh.element="tet4"' --set 'body.0.mesh.dx=0.005'
if [ "${BIG:-0}" = 1 ]; then
    bench big scenes/cantilever.toml 1 --set 'body.0.mesh.cells=[420, 20, 20]' \
        --set 'body.0.mesh.element="tet4"' --set 'body.0.mesh.dx=0.0025'
fi
