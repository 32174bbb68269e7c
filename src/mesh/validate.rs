//! Mesh validation: element volumes, orientation repair and rejection of unusable meshes.
//!
//! [`validate_and_fix`] is meant to run once on every mesh that enters the simulator (read from
//! a file or built by hand). It either returns a [`MeshReport`] for a mesh that satisfies the
//! conventions of [`crate::mesh`] (positive tets, hexes with positive Jacobian at every corner,
//! finite coordinates, every node used) or an error naming the offending element or node. On
//! error the mesh is left unchanged.

use super::check::duplicate_element;
use super::{ElementKind, Mesh, MeshError};

/// Summary of a successful [`validate_and_fix`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MeshReport {
    /// Elements whose node order was repaired, ascending. Tets with negative orientation had
    /// their local nodes 2 and 3 swapped; hexes whose 8 corner Jacobian determinants were all
    /// negative (a mirrored node order) had local nodes swapped pairwise along the reference x
    /// axis (`a <-> a ^ 1`).
    pub flipped: Vec<usize>,
    /// Number of nodes removed. Always 0: `validate_and_fix` never removes nodes (unreferenced
    /// nodes are an error); call [`remove_unreferenced_nodes`] explicitly if that is wanted.
    pub removed_nodes: usize,
    /// Node and element counts of the validated mesh.
    pub num_nodes: usize,
    pub num_elements: usize,
    /// Sum of element volumes (after repair, so all positive).
    pub total_volume: f64,
    /// Smallest and largest element volume (after repair).
    pub min_volume: f64,
    pub max_volume: f64,
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

/// `det[a, b, c]` with `a, b, c` as columns.
fn det3(a: [f64; 3], b: [f64; 3], c: [f64; 3]) -> f64 {
    a[0] * (b[1] * c[2] - b[2] * c[1]) - b[0] * (a[1] * c[2] - a[2] * c[1])
        + c[0] * (a[1] * b[2] - a[2] * b[1])
}

/// Signed volume of the tetrahedron `x0..x3`: `det[x1-x0, x2-x0, x3-x0] / 6`.
pub fn tet_volume(x: [[f64; 3]; 4]) -> f64 {
    det3(sub(x[1], x[0]), sub(x[2], x[0]), sub(x[3], x[0])) / 6.0
}

/// Jacobian determinants of the trilinear map of a lexicographic hex at its 8 corners, for the
/// reference cube `[0,1]³` (so a unit cube has determinant 1 everywhere).
pub fn hex_corner_dets(x: &[[f64; 3]; 8]) -> [f64; 8] {
    let mut out = [0.0; 8];
    for (a, d) in out.iter_mut().enumerate() {
        // The trilinear map is linear along each edge, so the derivative along reference axis
        // `k` at a corner is the edge vector between the corners differing in bit `k`.
        let edge = |bit: usize| sub(x[a | bit], x[a & !bit]);
        *d = det3(edge(1), edge(2), edge(4));
    }
    out
}

/// Signed volume of a lexicographic hex: the 2x2x2 Gauss rule applied to `det J`, which is
/// exact for trilinear elements (det J has degree ≤ 2 in each reference coordinate).
pub fn hex_volume(x: &[[f64; 3]; 8]) -> f64 {
    let g = 0.5 / 3f64.sqrt();
    let pts = [0.5 - g, 0.5 + g];
    let mut vol = 0.0;
    for &w in &pts {
        for &v in &pts {
            for &u in &pts {
                let xi = [u, v, w];
                let mut jac = [[0.0; 3]; 3]; // jac[k] = dX/dxi_k
                for (a, p) in x.iter().enumerate() {
                    for (k, col) in jac.iter_mut().enumerate() {
                        let mut dn = 1.0;
                        for (m, &s) in xi.iter().enumerate() {
                            let bit = (a >> m) & 1;
                            dn *= if m == k {
                                if bit == 1 {
                                    1.0
                                } else {
                                    -1.0
                                }
                            } else if bit == 1 {
                                s
                            } else {
                                1.0 - s
                            };
                        }
                        for d in 0..3 {
                            col[d] += dn * p[d];
                        }
                    }
                }
                vol += det3(jac[0], jac[1], jac[2]) / 8.0;
            }
        }
    }
    vol
}

fn tet_nodes(mesh: &Mesh, e: usize) -> [[f64; 3]; 4] {
    let el = mesh.element(e);
    [
        mesh.nodes[el[0]],
        mesh.nodes[el[1]],
        mesh.nodes[el[2]],
        mesh.nodes[el[3]],
    ]
}

