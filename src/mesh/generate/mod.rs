//! Procedural box meshes on a regular grid of cubic cells.
//!
//! Both generators number the grid nodes the same way: node `(i, j, k)` (with
//! `0 <= i <= nx`, `0 <= j <= ny`, `0 <= k <= nz`) has index `i + (nx+1)*(j + (ny+1)*k)` and
//! position `origin + dx*(i, j, k)`. Cells are visited x fastest, then y, then z.

pub mod crab;
pub mod shapes;
pub mod solids;
pub mod voxelize;

use crate::mesh::{ElementKind, Mesh, MeshError};

/// Largest number of grid cells (cubes) a generated box may have: 10 million, i.e. 10 M hexes
/// or 60 M tets, several GB of model before any solve. A scene's `cells` is checked against it
/// ([`box_cell_count`]) before anything is allocated.
pub const MAX_BOX_CELLS: usize = 10_000_000;

/// The number of cubes `nx * ny * nz` of a box of `cells`, computed without overflow; an error
/// for a zero count or more than [`MAX_BOX_CELLS`] cubes.
pub fn box_cell_count(cells: [usize; 3]) -> Result<usize, MeshError> {
    if cells.contains(&0) {
        return Err(MeshError::Invalid(format!(
            "{cells:?}: every cell count must be >= 1"
        )));
    }
    let total = cells
        .iter()
        .try_fold(1usize, |acc, &c| acc.checked_mul(c))
        .filter(|&t| t <= MAX_BOX_CELLS);
    total.ok_or_else(|| {
        let exact = cells.iter().map(|&c| c as f64).product::<f64>();
        MeshError::Invalid(format!(
            "{cells:?} asks for {exact:.3e} grid cells; a generated box has at most {MAX_BOX_CELLS}"
        ))
    })
}

/// [`box_hex`] or [`box_tet`], after checking `cells` with [`box_cell_count`].
pub fn try_box(
    cells: [usize; 3],
    dx: f64,
    origin: [f64; 3],
    kind: ElementKind,
) -> Result<Mesh, MeshError> {
    box_cell_count(cells)?;
    Ok(match kind {
        ElementKind::Hex8 => box_hex(cells, dx, origin),
        ElementKind::Tet4 => box_tet(cells, dx, origin),
    })
}

/// Positively oriented Kuhn (Freudenthal) tetrahedra of the unit cube, as lexicographic
/// corner indices (corner `a` at `(a & 1, (a >> 1) & 1, (a >> 2) & 1)`). All six share the
/// main diagonal from corner 0 to corner 7; each follows one monotone lattice path
/// 0 → e_p → e_p + e_q → 7, with the two middle vertices swapped for odd permutations so that
/// every tet has `det[X1-X0, X2-X0, X3-X0] > 0`. Because every cube is split along the same
/// diagonal direction, each cube face is cut along the diagonal through its lowest corner in
/// both neighbouring cubes, so the resulting mesh is conforming.
pub const KUHN_TETS: [[usize; 4]; 6] = [
    [0, 1, 3, 7], // x, y, z
    [0, 2, 6, 7], // y, z, x
    [0, 4, 5, 7], // z, x, y
    [0, 5, 1, 7], // x, z, y (odd, swapped)
    [0, 6, 4, 7], // z, y, x (odd, swapped)
    [0, 3, 2, 7], // y, x, z (odd, swapped)
];

