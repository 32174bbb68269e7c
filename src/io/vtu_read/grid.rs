//! What the reader returns: the grid's arrays as stored, and its error (the line of the XML
//! tag concerned).

use std::ops::Range;

/// The values of one array, integers kept exact.
#[derive(Clone, Debug, PartialEq)]
pub enum VtuValues {
    Int(Vec<i64>),
    Float(Vec<f64>),
}

impl VtuValues {
    pub fn len(&self) -> usize {
        match self {
            VtuValues::Int(v) => v.len(),
            VtuValues::Float(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The values as `f64` (integers beyond 2^53 rounded).
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            VtuValues::Int(v) => v.iter().map(|&x| x as f64).collect(),
            VtuValues::Float(v) => v.clone(),
        }
    }
}

/// A named point or cell array.
#[derive(Clone, Debug, PartialEq)]
pub struct VtuArray {
    pub name: String,
    pub components: usize,
    pub values: VtuValues,
}

/// An unstructured grid as stored: every piece concatenated.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VtuGrid {
    pub points: Vec<[f64; 3]>,
    /// Node indices of all cells, cell after cell.
    pub connectivity: Vec<usize>,
    /// Range of each cell in `connectivity`.
    pub cells: Vec<Range<usize>>,
    /// VTK cell type of each cell.
    pub types: Vec<u8>,
    pub point_data: Vec<VtuArray>,
    pub cell_data: Vec<VtuArray>,
    /// Line of the `<Cells>` tag of the first piece (for error messages of callers).
    pub cells_line: usize,
}

/// A `.vtu` that cannot be read: the line of the XML tag concerned and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{msg}")]
pub struct VtuReadError {
    pub line: usize,
    pub msg: String,
}

pub(super) fn err<T>(line: usize, msg: impl Into<String>) -> Result<T, VtuReadError> {
    Err(VtuReadError {
        line,
        msg: msg.into(),
    })
}
