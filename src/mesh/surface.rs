//! Boundary surface extraction.
//!
//! A face is on the boundary when exactly one element has it (faces are matched by their node
//! set, so faces shared by more than two elements — a non-manifold mesh — are not reported).
//! Boundary triangles are oriented so that the right-hand rule gives the outward normal,
//! assuming the mesh follows the orientation conventions of [`crate::mesh`] (run
//! [`crate::mesh::validate::validate_and_fix`] first). Hex quads are split into two triangles
//! along the diagonal through their smallest node index, so the split is deterministic.

use super::{ElementKind, Mesh};
use std::collections::HashMap;

/// Outward faces of a positively oriented tet (local indices, counter-clockwise seen from
/// outside).
pub const TET_FACES: [[usize; 3]; 4] = [[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]];

/// Outward faces of a lexicographic hex (local indices, counter-clockwise seen from outside):
/// x = 0, x = 1, y = 0, y = 1, z = 0, z = 1.
pub const HEX_FACES: [[usize; 4]; 6] = [
    [0, 4, 6, 2],
    [1, 3, 7, 5],
    [0, 1, 5, 4],
    [2, 6, 7, 3],
    [0, 2, 3, 1],
    [4, 5, 7, 6],
];

fn sorted<const N: usize>(mut f: [usize; N]) -> [usize; N] {
    f.sort_unstable();
    f
}

/// Boundary faces of element faces of type `[usize; N]`, in element order then local face
/// order.
fn unshared<const N: usize>(mesh: &Mesh, local: &[[usize; N]]) -> Vec<[usize; N]> {
    let ne = mesh.num_elements();
    let global = |e: usize, f: &[usize; N]| {
        let el = mesh.element(e);
        f.map(|a| el[a])
    };
    let mut count: HashMap<[usize; N], u32> = HashMap::with_capacity(ne * local.len());
    for e in 0..ne {
        for f in local {
            *count.entry(sorted(global(e, f))).or_insert(0) += 1;
        }
    }
    let mut out = Vec::new();
    for e in 0..ne {
        for f in local {
            let g = global(e, f);
            if count.get(&sorted(g)) == Some(&1) {
                out.push(g);
            }
        }
    }
    out
}

/// Boundary triangles with outward normals (right-hand rule). Tet meshes give one triangle per
/// boundary face; hex meshes give two per boundary quad `(a, b, c, d)` (rotated so `a` is its
/// smallest node): `(a, b, c)` and `(a, c, d)`. Order: by element, then local face.
pub fn boundary_faces(mesh: &Mesh) -> Vec<[usize; 3]> {
    match mesh.kind {
        ElementKind::Tet4 => unshared(mesh, &TET_FACES),
        ElementKind::Hex8 => {
            let quads = unshared(mesh, &HEX_FACES);
            let mut out = Vec::with_capacity(2 * quads.len());
            for mut q in quads {
                let min = (0..4).min_by_key(|&i| q[i]).unwrap_or(0);
                q.rotate_left(min);
                out.push([q[0], q[1], q[2]]);
                out.push([q[0], q[2], q[3]]);
            }
            out
        }
    }
}