fn hex_nodes(mesh: &Mesh, e: usize) -> [[f64; 3]; 8] {
    let mut x = [[0.0; 3]; 8];
    for (p, &n) in x.iter_mut().zip(mesh.element(e)) {
        *p = mesh.nodes[n];
    }
    x
}

/// Signed volume of element `e`: `det[X1-X0, X2-X0, X3-X0]/6` for tets; for hexes the 2x2x2
/// Gauss integral of the Jacobian determinant (negative for a mirrored hex).
///
/// Panics if `e` or one of its node indices is out of range (validate the mesh first).
pub fn element_volume(mesh: &Mesh, e: usize) -> f64 {
    match mesh.kind {
        ElementKind::Tet4 => tet_volume(tet_nodes(mesh, e)),
        ElementKind::Hex8 => hex_volume(&hex_nodes(mesh, e)),
    }
}

/// Mirror permutation of a lexicographic hex: swap corners along reference x (`a <-> a ^ 1`).
const HEX_MIRROR: [usize; 8] = [1, 0, 3, 2, 5, 4, 7, 6];

/// Checks a mesh and repairs what is unambiguous. In order:
///
/// 1. structure: connectivity length a multiple of the nodes per element, one tag per
///    element, at least one element, node indices in range ([`MeshError::Invalid`] /
///    [`MeshError::BadElement`]);
/// 2. every coordinate finite ([`MeshError::BadNode`]);
/// 3. no element repeats a node ([`MeshError::BadElement`]);
/// 4. every node referenced by some element ([`MeshError::BadNode`], "node is not referenced
///    by any element"; nodes are never removed silently: drop them explicitly with
///    [`remove_unreferenced_nodes`]), and no two elements on the same node set
///    ([`MeshError::BadElement`]);
/// 5. no degenerate element: `|volume| <= 1e-12 * mean |volume|` is rejected with the volume
///    in the message;
/// 6. orientation: tets with negative volume get local nodes 2 and 3 swapped; hexes must have a
///    positive Jacobian determinant at all 8 corners, except that a hex with all 8 negative
///    (a mirror image of a valid hex) is reordered by `HEX_MIRROR`. Any other hex with a
///    non-positive corner determinant is rejected as inverted.
///
/// Repaired elements are listed in [`MeshReport::flipped`]. The mesh is only modified when the
/// whole check succeeds.
pub fn validate_and_fix(mesh: &mut Mesh) -> Result<MeshReport, MeshError> {
    check_connectivity(mesh)?;
    let nv = mesh.kind.nodes();
    let ne = mesh.num_elements();
    let nn = mesh.num_nodes();
    let vols: Vec<f64> = (0..ne).map(|e| element_volume(mesh, e)).collect();
    let mean_abs = vols.iter().map(|v| v.abs()).sum::<f64>() / ne as f64;
    for (e, &v) in vols.iter().enumerate() {
        if v.abs() <= 1e-12 * mean_abs || !v.is_finite() {
            return Err(MeshError::BadElement {
                element: e,
                msg: format!(
                    "degenerate element: volume {v:.3e} (mean |volume| {mean_abs:.3e}, threshold 1e-12 x mean)"
                ),
            });
        }
    }

    let flipped = to_flip(mesh, &vols)?;

    // All checks passed: apply the repairs.
    for &e in &flipped {
        let el = &mut mesh.elements[e * nv..(e + 1) * nv];
        match mesh.kind {
            ElementKind::Tet4 => el.swap(2, 3),
            ElementKind::Hex8 => {
                let old: Vec<usize> = el.to_vec();
                for (a, slot) in el.iter_mut().enumerate() {
                    *slot = old[HEX_MIRROR[a]];
                }
            }
        }
    }
    let abs: Vec<f64> = vols.iter().map(|v| v.abs()).collect();
    Ok(MeshReport {
        flipped,
        removed_nodes: 0,
        num_nodes: nn,
        num_elements: ne,
        total_volume: abs.iter().sum(),
        min_volume: abs.iter().copied().fold(f64::INFINITY, f64::min),
        max_volume: abs.iter().copied().fold(0.0, f64::max),
    })
}

