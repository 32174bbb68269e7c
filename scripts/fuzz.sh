#!/usr/bin/env bash
# Fuzz diffphd's parsers with cargo-fuzz (libFuzzer; needs nightly and `cargo install
# cargo-fuzz`). The fuzz crate lives in fuzz/ and is not part of the main build.
#
#   scripts/fuzz.sh SECONDS [TARGET ...]     # default: every target, SECONDS each
#   RUNS=1000000 scripts/fuzz.sh SECONDS     # stop each target after RUNS executions
#                                            # (or SECONDS, whichever comes first)
#
# One libFuzzer process per target, one after the other: one core (no -jobs/-workers).
# Built with debug assertions (integer overflow panics) and no sanitizer (safe Rust; the
# instrumented faer build is slow). Corpora are
# seeded from scenes/, meshes/ and tests/fixtures/ on the first run (fuzz/corpus/TARGET);
# crashes land in fuzz/artifacts/TARGET; each run's libFuzzer output in fuzz/logs/TARGET.log.
# The last lines print executions and crashes per target (the numbers in
# docs/RELIABILITY.md). A crash found here becomes a named regression test in
# tests/fuzz_regressions.rs, which runs on stable in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:?usage: scripts/fuzz.sh SECONDS [TARGET ...]}
shift
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(scene mesh_tetgen mesh_gmsh mesh_medit mesh_vtk mesh_vtu mesh_bin surface ply_frame plot_json)
fi
root=$PWD
seed() { # seed TARGET FILE...
  local dir="fuzz/corpus/$1"; shift
  mkdir -p "$dir"
  for f in "$@"; do
    [ -f "$f" ] || continue
    # libFuzzer's default -max_len is 4096: seed with the head of large files
    head -c 65536 "$f" > "$dir/$(basename "$f")"
  done
}
for t in "${targets[@]}"; do
  if [ ! -d "fuzz/corpus/$t" ]; then
    case $t in
      scene) seed scene scenes/*.toml ;;
      mesh_tetgen)
        mkdir -p fuzz/corpus/mesh_tetgen
        for n in tests/fixtures/meshes/*.node tests/fixtures/meshes/bad/*.node; do
          e=${n%.node}.ele
          { cat "$n"; printf -- '---\n'; [ -f "$e" ] && cat "$e"; } > "fuzz/corpus/mesh_tetgen/$(basename "${n%.node}")"
        done ;;
      mesh_gmsh) seed mesh_gmsh tests/fixtures/meshes/*.msh tests/fixtures/meshes/bad/*.msh ;;
      mesh_medit) seed mesh_medit tests/fixtures/meshes/*.mesh tests/fixtures/meshes/bad/*.mesh ;;
      mesh_vtk) seed mesh_vtk tests/fixtures/meshes/*.vtk meshes/bunny_hex_coarse.vtk meshes/torus_hex_coarse.vtk ;;
      mesh_vtu)
        seed mesh_vtu tests/fixtures/vtu/*.vtu
        ./target/release/diffphd mesh convert tests/fixtures/meshes/two_hexes.mesh fuzz/corpus/mesh_vtu/two_hexes.vtu >/dev/null 2>&1 || true
        tmp=$(mktemp -d)
        ./target/release/diffphd simulate scenes/stiff_strikes_soft.toml --frames 1 --quiet --out "$tmp" \
          --set output.format='"vtu"' >/dev/null 2>&1 && cp "$tmp/frame_00001.vtu" fuzz/corpus/mesh_vtu/two_bodies_zlib.vtu
        rm -rf "$tmp" ;;
      mesh_bin)
        mkdir -p fuzz/corpus/mesh_bin
        ./target/release/diffphd mesh convert tests/fixtures/meshes/two_hexes.mesh "fuzz/corpus/mesh_bin/two_hexes.bin" >/dev/null 2>&1 || true
        ./target/release/diffphd mesh convert tests/fixtures/meshes/two_tets.mesh "fuzz/corpus/mesh_bin/two_tets.bin" >/dev/null 2>&1 || true ;;
      surface)
        mkdir -p fuzz/corpus/surface
        for f in meshes/sphere.obj; do { printf '\0'; head -c 8192 "$f"; } > fuzz/corpus/surface/obj; done
        printf '\001OFF\n4 4 0\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n3 0 2 1\n3 0 1 3\n3 0 3 2\n3 1 2 3\n' > fuzz/corpus/surface/off
        printf '\002solid t\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nvertex 0 1 0\nendloop\nendfacet\nendsolid t\n' > fuzz/corpus/surface/stl ;;
      ply_frame)
        mkdir -p fuzz/corpus/ply_frame
        tmp=$(mktemp -d)
        ./target/release/diffphd simulate scenes/cantilever.toml --frames 1 --quiet --out "$tmp" \
          --set 'body.0.mesh.cells=[2, 1, 1]' >/dev/null 2>&1 || true
        cp "$tmp"/frame_*.ply fuzz/corpus/ply_frame/ 2>/dev/null || true
        rm -rf "$tmp" ;;
      plot_json)
        mkdir -p fuzz/corpus/plot_json
        printf '{"parameters":[{"name":"p","initial":1}],"evaluations":[{"index":0,"loss":1,"gradient_norm":1,"parameters":[1]}],"iterations":[{"iteration":0,"evaluation":0,"loss":1,"gradient_norm":1,"parameters":[1]}]}' > fuzz/corpus/plot_json/min.json ;;
    esac
  fi
  if [ "$t" = scene ]; then
    # the static/dynamic friction keys (issue 38), also into corpora seeded before them
    seed scene tests/fixtures/static_friction_incline.toml tests/fixtures/params/stick_slip_block.toml
    { printf '#set contact.body_friction=0.3\n#set contact.body_static_friction=0.6\n#set contact.stick_slip_speed=0.01\n'
      cat tests/fixtures/params/two_bodies.toml; } > fuzz/corpus/scene/two_bodies_static_friction.toml
  fi
  mkdir -p "fuzz/artifacts/$t" fuzz/logs
  echo "== $t: ${secs}s"
  (cd fuzz && cargo +nightly fuzz run --sanitizer none -a "$t" "corpus/$t" -- \
      -max_total_time="$secs" ${RUNS:+-runs="$RUNS"} -print_final_stats=1 -rss_limit_mb=2048 -timeout=10 \
      -artifact_prefix="$root/fuzz/artifacts/$t/" ) > "fuzz/logs/$t.log" 2>&1 || true
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "fuzz/logs/$t.log" | grep -o '[0-9]*$' | tail -1)
  crashes=$(find "fuzz/artifacts/$t" -type f | wc -l)
  echo "$t: executions ${execs:-?}, crash/timeout/oom artifacts $crashes"
done
