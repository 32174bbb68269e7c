#!/usr/bin/env bash
# CI step (issue 34): build every cargo-fuzz target of fuzz/ so that a change to a parser's
# API cannot leave the fuzz crate broken until the next fuzzing session. Builds only (no
# fuzzing: that is scripts/fuzz.sh) as an unoptimised `--dev` build without a sanitizer: the check
# is that every target compiles, at a fraction of a release build's CI time. Needs the nightly
# toolchain; installs cargo-fuzz when it is missing
# (CI images start without it). Prints the build's wall time.
#
#   scripts/fuzz_build.sh            # from anywhere; exit status is the build's
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz_build: the nightly toolchain is missing (rustup toolchain install nightly)" >&2
  exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
t0=$(date +%s)
(cd fuzz && cargo +nightly fuzz build --dev --sanitizer none)
echo "fuzz_build: every target of fuzz/ built in $(( $(date +%s) - t0 )) s"
