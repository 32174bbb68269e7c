#!/usr/bin/env bash
# Installs the pinned NVRTC wheel (CPU-only machines can compile CUDA kernels with it) into a
# cached venv and prints the directory of libnvrtc.so.13, for LD_LIBRARY_PATH.
# Pinned to 13.0.88: the lent GPU machines run driver 580 (CUDA 13.0), whose JIT rejects PTX
# from a newer NVRTC (docs/gpu.md). Prints nothing and exits 1 when python3/pip cannot install it.
set -euo pipefail
NVRTC_VER=13.0.88
VENV="${XDG_CACHE_HOME:-$HOME/.cache}/diffphd-nvrtc-$NVRTC_VER"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import importlib.metadata as m; m.distribution("nvidia-cuda-nvrtc")' 2>/dev/null; then
    rm -rf "$VENV"
    python3 -m venv "$VENV" >&2
    "$VENV/bin/pip" install -q --disable-pip-version-check "nvidia-cuda-nvrtc==$NVRTC_VER" >&2
fi
"$VENV/bin/python" - <<'PY'
import importlib.metadata as m, os
d = m.distribution("nvidia-cuda-nvrtc")
f = next(f for f in d.files if f.name.startswith("libnvrtc.so."))
print(os.path.dirname(d.locate_file(f)))
PY
