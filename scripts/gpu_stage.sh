#!/usr/bin/env bash
# Stage everything a lent GPU machine needs into .gpu/ (git-ignored), HERE, before asking for
# the machine: the device image has CUDA, NVRTC (pip) and Python but no Rust toolchain and no
# network, so the `--features cuda` binary and the GPU test binaries are built on this
# (x86-64) machine and carried. Then, with the `device` tool:
#   run(command="bash scripts/gpu_device.sh", carry=[".gpu"], timeout_s=580)
# which runs `diffphd doctor`, the device parity suites (tests/gpu_*.rs, module `cuda`) and the
# forward/backward timings CPU (2 threads) vs CUDA, writing everything under $OUT.
# The staged files are stripped and gzip-compressed to stay under the 64 MiB the tool carries.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu && mkdir -p .gpu/bin
cargo build --release --features cuda
cp target/release/diffphd .gpu/bin/diffphd
# the per-operation timings (examples/gpu_ops.rs: local step, both solve paths, ΔA·z)
cargo build --release --features cuda --example gpu_ops
cp target/release/examples/gpu_ops .gpu/bin/gpu_ops
# the memory estimate and global-solve path of a scene at any size (the paper parts print it)
cargo build --release --features cuda --example device_memory
cp target/release/examples/device_memory .gpu/bin/device_memory
# the GPU test binaries (their `cuda` modules run on the device, the `emulator` ones too)
cargo test --release --features cuda --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys, shutil
for line in sys.stdin:
    m = json.loads(line)
    t = m.get("target", {})
    if m.get("executable") and t.get("kind") == ["test"] and t.get("name") == "gpu":
        shutil.copy(m["executable"], ".gpu/bin/" + t["name"])
        print("staged", t["name"])
'
strip .gpu/bin/* 2>/dev/null || true
gzip -9 .gpu/bin/*
git rev-parse HEAD > .gpu/commit
du -sh .gpu