/// Sorted, unique node indices of [`boundary_faces`].
pub fn boundary_nodes(mesh: &Mesh) -> Vec<usize> {
    let mut nodes: Vec<usize> = boundary_faces(mesh).into_iter().flatten().collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::generate::{box_hex, box_tet};

    fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
        [
            a[1] * b[2] - a[2] * b[1],
            a[2] * b[0] - a[0] * b[2],
            a[0] * b[1] - a[1] * b[0],
        ]
    }

    /// (area, divergence-theorem volume) of a triangle set.
    fn area_and_volume(mesh: &Mesh, faces: &[[usize; 3]]) -> (f64, f64) {
        let mut area = 0.0;
        let mut vol = 0.0;
        for f in faces {
            let [a, b, c] = f.map(|i| mesh.nodes[i]);
            let n2 = cross(
                [b[0] - a[0], b[1] - a[1], b[2] - a[2]],
                [c[0] - a[0], c[1] - a[1], c[2] - a[2]],
            ); // normal * 2 * area
            area += 0.5 * (n2[0] * n2[0] + n2[1] * n2[1] + n2[2] * n2[2]).sqrt();
            let cen = [0, 1, 2].map(|d| (a[d] + b[d] + c[d]) / 3.0);
            vol += (cen[0] * n2[0] + cen[1] * n2[1] + cen[2] * n2[2]) * 0.5 / 3.0;
        }
        (area, vol)
    }

    #[test]
    fn box_surfaces_area_and_divergence() {
        let cells = [3, 2, 4];
        let dx = 0.5;
        let origin = [0.3, -1.0, 2.0]; // off-origin so the divergence check is non-trivial
        let (lx, ly, lz) = (1.5, 1.0, 2.0);
        let want_area = 2.0 * (lx * ly + ly * lz + lx * lz);
        let want_vol = lx * ly * lz;
        let quads = 2 * (3 * 2 + 2 * 4 + 3 * 4);
        for m in [box_hex(cells, dx, origin), box_tet(cells, dx, origin)] {
            let faces = boundary_faces(&m);
            assert_eq!(faces.len(), 2 * quads, "{}", m.kind);
            let (area, vol) = area_and_volume(&m, &faces);
            assert!((area - want_area).abs() < 1e-12, "{}: area {area}", m.kind);
            assert!((vol - want_vol).abs() < 1e-12, "{}: volume {vol}", m.kind);
            // Every face is outward: its normal points away from the box centre.
            for f in &faces {
                let [a, b, c] = f.map(|i| m.nodes[i]);
                let n = cross(
                    [b[0] - a[0], b[1] - a[1], b[2] - a[2]],
                    [c[0] - a[0], c[1] - a[1], c[2] - a[2]],
                );
                let centre = [
                    origin[0] + lx / 2.0,
                    origin[1] + ly / 2.0,
                    origin[2] + lz / 2.0,
                ];
                let out = (0..3).map(|d| n[d] * (a[d] - centre[d])).sum::<f64>();
                assert!(out > 0.0, "{}: inward face {f:?}", m.kind);
            }
            let nodes = boundary_nodes(&m);
            let interior = (cells[0] - 1) * (cells[1] - 1) * (cells[2] - 1);
            assert_eq!(nodes.len(), m.num_nodes() - interior);
            assert!(nodes.windows(2).all(|w| w[0] < w[1]));
            // Interior node (1,1,1) is absent.
            assert!(nodes.binary_search(&(1 + 4 * (1 + 3))).is_err());
        }
    }

    #[test]
    fn single_tet_has_four_outward_faces() {
        // An irregular, positively oriented tet.
        let m = Mesh {
            kind: ElementKind::Tet4,
            nodes: vec![
                [0.1, 0.0, 0.2],
                [1.0, 0.1, 0.0],
                [0.2, 1.3, 0.1],
                [0.0, 0.3, 0.9],
            ],
            elements: vec![0, 1, 2, 3],
            tags: vec![0],
        };
        assert!(crate::mesh::validate::element_volume(&m, 0) > 0.0);
        let faces = boundary_faces(&m);
        assert_eq!(faces.len(), 4);
        let c = m.centroid(0);
        for f in &faces {
            let [a, b, d] = f.map(|i| m.nodes[i]);
            let n = cross(
                [b[0] - a[0], b[1] - a[1], b[2] - a[2]],
                [d[0] - a[0], d[1] - a[1], d[2] - a[2]],
            );
            let out: f64 = (0..3).map(|k| n[k] * (a[k] - c[k])).sum();
            assert!(out > 0.0, "face {f:?} points inward");
        }
        let (_, vol) = area_and_volume(&m, &faces);
        let v = crate::mesh::validate::element_volume(&m, 0);
        assert!((vol - v).abs() < 1e-14);
        assert_eq!(boundary_nodes(&m), vec![0, 1, 2, 3]);
    }

    #[test]
    fn single_hex_faces() {
        let m = box_hex([1, 1, 1], 2.0, [0.0; 3]);
        let faces = boundary_faces(&m);
        assert_eq!(faces.len(), 12);
        let (area, vol) = area_and_volume(&m, &faces);
        assert!((area - 24.0).abs() < 1e-12);
        assert!((vol - 8.0).abs() < 1e-12);
        assert_eq!(boundary_nodes(&m), (0..8).collect::<Vec<_>>());
    }
}
