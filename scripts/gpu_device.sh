#!/usr/bin/env bash
# Run ON the lent GPU machine (see scripts/gpu_stage.sh, which builds what this needs into
# .gpu/ here): doctor, a smoke run, the device parity suites, the per-operation timings and
# the CPU-vs-CUDA grad timings, results in $OUT. The lease is short (15 minutes of device time
# for everything), so every part has its own limit under one deadline (BUDGET seconds from
# the start, default 540) and the script stops early, with diagnostics, when the smoke run
# fails. BIG=1 (default) runs a >= 1M-tet box on the GPU in whatever time is left.
# PARTS picks and orders the parts after the smoke run (default: these, in this order):
#   PARTS="parity ops armadillo big cantilever box56k" bash scripts/gpu_device.sh
# Six more, not in the default: contact (issue 38: contact on the device, about 60 s), ab56k (the 56k box's forward, this binary against a staged
# diffphd-old), bigcpu (the 1M-tet box's `grad` on the CPU, 2 threads, about 4 minutes),
# bigdirect (the 1M-tet box's backward by device GMRES alone, to rel. 1e-10), ncu (Nsight
# Compute of the 1M box's solve kernels, about 45 s) and newton (Newton on the CPU, the oracle
# and newton_tol 1e-6, against the bench parts run before it in the same call).
# The fourth lease (session 15, H100, commit 7c09676) ran
#   PARTS="parity box56k armadillo big ops" BUDGET=400   (147 s)
# then, on the warm machine, the 1M box's CPU baseline (PARTS="bigcpu", about 265 s) and a
# part of its own passed in by `part_NAME() { ...; }; export -f part_NAME; PARTS="NAME"`
# (the script's variables D, BIGSET, OUT and limit are visible to it). Measured there:
# box56k 36x / 50x, armadillo 34x / 14.5x, the 1M box 28x / 35x (219 adjoint iterations,
# 22.7 GiB), cantilever_diffpd 11x / 12x (docs/benchmarks-log.md "GPU: the fourth lease").
# Suggested next order: PARTS="parity cantilever armadillo box56k newton big ops ncu".
# Issue 38 (the paper's scenes at scale; parts `crab`, `crab_big`, `oreo` below, each with
# its cap and its JSON, $OUT/paper-<part>.json), in its order of priority:
#   PARTS="parity contact ops crab oreo crab_big" bash scripts/gpu_device.sh
# (parity 60-120 s, contact ~60 s, ops ~60 s, then up to 3 x 150 s each for crab and oreo
# and 300 s for crab_big: the deadline cuts the tail). The same parts ran without a device
# on the host emulator (BACKEND=emulator LOCAL_BIN=..., below), docs/paper-scenes.md.
# Since then (7e0b4af) S's column indices are 32-bit: the next lease's `ops`, `big` and `ncu`
# parts measure the solve against 0.377 ms (one axis, 56k box), 2.54 s (the 1M box's
# backward, 219 iterations) and 3.96 + 4.16 ms (its two SpMVs).
# Restage first (scripts/gpu_stage.sh) whenever the code has changed since .gpu/commit.
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
BUDGET="${BUDGET:-520}"
left() { echo $((BUDGET - ($(date +%s) - T0))); }
# limit SECONDS: the smaller of SECONDS and the time left before the deadline (at least 1)
limit() { local l; l=$(left); [ "$l" -lt "$1" ] && echo $((l > 1 ? l : 1)) || echo "$1"; }
OUT="${OUT:-/tmp/gpu-out}"; mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
# LOCAL_BIN=DIR: a dry run without staging, on this machine's build (DIR/diffphd,
# DIR/examples/device_memory, DIR/examples/gpu_ops; the `gpu` test binary is not there, so
# `parity` and `contact` report it missing: CI runs their emulator halves):
#   BACKEND=emulator LOCAL_BIN=target/release PARTS="crab oreo" bash scripts/gpu_device.sh
if [ -n "${LOCAL_BIN:-}" ]; then
    mkdir -p /tmp/gpubin
    for f in diffphd examples/device_memory examples/gpu_ops; do
        [ -x "$LOCAL_BIN/$f" ] && ln -sf "$(realpath "$LOCAL_BIN/$f")" "/tmp/gpubin/$(basename "$f")"
    done
    echo "$(git rev-parse HEAD)$(git diff --quiet || echo -dirty) (local build)" > /tmp/gpubin/commit
