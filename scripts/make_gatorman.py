#!/usr/bin/env python3
"""Gatorman-class character mesh (issue 38 item 3): a voxelized Armadillo holding a sword.

Reads the hex8 VTK that `diffphd mesh voxelize` writes for the Armadillo surface of
`../shared/anchor-meshes/armadillo_low_res.obj` (metres, z up, arms raised; the right hand
is the voxel column of largest x near z = 0.12 m), and adds a sword on the same voxel grid:
a straight bar of cells leaving the right hand along +x, LENGTH long, with a cross-section
of SECTION_Y x SECTION_Z (rounded to whole cells, at least one), face-attached to the hand's
outermost voxels. Sword cells get tag 1, the body keeps tag 0 (select the sword with
`select = { tag = 1 }`). Writes a legacy ASCII VTK with a `tag` cell array.

    diffphd mesh voxelize armadillo_low_res.obj --dx 0.01 --out arm.vtk
    scripts/make_gatorman.py arm.vtk meshes/gatorman_ci.vtk --length 0.08

Only the standard library is used.
"""

import argparse


def read_vtk(path):
    lines = open(path).read().split("\n")
    i = next(k for k, l in enumerate(lines) if l.startswith("POINTS"))
    n = int(lines[i].split()[1])
    pts = [tuple(map(float, lines[i + 1 + k].split())) for k in range(n)]
    j = next(k for k, l in enumerate(lines) if l.startswith("CELLS"))
    m = int(lines[j].split()[1])
    cells = [list(map(int, lines[j + 1 + k].split()[1:])) for k in range(m)]
    return pts, cells


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("voxels")
    ap.add_argument("out")
    ap.add_argument("--length", type=float, default=0.08)
    ap.add_argument("--section-y", type=float, default=0.0)
    ap.add_argument("--section-z", type=float, default=0.0)
    a = ap.parse_args()
    pts, cells = read_vtk(a.voxels)
    # grid: dx from the first hex's x extent, origin from the minimum corner
    xs = sorted({p[0] for p in pts})
    dx = min(b - a_ for a_, b in zip(xs, xs[1:]) if b - a_ > 1e-9)
    org = [min(p[d] for p in pts) for d in range(3)]

    def ijk(p):
        return tuple(round((p[d] - org[d]) / dx) for d in range(3))

    node = {ijk(p): i for i, p in enumerate(pts)}
    cell_ijk = [min(ijk(pts[v]) for v in c) for c in cells]
    occupied = set(cell_ijk)
    # right hand: the cells of largest i among those above 80 % of the height
    top = max(c[2] for c in cell_ijk)
    upper = [c for c in cell_ijk if c[2] >= 0.8 * top]
    imax = max(c[0] for c in upper)
    hand = sorted(c for c in upper if c[0] == imax)
    j0, k0 = hand[len(hand) // 2][1], hand[len(hand) // 2][2]
    ny = max(1, round(a.section_y / dx))
    nz = max(1, round(a.section_z / dx))
    nl = max(1, round(a.length / dx))
    sword = []
    for di in range(1, nl + 1):
        for dj in range(ny):
            for dk in range(nz):
                c = (imax + di, j0 + dj - ny // 2, k0 + dk - nz // 2)
                if c not in occupied:
                    sword.append(c)
    # the sword's first layer must touch the hand through a face
    assert any((imax, c[1], c[2]) in occupied for c in sword if c[0] == imax + 1), "sword not attached"
    out_cells = [list(c) for c in cells]
    tags = [0] * len(cells)
    for c in sword:
        corners = []
        for a_ in range(8):
            g = (c[0] + (a_ & 1), c[1] + ((a_ >> 1) & 1), c[2] + ((a_ >> 2) & 1))
            if g not in node:
                node[g] = len(pts)
                pts.append(tuple(org[d] + dx * g[d] for d in range(3)))
            corners.append(node[g])
        # lexicographic (bit) order -> VTK hexahedron order
        lex = corners
        out_cells.append([lex[0], lex[1], lex[3], lex[2], lex[4], lex[5], lex[7], lex[6]])
        tags.append(1)
    with open(a.out, "w") as f:
        f.write("# vtk DataFile Version 3.0\n")
        f.write(f"gatorman-class character: voxel Armadillo (dx {dx:g} m) + sword of {len(sword)} cells (tag 1)\n")
        f.write("ASCII\nDATASET UNSTRUCTURED_GRID\n")
        f.write(f"POINTS {len(pts)} double\n")
        for p in pts:
            f.write(f"{p[0]!r} {p[1]!r} {p[2]!r}\n")
        f.write(f"CELLS {len(out_cells)} {9 * len(out_cells)}\n")
        for c in out_cells:
            f.write("8 " + " ".join(map(str, c)) + "\n")
        f.write(f"CELL_TYPES {len(out_cells)}\n")
        f.write("12\n" * len(out_cells))
        f.write(f"CELL_DATA {len(out_cells)}\nSCALARS tag int 1\nLOOKUP_TABLE default\n")
        f.write("\n".join(map(str, tags)) + "\n")
    print(f"{a.out}: {len(cells)} body + {len(sword)} sword hex8, {len(pts)} nodes, dx {dx:g}; "
          f"hand cell {hand[len(hand) // 2]}, sword tip x = {org[0] + dx * (imax + nl + 1):.4f} m")


main()
