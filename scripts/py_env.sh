#!/usr/bin/env bash
# Makes (once) and prints the path of the cached venv the Python package is built into and
# tested in: maturin, numpy, pytest and torch (CPU use; PyPI installs its CUDA libraries too,
# about 5.4 GB) as pinned in python/requirements-test.txt. The venv is
# target/py-venv-<hash of that file and the interpreter's version>, so changing the pins
# makes a new one; a cached one is reused in well under a second. Needs python3 (>= 3.9)
# with venv and pip, and PyPI (or a pip mirror) the first time. PYTHON picks the interpreter.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
REQ="$ROOT/python/requirements-test.txt"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else "diffphd needs Python >= 3.9, found " + sys.version.split()[0])'
KEY="$( { cat "$REQ"; "$PY" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-12)"
VENV="${DIFFPHD_PY_VENV:-$ROOT/target/py-venv-$KEY}"
if [ ! -f "$VENV/.ready" ]; then
    rm -rf "$VENV"
    mkdir -p "$(dirname "$VENV")"
    "$PY" -m venv "$VENV" >&2
    # --no-compile: pip byte-compiles every module it installs (8,400 files, torch's most of
    # them: 46 of pip's 126 CPU-seconds on the 2-core CI machine, taken from the cargo build
    # this runs beside); only what the tests import is compiled, by importing it once.
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-compile -r "$REQ" >&2
    env -u PYTHONDONTWRITEBYTECODE "$VENV/bin/python" -c 'import numpy, torch, meshio, pyvista, pytest' >&2
    touch "$VENV/.ready"
fi
echo "$VENV"
