//! Volume elements as read by the gmsh and MEDIT readers, resolved against the node table
//! once the whole file is read (so that section order does not matter), with the checks
//! every such reader shares: one element type per mesh, every node defined, no duplicate
//! element.

use crate::mesh::check::{duplicate_element, duplicate_message};
use crate::mesh::lexer::Cursor;
use crate::mesh::{ElementKind, Mesh, MeshError, HEX_VTK_TO_LEX};

/// Volume elements as read (file node ids), resolved against the node table at the end so
/// that section order does not matter.
pub struct RawElements {
    kind: Option<(ElementKind, usize)>,
    /// File node ids in lexicographic local order.
    ids: Vec<u64>,
    /// Line of each element.
    lines: Vec<usize>,
    tags: Vec<i64>,
}

impl RawElements {
    pub fn new() -> Self {
        RawElements {
            kind: None,
            ids: Vec::new(),
            lines: Vec::new(),
            tags: Vec::new(),
        }
    }

    /// Checks that `kind` matches the elements read so far.
    pub fn set_kind(
        &mut self,
        c: &Cursor,
        kind: ElementKind,
        line: usize,
    ) -> Result<(), MeshError> {
        match self.kind {
            None => {
                self.kind = Some((kind, line));
                Ok(())
            }
            Some((k, _)) if k == kind => Ok(()),
            Some((k, first)) => Err(c.err(
                line,
                format!(
                    "mesh mixes element types: {kind} here but {k} at line {first}; only one element type per mesh is supported"
                ),
            )),
        }
    }

    /// Adds an element whose node ids are in file (gmsh/VTK/MEDIT) order.
    pub fn push(&mut self, kind: ElementKind, file_order: &[u64], tag: i64, line: usize) {
        match kind {
            ElementKind::Tet4 => self.ids.extend_from_slice(file_order),
            ElementKind::Hex8 => {
                let mut lex = [0u64; 8];
                for (k, &id) in file_order.iter().enumerate() {
                    lex[HEX_VTK_TO_LEX[k]] = id;
                }
                self.ids.extend_from_slice(&lex);
            }
        }
        self.lines.push(line);
        self.tags.push(tag);
    }

    /// Builds the mesh, mapping file node ids through `index` (id → position in `nodes`).
    pub fn finish(
        self,
        c: &Cursor,
        nodes: Vec<[f64; 3]>,
        index: impl Fn(u64) -> Option<usize>,
        what: &str,
    ) -> Result<Mesh, MeshError> {
        let Some((kind, _)) = self.kind else {
            return Err(c.err(c.last.max(1), format!("file contains no {what}")));
        };
        let nv = kind.nodes();
        let mut elements = Vec::with_capacity(self.ids.len());
        for (e, chunk) in self.ids.chunks(nv).enumerate() {
            for &id in chunk {
                match index(id) {
                    Some(i) => elements.push(i),
                    None => {
                        let line = self.lines.get(e).copied().unwrap_or(1);
                        return Err(c.err(
                            line,
                            format!(
                                "element refers to node {id}, which is not defined (file has {} nodes)",
                                nodes.len()
                            ),
                        ));
                    }
                }
            }
        }
        let mesh = Mesh {
            kind,
            nodes,
            elements,
            tags: self.tags,
        };
        if let Some((a, b)) = duplicate_element(&mesh) {
            let line = |e: usize| self.lines.get(e).copied().unwrap_or(1);
            return Err(c.err(line(b), duplicate_message(a, b, Some((line(a), line(b))))));
        }
        Ok(mesh)
    }
}
