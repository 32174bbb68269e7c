//! Mesh summary and quality report ([`mesh_info`]) and the defect list derived from it
//! ([`MeshInfo::defects`]), behind `diffphd mesh info` and `diffphd mesh check`.
//!
//! Quality measures:
//! - tets: dihedral angles. The dihedral angle at an edge is `π - ∠(n_k, n_l)`, where `n_k`,
//!   `n_l` are the outward normals of the two faces that meet there (the faces opposite the
//!   edge's two other vertices). A regular tet has 70.53° everywhere; slivers approach 0° and
//!   180°.
//! - hexes: scaled Jacobian at the 8 corners, `det[e1, e2, e3] / (|e1| |e2| |e3|)` with `e_k`
//!   the edge leaving the corner along reference axis `k` (same edges as
//!   [`hex_corner_dets`]): 1 for a cube, ≤ 0 for an inverted corner.
//!
//! Defects ([`DefectKind`]): structural problems (index out of range, tag count, non-finite
//! coordinate; when present nothing else is computed), inverted elements (tet volume < 0; hex
//! with a corner Jacobian ≤ 0, including mirrored hexes whose 8 corners are all negative),
//! degenerate elements (repeated node, or `|volume| <= 1e-12 × mean |volume|`, the threshold of
//! [`crate::mesh::validate::validate_and_fix`]), unreferenced nodes, faces shared by more than
//! two elements, and elements that repeat the node set of an earlier element. A mesh without
//! defects passes `validate_and_fix` unchanged. Inverted tets and mirrored hexes would be
//! reordered by `validate_and_fix` rather than rejected; they are still listed, because the
//! file does not follow the orientation convention.

use super::check::check_structure;
use super::readers::MeshSource;
use super::surface::{HEX_FACES, TET_FACES};
use super::validate::{element_volume, hex_corner_dets};
use super::{ElementKind, Mesh, MeshFormat};
use std::collections::{BTreeMap, HashMap};

/// Elements and volume of one region tag.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RegionInfo {
    pub tag: i64,
    pub elements: usize,
    pub volume: f64,
}

/// Kind of a mesh defect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DefectKind {
    Structure,
    Inverted,
    Degenerate,
    UnreferencedNode,
    NonManifoldFace,
    DuplicateElement,
}

impl DefectKind {
    /// Snake-case name, as in the JSON report.
    pub fn name(self) -> &'static str {
        match self {
            DefectKind::Structure => "structure",
            DefectKind::Inverted => "inverted",
            DefectKind::Degenerate => "degenerate",
            DefectKind::UnreferencedNode => "unreferenced_node",
            DefectKind::NonManifoldFace => "non_manifold_face",
            DefectKind::DuplicateElement => "duplicate_element",
        }
    }
}

/// One defect: its kind, the element or node it concerns, and a message.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Defect {
    pub kind: DefectKind,
    /// Element index (node index for unreferenced nodes), when there is one.
    pub index: Option<usize>,
    pub message: String,
}

/// Summary and quality report of a mesh. Volumes are signed (see
/// [`crate::mesh::validate::element_volume`]); angles in degrees.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct MeshInfo {
    /// Format the mesh was read from and its node numbering base (see [`MeshSource`]).
    pub format: Option<MeshFormat>,
    pub index_base: Option<usize>,
    pub element: ElementKind,
    pub nodes: usize,
    pub elements: usize,
    /// Axis-aligned bounding box of all nodes.
    pub bbox_min: [f64; 3],
    pub bbox_max: [f64; 3],
    /// Sum of the signed element volumes.
    pub volume: f64,
    pub min_element_volume: f64,
    pub max_element_volume: f64,
    /// Tets only: smallest and largest dihedral angle (degrees) over non-degenerate tets.
    pub min_dihedral_deg: Option<f64>,
    pub max_dihedral_deg: Option<f64>,
    /// Hexes only: smallest corner scaled Jacobian over non-degenerate hexes.
    pub min_scaled_jacobian: Option<f64>,
    /// Faces used by exactly one element.
    pub boundary_faces: usize,
    /// Groups of elements connected through shared nodes.
    pub components: usize,
    /// Region tags in ascending order.
    pub regions: Vec<RegionInfo>,
    pub inverted_elements: usize,
    pub degenerate_elements: usize,
    pub unreferenced_nodes: usize,
    pub non_manifold_faces: usize,
    pub duplicate_elements: usize,
    /// Every defect, in the order: structure, inverted, degenerate, unreferenced nodes,
    /// non-manifold faces, duplicates.
    pub defects: Vec<Defect>,
}

