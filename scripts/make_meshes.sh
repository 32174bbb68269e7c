#!/usr/bin/env bash
# Regenerates every file in meshes/ with the tool itself (see meshes/README.md).
# Usage: scripts/make_meshes.sh            (from anywhere; builds the release binary first)
# The bunny step needs `npm` and `node` (npm registry package `bunny` 1.0.1); without them the
# committed meshes/bunny.obj is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
B=target/release/diffphd
M=meshes
mkdir -p "$M"

# Sphere: icosphere of radius 5 cm (3 subdivisions), voxelized at 8 mm.
"$B" mesh generate sphere --radius 0.05 --subdivisions 3 --out "$M/sphere.obj"
"$B" mesh voxelize "$M/sphere.obj" --dx 0.008 --out "$M/sphere_hex.vtk"

# Torus around z: ring radius 8 cm, tube radius 3 cm (24 segments around the tube, 64 around
# the ring), voxelized at 1 cm.
"$B" mesh generate torus --major-radius 0.08 --radius 0.03 --segments 24 --out "$M/torus.obj"
"$B" mesh voxelize "$M/torus.obj" --dx 0.01 --out "$M/torus_hex.vtk"

# Stanford bunny (public domain) from the npm package `bunny`, in metres, z up (~9.7 cm tall).
if command -v npm >/dev/null && command -v node >/dev/null; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack bunny@1.0.1 --silent >/dev/null && tar xzf bunny-1.0.1.tgz)
  node scripts/bunny_to_obj.js "$tmp/package" > "$M/bunny.obj"
else
  echo "npm/node not found: reusing the committed $M/bunny.obj" >&2
fi
# Voxelized at 5 mm (hexes) and 6.5 mm (each voxel split into six conforming Kuhn tets).
"$B" mesh voxelize "$M/bunny.obj" --dx 0.005 --out "$M/bunny_hex.vtk"
"$B" mesh voxelize "$M/bunny.obj" --dx 0.0065 --tet --out "$M/bunny_tet.vtk"
# Coarse versions for the contact inverse scenes (initial_state_bunny, torus_locomotion).
"$B" mesh voxelize "$M/bunny.obj" --dx 0.0125 --out "$M/bunny_hex_coarse.vtk"
"$B" mesh voxelize "$M/torus.obj" --dx 0.02 --out "$M/torus_hex_coarse.vtk"

for f in "$M"/*.vtk; do "$B" mesh check "$f"; done
du -ch "$M"/* | tail -1
