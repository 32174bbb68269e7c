#!/usr/bin/env bash
# TOML table headers (`[simulation]`, `[[body]]`, ...) inside Rust string literals in every
# member's tests (tests/, crates/*/tests, #[cfg(test)] code in src/, cli/src, crates/*/src,
# python/src). Target: <= 5. What exactly is counted: the docstring of count_test_toml.py.
# Usage: scripts/count_test_toml.sh [-v]
set -euo pipefail
exec python3 "$(dirname "$0")/count_test_toml.py" "$@"