/// Grid nodes and the 8 lexicographic corner indices of every cell (cells x fastest).
/// A box with a zero cell count in any direction has no cells and no nodes.
fn grid(cells: [usize; 3], dx: f64, origin: [f64; 3]) -> (Vec<[f64; 3]>, Vec<[usize; 8]>) {
    let [nx, ny, nz] = cells;
    if nx == 0 || ny == 0 || nz == 0 {
        return (Vec::new(), Vec::new());
    }
    let (px, py) = (nx + 1, ny + 1);
    let mut nodes = Vec::with_capacity(px * py * (nz + 1));
    for k in 0..=nz {
        for j in 0..=ny {
            for i in 0..=nx {
                nodes.push([
                    origin[0] + dx * i as f64,
                    origin[1] + dx * j as f64,
                    origin[2] + dx * k as f64,
                ]);
            }
        }
    }
    let id = |i: usize, j: usize, k: usize| i + px * (j + py * k);
    let mut cubes = Vec::with_capacity(nx * ny * nz);
    for k in 0..nz {
        for j in 0..ny {
            for i in 0..nx {
                let mut c = [0usize; 8];
                for (a, slot) in c.iter_mut().enumerate() {
                    *slot = id(i + (a & 1), j + ((a >> 1) & 1), k + ((a >> 2) & 1));
                }
                cubes.push(c);
            }
        }
    }
    (nodes, cubes)
}

/// Regular hexahedral (voxel) grid of `cells[0] x cells[1] x cells[2]` cubes of edge `dx`
/// with its minimum corner at `origin` (check untrusted `cells` with [`box_cell_count`] or
/// call [`try_box`]: the grid is allocated as asked). Elements are `Hex8` in lexicographic local order
/// (positive Jacobian for `dx > 0`); all tags are 0. See the module docs for node numbering.
pub fn box_hex(cells: [usize; 3], dx: f64, origin: [f64; 3]) -> Mesh {
    let (nodes, cubes) = grid(cells, dx, origin);
    let elements = cubes.iter().flat_map(|c| c.iter().copied()).collect();
    Mesh {
        kind: ElementKind::Hex8,
        nodes,
        tags: vec![0; cubes.len()],
        elements,
    }
}

/// Same grid as [`box_hex`], with every cube split into the six Kuhn tetrahedra of
/// [`KUHN_TETS`] (element `6*c + t` is tet `t` of cube `c`). The mesh is conforming and every
/// tet is positively oriented for `dx > 0`; each has volume `dx³/6`. All tags are 0.
pub fn box_tet(cells: [usize; 3], dx: f64, origin: [f64; 3]) -> Mesh {
    let (nodes, cubes) = grid(cells, dx, origin);
    let mut elements = Vec::with_capacity(cubes.len() * 24);
    for c in &cubes {
        for t in &KUHN_TETS {
            elements.extend(t.iter().map(|&a| c[a]));
        }
    }
    Mesh {
        kind: ElementKind::Tet4,
        nodes,
        tags: vec![0; cubes.len() * 6],
        elements,
    }
}

