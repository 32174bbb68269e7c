//! The native half of `diffphd.torch`: a recorded rollout or step ([`session::Tape`]) at
//! given parameter values, and its reverse sweep for caller-supplied cotangents of every
//! returned frame ([`diffphd::solver::cotangent::DenseCotangents`]). The autograd wrapper
//! is Python (`diffphd/torch.py`); nothing here imports torch.

use crate::arrays::{self, F64Array};
use crate::errors::{py_err, session_err};
use crate::guarded;
use diffphd::optimize::problem::Problem;
use diffphd::session::{self, SessionError};
use diffphd::solver::cotangent::DenseCotangents;
use numpy::ndarray::{Array1, Array3};
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::sync::Arc;

/// A recorded rollout (frames `start..=last`) at parameter values θ, to differentiate.
#[pyclass(module = "diffphd._diffphd", frozen)]
pub struct Tape {
    problem: Arc<Problem>,
    theta: Vec<f64>,
    tape: session::Tape,
    threads: usize,
}

/// The scene's differentiable inputs: one per `[[parameter]]` entry, named by the entry's
/// expanded names without the component or knot suffix (`initial_velocity[0]` for its three
/// components), with the indices of its scalars among the problem's parameters (and, for
/// `muscle_activation`, the group and its knots).
pub fn inputs<'py>(py: Python<'py>, problem: &Problem) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    let mut k = 0;
    while k < problem.params.len() {
        let entry = problem.params[k].index;
        let end = (k..problem.params.len())
            .find(|&j| problem.params[j].index != entry)
            .unwrap_or(problem.params.len());
        let names: Vec<&str> = problem.params[k..end]
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        let name = if names.len() == 1 {
            names[0].to_string()
        } else {
            let first = names[0];
            let common = names.iter().fold(first.len(), |n, s| {
                first
                    .bytes()
                    .zip(s.bytes())
                    .take(n)
                    .take_while(|(a, b)| a == b)
                    .count()
            });
            let prefix = &first[..common];
            prefix[..prefix.rfind('.').unwrap_or(prefix.len())].to_string()
        };
        let d = PyDict::new(py);
        d.set_item("name", name)?;
        d.set_item("parameters", names)?;
        d.set_item("indices", (k..end).collect::<Vec<_>>())?;
        d.set_item("kind", problem.params[k].key())?;
        d.set_item("log", problem.params[k].log)?;
        d.set_item("theta", problem.theta0()[k..end].to_vec())?;
        if problem.params[k].key() == "muscle_activation" {
            // the group (index into `Scene.muscles`) and the knots the entry's scalars set
            d.set_item("muscle", problem.params[k].muscle)?;
            let knots: Vec<usize> = problem.params[k..end].iter().map(|p| p.knot).collect();
            d.set_item("knots", knots)?;
        }
        out.append(d)?;
        k = end;
    }
    Ok(out)
}

/// The problem of a scene for caller cotangents (its `[[parameter]]`s).
pub fn problem(py: Python<'_>, ls: &diffphd::scene::LoadedScene) -> PyResult<Arc<Problem>> {
    let ls = ls.clone();
    Ok(Arc::new(
        guarded(py, || session::parameters(ls))?.map_err(|e| session_err(py, e))?,
    ))
}

