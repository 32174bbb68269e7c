#!/usr/bin/env bash
# Render docs/gallery/<scene>.png for every shipped scene and write docs/gallery.md.
#
#   scripts/gallery.sh [SCENE_NAME ...]     (default: every scenes/*.toml)
#   scripts/gallery.sh --index              (only rewrite docs/gallery.md from the captions)
#
# Each scene runs with the release binary (`cargo build --release` first) as shipped, at
# its own frame count unless listed in FRAMES below (the caption then says so), with VTU
# frames in target/gallery/<scene>/; scripts/gallery.py renders the first and last frames
# off screen (PyVista in the project's test venv, scripts/py_env.sh; VTK's wheels render
# through EGL or OSMesa without a display). Captions name the command and the commit.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# BIN: the binary (default target/release/diffphd); COMMIT: the caption's commit for a BIN
# built elsewhere (default: HEAD, +dirty when src/cli/scenes differ); LIMIT: wall seconds per
# scene's simulation (default 900; a scene over it is left out of the gallery, with a message).
BIN="${BIN:-$ROOT/target/release/diffphd}"
[ -x "$BIN" ] || { echo "gallery.sh: build first: cargo build --release" >&2; exit 2; }
PY="${PY:-$("$ROOT/scripts/py_env.sh")/bin/python}"
COMMIT="${COMMIT:-$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src cli scenes || echo '+dirty')}"
LIMIT="${LIMIT:-900}"
mkdir -p docs/gallery target/gallery
# Scenes whose bodies travel: show two intermediate frames as ghosts.
TRAIL=" bouncing_ball sysid_bouncing_ball sysid_bouncing_ball_bands initial_state_flight torus_locomotion incline dice strike stack stiff_strikes_soft "
# Frame caps for the scenes too slow to render whole on a 2-core machine (caption says so).
declare -A FRAMES=([mpm_panel_squeeze]=300 [mpm_close_lift_shake]=100 [mpm_dough_rolling]=300 [mpm_box_on_sand]=600 [armadillo_twist]=5 [gatorman]=10 [crab]=10 [oreo]=20 [plant]=60 [napkin]=40 [torus_locomotion]=60 [incline]=100 [stiff_strikes_soft]=30 [stack]=14 [strike]=10)
# Scenes whose mesh is not in the repository (DiffPD's plant, MIT): taken from
# $DIFFPHD_ANCHOR_MESHES (the caption names the variable, not the machine's path).
ANCHOR="${DIFFPHD_ANCHOR_MESHES:-$ROOT/../shared/anchor-meshes}"
declare -A MESH=([plant]=plant.bin)
if [ "${1:-}" = --index ]; then NAMES=(); elif [ $# -gt 0 ]; then NAMES=("$@"); else
    NAMES=(); for f in scenes/*.toml; do NAMES+=("$(basename "$f" .toml)"); done
fi
for name in "${NAMES[@]}"; do
    scene="scenes/$name.toml"
    out="target/gallery/$name"
    args=(simulate "$scene" --out "$out" --overwrite -q --set output.format=vtu)
    [ -n "${FRAMES[$name]:-}" ] && args+=(--frames "${FRAMES[$name]}")
    shown=()
    if [ -n "${MESH[$name]:-}" ]; then
        [ -f "$ANCHOR/${MESH[$name]}" ] || { echo "$name: needs $ANCHOR/${MESH[$name]} (set DIFFPHD_ANCHOR_MESHES); not in the gallery" >&2; continue; }
        args+=(--set "body.0.mesh.file=\"$ANCHOR/${MESH[$name]}\"")
        shown=(--set "'body.0.mesh.file=\"\$DIFFPHD_ANCHOR_MESHES/${MESH[$name]}\"'")
    fi
    start=$(date +%s.%N)
    if ! timeout -s INT "$LIMIT" "$BIN" "${args[@]}" 2> "target/gallery/$name.err"; then
        echo "$name: simulate failed ($(head -c 300 "target/gallery/$name.err")); not in the gallery" >&2
        continue
    fi
    secs=$(echo "$(date +%s.%N) - $start" | bc)
    trail=(); [[ "$TRAIL" == *" $name "* ]] && trail=(--trail)
    "$PY" scripts/gallery.py "$scene" "$out" "docs/gallery/$name.png" "${trail[@]}" 2>/dev/null
    last=$( (ls "$out"/frame_*.vtu "$out"/particles_*.vtu 2>/dev/null || true) | tail -1 | sed 's/.*_0*\([0-9][0-9]*\)\.vtu/\1/')
    grep -v "^$name	" docs/gallery/captions.tsv > target/gallery/captions.tmp 2>/dev/null || true
    cmd="diffphd ${args[*]:0:2} ${args[*]:6}"
    [ ${#shown[@]} -gt 0 ] && cmd="diffphd ${args[*]:0:2} ${args[*]:6:$((${#args[@]} - 8))} ${shown[*]}"
    printf '%s\t%s\t%s\t%.0f\t%s\t%s\n' "$name" "$cmd" "$last" "$secs" \
        "$COMMIT" "$(date -u +%Y-%m-%d)" >> target/gallery/captions.tmp
    sort target/gallery/captions.tmp > docs/gallery/captions.tsv
    echo "$name: frames 0..$last, simulated in ${secs%.*} s" >&2
done
{
    echo "# Gallery"
    echo
    echo "One picture per shipped scene, rendered off screen by \`scripts/gallery.sh\` (PyVista"
    echo "0.49 / VTK 9.7, EGL or OSMesa, no display). Each shows the first frame as a grey ghost and"
    echo "the last frame coloured by von Mises stress (log scale); scenes whose bodies travel also"
    echo "show two intermediate frames as fainter ghosts. Obstacle planes and spheres are drawn at"
    echo "their start positions (moving probes and claws have moved on by the last frame). MPM"
    echo "scenes show their particles as points (the first frame's as a faint ghost) and the rigid"
    echo "bodies' surfaces. Frame caps (\`--frames\`) keep each scene to minutes on a 2-core machine;"
    echo "each caption names its command, the commit of the binary and the date (the captions are"
    echo "kept in \`docs/gallery/captions.tsv\`, so a partial re-run keeps the others)."
    echo
    while IFS=$'\t' read -r name cmd last secs commit day; do
        [ -f "docs/gallery/$name.png" ] || continue
        echo "## $name"
        echo
        echo "![$name](gallery/$name.png)"
        echo
        asked=$(echo "$cmd" | sed -n 's/.*--frames \([0-9]*\).*/\1/p')
        stop=""
        [ -n "$asked" ] && [ "$last" -lt "$asked" ] && stop=" (the run stopped at the script's time limit after frame $last; frames 0–$last are those of the command)"
        echo "\`$cmd\` — frames 0 and $last$stop; commit $commit, $day."
        echo
    done < docs/gallery/captions.tsv
    missing=()
    for f in scenes/*.toml; do
        n=$(basename "$f" .toml)
        [ -f "docs/gallery/$n.png" ] || missing+=("\`$n\`")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "## Not rendered"
        echo
        echo "${missing[*]}: their simulation did not finish within the script's per-scene limit"
        echo "(\`LIMIT\`, 600 s by default) on the shared 2-core machine at its last run, even at the"
        echo "frame caps above (see docs/contact.md §7 \"Stack\" for the stack's contact cost)."
        echo
    fi
} > docs/gallery.md
echo "wrote docs/gallery.md and $(ls docs/gallery/*.png | wc -l) pictures ($(du -ch docs/gallery/*.png | tail -1 | cut -f1))"
