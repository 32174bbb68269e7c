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
#
# Issue 37's re-run (the defaults = `auto` against Newton and PD, every frontier scene + 2
# outside it, 1 and 2 threads, per-parameter gradient error in the notes; ~30 min idle):
#   for t in 1 2; do NO_BUILD=1 scripts/bench_frontier.sh --methods auto,diffphd,newton --pd-tols 1e-6,1e-8 --newton-tols 1e-3,1e-6 --frames 10 --threads $t --scenes cantilever,cantilever_diffpd,twist_bands_tet,bouncing_ball,armadillo_twist,plant,routing_tendon,sysid_cantilever --plant-mesh "$DIFFPHD_ANCHOR_MESHES/plant.bin" --out out/frontier37_t$t --label "issue 37, $t thread(s)"; done
set -euo pipefail
cd "$(dirname "$0")/.."
case " $* " in
  *" --self-test "*|*" --analyze-only "*|*" --help "*|*" -h "*) ;;
  *) [ "${NO_BUILD:-0}" = 1 ] || cargo build --release --quiet ;;
esac
exec python3 scripts/bench_frontier.py "$@"
