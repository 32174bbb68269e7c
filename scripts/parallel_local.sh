#!/usr/bin/env bash
# The shipped sweep through GNU parallel (Debian's `parallel`): `diffphd sweep emit
# --parallel` writes the job file, parallel schedules it (--joblog), `sweep collect` gathers
# the results. Extra arguments go to parallel, e.g. `--sshloginfile nodes.txt` to spread the
# runs over machines that share this checkout's path. Usage:
#   scripts/parallel_local.sh [SWEEP_FILE] [SWEEP_OUT] [parallel args...]
set -euo pipefail
cd "$(dirname "$0")/.."
SWEEP=${1:-scenes/sweeps/cantilever_E_nu.sweep.toml}
OUT=${2:-out/sweeps/parallel_local}
shift $(( $# > 2 ? 2 : $# ))
B=${DIFFPHD:-$(pwd)/target/release/diffphd}
[ -x "$B" ] || cargo build --release
command -v parallel >/dev/null || { echo "GNU parallel is not installed (apt-get install parallel)" >&2; exit 2; }
echo "== parallel --version"; parallel --version | head -1
echo "== diffphd sweep emit --parallel"
"$B" sweep emit "$SWEEP" --parallel --out "$OUT" --binary "$B"
echo "== first lines of $OUT/parallel.jobs"; head -2 "$OUT/parallel.jobs"
t0=$(date +%s)
"$OUT/parallel.sh" "$@"
echo "== parallel finished in $(( $(date +%s) - t0 ))s; joblog (first lines):"
head -4 "$OUT/parallel.joblog" | cut -f1-7
echo "   jobs: $(( $(wc -l < "$OUT/parallel.joblog") - 1 )), non-zero exit values: $(awk 'NR > 1 && $7 != 0' "$OUT/parallel.joblog" | wc -l)"
"$B" sweep collect "$OUT"
