#!/usr/bin/env bash
# Speed/accuracy frontier benchmark (issue 14): every solver method at its default settings
# and at a ladder of tolerances against a tight Newton oracle, with the equal-accuracy
# speed-ups of diffphd. Not a test. The work is done by scripts/bench_frontier.py (Python 3
# standard library); see its header or `--help` for the options. Builds the release binary
# first (set NO_BUILD=1 to skip).
#
#   scripts/bench_frontier.sh --quick                       # CI size, 3 scenes, ~minutes
#   scripts/bench_frontier.sh --scenes cantilever_diffpd --threads 1
#   DIFFPHD_ANCHOR_MESHES=/path/to/diffpd/meshes scripts/bench_frontier.sh --scenes plant
#   scripts/bench_frontier.sh --self-test                   # the analysis on synthetic data
set -euo pipefail
cd "$(dirname "$0")/.."
case " $* " in
  *" --self-test "*|*" --analyze-only "*|*" --help "*|*" -h "*) ;;
  *) [ "${NO_BUILD:-0}" = 1 ] || cargo build --release --quiet ;;
esac
exec python3 scripts/bench_frontier.py "$@"
