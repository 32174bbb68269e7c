#!/usr/bin/env bash
# Render docs/gallery/<scene>.png for every shipped scene and write docs/gallery.md.
#
#   scripts/gallery.sh [SCENE_NAME ...]     (default: every scenes/*.toml)
#
# Each scene runs with the release binary (`cargo build --release` first) as shipped, at
# its own frame count unless listed in FRAMES below (the caption then says so), with VTU
# frames in target/gallery/<scene>/; scripts/gallery.py renders the first and last frames
# off screen (PyVista in the project's test venv, scripts/py_env.sh; VTK's wheels render
# through EGL or OSMesa without a display). Captions name the command and the commit.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN="$ROOT/target/release/diffphd"
[ -x "$BIN" ] || { echo "gallery.sh: build first: cargo build --release" >&2; exit 2; }
PY="$("$ROOT/scripts/py_env.sh")/bin/python"
COMMIT="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src cli scenes || echo '+dirty')"
mkdir -p docs/gallery target/gallery
# Scenes whose bodies travel: show two intermediate frames as ghosts.
TRAIL=" bouncing_ball sysid_bouncing_ball sysid_bouncing_ball_bands initial_state_flight torus_locomotion incline dice strike stack stiff_strikes_soft "
# Frame caps for the scenes too slow to render whole on a 2-core machine (caption says so).
declare -A FRAMES=([armadillo_twist]=10 [gatorman]=10 [crab]=10 [oreo]=20 [plant]=60 [napkin]=40 [torus_locomotion]=60 [incline]=100 [stack]=20 [stiff_strikes_soft]=30 [strike]=30)
if [ $# -gt 0 ]; then NAMES=("$@"); else
    NAMES=(); for f in scenes/*.toml; do NAMES+=("$(basename "$f" .toml)"); done
fi
for name in "${NAMES[@]}"; do
    scene="scenes/$name.toml"
    out="target/gallery/$name"
    args=(simulate "$scene" --out "$out" --overwrite -q --set output.format=vtu)
    [ -n "${FRAMES[$name]:-}" ] && args+=(--frames "${FRAMES[$name]}")
    start=$(date +%s.%N)
    if ! "$BIN" "${args[@]}" 2> "target/gallery/$name.err"; then
        echo "$name: simulate failed ($(head -c 300 "target/gallery/$name.err")); not in the gallery" >&2
        continue
    fi
    secs=$(echo "$(date +%s.%N) - $start" | bc)
    trail=(); [[ "$TRAIL" == *" $name "* ]] && trail=(--trail)
    "$PY" scripts/gallery.py "$scene" "$out" "docs/gallery/$name.png" "${trail[@]}" 2>/dev/null
    last=$(ls "$out"/frame_*.vtu | tail -1 | sed 's/.*frame_0*\([0-9][0-9]*\)\.vtu/\1/')
    printf '%s\t%s\t%s\t%.0f\n' "$name" "diffphd ${args[*]:0:2} ${args[*]:6}" "$last" "$secs" >> target/gallery/captions.tsv
    echo "$name: frames 0..$last, simulated in ${secs%.*} s" >&2
done
{
    echo "# Gallery"
    echo
    echo "One picture per shipped scene, rendered off screen by \`scripts/gallery.sh\` (PyVista"
    echo "0.49 / VTK 9.7, EGL or OSMesa, no display). Each shows the first frame as a grey ghost and"
    echo "the last frame coloured by von Mises stress (log scale); scenes whose bodies travel also"
    echo "show two intermediate frames as fainter ghosts. Obstacle planes and spheres are drawn at"
    echo "their start positions. Commit $COMMIT, $(date -u +%Y-%m-%d)."
    echo
    sort -u -t$'\t' -k1,1 target/gallery/captions.tsv | while IFS=$'\t' read -r name cmd last secs; do
        echo "## $name"
        echo
        echo "![$name](gallery/$name.png)"
        echo
        echo "\`$cmd\` — frames 0 and $last."
        echo
    done
} > docs/gallery.md
echo "wrote docs/gallery.md and $(ls docs/gallery/*.png | wc -l) pictures ($(du -ch docs/gallery/*.png | tail -1 | cut -f1))"
