#!/usr/bin/env bash
# Run the contact-free inverse scenes of issue 5 and plot them:
#   scenes/sysid_cantilever.toml     E and nu from a self-generated reference (3x off)
#   scenes/initial_state_flight.toml initial position/velocity to a centre-of-mass target
#   scenes/routing_tendon.toml       16 muscle activations bringing a tendon tip to a target
# and the contact scenes (smoothed or hard Signorini-Coulomb contact with the ground):
#   scenes/sysid_bouncing_ball.toml        E and nu of a bouncing ball (3x off)
#   scenes/sysid_bouncing_ball_bands.toml  three band moduli at 30x contrast
#   scenes/initial_state_bunny.toml        rotation/position/velocity of a bunny to a CoM target
#   scenes/torus_locomotion.toml           8 sector muscles x 11 knots, maximize forward motion;
#                                          then a second run from its optimum with the bounds
#                                          widened to [0, 2] (out/torus_locomotion_wide/)
# Pass scene names to run a subset (e.g. `scripts/optimize_scenes.sh torus_locomotion`);
# further arguments after `--` go to `diffphd optimize` (e.g. `-- --threads 1`).
# Outputs in out/<scene>/ (optimize.json, optimized.toml, frame_*.vtu + frames.pvd, loss.svg).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
scenes=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do scenes+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
if [ ${#scenes[@]} -eq 0 ]; then
  scenes=(sysid_cantilever initial_state_flight routing_tendon sysid_bouncing_ball
    sysid_bouncing_ball_bands initial_state_bunny torus_locomotion)
fi
for s in "${scenes[@]}"; do
  echo "== $s"
  target/release/diffphd optimize "scenes/$s.toml" --overwrite --out "out/$s" "$@"
  target/release/diffphd plot "out/$s/optimize.json" -o "out/$s/loss.svg"
  if [ "$s" = torus_locomotion ]; then
    # docs/optimize.md "Torus": continue from the optimum with DiffPD's bounds [0, 2]
    # (optimized.toml names its input files by absolute paths, so it loads from out/).
    wide=(--max-evaluations 25)
    for i in 0 1 2 3 4 5 6 7; do
      wide+=(--set "parameter.$i.lower=0" --set "parameter.$i.upper=2")
    done
    target/release/diffphd optimize "out/$s/optimized.toml" --overwrite --out "out/${s}_wide" "${wide[@]}" "$@"
    target/release/diffphd plot "out/${s}_wide/optimize.json" -o "out/${s}_wide/loss.svg"
  fi
done
