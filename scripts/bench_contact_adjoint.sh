#!/usr/bin/env bash
# Contact adjoint solvers side by side (issue 7): one `diffphd grad` per `[backward] method`
# on a contact scene, same forward, printing backward seconds, adjoint iterations and the
# largest relative gradient difference to the fixed point.
#
#   scripts/bench_contact_adjoint.sh [SCENE] [FRAMES] [-- extra diffphd args]
#
# Defaults: scenes/bouncing_ball.toml (1288-hex NH ball, hard Coulomb contact), 40 frames,
# one thread. The scene gets a seeded random-linear loss and parameters (log E, nu, mu, v0)
# appended, and `[backward] rel_tol = 1e-8`. Methods: fixed_point (contact-projected fixed
# point + Anderson), woodbury (GMRES on the KKT system, Woodbury block preconditioner),
# gmres (same GMRES, block-diagonal A^-1 / diag(G_c)^-1 preconditioner).
set -euo pipefail
cd "$(dirname "$0")/.."
scene=${1:-scenes/bouncing_ball.toml}
frames=${2:-40}
shift $(( $# > 2 ? 2 : $# ))
[ "${1:-}" = "--" ] && shift
cargo build --release --quiet
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -v '^directory' "$scene" > "$tmp/scene.toml"
if grep -q '^\[backward\]' "$tmp/scene.toml"; then
  echo "scene already has [backward]; edit the script to merge it" >&2
  exit 2
fi
cat >> "$tmp/scene.toml" <<'EOF'

[backward]
rel_tol = 1e-8

[loss]
[[loss.term]]
type = "random_linear"
seed = 3

[[parameter]]
kind = "youngs_modulus"
log = true
[[parameter]]
kind = "poisson_ratio"
[[parameter]]
kind = "friction"
obstacle = 0
[[parameter]]
kind = "initial_velocity"
EOF
# mesh paths in the scene are relative to its folder
sed -i "s#file = \"\.\./#file = \"$(pwd)/#" "$tmp/scene.toml"
echo "scene $scene, $frames frames, $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p'))"
printf '%-12s %10s %10s %12s %12s\n' method "fwd s" "bwd s" "adj. iter" "rel.diff"
for m in fixed_point woodbury gmres; do
  target/release/diffphd grad "$tmp/scene.toml" --frames "$frames" --threads 1 \
    --set "backward.method=\"$m\"" --out "$tmp/$m" "$@" > "$tmp/$m.log"
  line=$(grep '^forward' "$tmp/$m.log")
  fwd=$(sed -E 's/^forward ([0-9.]+)s.*/\1/' <<< "$line")
  bwd=$(sed -E 's/.*backward ([0-9.]+)s.*/\1/' <<< "$line")
  its=$(sed -E 's/.* ([0-9]+) adjoint iterations.*/\1/' <<< "$line")
  grep 'dL/d' "$tmp/$m.log" | sed -E 's/.*= //' > "$tmp/$m.grad"
  diff=$(paste "$tmp/fixed_point.grad" "$tmp/$m.grad" | awk '
    { d = $1 - $2; if (d < 0) d = -d; a = $1; if (a < 0) a = -a; r = d / a; if (r > m) m = r }
    END { printf "%.2e", m }')
  printf '%-12s %10s %10s %12s %12s\n' "$m" "$fwd" "$bwd" "$its" "$diff"
done
