#!/usr/bin/env bash
# Full-size runs of the MPM seed scenes' long-phase properties that CI checks only in their
# early phases (docs/mpm.md, "Seed scenes"; the results there are from this script). Not a
# test: about 5 minutes on a quiet 2-core machine.
#   close-lift-shake (scenes/mpm_close_lift_shake.toml, 50 ms): the stack does not slip out;
#     the rigid cube's largest displacement relative to the panels' mean stays <= 3 mm;
#   dough rolling (scenes/mpm_dough_rolling.toml, 100 ms): the pin's rotation, driven only by
#     friction, is 0 while pressing (|omega_y| < 0.5 rad/s over 0-40 ms) and its mean over
#     70-100 ms is v/r = 6.667 rad/s within 10 %;
#   the Drucker-Prager piles at script size (slow pours of 3 s, +-3 deg, phi = 25 and 35 deg):
#     the crate's ignored test mpm_sand_pile::drucker_prager_pile_fine_poured.
# BIN overrides the binary (default: target/release/diffphd, built here). Exit 1 if a
# property fails.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet -p diffphd-cli
  BIN=target/release/diffphd
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0

"$BIN" simulate scenes/mpm_close_lift_shake.toml --out "$out/cls" --quiet --set output.every=500
python3 - "$out/cls/log.json" <<'PY' || status=1
import json, sys
l = json.load(open(sys.argv[1]))
f = l["frames"]
def pos(k, b): return f[k]["bodies"][b]["position"]
def rel(k):  # rigid cube (body 0) relative to the mean of the panels (bodies 1, 2)
    return [pos(k, 0)[a] - 0.5 * (pos(k, 1)[a] + pos(k, 2)[a]) for a in range(3)]
r0 = rel(0)
worst = max(sum((rel(k)[a] - r0[a]) ** 2 for a in range(3)) ** 0.5 for k in range(len(f)))
lift = pos(len(f) - 1, 1)[2] - pos(0, 1)[2]
print(f"close-lift-shake: {len(f) - 1} frames, panels lifted {lift * 1e3:.2f} mm, "
      f"largest cube displacement relative to the panels {worst * 1e3:.3f} mm (bound 3 mm), "
      f"QN max {max(x['qn_iterations_max'] for x in f)}")
sys.exit(0 if worst <= 3e-3 and lift > 1.5e-3 else 1)
PY

"$BIN" simulate scenes/mpm_dough_rolling.toml --out "$out/dough" --quiet --set output.every=1000
python3 - "$out/dough/log.json" <<'PY' || status=1
import json, sys
l = json.load(open(sys.argv[1]))
f = l["frames"]
w = [x["bodies"][0]["angular_velocity"][1] for x in f]
press = max(abs(v) for v in w[:401])
late = w[700:]
mean = sum(late) / len(late)
target = 0.1 / 0.015
print(f"dough rolling: |omega_y| <= {press:.3f} rad/s while pressing; mean omega_y over "
      f"70-100 ms {mean:.3f} rad/s vs v/r = {target:.3f} ({100 * (mean / target - 1):+.1f} %), "
      f"range {min(late):.2f}..{max(late):.2f}")
sys.exit(0 if press < 0.5 and abs(mean - target) <= 0.1 * target else 1)
PY

cargo test --release -q -p diffphd-mpm --test mpm -- --ignored --exact \
  mpm_sand_pile::drucker_prager_pile_fine_poured --nocapture || status=1
exit $status
