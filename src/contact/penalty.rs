//! DiffPD's penalty contact (`diffpd-notes.md` §1.8), the alternative `model = "penalty"`.

use crate::solver::model::Model;

/// Add the penalty contact forces at the step start to `f_ext` (explicit, enters $y$).
pub fn add_forces(
    _model: &Model,
    _nodes: &[usize],
    _t: f64,
    _x_t: &[f64],
    _v_t: &[f64],
    _f: &mut [f64],
) {
}
