#!/usr/bin/env bash
# The one test command (.ci/run runs exactly this): the tools the tests need, the cached Python
# test venv, one cargo build of the whole workspace (every test target, the CLI and the Python
# extension, in ONE feature resolution so nothing is compiled twice), the Rust tests (the
# frame-viewer test uses the venv's meshio and PyVista; the fuzz targets' bodies run over a
# corpus in tests/cli), the extension put into the venv, then pytest on python/tests. Stops at
# the first failing step with its exit code. Extra arguments go to `cargo test`.
# Under CI=true the Python tests that compare with the command line fail instead of skipping
# when target/release/diffphd is missing.
#
# Why not `maturin develop` here: cargo resolves features per invocation, and maturin's
# `-p diffphd-python` build unifies fewer features than the workspace's test build (the
# dev-dependencies' libc/rand/bitflags features; pyo3's syn/num-complex ones), so it compiled
# faer, the library and ~100 other crates a second time (about 5 CPU-minutes of CI). The
# extension built here is the same cdylib maturin builds (`[tool.maturin] features`), placed
# where `maturin develop` places it (python/diffphd/, python/ on the venv's path).
# `scripts/fuzz_build.sh` (the nightly cargo-fuzz build) is no longer a CI step: the targets
# are one-line wrappers of fuzz/bodies, which this build compiles and tests on stable.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
step() { printf '\n== %s\n' "$*" >&2; }

step "what the tests need (scripts/ci_deps.sh: GNU parallel, python3)"
scripts/ci_deps.sh

step "Python test venv (scripts/py_env.sh)"
VENV="$(scripts/py_env.sh)"
echo "$VENV" >&2
# The Python with meshio and PyVista that the frame-viewer test (tests/cli/outputs/vtu_frames.rs) runs.
export DIFFPHD_PYTHON="${DIFFPHD_PYTHON:-$VENV/bin/python}"
# pyo3's build script configures the extension for this interpreter (as maturin would).
export PYO3_PYTHON="${PYO3_PYTHON:-$VENV/bin/python}"

# Every member and the extension's `extension-module` feature: one feature resolution.
FEATURES=(--workspace --features diffphd-python/extension-module)

# The libraries (the extension's cdylib among them), binaries, tests and examples: what
# `cargo test` builds, plus the cdylib that it does not (no --benches: they would build each
# library's harness a second time).
step "cargo build --release --lib --bins --tests --examples ${FEATURES[*]}"
t0=$(date +%s)
cargo build --release --lib --bins --tests --examples "${FEATURES[@]}"
echo "build: $(( $(date +%s) - t0 )) s" >&2

step "cargo test --release ${FEATURES[*]} $*"
cargo test --release "${FEATURES[@]}" "$@"

step "the extension into the venv (python/diffphd/_diffphd.abi3.so; python/ on its path)"
SO="$CARGO_TARGET_DIR/release/lib_diffphd.so"
[ -f "$SO" ] || SO="$CARGO_TARGET_DIR/release/lib_diffphd.dylib"
cp -f "$SO" python/diffphd/_diffphd.abi3.so
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$ROOT/python" > "$SITE/diffphd.pth"

step "pytest python/tests"
# The command line the Python tests compare against: the binary cargo just built.
export DIFFPHD_CLI="${DIFFPHD_CLI:-$CARGO_TARGET_DIR/release/diffphd}"
"$VENV/bin/python" -m pytest -q python/tests
