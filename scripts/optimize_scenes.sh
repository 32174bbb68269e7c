#!/usr/bin/env bash
# Run the contact-free inverse scenes of issue 5 and plot them:
#   scenes/sysid_cantilever.toml     E and nu from a self-generated reference (3x off)
#   scenes/initial_state_flight.toml initial position/velocity to a centre-of-mass target
#   scenes/routing_tendon.toml       16 muscle activations bringing a tendon tip to a target
# Outputs in out/<scene>/ (optimize.json, optimized.toml, frame_*.ply, loss.svg).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
for s in sysid_cantilever initial_state_flight routing_tendon; do
  echo "== $s"
  target/release/diffphd optimize "scenes/$s.toml" --out "out/$s" "$@"
  target/release/diffphd plot "out/$s/optimize.json" -o "out/$s/loss.svg"
done
