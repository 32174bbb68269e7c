//! The library's bridge from the simulation model to the frame writer of
//! [`crate::io::frames`], which takes plain numbers: the model's bodies become a
//! [`FrameLayout`] (with the per-element strain-energy density and von Mises stress of
//! [`crate::solver::cell_fields`] as per-frame cell arrays) and the scene's `[output] format`
//! and `vtu_encoding` a [`FrameFiles`]. The CLI and the Python package write frames through it.

use crate::io::frames::{CellFields, FrameBody, FrameFiles, FrameLayout};
use crate::mesh::vtk::vtk_cell_type;
use crate::mesh::{ElementKind, HEX_VTK_TO_LEX};
use crate::scene::{FrameFormat, Output};
use crate::solver::Model;

impl From<&Output> for FrameFiles {
    fn from(o: &Output) -> Self {
        match o.format {
            FrameFormat::Ply => FrameFiles::Ply,
            FrameFormat::Vtu => FrameFiles::Vtu(o.vtu_encoding),
        }
    }
}

impl From<&Model> for FrameLayout {
    fn from(model: &Model) -> Self {
        let bodies = model
            .bodies
            .iter()
            .map(|b| {
                let mut connectivity = Vec::with_capacity(b.elements.len() * b.kind.nodes());
                for e in b.elements.clone() {
                    let el = model.element(e);
                    match b.kind {
                        ElementKind::Tet4 => connectivity.extend_from_slice(el),
                        ElementKind::Hex8 => connectivity.extend(HEX_VTK_TO_LEX.map(|l| el[l])),
                    }
                }
                FrameBody {
                    nodes: b.nodes.clone(),
                    cell_type: vtk_cell_type(b.kind),
                    nodes_per_cell: b.kind.nodes(),
                    connectivity,
                    youngs: model.params.youngs[b.elements.clone()].to_vec(),
                    surface: b.surface.clone(),
                }
            })
            .collect();
        let m = model.clone();
        FrameLayout {
            num_nodes: model.num_nodes(),
            bodies,
            cell_fields: Some(CellFields(std::sync::Arc::new(move |x: &[f64]| {
                let (psi, mises) = crate::solver::cell_fields::cell_fields(&m, x);
                vec![("strain_energy_density", psi), ("von_mises_stress", mises)]
            }))),
        }
    }
}