impl MeshInfo {
    /// The defect list (empty for a clean mesh).
    pub fn defects(&self) -> &[Defect] {
        &self.defects
    }
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn norm(a: [f64; 3]) -> f64 {
    dot(a, a).sqrt()
}

/// The six dihedral angles (radians) of a tet, independent of its orientation; `None` when a
/// face has zero area.
pub fn tet_dihedral_angles(x: [[f64; 3]; 4]) -> Option<[f64; 6]> {
    // Outward normal of the face opposite vertex k.
    let mut n = [[0.0; 3]; 4];
    for (k, nk) in n.iter_mut().enumerate() {
        let f: Vec<usize> = (0..4).filter(|&i| i != k).collect();
        let mut v = cross(sub(x[f[1]], x[f[0]]), sub(x[f[2]], x[f[0]]));
        if dot(v, sub(x[k], x[f[0]])) > 0.0 {
            v = v.map(|c| -c);
        }
        let l = norm(v);
        if l == 0.0 || !l.is_finite() {
            return None;
        }
        *nk = v.map(|c| c / l);
    }
    let mut out = [0.0; 6];
    let mut m = 0;
    for k in 0..4 {
        for l in k + 1..4 {
            out[m] = std::f64::consts::PI - dot(n[k], n[l]).clamp(-1.0, 1.0).acos();
            m += 1;
        }
    }
    Some(out)
}

/// Scaled Jacobian at the 8 corners of a lexicographic hex; `None` when an edge has zero
/// length.
pub fn hex_scaled_jacobians(x: &[[f64; 3]; 8]) -> Option<[f64; 8]> {
    let dets = hex_corner_dets(x);
    let mut out = [0.0; 8];
    for (a, o) in out.iter_mut().enumerate() {
        let l: f64 = [1usize, 2, 4]
            .iter()
            .map(|&bit| norm(sub(x[a | bit], x[a & !bit])))
            .product();
        if l == 0.0 || !l.is_finite() {
            return None;
        }
        *o = dets[a] / l;
    }
    Some(out)
}

fn defect(kind: DefectKind, index: Option<usize>, message: String) -> Defect {
    Defect {
        kind,
        index,
        message,
    }
}

/// Number of groups of elements connected through shared nodes (union-find).
fn count_components(mesh: &Mesh) -> usize {
    let nn = mesh.num_nodes();
    let mut parent: Vec<usize> = (0..nn).collect();
    fn find(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    for e in 0..mesh.num_elements() {
        let el = mesh.element(e);
        let r0 = find(&mut parent, el[0]);
        for &n in &el[1..] {
            let r = find(&mut parent, n);
            if r != r0 {
                parent[r] = r0;
            }
        }
    }
    let mut used = vec![false; nn];
    for &n in &mesh.elements {
        used[n] = true;
    }
    (0..nn)
        .filter(|&i| used[i] && find(&mut parent, i) == i)
        .count()
}

/// Computes the report of `mesh`; `source` (from
/// [`crate::mesh::readers::read_mesh_with_source`]) fills the format and index base.
pub fn mesh_info(mesh: &Mesh, source: Option<&MeshSource>) -> MeshInfo {
    let (bbox_min, bbox_max) = mesh.bounding_box();
    let mut info = MeshInfo {
        format: source.map(|s| s.format),
        index_base: source.and_then(|s| s.index_base),
        element: mesh.kind,
        nodes: mesh.num_nodes(),
        elements: mesh.elements.len() / mesh.kind.nodes(),
        bbox_min,
        bbox_max,
        volume: 0.0,
        min_element_volume: 0.0,
        max_element_volume: 0.0,
        min_dihedral_deg: None,
        max_dihedral_deg: None,
        min_scaled_jacobian: None,
        boundary_faces: 0,
        components: 0,
        regions: Vec::new(),
        inverted_elements: 0,
        degenerate_elements: 0,
        unreferenced_nodes: 0,
        non_manifold_faces: 0,
        duplicate_elements: 0,
        defects: Vec::new(),
    };
    if let Err(e) = check_structure(mesh) {
        info.defects
            .push(defect(DefectKind::Structure, None, e.to_string()));
        return info;
    }
    let ne = mesh.num_elements();
    if ne == 0 {
        info.defects.push(defect(
            DefectKind::Structure,
            None,
            "mesh has no elements".into(),
        ));
        return info;
    }
    let vols: Vec<f64> = (0..ne).map(|e| element_volume(mesh, e)).collect();
    let mean_abs = vols.iter().map(|v| v.abs()).sum::<f64>() / ne as f64;
    info.volume = vols.iter().sum();
    info.min_element_volume = vols.iter().copied().fold(f64::INFINITY, f64::min);
    info.max_element_volume = vols.iter().copied().fold(f64::NEG_INFINITY, f64::max);

    let mut regions: BTreeMap<i64, (usize, f64)> = BTreeMap::new();
    for (&tag, &v) in mesh.tags.iter().zip(&vols) {
        let r = regions.entry(tag).or_default();
        r.0 += 1;
        r.1 += v;
    }
    info.regions = regions
        .into_iter()
        .map(|(tag, (elements, volume))| RegionInfo {
            tag,
            elements,
            volume,
        })
        .collect();

    let (inverted, degenerate, repeated) = quality(mesh, &vols, mean_abs, &mut info);

    let mut used = vec![false; mesh.num_nodes()];
    for &n in &mesh.elements {
        used[n] = true;
    }
    let unreferenced: Vec<Defect> = used
        .iter()
        .enumerate()
        .filter(|(_, &u)| !u)
        .map(|(i, _)| {
            defect(
                DefectKind::UnreferencedNode,
                Some(i),
                format!("node {i}: not referenced by any element"),
            )
        })
        .collect();
    info.unreferenced_nodes = unreferenced.len();

    let (nonmanifold, duplicates) = faces_and_duplicates(mesh, &repeated, &mut info);
    info.components = count_components(mesh);

    info.defects.extend(inverted);
    info.defects.extend(degenerate);
    info.defects.extend(unreferenced);
    info.defects.extend(nonmanifold);
    info.defects.extend(duplicates);
    info
}

/// Degenerate and inverted elements and the quality range (dihedral angles of tets, scaled
/// Jacobians of hexes), filled into `info`; also which elements repeat a node.
fn quality(
    mesh: &Mesh,
    vols: &[f64],
    mean_abs: f64,
    info: &mut MeshInfo,
) -> (Vec<Defect>, Vec<Defect>, Vec<bool>) {
    let ne = mesh.num_elements();
    let mut inverted = Vec::new();
    let mut degenerate = Vec::new();
    let (mut min_q, mut max_q) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut repeated = vec![false; ne];
    for (e, &v) in vols.iter().enumerate() {
        let el = mesh.element(e);
        if let Some((_, &a)) = el.iter().enumerate().find(|(i, a)| el[i + 1..].contains(a)) {
            repeated[e] = true;
            degenerate.push(defect(
                DefectKind::Degenerate,
                Some(e),
                format!("element {e}: node {a} appears more than once in {el:?}"),
            ));
            continue;
        }
        if v.abs() <= 1e-12 * mean_abs || !v.is_finite() {
            degenerate.push(defect(
                DefectKind::Degenerate,
                Some(e),
                format!("element {e}: degenerate, volume {v:.3e} (mean |volume| {mean_abs:.3e})"),
            ));
            continue;
        }
        match mesh.kind {
            ElementKind::Tet4 => {
                let x = [0, 1, 2, 3].map(|k| mesh.nodes[el[k]]);
                if let Some(ang) = tet_dihedral_angles(x) {
                    for a in ang {
                        min_q = min_q.min(a.to_degrees());
                        max_q = max_q.max(a.to_degrees());
                    }
                }
                if v < 0.0 {
                    inverted.push(defect(
                        DefectKind::Inverted,
                        Some(e),
                        format!("element {e}: inverted tetrahedron, volume {v:.3e} (nodes {el:?})"),
                    ));
                }
            }
            ElementKind::Hex8 => {
                let mut x = [[0.0; 3]; 8];
                for (p, &n) in x.iter_mut().zip(el) {
                    *p = mesh.nodes[n];
                }
                if let Some(sj) = hex_scaled_jacobians(&x) {
                    for s in sj {
                        min_q = min_q.min(s);
                    }
                }
                let dets = hex_corner_dets(&x);
                if dets.iter().all(|&d| d < 0.0) {
                    inverted.push(defect(
                        DefectKind::Inverted,
                        Some(e),
                        format!("element {e}: mirrored hexahedron (all 8 corner Jacobians negative; node order is not lexicographic/VTK)"),
                    ));
                } else if let Some((c, &d)) = dets
                    .iter()
                    .enumerate()
                    .filter(|(_, &d)| d <= 0.0)
                    .min_by(|a, b| a.1.total_cmp(b.1))
                {
                    inverted.push(defect(
                        DefectKind::Inverted,
                        Some(e),
                        format!("element {e}: inverted hexahedron, Jacobian det {d:.3e} at corner {c} (node {})", el[c]),
                    ));
                }
            }
        }
    }
    if min_q.is_finite() {
        match mesh.kind {
            ElementKind::Tet4 => {
                info.min_dihedral_deg = Some(min_q);
                info.max_dihedral_deg = Some(max_q);
            }
            ElementKind::Hex8 => info.min_scaled_jacobian = Some(min_q),
        }
    }
    info.inverted_elements = inverted.len();
    info.degenerate_elements = degenerate.len();
    (inverted, degenerate, repeated)
}

/// Boundary and non-manifold faces (counts filled into `info`, non-manifold faces returned
/// as defects) and elements on the same nodes as an earlier one.
fn faces_and_duplicates(
    mesh: &Mesh,
    repeated: &[bool],
    info: &mut MeshInfo,
) -> (Vec<Defect>, Vec<Defect>) {
    let mut faces: HashMap<Vec<usize>, u32> = HashMap::new();
    let local: Vec<Vec<usize>> = match mesh.kind {
        ElementKind::Tet4 => TET_FACES.iter().map(|f| f.to_vec()).collect(),
        ElementKind::Hex8 => HEX_FACES.iter().map(|f| f.to_vec()).collect(),
    };
    let mut sets: HashMap<Vec<usize>, usize> = HashMap::new();
    let mut duplicates = Vec::new();
    for (e, &rep) in repeated.iter().enumerate() {
        let el = mesh.element(e);
        let mut key = el.to_vec();
        key.sort_unstable();
        if let Some(&first) = sets.get(&key) {
            duplicates.push(defect(
                DefectKind::DuplicateElement,
                Some(e),
                format!("element {e}: same nodes as element {first}"),
            ));
            continue;
        }
        sets.insert(key, e);
        if rep {
            continue;
        }
        for f in &local {
            let mut g: Vec<usize> = f.iter().map(|&a| el[a]).collect();
            g.sort_unstable();
            *faces.entry(g).or_insert(0) += 1;
        }
    }
    info.duplicate_elements = duplicates.len();
    info.boundary_faces = faces.values().filter(|&&c| c == 1).count();
    let mut nonmanifold: Vec<(&Vec<usize>, u32)> = faces
        .iter()
        .filter(|(_, &c)| c > 2)
        .map(|(f, &c)| (f, c))
        .collect();
    nonmanifold.sort();
    info.non_manifold_faces = nonmanifold.len();
    let nonmanifold = nonmanifold.into_iter().map(|(f, c)| {
        defect(
            DefectKind::NonManifoldFace,
            None,
            format!("face with nodes {f:?} is shared by {c} elements"),
        )
    });
    (nonmanifold.collect(), duplicates)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::generate::{box_hex, box_tet};

    #[test]
    fn clean_boxes() {
        let h = box_hex([3, 2, 2], 0.5, [0.0; 3]);
        let i = mesh_info(&h, None);
        assert!(i.defects.is_empty(), "{:?}", i.defects);
        assert!((i.volume - 1.5 * 1.0 * 1.0).abs() < 1e-12);
        assert!((i.min_scaled_jacobian.expect("hex") - 1.0).abs() < 1e-12);
        assert_eq!(i.boundary_faces, 2 * (6 + 6 + 4));
        assert_eq!(i.components, 1);
        assert_eq!(
            i.regions,
            vec![RegionInfo {
                tag: 0,
                elements: 12,
                volume: i.volume
            }]
        );
        let t = box_tet([1, 1, 1], 1.0, [0.0; 3]);
        let i = mesh_info(&t, None);
        assert!(i.defects.is_empty(), "{:?}", i.defects);
        // Kuhn tets have dihedral angles 45°, 60° and 90°.
        assert!((i.min_dihedral_deg.expect("tet") - 45.0).abs() < 1e-9);
        assert!((i.max_dihedral_deg.expect("tet") - 90.0).abs() < 1e-9);
        assert_eq!(i.boundary_faces, 12);
    }

    #[test]
    fn regular_tet_dihedral() {
        let x = [
            [1.0, 1.0, 1.0],
            [1.0, -1.0, -1.0],
            [-1.0, 1.0, -1.0],
            [-1.0, -1.0, 1.0],
        ];
        let a = tet_dihedral_angles(x).expect("non-degenerate");
        for v in a {
            assert!((v.to_degrees() - (1.0f64 / 3.0).acos().to_degrees()).abs() < 1e-9);
        }
    }

    #[test]
    fn every_defect_kind_is_listed() {
        let mut m = box_tet([2, 1, 1], 1.0, [0.0; 3]);
        m.elements.swap(2, 3); // element 0 inverted
        m.nodes.push([9.0, 9.0, 9.0]); // unreferenced
        let el: Vec<usize> = m.element(5).to_vec();
        m.elements.extend_from_slice(&el); // duplicate of element 5
        m.tags.push(7);
        m.elements.extend_from_slice(&[0, 0, 1, 2]); // repeated node
        m.tags.push(0);
        let i = mesh_info(&m, None);
        let kinds: Vec<DefectKind> = i.defects.iter().map(|d| d.kind).collect();
        assert_eq!(
            kinds,
            vec![
                DefectKind::Inverted,
                DefectKind::Degenerate,
                DefectKind::UnreferencedNode,
                DefectKind::DuplicateElement
            ]
        );
        assert_eq!(i.defects[0].index, Some(0));
        assert_eq!(i.defects[2].index, Some(m.nodes.len() - 1));
        assert_eq!(i.regions.len(), 2);
        assert_eq!(i.regions[1].tag, 7);

        // Three tets on one face.
        let nm = Mesh {
            kind: ElementKind::Tet4,
            nodes: vec![
                [0.0, 0.0, 0.0],
                [1.0, 0.0, 0.0],
                [0.0, 1.0, 0.0],
                [0.0, 0.0, 1.0],
                [0.0, 0.0, -1.0],
                [0.3, 0.3, 2.0],
            ],
            elements: vec![0, 1, 2, 3, 0, 2, 1, 4, 0, 1, 2, 5],
            tags: vec![0; 3],
        };
        let i = mesh_info(&nm, None);
        assert_eq!(i.non_manifold_faces, 1);
        assert!(i
            .defects
            .iter()
            .any(|d| d.kind == DefectKind::NonManifoldFace));

        // Structure problems stop the analysis.
        let mut bad = box_hex([1, 1, 1], 1.0, [0.0; 3]);
        bad.elements[3] = 99;
        let i = mesh_info(&bad, None);
        assert_eq!(i.defects.len(), 1);
        assert_eq!(i.defects[0].kind, DefectKind::Structure);
    }

    #[test]
    fn inverted_and_mirrored_hexes() {
        let mut m = box_hex([2, 1, 1], 1.0, [0.0; 3]);
        // Mirror element 0 (swap along x), invert a corner of element 1.
        let e0: Vec<usize> = m.element(0).to_vec();
        for a in 0..8 {
            m.elements[a] = e0[a ^ 1];
        }
        let i = mesh_info(&m, None);
        assert_eq!(i.inverted_elements, 1);
        assert!(
            i.defects[0].message.contains("mirrored"),
            "{}",
            i.defects[0].message
        );
        let mut m = box_hex([1, 1, 1], 1.0, [0.0; 3]);
        m.nodes[7] = [0.1, 0.1, 0.1];
        let i = mesh_info(&m, None);
        assert_eq!(i.inverted_elements, 1, "{:?}", i.defects);
        assert!(i.min_scaled_jacobian.expect("q") < 0.0);
    }
}