/// Voxelized ball: the cells of a regular grid of edge `dx` (centred on `center`, with
/// $\lceil 2r/dx\rceil$ cells per axis) whose centres lie inside the sphere of radius `radius`,
/// as `Hex8` elements, or split into Kuhn tetrahedra for `Tet4` (conforming, as in
/// [`box_tet`]). Unused grid nodes are dropped; nodes keep the grid order (x fastest).
pub fn voxel_sphere(radius: f64, dx: f64, center: [f64; 3], kind: ElementKind) -> Mesh {
    let n = ((2.0 * radius / dx).ceil() as usize).max(1);
    let half = 0.5 * n as f64 * dx;
    let origin = [center[0] - half, center[1] - half, center[2] - half];
    let (nodes, cubes) = grid([n, n, n], dx, origin);
    let r2 = radius * radius;
    let keep: Vec<&[usize; 8]> = cubes
        .iter()
        .filter(|c| {
            let (a, b) = (nodes[c[0]], nodes[c[7]]);
            (0..3)
                .map(|d| (0.5 * (a[d] + b[d]) - center[d]).powi(2))
                .sum::<f64>()
                <= r2
        })
        .collect();
    let mut map = vec![usize::MAX; nodes.len()];
    for c in &keep {
        for &i in c.iter() {
            map[i] = 0;
        }
    }
    let mut out_nodes = Vec::new();
    for (i, m) in map.iter_mut().enumerate() {
        if *m == 0 {
            *m = out_nodes.len();
            out_nodes.push(nodes[i]);
        }
    }
    let (elements, ne): (Vec<usize>, usize) = match kind {
        ElementKind::Hex8 => (
            keep.iter()
                .flat_map(|c| c.iter().map(|&i| map[i]))
                .collect(),
            keep.len(),
        ),
        ElementKind::Tet4 => (
            keep.iter()
                .flat_map(|c| {
                    KUHN_TETS
                        .iter()
                        .flat_map(move |t| t.iter().map(move |&a| c[a]))
                })
                .map(|i| map[i])
                .collect(),
            6 * keep.len(),
        ),
    };
    Mesh {
        kind,
        nodes: out_nodes,
        elements,
        tags: vec![0; ne],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (#18): `cells = [1000000, 1000000, 1000000]` panicked with "capacity
    /// overflow"; the count is now checked, overflow included, before allocating.
    #[test]
    fn absurd_cell_counts_are_refused_before_allocating() {
        assert_eq!(box_cell_count([2, 3, 4]).expect("small"), 24);
        for cells in [
            [1_000_000, 1_000_000, 1_000_000],
            [usize::MAX, 2, 1],
            [MAX_BOX_CELLS + 1, 1, 1],
            [0, 1, 1],
        ] {
            let e = box_cell_count(cells).unwrap_err();
            assert!(e.to_string().contains(&format!("{cells:?}")), "{e}");
            assert!(try_box(cells, 1.0, [0.0; 3], ElementKind::Tet4).is_err());
        }
        let m = try_box([1, 1, 2], 0.5, [0.0; 3], ElementKind::Hex8).expect("box");
        assert_eq!(m, box_hex([1, 1, 2], 0.5, [0.0; 3]));
    }
    use crate::mesh::validate::element_volume;
    use std::collections::HashMap;

    #[test]
    fn hex_counts_numbering_and_volume() {
        let m = box_hex([3, 2, 4], 0.5, [1.0, -2.0, 0.25]);
        assert_eq!(m.kind, ElementKind::Hex8);
        assert_eq!(m.num_nodes(), 4 * 3 * 5);
        assert_eq!(m.num_elements(), 24);
        assert_eq!(m.tags.len(), 24);
        // node (i,j,k) = (2,1,3)
        let n = 2 + 4 * (1 + 3 * 3);
        assert_eq!(m.nodes[n], [2.0, -1.5, 1.75]);
        // element (1,0,0) is the second one; its corner a sits at (1 + a&1, ...)
        let e = m.element(1);
        for (a, &node) in e.iter().enumerate() {
            let p = m.nodes[node];
            let want = [
                1.0 + 0.5 * (1 + (a & 1)) as f64,
                -2.0 + 0.5 * ((a >> 1) & 1) as f64,
                0.25 + 0.5 * ((a >> 2) & 1) as f64,
            ];
            assert_eq!(p, want);
        }
        let vol: f64 = (0..m.num_elements()).map(|e| element_volume(&m, e)).sum();
        assert!((vol - 1.5 * 1.0 * 2.0).abs() < 1e-12, "{vol}");
        let (lo, hi) = m.bounding_box();
        assert_eq!(lo, [1.0, -2.0, 0.25]);
        assert_eq!(hi, [2.5, -1.0, 2.25]);
    }

    #[test]
    fn kuhn_tets_positive_and_fill_cube() {
        let m = box_tet([1, 1, 1], 1.0, [0.0; 3]);
        assert_eq!(m.num_elements(), 6);
        for e in 0..6 {
            let v = element_volume(&m, e);
            assert!((v - 1.0 / 6.0).abs() < 1e-14, "tet {e}: {v}");
        }
    }

    #[test]
    fn tet_counts_volume_orientation() {
        let m = box_tet([2, 3, 4], 0.25, [0.0, 1.0, 2.0]);
        assert_eq!(m.kind, ElementKind::Tet4);
        assert_eq!(m.num_nodes(), 3 * 4 * 5);
        assert_eq!(m.num_elements(), 6 * 24);
        assert_eq!(m.tags.len(), 6 * 24);
        let hex = box_hex([2, 3, 4], 0.25, [0.0, 1.0, 2.0]);
        assert_eq!(m.nodes, hex.nodes);
        let mut vol = 0.0;
        for e in 0..m.num_elements() {
            let v = element_volume(&m, e);
            assert!(v > 0.0, "tet {e} not positively oriented");
            vol += v;
        }
        let want = 0.5 * 0.75 * 1.0;
        assert!((vol - want).abs() < 1e-12, "{vol} vs {want}");
    }

    #[test]
    fn tet_mesh_is_conforming() {
        let cells = [3, 2, 2];
        let m = box_tet(cells, 1.0, [0.0; 3]);
        let mut count: HashMap<[usize; 3], usize> = HashMap::new();
        for e in 0..m.num_elements() {
            let t = m.element(e);
            for skip in 0..4 {
                let mut f = [0usize; 3];
                let mut n = 0;
                for (l, &v) in t.iter().enumerate() {
                    if l != skip {
                        f[n] = v;
                        n += 1;
                    }
                }
                f.sort_unstable();
                *count.entry(f).or_default() += 1;
            }
        }
        let on_boundary = |f: &[usize; 3]| {
            (0..3).any(|d| {
                let c = |v: usize| m.nodes[v][d];
                let hi = cells[d] as f64;
                (c(f[0]) == 0.0 && c(f[1]) == 0.0 && c(f[2]) == 0.0)
                    || (c(f[0]) == hi && c(f[1]) == hi && c(f[2]) == hi)
            })
        };
        let [nx, ny, nz] = cells;
        let mut boundary = 0;
        for (f, &c) in &count {
            if on_boundary(f) {
                assert_eq!(c, 1, "boundary face {f:?}");
                boundary += 1;
            } else {
                assert_eq!(c, 2, "interior face {f:?} shared by {c} tets");
            }
        }
        assert_eq!(boundary, 4 * (nx * ny + ny * nz + nx * nz));
        // Euler-type count check: 4 faces per tet = 2*interior + boundary.
        assert_eq!(
            4 * m.num_elements(),
            2 * (count.len() - boundary) + boundary
        );
    }

    #[test]
    fn empty_box() {
        let m = box_tet([0, 2, 2], 1.0, [0.0; 3]);
        assert_eq!(m.num_nodes(), 0);
        assert_eq!(m.num_elements(), 0);
        let m = box_hex([2, 2, 0], 1.0, [0.0; 3]);
        assert_eq!(m.num_elements(), 0);
        assert!(m.tags.is_empty());
    }

    #[test]
    fn voxel_sphere_counts_and_volume() {
        // DiffPD's bouncing-ball size: about 1288 hexes
        let m = voxel_sphere(0.084375, 0.0125, [0.0, 0.0, 0.1], ElementKind::Hex8);
        let ne = m.num_elements();
        assert!((1200..1400).contains(&ne), "{ne} hexes");
        let vol: f64 = (0..ne).map(|e| element_volume(&m, e)).sum();
        let exact = 4.0 / 3.0 * std::f64::consts::PI * 0.084375f64.powi(3);
        assert!((vol / exact - 1.0).abs() < 0.05, "volume {vol} vs {exact}");
        let t = voxel_sphere(0.05, 0.02, [0.0; 3], ElementKind::Tet4);
        assert_eq!(t.num_elements() % 6, 0);
        assert!((0..t.num_elements()).all(|e| element_volume(&t, e) > 0.0));
        // every node is used
        let mut used = vec![false; m.num_nodes()];
        m.elements.iter().for_each(|&i| used[i] = true);
        assert!(used.iter().all(|&u| u));
    }
}
