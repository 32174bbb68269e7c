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
set -euo pipefail
cd "$(dirname "$0")/.."
DEVICE="${1:-emulator}"
FEATURES=()
if [ "$DEVICE" = cuda ]; then
    FEATURES=(--features cuda)
    NVRTC_DIR="$(scripts/nvrtc_env.sh)"
    export LD_LIBRARY_PATH="$NVRTC_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
cargo build --release --example gpu_ops "${FEATURES[@]}"
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
