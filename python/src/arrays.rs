//! NumPy arrays in and out. In: any array-like of real numbers, read through a read-only
//! view without a copy when it is a C-contiguous float64 array (else converted once), its
//! shape and finiteness checked with messages naming the argument and the index. Out: new
//! arrays owned by Python.

use crate::errors::py_err;
use numpy::ndarray::{Array1, Array2};
use numpy::{
    IntoPyArray, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn,
    PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::prelude::*;

/// A new array handed to Python.
pub fn out<'py, T: numpy::Element, D: numpy::ndarray::Dimension>(
    a: Bound<'py, numpy::PyArray<T, D>>,
) -> Bound<'py, PyAny> {
    a.into_any()
}

/// Node-major values (3n) as an (n, 3) array.
pub fn nodal<'py>(py: Python<'py>, v: &[f64]) -> Bound<'py, PyAny> {
    out(Array2::from_shape_vec((v.len() / 3, 3), v.to_vec())
        .expect("n x 3")
        .into_pyarray(py))
}

/// Indices as an int64 array.
pub fn indices<'py>(py: Python<'py>, v: &[usize]) -> Bound<'py, PyAny> {
    out(Array1::from_iter(v.iter().map(|&i| i as i64)).into_pyarray(py))
}

/// A float64 array read from Python: a view of the caller's buffer, or a converted copy.
pub enum F64Array<'py> {
    View(PyReadonlyArrayDyn<'py, f64>),
    Owned(Vec<f64>),
}

fn shape_text(s: &[usize]) -> String {
    let parts: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    if parts.len() == 1 {
        format!("({},)", parts[0])
    } else {
        format!("({})", parts.join(", "))
    }
}

impl<'py> F64Array<'py> {
    /// Read `obj` (argument `name`) as real numbers of shape `shape` (`None`: any length),
    /// every value finite.
    pub fn read(obj: &Bound<'py, PyAny>, name: &str, shape: &[Option<usize>]) -> PyResult<Self> {
        let py = obj.py();
        let arr: Bound<'py, PyUntypedArray> = match obj.cast::<PyUntypedArray>() {
            Ok(a) => a.clone(),
            Err(_) => {
                let a = py
                    .import("numpy")?
                    .call_method1("asarray", (obj,))
                    .map_err(|e| {
                        py_err(
                            py,
                            "InputError",
                            format!("{name}: not an array of numbers ({e})"),
                        )
                    })?;
                a.cast_into::<PyUntypedArray>().map_err(|_| {
                    py_err(py, "InputError", format!("{name}: not an array of numbers"))
                })?
            }
        };
        let kind = arr.dtype().kind();
        if !matches!(kind, b'f' | b'i' | b'u') {
            return Err(py_err(
                py,
                "InputError",
                format!(
                    "{name}: expected real numbers (float64), got dtype {}",
                    arr.dtype().str().map(|s| s.to_string()).unwrap_or_default()
                ),
            ));
        }
        let got = arr.shape().to_vec();
        let fits = got.len() == shape.len()
            && got
                .iter()
                .zip(shape)
                .all(|(&g, s)| s.is_none_or(|s| s == g));
        if !fits {
            let want: Vec<String> = shape
                .iter()
                .map(|s| s.map(|d| d.to_string()).unwrap_or_else(|| "*".into()))
                .collect();
            return Err(py_err(
                py,
                "InputError",
                format!(
                    "{name}: expected shape ({}{}), got {}",
                    want.join(", "),
                    if want.len() == 1 { "," } else { "" },
                    shape_text(&got)
                ),
            ));
        }
        let f64arr: Bound<'py, PyArrayDyn<f64>> = match arr.cast::<PyArrayDyn<f64>>() {
            Ok(a) => a.clone(),
            Err(_) => arr
                .call_method1("astype", ("float64",))?
                .cast_into::<PyArrayDyn<f64>>()
                .map_err(PyErr::from)?,
        };
        let view = f64arr.readonly();
        let this = if view.as_slice().is_ok() {
            F64Array::View(view)
        } else {
            F64Array::Owned(view.as_array().iter().copied().collect())
        };
        if let Some(k) = this.slice().iter().position(|x| !x.is_finite()) {
            let mut idx = vec![0; got.len()];
            let mut r = k;
            for d in (0..got.len()).rev() {
                idx[d] = r % got[d].max(1);
                r /= got[d].max(1);
            }
            let idx: Vec<String> = idx.iter().map(|i| i.to_string()).collect();
            return Err(py_err(
                py,
                "InputError",
                format!(
                    "{name}[{}] = {} is not a finite number",
                    idx.join(", "),
                    this.slice()[k]
                ),
            ));
        }
        Ok(this)
    }

    /// The values in C order.
    pub fn slice(&self) -> &[f64] {
        match self {
            F64Array::View(v) => v.as_slice().expect("checked contiguous"),
            F64Array::Owned(v) => v,
        }
    }

    /// Copy the values into `dst` (same length, checked by [`F64Array::read`]'s shape).
    pub fn copy_into(&self, dst: &mut [f64]) {
        dst.copy_from_slice(self.slice());
    }
}

/// Refuse a non-positive entry (argument `name`) or one beyond the scene's number range
/// ([`diffphd::scene::MAX_MAGNITUDE`], as a scene file's value), naming the first.
pub fn check_positive(py: Python<'_>, a: &F64Array, name: &str) -> PyResult<()> {
    let max = diffphd::scene::MAX_MAGNITUDE;
    if let Some(k) = a.slice().iter().position(|&x| x <= 0.0 || x > max) {
        let x = a.slice()[k];
        let msg = if x <= 0.0 {
            format!("{name}[{k}] = {x} must be positive")
        } else {
            format!("{name}[{k}] = {x:e} is beyond the range of the 32-bit floats the frame files store (|value| <= {max:.2e})")
        };
        return Err(py_err(py, "InputError", msg));
    }
    Ok(())
}
