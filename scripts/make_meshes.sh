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
"$B" mesh generate sphere --radius 0.05 --subdivisions 3 --out "$M/sphere.obj" --overwrite
"$B" mesh voxelize "$M/sphere.obj" --dx 0.008 --out "$M/sphere_hex.vtk" --overwrite

# Torus around z: ring radius 8 cm, tube radius 3 cm (24 segments around the tube, 64 around
# the ring), voxelized at 1 cm.
"$B" mesh generate torus --major-radius 0.08 --radius 0.03 --segments 24 --out "$M/torus.obj" --overwrite
"$B" mesh voxelize "$M/torus.obj" --dx 0.01 --out "$M/torus_hex.vtk" --overwrite

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
"$B" mesh voxelize "$M/bunny.obj" --dx 0.005 --out "$M/bunny_hex.vtk" --overwrite
"$B" mesh voxelize "$M/bunny.obj" --dx 0.0065 --tet --out "$M/bunny_tet.vtk" --overwrite
# Coarse versions for the contact inverse scenes (initial_state_bunny, torus_locomotion).
"$B" mesh voxelize "$M/bunny.obj" --dx 0.0125 --out "$M/bunny_hex_coarse.vtk" --overwrite
"$B" mesh voxelize "$M/torus.obj" --dx 0.02 --out "$M/torus_hex_coarse.vtk" --overwrite

# Stanford Armadillo (CC0 as distributed in CGAL's demo data, Debian package libcgal-demo
# 5.5.1-2): quadric-decimated to 30 % of its triangles (scripts/armadillo_decimate.py, needs
# pip's numpy + fast-simplification 0.2.0), tetrahedralized by TetGen 1.5.0 (Debian package
# tetgen: -p PLC, -q1.6 radius-edge bound, -Y keep the surface, -a8e-9 max volume in m^3),
# then converted by diffphd. Without apt-get/tetgen/python the committed mesh is reused.
if command -v apt-get >/dev/null && command -v tetgen >/dev/null && python3 -c "import fast_simplification" 2>/dev/null; then
  at=$(mktemp -d)
  (cd "$at" && apt-get download -q libcgal-demo=5.5.1-2 >/dev/null && dpkg -x libcgal-demo_5.5.1-2_all.deb pkg \
    && tar xzf pkg/usr/share/doc/libcgal-dev/data.tar.gz data/meshes/armadillo.off)
  python3 scripts/armadillo_decimate.py "$at/data/meshes/armadillo.off" "$at/armadillo.off" 0.7
  tetgen -pq1.6Ya8e-9Q "$at/armadillo.off"
  "$B" mesh convert "$at/armadillo.1.node" "$M/armadillo_tet.vtk" --overwrite
  rm -rf "$at"
else
  echo "apt-get, tetgen or python3 fast_simplification missing: reusing the committed $M/armadillo_tet.vtk" >&2
fi

for f in "$M"/*.vtk; do "$B" mesh check "$f"; done
du -ch "$M"/* | tail -1
