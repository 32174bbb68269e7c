#!/usr/bin/env bash
# The one test command (.ci/run runs exactly this): the tools the tests need, the cached Python
# test venv (made in the background while cargo builds), one cargo build of the whole workspace
# (every test target, the CLI and the Python extension, in ONE feature resolution so nothing is
# compiled twice), the extension put into the venv, then the Rust tests (the frame-viewer test
# uses the venv's meshio and PyVista; the fuzz targets' bodies run over a corpus in tests/cli)
# with pytest on python/tests beside them. Fails with the first failing step's exit code (cargo
# test's before pytest's when both fail). Extra arguments go to `cargo test`.
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

# The venv (a first run downloads and unpacks torch: about 2 minutes, mostly network and disk)
# is made while cargo builds; cargo test waits for it (the frame-viewer test runs its Python).
step "Python test venv (scripts/py_env.sh), in the background while cargo builds"
LOGS="$(mktemp -d)"
# (an early exit stops the background jobs: no half-made venv is left being written)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$LOGS"' EXIT
scripts/py_env.sh >"$LOGS/venv" 2>"$LOGS/venv.err" &
VENV_PID=$!
# pyo3's build script configures the extension for the base interpreter the venv is made from
# (the same version; the extension is abi3), so the build need not wait for the venv.
export PYO3_PYTHON="${PYO3_PYTHON:-$(command -v "${PYTHON:-python3}")}"

# Every member and the extension's `extension-module` feature: one feature resolution.
FEATURES=(--workspace --features diffphd-python/extension-module)

# The libraries (the extension's cdylib among them), binaries, tests and examples: what
# `cargo test` builds, plus the cdylib that it does not (no --benches: they would build each
# library's harness a second time).
step "cargo build --release --lib --bins --tests --examples ${FEATURES[*]}"
t0=$(date +%s)
cargo build --release --lib --bins --tests --examples "${FEATURES[@]}"
echo "build: $(( $(date +%s) - t0 )) s" >&2

step "waiting for the venv"
if ! wait "$VENV_PID"; then
    cat "$LOGS/venv.err" >&2
    echo "scripts/py_env.sh failed" >&2
    exit 1
fi
VENV="$(cat "$LOGS/venv")"
echo "$VENV" >&2
# The Python with meshio and PyVista that the frame-viewer test (tests/cli/outputs/vtu_frames.rs) runs.
export DIFFPHD_PYTHON="${DIFFPHD_PYTHON:-$VENV/bin/python}"

step "the extension into the venv (python/diffphd/_diffphd.abi3.so; python/ on its path)"
SO="$CARGO_TARGET_DIR/release/lib_diffphd.so"
[ -f "$SO" ] || SO="$CARGO_TARGET_DIR/release/lib_diffphd.dylib"
cp -f "$SO" python/diffphd/_diffphd.abi3.so
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$ROOT/python" > "$SITE/diffphd.pth"

# Nothing left to build (pytest must not run while cargo relinks the binary it calls).
cargo test --release --no-run -q "${FEATURES[@]}"

# pytest runs beside the Rust tests (their binaries leave a core idle at each one's tail);
# its output is printed when both are done.
step "pytest python/tests, in the background while cargo tests"
# The command line the Python tests compare against: the binary cargo just built.
export DIFFPHD_CLI="${DIFFPHD_CLI:-$CARGO_TARGET_DIR/release/diffphd}"
"$VENV/bin/python" -m pytest -q python/tests >"$LOGS/pytest" 2>&1 &
PYTEST_PID=$!

step "cargo test --release ${FEATURES[*]} $*"
rust=0
cargo test --release "${FEATURES[@]}" "$@" || rust=$?

step "pytest python/tests (its output)"
py=0
wait "$PYTEST_PID" || py=$?
cat "$LOGS/pytest" >&2
if [ "$rust" -ne 0 ]; then
    echo "cargo test failed (exit $rust)" >&2
    exit "$rust"
fi
if [ "$py" -ne 0 ]; then
    echo "pytest failed (exit $py)" >&2
    exit "$py"
fi