/// Steps 1-4 of [`validate_and_fix`] and the duplicate-element check: everything that does
/// not look at the geometry.
fn check_connectivity(mesh: &Mesh) -> Result<(), MeshError> {
    let nv = mesh.kind.nodes();
    if !mesh.elements.len().is_multiple_of(nv) {
        return Err(MeshError::Invalid(format!(
            "connectivity has {} indices, not a multiple of {} ({})",
            mesh.elements.len(),
            nv,
            mesh.kind
        )));
    }
    let ne = mesh.num_elements();
    if ne == 0 {
        return Err(MeshError::Invalid("mesh has no elements".into()));
    }
    if mesh.tags.len() != ne {
        return Err(MeshError::Invalid(format!(
            "mesh has {} tags for {} elements",
            mesh.tags.len(),
            ne
        )));
    }
    let nn = mesh.num_nodes();
    for e in 0..ne {
        if let Some(&n) = mesh.element(e).iter().find(|&&n| n >= nn) {
            return Err(MeshError::BadElement {
                element: e,
                msg: format!("node index {n} out of range (mesh has {nn} nodes)"),
            });
        }
    }
    for (i, p) in mesh.nodes.iter().enumerate() {
        if p.iter().any(|c| !c.is_finite()) {
            return Err(MeshError::BadNode {
                node: i,
                msg: format!("non-finite coordinates {p:?}"),
            });
        }
    }
    for e in 0..ne {
        let el = mesh.element(e);
        for (i, &a) in el.iter().enumerate() {
            if el[i + 1..].contains(&a) {
                let v = element_volume(mesh, e);
                return Err(MeshError::BadElement {
                    element: e,
                    msg: format!(
                        "degenerate element: node {a} appears more than once in {el:?} (volume {v:.3e})"
                    ),
                });
            }
        }
    }
    let mut used = vec![false; nn];
    for &n in &mesh.elements {
        used[n] = true;
    }
    if let Some(node) = used.iter().position(|&u| !u) {
        return Err(MeshError::BadNode {
            node,
            msg: "node is not referenced by any element".into(),
        });
    }
    if let Some((a, b)) = duplicate_element(mesh) {
        return Err(MeshError::BadElement {
            element: b,
            msg: format!("same nodes as element {a} (duplicate elements are not allowed)"),
        });
    }
    Ok(())
}

/// Elements to reorient (step 6): negative tets, and mirrored hexes (all 8 corner
/// determinants negative); any other hex with a non-positive corner determinant is an error.
fn to_flip(mesh: &Mesh, vols: &[f64]) -> Result<Vec<usize>, MeshError> {
    let ne = mesh.num_elements();
    let mut flipped = Vec::new();
    match mesh.kind {
        ElementKind::Tet4 => flipped.extend((0..ne).filter(|&e| vols[e] < 0.0)),
        ElementKind::Hex8 => {
            for e in 0..ne {
                let dets = hex_corner_dets(&hex_nodes(mesh, e));
                if dets.iter().all(|&d| d < 0.0) {
                    flipped.push(e);
                    continue;
                }
                let (corner, &det) = dets
                    .iter()
                    .enumerate()
                    .min_by(|a, b| a.1.total_cmp(b.1))
                    .unwrap_or((0, &0.0));
                if det <= 0.0 {
                    return Err(MeshError::BadElement {
                        element: e,
                        msg: format!(
                            "inverted hexahedron (Jacobian det {det:.3e} at corner {corner}, node {})",
                            mesh.element(e)[corner]
                        ),
                    });
                }
            }
        }
    }
    Ok(flipped)
}