/// θ for every parameter: the scene's, with `theta` (p,) replacing them when given.
fn theta_of(problem: &Problem, theta: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<f64>> {
    let p = problem.params.len();
    match theta {
        None => Ok(problem.theta0()),
        Some(t) => Ok(F64Array::read(t, "theta", &[Some(p)])?.slice().to_vec()),
    }
}

/// Run `f` on a pool of `threads` with the GIL released, Ctrl-C ending it at the next
/// solver iteration ([`crate::interruptible`]); session errors as exceptions.
fn pooled<T: Send>(
    py: Python<'_>,
    threads: usize,
    f: impl FnOnce() -> Result<T, SessionError> + Send,
) -> PyResult<T> {
    let (r, _) = crate::interruptible(py, threads, |_| f())?;
    r.map_err(|e| session_err(py, e))
}

/// A rollout from the model's initial state at θ (`x0`, `v0` (n, 3) replacing it).
pub fn record_rollout(
    py: Python<'_>,
    problem: Arc<Problem>,
    theta: Option<&Bound<'_, PyAny>>,
    x0: Option<&Bound<'_, PyAny>>,
    v0: Option<&Bound<'_, PyAny>>,
    threads: usize,
) -> PyResult<Tape> {
    let theta = theta_of(&problem, theta)?;
    let mut model = problem.model_at(&theta);
    let n = model.num_nodes();
    if let Some(a) = x0 {
        F64Array::read(a, "x0", &[Some(n), Some(3)])?.copy_into(&mut model.x0);
    }
    if let Some(a) = v0 {
        F64Array::read(a, "v0", &[Some(n), Some(3)])?.copy_into(&mut model.v0);
    }
    let last = model.frames;
    let tape = {
        let problem = &problem;
        pooled(py, threads, move || {
            session::Tape::record(problem, model, 0, None, last)
        })?
    };
    Ok(Tape {
        problem,
        theta,
        tape,
        threads,
    })
}

/// One step from `(x, v)` at frame `frame`, `controls` (one activation per muscle group)
/// replacing the muscles' knots for the step.
#[allow(clippy::too_many_arguments)]
pub fn record_step(
    py: Python<'_>,
    problem: Arc<Problem>,
    theta: Option<&Bound<'_, PyAny>>,
    frame: usize,
    x: &Bound<'_, PyAny>,
    v: &Bound<'_, PyAny>,
    controls: Option<&Bound<'_, PyAny>>,
    threads: usize,
) -> PyResult<Tape> {
    let theta = theta_of(&problem, theta)?;
    let n = problem.base.num_nodes();
    let x = F64Array::read(x, "x_t", &[Some(n), Some(3)])?
        .slice()
        .to_vec();
    let v = F64Array::read(v, "v_t", &[Some(n), Some(3)])?
        .slice()
        .to_vec();
    let k = problem.base.muscles.len();
    let controls = match controls {
        Some(c) => {
            if k == 0 {
                return Err(py_err(
                    py,
                    "InputError",
                    "controls_t: the scene has no muscle group to control (pass None)".into(),
                ));
            }
            Some(
                F64Array::read(c, "controls_t", &[Some(k)])?
                    .slice()
                    .to_vec(),
            )
        }
        None => None,
    };
    let tape = {
        let (problem, theta) = (&problem, &theta);
        pooled(py, threads, move || {
            session::step(problem, theta, frame, (x, v), controls.as_deref())
        })?
    };
    Ok(Tape {
        problem,
        theta,
        tape,
        threads,
    })
}

#[pymethods]
impl Tape {
    /// Positions (K+1, n, 3) of the recorded frames (the first is the start state).
    #[getter]
    fn positions<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        self.frames(py, |_, x, _| x)
    }
    /// Velocities (K+1, n, 3): $v_t=(x_t-x_{t-1})/h$, the start state's as given.
    #[getter]
    fn velocities<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        self.frames(py, |_, _, v| v)
    }
    /// The first recorded frame.
    #[getter]
    fn start(&self) -> usize {
        self.tape.rollout.start
    }

    /// The reverse sweep for cotangents `dx`, `dv` (K+1, n, 3) of the recorded frames (None:
    /// zero): a dict with `theta` (dL/dθ per parameter, θ = ln value for `log = true`),
    /// `x0`, `v0` (n, 3) (dL/d of the start state) and `controls` (dL/d of each muscle
    /// group's activation of a step, or None). Raises `SolverError` when a frame's adjoint
    /// did not converge.
    #[pyo3(signature = (dx=None, dv=None))]
    fn gradient<'py>(
        &self,
        py: Python<'py>,
        dx: Option<&Bound<'py, PyAny>>,
        dv: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let count = self.tape.rollout.kept.len();
        let n = self.tape.model.num_nodes();
        let shape = [Some(count), Some(n), Some(3)];
        let read = |a: Option<&Bound<'py, PyAny>>, name: &str| -> PyResult<Option<Vec<f64>>> {
            a.map(|a| Ok(F64Array::read(a, name, &shape)?.slice().to_vec()))
                .transpose()
        };
        let source = DenseCotangents {
            start: self.tape.rollout.start,
            n3: 3 * n,
            x: read(dx, "dx")?,
            v: read(dv, "dv")?,
        };
        let g = {
            let (problem, theta, tape, source) = (&*self.problem, &self.theta, &self.tape, &source);
            pooled(py, self.threads, move || {
                tape.gradient(problem, theta, source)
            })?
        };
        if !g.nonconverged.is_empty() {
            return Err(py_err(
                py,
                "SolverError",
                format!(
                    "{}: the adjoint did not converge in frames {:?} (raise backward.max_iterations or loosen backward.rel_tol)",
                    self.problem.ls.path.display(),
                    g.nonconverged
                ),
            ));
        }
        let d = PyDict::new(py);
        d.set_item(
            "theta",
            arrays::out(Array1::from_vec(g.gradient.clone()).into_pyarray(py)),
        )?;
        d.set_item("x0", arrays::nodal(py, &g.dx))?;
        d.set_item("v0", arrays::nodal(py, &g.dv))?;
        let controls: Vec<f64> = g
            .all
            .muscle_activation
            .iter()
            .map(|k| k.iter().sum())
            .collect();
        d.set_item(
            "controls",
            arrays::out(Array1::from_vec(controls).into_pyarray(py)),
        )?;
        Ok(d)
    }
}

impl Tape {
    fn frames<'py>(
        &self,
        py: Python<'py>,
        pick: impl for<'a> Fn(usize, &'a [f64], &'a [f64]) -> &'a [f64],
    ) -> Bound<'py, PyAny> {
        let n = self.tape.model.num_nodes();
        let mut flat = Vec::with_capacity(self.tape.rollout.kept.len() * 3 * n);
        let mut count = 0;
        for (t, x, v) in self.tape.states() {
            flat.extend_from_slice(pick(t, x, v));
            count += 1;
        }
        arrays::out(
            Array3::from_shape_vec((count, n, 3), flat)
                .expect("frames x n x 3")
                .into_pyarray(py),
        )
    }
}
