#!/usr/bin/env bash
# Python-vs-CLI wall time of `grad` (issue 36, must show 4): builds the CLI and the extension
# into the test venv, then runs scripts/bench_python.py (see its header; arguments pass on).
# A benchmark, not a test: run on an idle machine and record the result in docs/BENCHMARKS.md.
#
#   scripts/bench_python.sh [--scene scenes/cantilever_diffpd.toml] [--repeats 7] [--threads 1]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="$(scripts/py_env.sh)"
if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --release --quiet -p diffphd-cli
  (cd python && VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" CARGO_TARGET_DIR="$PWD/../target" maturin develop --release --quiet)
fi
exec "$VENV/bin/python" scripts/bench_python.py "$@"