/// Explicitly drops nodes that no element references, renumbering the connectivity (node order
/// is otherwise preserved). Returns the number of nodes removed. Element indices out of range
/// are left untouched (and still rejected by [`validate_and_fix`]).
pub fn remove_unreferenced_nodes(mesh: &mut Mesh) -> usize {
    let nn = mesh.nodes.len();
    let mut new_id = vec![usize::MAX; nn];
    for &n in &mesh.elements {
        if n < nn {
            new_id[n] = 0;
        }
    }
    let mut next = 0;
    for id in new_id.iter_mut() {
        if *id == 0 {
            *id = next;
            next += 1;
        }
    }
    if next == nn {
        return 0;
    }
    let mut k = 0;
    mesh.nodes.retain(|_| {
        let keep = new_id[k] != usize::MAX;
        k += 1;
        keep
    });
    for n in &mut mesh.elements {
        if *n < nn {
            *n = new_id[*n];
        }
    }
    nn - next
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::generate::{box_hex, box_tet};

    fn two_tets() -> Mesh {
        Mesh {
            kind: ElementKind::Tet4,
            nodes: vec![
                [0.0, 0.0, 0.0],
                [1.0, 0.0, 0.0],
                [0.0, 1.0, 0.0],
                [0.0, 0.0, 1.0],
                [1.0, 1.0, 1.0],
            ],
            elements: vec![0, 1, 2, 3, 1, 2, 3, 4],
            tags: vec![1, 2],
        }
    }

    fn msg(e: MeshError) -> String {
        e.to_string()
    }

    #[test]
    fn generated_meshes_pass_unchanged() {
        for (mut m, want) in [
            (box_tet([2, 2, 3], 0.1, [0.0; 3]), 0.2 * 0.2 * 0.3),
            (box_hex([2, 3, 1], 0.1, [1.0; 3]), 0.2 * 0.3 * 0.1),
        ] {
            let before = m.clone();
            let r = validate_and_fix(&mut m).expect("valid");
            assert_eq!(m, before);
            assert!(r.flipped.is_empty());
            assert_eq!(r.removed_nodes, 0);
            assert_eq!(r.num_nodes, m.num_nodes());
            assert_eq!(r.num_elements, m.num_elements());
            assert!((r.total_volume - want).abs() < 1e-12, "{}", r.total_volume);
            assert!(r.min_volume > 0.0 && r.min_volume <= r.max_volume);
        }
    }

    #[test]
    fn volumes() {
        let m = two_tets();
        assert!((element_volume(&m, 0) - 1.0 / 6.0).abs() < 1e-15);
        assert!((element_volume(&m, 1) - 1.0 / 3.0).abs() < 1e-15);
        // Non-affine hex: unit cube with corner 7 pulled out to (2,2,2).
        let mut h = box_hex([1, 1, 1], 1.0, [0.0; 3]);
        h.nodes[7] = [2.0, 2.0, 2.0];
        // Exact volume: split the hex into 6 Kuhn tets along 0-7 is not exact for a warped
        // hex; compare against a fine numerical integration instead.
        let x = hex_nodes(&h, 0);
        let n = 40;
        let mut fine = 0.0;
        for k in 0..n {
            for j in 0..n {
                for i in 0..n {
                    let s = |t: usize| (t as f64 + 0.5) / n as f64;
                    let (u, v, w) = (s(i), s(j), s(k));
                    let mut jac = [[0.0; 3]; 3];
                    for (a, p) in x.iter().enumerate() {
                        let b = [(a & 1) as f64, ((a >> 1) & 1) as f64, ((a >> 2) & 1) as f64];
                        let f = |bit: f64, t: f64| if bit == 1.0 { t } else { 1.0 - t };
                        let df = |bit: f64| if bit == 1.0 { 1.0 } else { -1.0 };
                        let g = [
                            df(b[0]) * f(b[1], v) * f(b[2], w),
                            f(b[0], u) * df(b[1]) * f(b[2], w),
                            f(b[0], u) * f(b[1], v) * df(b[2]),
                        ];
                        for kk in 0..3 {
                            for d in 0..3 {
                                jac[kk][d] += g[kk] * p[d];
                            }
                        }
                    }
                    fine += det3(jac[0], jac[1], jac[2]);
                }
            }
        }
        fine /= (n * n * n) as f64;
        let v = element_volume(&h, 0);
        assert!((v - fine).abs() < 1e-3, "{v} vs {fine}");
        assert!(v > 1.0);
        let dets = hex_corner_dets(&x);
        assert_eq!(dets[0], 1.0);
        assert!(dets.iter().all(|&d| d > 0.0));
    }

    #[test]
    fn flips_negative_tets() {
        let mut m = two_tets();
        m.elements.swap(5, 6); // element 1 now negatively oriented
        let r = validate_and_fix(&mut m).expect("fixable");
        assert_eq!(r.flipped, vec![1]);
        assert!(element_volume(&m, 1) > 0.0);
        assert!((r.total_volume - 0.5).abs() < 1e-14);
        // Second pass is a no-op.
        assert!(validate_and_fix(&mut m).unwrap().flipped.is_empty());
    }

    #[test]
    fn mirrors_fully_inverted_hex() {
        let mut m = box_hex([2, 1, 1], 1.0, [0.0; 3]);
        // Mirror element 1's ordering along reference y: all corner dets negative.
        let el = m.element(1).to_vec();
        for a in 0..8 {
            m.elements[8 + a] = el[a ^ 2];
        }
        assert!(element_volume(&m, 1) < 0.0);
        let r = validate_and_fix(&mut m).expect("mirror is fixable");
        assert_eq!(r.flipped, vec![1]);
        assert!(hex_corner_dets(&hex_nodes(&m, 1)).iter().all(|&d| d > 0.0));
        assert!((r.total_volume - 2.0).abs() < 1e-12);
    }

    #[test]
    fn rejects_partially_inverted_hex() {
        let mut m = box_hex([3, 1, 1], 1.0, [0.0; 3]);
        // Push node (2,1,1) of element 1 (its local corner 7) far inside past the cell:
        // the corner Jacobian at corner 7 becomes negative while the volume stays positive.
        let n = m.element(1)[7];
        m.nodes[n] = [0.9, 0.1, 0.1];
        let before = m.clone();
        let err = msg(validate_and_fix(&mut m).unwrap_err());
        assert_eq!(m, before, "mesh must be unchanged on error");
        assert!(
            err.starts_with("element 1: inverted hexahedron (Jacobian det -"),
            "{err}"
        );
        assert!(err.contains("at corner 7"), "{err}");
    }

    #[test]
    fn rejects_degenerate_elements() {
        let mut m = two_tets();
        m.nodes.push([0.5, 0.5, 0.0]);
        m.elements.extend([0, 1, 2, 5]); // flat tet, element 2
        m.tags.push(0);
        let err = msg(validate_and_fix(&mut m).unwrap_err());
        assert!(
            err.starts_with("element 2: degenerate element: volume 0.000e0"),
            "{err}"
        );

        let mut m = two_tets();
        m.elements[6] = 1; // element 1 = [1,2,1,4]
        let err = msg(validate_and_fix(&mut m).unwrap_err());
        assert_eq!(
            err,
            "element 1: degenerate element: node 1 appears more than once in [1, 2, 1, 4] (volume 0.000e0)"
        );

        // Two disconnected hexes, the second one a flat sliver of height 1e-14.
        let mut h = box_hex([1, 1, 1], 1.0, [0.0; 3]);
        let mut flat = box_hex([1, 1, 1], 1.0, [2.0, 0.0, 0.0]);
        for p in &mut flat.nodes {
            p[2] *= 1e-14;
        }
        h.elements.extend(flat.elements.iter().map(|n| n + 8));
        h.nodes.extend(flat.nodes);
        h.tags.push(0);
        let err = msg(validate_and_fix(&mut h).unwrap_err());
        assert!(
            err.starts_with("element 1: degenerate element: volume 1.000e-14"),
            "{err}"
        );
    }

    #[test]
    fn rejects_bad_nodes() {
        let mut m = two_tets();
        m.nodes[3][1] = f64::NAN;
        let err = msg(validate_and_fix(&mut m).unwrap_err());
        assert!(err.starts_with("node 3: non-finite coordinates"), "{err}");

        let mut m = two_tets();
        m.nodes[4][2] = f64::INFINITY;
        assert!(matches!(
            validate_and_fix(&mut m),
            Err(MeshError::BadNode { node: 4, .. })
        ));

        let mut m = two_tets();
        m.nodes.insert(2, [5.0, 5.0, 5.0]);
        for n in &mut m.elements {
            if *n >= 2 {
                *n += 1;
            }
        }
        let err = validate_and_fix(&mut m).unwrap_err();
        assert_eq!(msg(err), "node 2: node is not referenced by any element");
        assert_eq!(remove_unreferenced_nodes(&mut m), 1);
        assert_eq!(m.nodes, two_tets().nodes);
        assert_eq!(m.elements, two_tets().elements);
        assert!(validate_and_fix(&mut m).is_ok());
    }

    #[test]
    fn rejects_bad_structure() {
        let mut m = two_tets();
        m.elements[7] = 9;
        let err = msg(validate_and_fix(&mut m).unwrap_err());
        assert_eq!(
            err,
            "element 1: node index 9 out of range (mesh has 5 nodes)"
        );

        let mut m = two_tets();
        m.tags.pop();
        assert!(matches!(
            validate_and_fix(&mut m),
            Err(MeshError::Invalid(_))
        ));

        let mut m = two_tets();
        m.elements.pop();
        assert!(matches!(
            validate_and_fix(&mut m),
            Err(MeshError::Invalid(_))
        ));

        let mut m = two_tets();
        m.elements.clear();
        m.tags.clear();
        assert!(matches!(
            validate_and_fix(&mut m),
            Err(MeshError::Invalid(_))
        ));
    }
}
