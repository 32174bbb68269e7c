#!/usr/bin/env bash
# The one test command (.ci/run runs exactly this): the tools the tests need, the fuzz targets'
# build, the cached Python test venv, the Rust tests
# of the workspace (the frame-viewer test uses the venv's meshio and PyVista), then the
# Python package built into the cached test venv (scripts/py_env.sh) on the same cargo target
# directory (the library is not rebuilt cold), then pytest on python/tests. Stops at the
# first failing step with its exit code. Extra arguments go to `cargo test`.
# Under CI=true the Python tests that compare with the command line fail instead of skipping
# when target/release/diffphd is missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
step() { printf '\n== %s\n' "$*" >&2; }

step "what the tests need (scripts/ci_deps.sh: GNU parallel, python3)"
scripts/ci_deps.sh

step "the fuzz targets build (scripts/fuzz_build.sh; DIFFPHD_SKIP_FUZZ_BUILD=1 skips it outside CI)"
if [ "${CI:-}" = true ] || [ -z "${DIFFPHD_SKIP_FUZZ_BUILD:-}" ]; then
    scripts/fuzz_build.sh
fi

step "Python test venv (scripts/py_env.sh)"
VENV="$(scripts/py_env.sh)"
echo "$VENV" >&2
# The Python with meshio and PyVista that the frame-viewer test (tests/cli/outputs/vtu_frames.rs) runs.
export DIFFPHD_PYTHON="${DIFFPHD_PYTHON:-$VENV/bin/python}"

step "cargo test --release --workspace --exclude diffphd-python $*"
# The extension crate is built by maturin below (it only links as a Python extension).
cargo test --release --workspace --exclude diffphd-python "$@"

step "maturin develop --release (python/ into the venv, target $CARGO_TARGET_DIR)"
(cd python && VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" maturin develop --release --quiet)

step "pytest python/tests"
# The command line the Python tests compare against: the binary cargo just built.
export DIFFPHD_CLI="${DIFFPHD_CLI:-$CARGO_TARGET_DIR/release/diffphd}"
"$VENV/bin/python" -m pytest -q python/tests