else
    mkdir -p /tmp/gpubin && for f in .gpu/bin/*.gz; do gunzip -c "$f" > "/tmp/gpubin/$(basename "$f" .gz)"; done
    chmod +x /tmp/gpubin/*
    cp .gpu/commit /tmp/gpubin/commit
fi
# NVRTC: the CUDA toolkit's (the image has nvcc 13.0, matching driver 580) or a pip wheel's
NVRTC_DIRS="$(python3 - <<'PY' 2>/dev/null
import glob, os, site
seen = []
for root in ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"] + site.getsitepackages():
    for f in glob.glob(os.path.join(root, "**", "libnvrtc.so*"), recursive=True):
        d = os.path.dirname(f)
        if "stubs" in d:  # the stub libcuda there would shadow the driver
            continue
        if d not in seen:
            seen.append(d)
print(":".join(seen))
PY
)"
export LD_LIBRARY_PATH="/usr/local/nvidia/lib64:${NVRTC_DIRS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "NVRTC search path: $NVRTC_DIRS"
echo "# $(date -u +%FT%TZ) commit $(cat /tmp/gpubin/commit) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader) $(nproc) cores"
D=/tmp/gpubin/diffphd
MEM=/tmp/gpubin/device_memory   # examples/device_memory: the estimate and path, no device
export DIFFPHD_REPO="$PWD" DIFFPHD_BIN="$D"   # the test binaries were built elsewhere
BACKEND="${BACKEND:-cuda}"   # BACKEND=emulator: a dry run of this script on a machine without a GPU
# A CUDA test without a usable device skips elsewhere; here it fails (tests/common/mod.rs
# skip_unless_cuda_required), so a parity run cannot pass without having run on the device.
[ "$BACKEND" = cuda ] && export REQUIRE_CUDA=1
timeout 60 $D doctor --compile sm_90 || echo "doctor failed: $?"
# 0. smoke: one short rollout on the device; without it nothing else is worth the lease
if ! timeout 60 $D simulate scenes/cantilever.toml --frames 2 --backend "$BACKEND" --quiet \
        --out /tmp/smoke --overwrite; then
    echo "SMOKE FAILED: diagnostics follow"
    ls -la /usr/local/cuda/lib64 2>&1 | grep -i nvrtc; ldconfig -p | grep -i -E "cuda|nvrtc"
    ldd $D; nvidia-smi
    exit 1
fi
echo "smoke ok ($(( $(date +%s) - T0 )) s)"
PARTS="${PARTS:-parity ops armadillo big cantilever box56k}"
part_parity() {
# 1. parity on the device: the one GPU test binary (tests/gpu/), every module but the emulator's
#    (`<module>::emulator::` tests run in CI); REQUIRE_CUDA=1 makes a missing device a failure
t=/tmp/gpubin/gpu
[ -x "$t" ] || { echo "missing $t"; return; }
s=$(date +%s)
echo "## gpu (all but emulator::)"
REQUIRE_CUDA=1 timeout "$(limit 300)" "$t" --skip emulator:: --test-threads 8 2>&1 \
    | grep -E "^test |test result|panicked|FAILED|failures|skipping" || echo "FAILED or timed out: gpu"
echo "## gpu took $(( $(date +%s) - s )) s"
}
# 1b. contact on the device (issue 38 item 6): the counters test and the Oreo / bouncing-ball
#    parity on the device, then the CI Oreo's `simulate` (its device_traffic and seconds in
#    $OUT/oreo-contact-log.json; the same run on the emulator is the CI test's numbers)
part_contact() {
t=/tmp/gpubin/gpu
[ -x "$t" ] || { echo "missing $t"; return; }
echo "## contact on the device"
REQUIRE_CUDA=1 timeout "$(limit 120)" "$t" --skip emulator:: --test-threads 4 --nocapture \
    contact_copies oreo_states bouncing_ball 2>&1 | grep -E "^test |test result|panicked|frame|seconds" | tail -60
timeout "$(limit 60)" $D simulate scenes/oreo.toml --frames 10 --backend "$BACKEND" --quiet \
    --out /tmp/oreo-contact --overwrite && cp /tmp/oreo-contact/log.json "$OUT/oreo-contact-log.json"
}
# 2. per-operation timings (local step + gather, both solve paths, 64-RHS solve, ΔA·z) at 56k DoF
part_ops() { timeout "$(limit 90)" /tmp/gpubin/gpu_ops 64 16 16 tet4 "$BACKEND" || echo "gpu_ops failed: $?"; }
# 3. forward/backward seconds per frame, CPU (2 threads) vs the device, same scene and settings
source scripts/gpu_bench_lib.sh
part_armadillo() { bench armadillo scenes/armadillo_twist.toml 2; }
part_cantilever() { bench cantilever_diffpd scenes/cantilever_diffpd.toml 10; }
# the issue's >= 50k DoF point as a whole run: the cantilever scene as a 64x16x16 tet4 box
# (18,785 nodes, 56,355 DoF, 98,304 tets; the mesh of the per-operation timings)
part_box56k() { bench box56k scenes/cantilever.toml 2 --set 'body.0.mesh.cells=[64, 16, 16]' \
    --set 'body.0.mesh.element="tet4"' --set 'body.0.mesh.dx=0.005'; }
# 4. a >= 1M-tet box (420 x 20 x 20 cells x 6 Kuhn tets = 1,008,000 tets, 557k DoF) on the
# device only, one frame of grad, in the time that is left (its host factorization is most of it)
part_big() {
if [ "${BIG:-1}" = 1 ] && [ "$(left)" -gt 90 ]; then
    echo "## big box, $(left) s left"
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > "$OUT/big-mem.txt" 2>/dev/null &
    SMI=$!
    timeout "$(limit 600)" $D grad scenes/cantilever.toml --frames 1 --backend "$BACKEND" --overwrite --threads 16 \
        --out /tmp/big --set 'body.0.mesh.cells=[420, 20, 20]' --set 'body.0.mesh.element="tet4"' \
        --set 'body.0.mesh.dx=0.0025' 2>&1 | tee "$OUT/big-log.txt" | tail -30
    cp /tmp/big/grad.json "$OUT/grad-big-$BACKEND.json" 2>/dev/null
    kill $SMI 2>/dev/null
    echo "big box: peak GPU memory used $(sort -n "$OUT/big-mem.txt" | tail -1) MiB"
fi
}
# 5. the 1M-tet box's CPU baseline (2 threads): one frame of `grad` (its forward and backward
# seconds are in grad.json; session 10 also ran `simulate` first, which cost 140 s more)
BIGSET=(--set 'body.0.mesh.cells=[420, 20, 20]' --set 'body.0.mesh.element="tet4"' --set 'body.0.mesh.dx=0.0025')
part_bigcpu() {
    echo "## big box on the CPU (2 threads), $(left) s left"
    /usr/bin/time -v timeout "$(limit 600)" $D grad scenes/cantilever.toml --frames 1 --backend cpu --threads 2 --overwrite \
        --out /tmp/bigcpu "${BIGSET[@]}" 2>&1 | grep -E "^forward|^loss|Maximum resident|Elapsed"
    cp /tmp/bigcpu/grad.json "$OUT/grad-big-cpu.json" 2>/dev/null
}
# 6. the 1M box's backward by device GMRES alone, to rel. 1e-10 (no host direct solve; on the
# CPU the 126k-tet box needs 650 iterations at 1e-10 and lands 1.0e-9 from the direct adjoint's
# gradient, 435 and 1.3e-6 at the default 1e-6; docs/benchmarks-log.md session 10)
part_bigdirect() {
    echo "## big box, device GMRES alone, $(left) s left"
    timeout "$(limit 400)" $D grad scenes/cantilever.toml --frames 1 --backend "$BACKEND" --overwrite --threads 16 \
        --out /tmp/big-gmres "${BIGSET[@]}" --set backward.direct_after=0 --set backward.max_iterations=3000 \
        --set backward.rel_tol=1e-10 2>&1 | tail -8
    cp /tmp/big-gmres/grad.json "$OUT/grad-big-gmres-$BACKEND.json" 2>/dev/null
}
# 7. A/B of the 56k box's forward: `simulate` (2 frames, 2 host threads) with this binary and
# with .gpu/bin/diffphd-old.gz (another commit's, staged by hand), each twice, alternating;
# per frame the PD and Newton-Krylov counts and the host's seconds, from log.json
part_ab56k() {
    local bins=("$D") f
    [ -x /tmp/gpubin/diffphd-old ] && bins+=(/tmp/gpubin/diffphd-old)
    for rep in 1 2; do for b in "${bins[@]}"; do
        f=/tmp/ab-$(basename "$b")-$rep
        timeout "$(limit 60)" "$b" simulate scenes/cantilever.toml --frames 2 --threads 2 --backend "$BACKEND" \
            --quiet --out "$f" --overwrite --set 'body.0.mesh.cells=[64, 16, 16]' \
            --set 'body.0.mesh.element="tet4"' --set 'body.0.mesh.dx=0.005' || echo "ab56k $b failed: $?"
        python3 - "$f" "$(basename "$b") #$rep" <<'PY'
import json, sys
d = json.load(open(sys.argv[1] + "/log.json"))
s = d["summary"]
print(sys.argv[2], "total %.3f s, local %.3f, other %.3f" % (s["seconds_total"], s["seconds_local"], s["seconds_other"]))
for fr in d["frames"]:
    print("  frame", fr["frame"], "PD it.", fr["iterations"], "residual", fr.get("residual"), "other %.3f s" % fr["seconds_other"])
PY
    done; done
}
# 9. the paper's comparison on one machine: Newton (the oracle, newton_tol 1e-10, and 1e-6) on
# the CPU against the `bench` runs of this call (run `armadillo`, `cantilever`, `box56k` first):
# gradient error against the oracle and seconds per frame (scripts/gpu_bench_lib.sh `newton`)
part_newton() {
    [ -d /tmp/bench-cantilever_diffpd-cpu ] && newton cantilever_diffpd scenes/cantilever_diffpd.toml 10
    [ -d /tmp/bench-armadillo-cpu ] && newton armadillo scenes/armadillo_twist.toml 2
    [ -d /tmp/bench-box56k-cpu ] && newton box56k scenes/cantilever.toml 2 --set 'body.0.mesh.cells=[64, 16, 16]' \
        --set 'body.0.mesh.element="tet4"' --set 'body.0.mesh.dx=0.005'
    return 0
}
# 8. Nsight Compute of the 1M box's solve: 15 launches of the SpMV, its second pass and the
# reductions (after skipping 300, in the forward's PD iterations, whose three-axis block solve
# is the adjoint's), duration and DRAM throughput each (session 15: SpMVs 3.96 + 4.16 ms at
# 60-63 % of the DRAM peak with 64-bit column indices); the full report in $OUT/ncu.txt
part_ncu() {
    local ncu; ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    echo "## ncu ($ncu), $(left) s left"
    timeout "$(limit 140)" "$ncu" --clock-control none \
        -k regex:'dphd_spmv_segments_multi|dphd_sum_segments_multi|dphd_dots_partial|dphd_sum_groups' \
        --launch-skip 300 --launch-count 15 --section SpeedOfLight \
        $D grad scenes/cantilever.toml --frames 1 --backend "$BACKEND" --threads 16 --overwrite \
        --out /tmp/bigncu "${BIGSET[@]}" > "$OUT/ncu.txt" 2>&1 || echo "ncu failed: $?"
    grep -E "  dphd_|Duration|DRAM Throughput" "$OUT/ncu.txt" | head -60
}
# 10. the MPM seed scenes (issue 40): ms per rigid step of `simulate` on the CPU (2 threads;
# the MPM core is serial) and on the device (--backend cuda: every substep, P2G/G2P and the
# contact solve resident, the rigid step on the host), one part per scene, each with its own
# cap (CPU and device runs under it separately) and its own JSON, $OUT/mpm-<name>.json, written
# as soon as the part ends (frames done, ms/step, QN iterations, the particles' centre-of-mass
# gap device vs CPU, the seed's Table I number where it has one). A run cut by its cap still
# reports the frames it finished (log.json is written every frame). Not in the default PARTS:
#   PARTS="mpm_dough mpm_shake mpm_panel mpm_sand" bash scripts/gpu_device.sh
mpm_bench() {  # name scene frames cap seed_ms [--set ...]
    local name=$1 scene=$2 frames=$3 cap=$4 seed=$5 be; shift 5
    echo "## mpm $name ($frames frames, cap ${cap} s each), $(left) s left"
    for be in cpu "$BACKEND"; do
        timeout "$(limit "$cap")" $D simulate "$scene" --frames "$frames" --threads 2 --backend "$be" \
            --quiet --overwrite --out "/tmp/mpm-$name-$be" --set output.frames=false "$@" \
            || echo "mpm $name $be: exit $?"
    done
    python3 - "$name" "$BACKEND" "$seed" "$OUT/mpm-$name.json" <<'PY'
import json, sys
name, be, seed, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
res = {"scene": name, "seed_table_i_ms_per_step": seed if seed > 0 else None}
logs = {}
for b in ("cpu", be):
    try:
        logs[b] = json.load(open(f"/tmp/mpm-{name}-{b}/log.json"))
    except Exception as e:
        res[b] = {"error": str(e)}
        continue
    fr = logs[b]["frames"][1:]
    n = len(fr)
    res[b] = {"frames": n, "status": logs[b]["status"], "seconds": logs[b]["seconds_total"],
              "ms_per_step": 1e3 * logs[b]["seconds_total"] / n if n else None,
              "qn_iterations": sum(f["qn_iterations_total"] for f in fr),
              "particles": logs[b]["header"]["particles"], "substeps": logs[b]["header"]["substeps"]}
if len(logs) == 2:
    a, c = logs["cpu"]["frames"], logs[be]["frames"]
    k = min(len(a), len(c)) - 1
    gap = max(abs(x - y) for x, y in zip(a[k]["energies"]["mpm_center_of_mass"], c[k]["energies"]["mpm_center_of_mass"]))
    res["common_frames"] = k
    res["com_gap_m"] = gap
    res["equal_qn_iterations_frames"] = sum(a[i]["qn_iterations_total"] == c[i]["qn_iterations_total"] for i in range(1, k + 1))
    if res["cpu"].get("ms_per_step") and res[be].get("ms_per_step"):
        res["speedup"] = res["cpu"]["ms_per_step"] / res[be]["ms_per_step"]
json.dump(res, open(out, "w"), indent=1)
print(json.dumps(res))
PY
}
# 11. The paper's scenes at scale (issue 38 item 2; sizes from docs/paper-scenes.md "Device
# memory at paper size", committed before the lease): each part prints the memory estimate and
# the path first, then `paper` (scripts/gpu_bench_lib.sh) runs it and writes
# $OUT/paper-<part>.json. The Crab is benchmarked "held" (the feet fixed, the ground removed,
# pulled upward: scripts/bench_crab_table.sh's SETUP=held), where every method converges; on
# the ground at 1000x no method meets its test (Newton's oracle included, 100 iterations; PD
# at 5,000), so no gradient there is a reference.
CRAB_HELD=('obstacle=[]' 'body.0.dirichlet=[{select={box={min=[-1,-1,-1],max=[1,1,0.003]}}}]'
    'loss.term=[{type="random_linear", seed=1}]' 'solver.mode="accurate"'
    'parameter=[{kind="youngs_modulus", log=true}, {kind="youngs_modulus", region=0, log=true}]')
# The Crab that the CPU runs in about 2 minutes (CRAB_RES, default 40 on 16 cores): device,
# CPU PD (the gradient parity) and the CPU's default method (the speed-up), 2 frames.
part_crab() { paper crab scenes/crab.toml 2 150 "dev pd best" "body.0.mesh.resolution=${CRAB_RES:-40}" "${CRAB_HELD[@]}"; }
# The largest Crab that fits (CRAB_BIG_RES, default 100: 633k DoF, 24.9 GiB estimated on
# the inverse path of both cards): the device alone, 1 frame.
part_crab_big() { paper crab_big scenes/crab.toml 1 300 "dev" "body.0.mesh.resolution=${CRAB_BIG_RES:-100}" "${CRAB_HELD[@]}"; }
# The Oreo at a size whose dense contact solve stays tractable (OREO_DX, default 1.25 mm;
# the paper's 0.625 mm needs 47k-100k contact rows, 16-75 GiB of dense Delassus matrix: not
# run). dx must divide the wafers' and the filling's 5 mm (5/k mm: 2.5, 1.25, 0.625): other
# sizes grow the voxel cylinders past their faces and the stack starts interpenetrating
# (0.42 mm at dx 3.5 mm, docs/paper-scenes.md). 7 frames: the claws reach the stack in
# frame 4, load it from frame 5. A loss and two stiffness parameters are added so that
# `grad` compares the states and the gradient with the CPU's.
part_oreo() {
    local dx=${OREO_DX:-0.00125} b sets=()
    for b in 1 2 3 4; do sets+=("body.$b.mesh.dx=$dx"); done
    paper oreo scenes/oreo.toml 7 150 "dev pd best" "${sets[@]}" 'loss.term=[{type="random_linear", seed=1}]' \
        'parameter=[{kind="youngs_modulus", body=2, log=true}, {kind="youngs_modulus", body=4, log=true}]'
}
part_mpm_dough() { mpm_bench dough scenes/mpm_dough_rolling.toml 300 100 21.7; }
part_mpm_shake() { mpm_bench shake scenes/mpm_close_lift_shake.toml 100 100 231; }
part_mpm_panel() { mpm_bench panel scenes/mpm_panel_squeeze.toml 300 80 0; }
part_mpm_sand() { mpm_bench sand scenes/mpm_box_on_sand.toml 200 80 0; }
for p in $PARTS; do
    [ "$(left)" -gt 20 ] || { echo "deadline: skipping $p and after"; break; }
    "part_$p"
done
echo "# done $(date -u +%FT%TZ), $(( $(date +%s) - T0 )) s"
# the device tool brings $OUT back only up to a count of files (2026-11-27: with eight
# grad.json files the log was left behind), so the JSON files travel as one archive
( cd "$OUT" && ls grad-*.json >/dev/null 2>&1 && tar czf grads.tar.gz grad-*.json && rm -f grad-*.json )
