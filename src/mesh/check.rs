//! Structure checks shared by the readers, the writers and the mesh report: what every mesh
//! must satisfy before any geometry is looked at.
//!
//! - [`check_structure`]: connectivity length a multiple of the nodes per element, one tag per
//!   element, node indices in range, finite coordinates (the writers refuse anything else);
//! - [`duplicate_element`]: two elements on the same set of nodes. Every reader refuses such a
//!   file (a duplicated element doubles mass and stiffness without a trace in the output), and
//!   [`crate::mesh::validate::validate_and_fix`] refuses such an in-memory mesh.

use super::{Mesh, MeshError};
use std::collections::HashMap;

/// Rejects meshes that no writer can represent: connectivity length not a multiple of the
/// nodes per element, tag count different from the element count, node index out of range,
/// non-finite coordinate.
pub fn check_structure(mesh: &Mesh) -> Result<(), MeshError> {
    let nv = mesh.kind.nodes();
    if !mesh.elements.len().is_multiple_of(nv) {
        return Err(MeshError::Invalid(format!(
            "connectivity has {} indices, not a multiple of {nv} ({})",
            mesh.elements.len(),
            mesh.kind
        )));
    }
    let ne = mesh.num_elements();
    if mesh.tags.len() != ne {
        return Err(MeshError::Invalid(format!(
            "mesh has {} tags for {ne} elements",
            mesh.tags.len()
        )));
    }
    let nn = mesh.num_nodes();
    if let Some(k) = mesh.elements.iter().position(|&n| n >= nn) {
        return Err(MeshError::BadElement {
            element: k / nv,
            msg: format!(
                "node index {} out of range (mesh has {nn} nodes)",
                mesh.elements[k]
            ),
        });
    }
    if let Some(i) = mesh
        .nodes
        .iter()
        .position(|p| p.iter().any(|c| !c.is_finite()))
    {
        return Err(MeshError::BadNode {
            node: i,
            msg: format!("non-finite coordinates {:?}", mesh.nodes[i]),
        });
    }
    Ok(())
}

/// The node set of an element as a fixed-size key (sorted, padded with `usize::MAX`).
fn node_set(el: &[usize]) -> [usize; 8] {
    let mut key = [usize::MAX; 8];
    for (k, &n) in key.iter_mut().zip(el) {
        *k = n;
    }
    key.sort_unstable();
    key
}

/// Every element (in order) whose node set equals that of an earlier element, as
/// `(earlier, later)` pairs; the earlier one is the first element with that node set.
/// Elements must have at most 8 nodes.
pub fn duplicate_elements(mesh: &Mesh) -> Vec<(usize, usize)> {
    let nv = mesh.kind.nodes();
    let mut first: HashMap<[usize; 8], usize> = HashMap::with_capacity(mesh.tags.len());
    let mut out = Vec::new();
    for (e, el) in mesh.elements.chunks_exact(nv).enumerate() {
        match first.entry(node_set(el)) {
            std::collections::hash_map::Entry::Occupied(o) => out.push((*o.get(), e)),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(e);
            }
        }
    }
    out
}

/// The first element whose node set repeats an earlier element's, as `(earlier, later)`.
pub fn duplicate_element(mesh: &Mesh) -> Option<(usize, usize)> {
    duplicate_elements(mesh).first().copied()
}

/// The message of a duplicate-element error: elements `a < b` (0-based positions in file
/// order) on the same nodes, with the lines they were read from where the format has lines.
pub fn duplicate_message(a: usize, b: usize, lines: Option<(usize, usize)>) -> String {
    match lines {
        Some((la, lb)) => format!(
            "element {b} (line {lb}) has the same nodes as element {a} (line {la}); duplicate elements are not allowed"
        ),
        None => format!(
            "element {b} has the same nodes as element {a}; duplicate elements are not allowed"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::generate::box_tet;

    #[test]
    fn duplicates_are_found_in_any_node_order() {
        let mut m = box_tet([1, 1, 1], 1.0, [0.0; 3]);
        assert_eq!(duplicate_element(&m), None);
        let mut copy: Vec<usize> = m.element(2).to_vec();
        copy.reverse();
        m.elements.extend(copy);
        m.tags.push(7);
        assert_eq!(duplicate_element(&m), Some((2, 6)));
        assert_eq!(
            duplicate_message(2, 6, Some((4, 8))),
            "element 6 (line 8) has the same nodes as element 2 (line 4); duplicate elements are not allowed"
        );
    }
}
