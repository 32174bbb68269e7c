//! `diffphd._diffphd`: the Python extension over the `diffphd` library (never the CLI).
//!
//! Scenes load with the command line's overrides and messages ([`diffphd::scene::load_str`]),
//! rollouts run through [`diffphd::session::simulate`] (the steps of `diffphd simulate`) on a
//! per-call rayon pool with the GIL released, and gradients through
//! [`diffphd::optimize::problem::Problem::evaluate`] (as `diffphd grad`). Arrays go out as
//! NumPy arrays; arrays in are read through read-only views (no copy when C-contiguous
//! float64). Every error becomes one of the exception classes of `diffphd/_errors.py`
//! (`errors` is the one place that maps them).

mod arrays;
mod diff;
mod errors;

use diffphd::cancel::Cancel;
use diffphd::gpu::Backend;
use diffphd::scene::LoadedScene;
use diffphd::session::{self, FrameState};
use diffphd::solver::Model;
use numpy::ndarray::{Array1, Array2, Array3};
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use errors::{py_err, session_err};

/// A scene loaded from a TOML file or string with `set` overrides, and its model.
#[pyclass(module = "diffphd._diffphd", frozen)]
struct Scene {
    /// The scene's text before overrides.
    text: String,
    /// Path of the scene (for a string: `<base_dir>/<string>`), for messages and relative paths.
    path: PathBuf,
    /// The `--set` expressions applied.
    sets: Vec<String>,
    ls: LoadedScene,
    model: Arc<Model>,
    /// The scene's `[[parameter]]`s for caller cotangents (`diffphd.torch`), made once.
    diff: std::sync::OnceLock<Arc<diffphd::optimize::problem::Problem>>,
}

/// `set` as `--set` expressions: a mapping `{key.path: value}` (numbers and booleans as
/// TOML, strings as the command line takes them: parsed as TOML, else a string) or a
/// sequence of `"key.path=value"` strings.
fn set_expressions(set: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    let Some(set) = set else { return Ok(vec![]) };
    if set.is_none() {
        return Ok(vec![]);
    }
    if let Ok(d) = set.cast::<PyDict>() {
        let mut out = vec![];
        for (k, v) in d.iter() {
            let key: String = k.extract().map_err(|_| {
                py_err(
                    k.py(),
                    "InputError",
                    format!("set: key {k} is not a string"),
                )
            })?;
            out.push(format!(
                "{key}={}",
                toml_text(&v, &format!("set[{key:?}]"))?
            ));
        }
        return Ok(out);
    }
    if let Ok(s) = set.extract::<String>() {
        return Ok(vec![s]);
    }
    let items: Vec<Bound<'_, PyAny>> = set.try_iter()?.collect::<PyResult<_>>().map_err(|_| {
        py_err(
            set.py(),
            "InputError",
            "set: expected a dict {\"key.path\": value} or a list of \"key.path=value\" strings"
                .into(),
        )
    })?;
    items
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.extract::<String>().map_err(|_| {
                py_err(
                    s.py(),
                    "InputError",
                    format!("set[{i}]: expected a \"key.path=value\" string"),
                )
            })
        })
        .collect()
}

/// A Python value as the text of an override's value.
fn toml_text(v: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    if let Ok(b) = v.extract::<bool>() {
        return Ok(b.to_string());
    }
    if let Ok(i) = v.extract::<i64>() {
        return Ok(i.to_string());
    }
    if let Ok(x) = v.extract::<f64>() {
        if !x.is_finite() {
            return Err(py_err(
                v.py(),
                "InputError",
                format!("{what}: {x} is not a finite number"),
            ));
        }
        return Ok(format!("{x:?}"));
    }
    if let Ok(s) = v.extract::<String>() {
        return Ok(s);
    }
    if let Ok(l) = v.cast::<PyList>() {
        let parts: Vec<String> = l
            .iter()
            .enumerate()
            .map(|(i, x)| {
                let t = toml_text(&x, &format!("{what}[{i}]"))?;
                Ok(if x.extract::<String>().is_ok() {
                    serde_json::to_string(&t).unwrap_or(t)
                } else {
                    t
                })
            })
            .collect::<PyResult<_>>()?;
        return Ok(format!("[{}]", parts.join(", ")));
    }
    Err(py_err(
        v.py(),
        "InputError",
        format!(
            "{what}: cannot use a {} as a scene value (numbers, booleans, strings and lists)",
            v.get_type().name()?
        ),
    ))
}

/// Run `f` with the GIL released, turning a panic of the library into a `DiffphdError`
/// (never a `PanicException`).
pub(crate) fn guarded<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> PyResult<T> {
    py.detach(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)))
        .map_err(|p| {
            let what = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            py_err(
                py,
                "DiffphdError",
                format!("internal error (please report it): {what}"),
            )
        })
}

/// Run `f` on a pool of `threads` with the GIL released, a fresh [`Cancel`] token installed
/// (every simulator `f` builds polls it once per solver iteration) and handed to `f`. The
/// calling thread checks Python's signals every 20 ms (the GIL taken briefly); when a
/// handler raises (Ctrl-C: `KeyboardInterrupt`) the token trips, `f` ends at its next
/// solver iteration, and the handler's exception is returned whatever `f` returned — the
/// scene is untouched (each call builds its own simulator). Otherwise `f`'s result and the
/// pool's size. A panic in `f` is the `DiffphdError` of [`guarded`].
pub(crate) fn interruptible<T: Send>(
    py: Python<'_>,
    threads: usize,
    f: impl FnOnce(&Cancel) -> T + Send,
) -> PyResult<(T, usize)> {
    let cancel = Cancel::new();
    let mut signal: Option<PyErr> = None;
    let joined = py.detach(|| {
        std::thread::scope(|s| {
            let worker =
                s.spawn(|| session::with_threads_cancellable(threads, &cancel, || f(&cancel)));
            while !worker.is_finished() {
                std::thread::sleep(std::time::Duration::from_millis(20));
                if signal.is_none() {
                    if let Err(e) = Python::attach(|py| py.check_signals()) {
                        signal = Some(e);
                        cancel.cancel();
                    }
                }
            }
            worker.join()
        })
    });
    if let Some(e) = signal {
        return Err(e);
    }
    match joined {
        Ok(r) => r.map_err(|e| session_err(py, e)),
        Err(p) => {
            let what = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(py_err(
                py,
                "DiffphdError",
                format!("internal error (please report it): {what}"),
            ))
        }
    }
}

/// Parse the backend argument.
fn backend_arg(py: Python<'_>, name: &str) -> PyResult<Backend> {
    session::backend(name).map_err(|e| session_err(py, e))
}

impl Scene {
    fn load(py: Python<'_>, text: String, path: PathBuf, sets: Vec<String>) -> PyResult<Scene> {
        let ls = guarded(py, || diffphd::scene::load_str(&text, &path, &sets))?
            .map_err(|e| session_err(py, e.into()))?;
        let model = guarded(py, || session::build_model(&ls))?.map_err(|e| session_err(py, e))?;
        Ok(Scene {
            text,
            path,
            sets,
            ls,
            model: Arc::new(model),
            diff: std::sync::OnceLock::new(),
        })
    }

    /// The scene's problem for caller cotangents, made on first use.
    fn diff_problem(&self, py: Python<'_>) -> PyResult<Arc<diffphd::optimize::problem::Problem>> {
        if let Some(p) = self.diff.get() {
            return Ok(p.clone());
        }
        let p = diff::problem(py, &self.ls)?;
        Ok(self.diff.get_or_init(|| p).clone())
    }

    /// The scene, model and overrides with `extra` overrides on top (a fresh load, as the
    /// command line's `--frames` is an override), or `self`'s when there are none.
    fn with_sets(
        &self,
        py: Python<'_>,
        extra: Vec<String>,
    ) -> PyResult<(LoadedScene, Arc<Model>, Vec<String>)> {
        if extra.is_empty() {
            return Ok((self.ls.clone(), self.model.clone(), self.sets.clone()));
        }
        let mut sets = self.sets.clone();
        sets.extend(extra);
        let s = Scene::load(py, self.text.clone(), self.path.clone(), sets)?;
        Ok((s.ls, s.model, s.sets))
    }
}

#[pymethods]
impl Scene {
    /// Load a scene file (TOML) with `set` overrides (as `--set key.path=value`).
    #[new]
    #[pyo3(signature = (path, set=None))]
    fn new(py: Python<'_>, path: PathBuf, set: Option<&Bound<'_, PyAny>>) -> PyResult<Scene> {
        let sets = set_expressions(set)?;
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(err) => {
                let e = diffphd::scene::SceneError::Io {
                    path: path.display().to_string(),
                    err,
                };
                return Err(session_err(py, e.into()));
            }
        };
        Scene::load(py, text, path, sets)
    }

    /// A scene from TOML text; relative paths (meshes, per-element files) resolve against
    /// `base_dir` (default: the working directory), and messages name `<base_dir>/<string>`.
    #[staticmethod]
    #[pyo3(signature = (text, set=None, base_dir=None))]
    fn from_toml(
        py: Python<'_>,
        text: String,
        set: Option<&Bound<'_, PyAny>>,
        base_dir: Option<PathBuf>,
    ) -> PyResult<Scene> {
        let sets = set_expressions(set)?;
        let path = base_dir
            .unwrap_or_else(|| PathBuf::from("."))
            .join("<string>");
        Scene::load(py, text, path, sets)
    }

    /// Path of the scene file (`<base_dir>/<string>` for a string).
    #[getter]
    fn path(&self) -> String {
        self.ls.path.display().to_string()
    }
    /// SHA-256 of the effective scene (after overrides), as in every output's provenance.
    #[getter]
    fn hash(&self) -> String {
        self.ls.hash.clone()
    }
    /// The `--set` expressions applied.
    #[getter]
    fn overrides(&self) -> Vec<String> {
        self.sets.clone()
    }
    /// The effective scene (after overrides) as TOML text.
    #[getter]
    fn effective_toml(&self) -> String {
        self.ls.effective_toml.clone()
    }
    /// Number of frames (`simulation.frames`).
    #[getter]
    fn frames(&self) -> usize {
        self.model.frames
    }
    /// Time step h (s).
    #[getter]
    fn dt(&self) -> f64 {
        self.model.h
    }
    #[getter]
    fn num_nodes(&self) -> usize {
        self.model.num_nodes()
    }
    #[getter]
    fn num_elements(&self) -> usize {
        self.model.num_elements()
    }
    /// Rest positions (n, 3) after the bodies' transforms.
    #[getter]
    fn rest_positions<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        let n = self.model.num_nodes();
        let flat: Vec<f64> = self.model.rest.iter().flatten().copied().collect();
        arrays::out(
            Array2::from_shape_vec((n, 3), flat)
                .expect("n x 3")
                .into_pyarray(py),
        )
    }
    /// Initial positions (n, 3) (rest positions moved by `[body.initial]`).
    #[getter]
    fn initial_positions<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        arrays::nodal(py, &self.model.x0)
    }
    /// Initial velocities (n, 3).
    #[getter]
    fn initial_velocities<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        arrays::nodal(py, &self.model.v0)
    }
    /// Element connectivity (m, k) of global node indices (k = 4 for tet4, 8 for hex8, in
    /// the library's lexicographic hex order). Scenes mixing element kinds: use
    /// `element_nodes` and `element_offsets`.
    #[getter]
    fn elements<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let m = &self.model;
        let k = m.conn_ptr.get(1).copied().unwrap_or(0);
        if m.conn_ptr.windows(2).any(|w| w[1] - w[0] != k) {
            return Err(py_err(
                py,
                "InputError",
                "elements: the scene mixes element kinds; use element_nodes and element_offsets"
                    .into(),
            ));
        }
        let conn: Vec<i64> = m.conn.iter().map(|&i| i as i64).collect();
        Ok(arrays::out(
            Array2::from_shape_vec((m.num_elements(), k), conn)
                .expect("m x k")
                .into_pyarray(py),
        ))
    }
    /// All elements' nodes, concatenated (element e: `element_nodes[offsets[e]:offsets[e+1]]`).
    #[getter]
    fn element_nodes<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        arrays::indices(py, &self.model.conn)
    }
    #[getter]
    fn element_offsets<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        arrays::indices(py, &self.model.conn_ptr)
    }
    /// Boundary triangles (f, 3) of every body, global node indices.
    #[getter]
    fn surface<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        let tris: Vec<i64> = self
            .model
            .bodies
            .iter()
            .flat_map(|b| b.surface.iter().flatten().map(|&i| i as i64))
            .collect();
        let f = tris.len() / 3;
        arrays::out(
            Array2::from_shape_vec((f, 3), tris)
                .expect("f x 3")
                .into_pyarray(py),
        )
    }
    /// Young's modulus per element (Pa), regions applied.
    #[getter]
    fn youngs_modulus<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        arrays::out(Array1::from_vec(self.model.params.youngs.clone()).into_pyarray(py))
    }
    /// Nodes held by a Dirichlet condition on any axis (sorted, unique).
    #[getter]
    fn fixed_nodes<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        let mut nodes: Vec<usize> = self
            .model
            .dirichlet
            .iter()
            .flat_map(|g| g.nodes.iter().copied())
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        arrays::indices(py, &nodes)
    }
    /// The bodies: name, element kind, material model, node and element ranges, ν, ρ.
    #[getter]
    fn bodies<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let m = &self.model;
        let out = PyList::empty(py);
        for (b, info) in m.bodies.iter().enumerate() {
            let d = PyDict::new(py);
            d.set_item("name", &info.name)?;
            d.set_item("element", format!("{:?}", info.kind).to_lowercase())?;
            d.set_item("material", format!("{:?}", info.model).to_lowercase())?;
            d.set_item("nodes", (info.nodes.start, info.nodes.end))?;
            d.set_item("elements", (info.elements.start, info.elements.end))?;
            d.set_item("poisson_ratio", m.params.nu[b])?;
            d.set_item("density", m.params.density[b])?;
            out.append(d)?;
        }
        Ok(out)
    }
    /// The `[[body.region]]`s: body index, region index, name (or None) and the elements
    /// (global indices) each selects.
    #[getter]
    fn regions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for (b, info) in self.model.bodies.iter().enumerate() {
            for (k, els) in info.regions.iter().enumerate() {
                let d = PyDict::new(py);
                d.set_item("body", b)?;
                d.set_item("index", k)?;
                let name = self
                    .ls
                    .scene
                    .bodies
                    .get(b)
                    .and_then(|body| body.regions.get(k))
                    .and_then(|r| r.name.clone());
                d.set_item("name", name)?;
                d.set_item("elements", arrays::indices(py, els))?;
                out.append(d)?;
            }
        }
        Ok(out)
    }
    /// The scene's `[[parameter]]`s, one scalar each: name, kind, shape `()`, value (user
    /// units), log, bounds `lower`/`upper` (None when not declared).
    #[getter]
    fn parameters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let ls = self.ls.clone();
        let problem = guarded(py, || session::problem(ls))?.map_err(|e| session_err(py, e))?;
        let out = PyList::empty(py);
        for p in &problem.params {
            let d = PyDict::new(py);
            d.set_item("name", &p.name)?;
            d.set_item("kind", p.key())?;
            d.set_item("shape", pyo3::types::PyTuple::empty(py))?;
            d.set_item("value", p.value(&problem.base))?;
            d.set_item("log", p.log)?;
            d.set_item("lower", p.lower)?;
            d.set_item("upper", p.upper)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// Roll the scene out as `diffphd simulate` does. `frames` overrides
    /// `simulation.frames` (as `--frames`); `threads` sizes this call's thread pool
    /// (default: the scene's `solver.threads`, 0 = every core); `backend` is `"cpu"`,
    /// `"cuda"` or `"emulator"`; `x0`, `v0` (n, 3) replace the initial state and `youngs`
    /// (m,) the per-element Young's modulus. Returns a `Rollout`.
    #[pyo3(signature = (frames=None, threads=None, backend="cpu", x0=None, v0=None, youngs=None))]
    #[allow(clippy::too_many_arguments)]
    fn simulate(
        &self,
        py: Python<'_>,
        frames: Option<usize>,
        threads: Option<usize>,
        backend: &str,
        x0: Option<&Bound<'_, PyAny>>,
        v0: Option<&Bound<'_, PyAny>>,
        youngs: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Rollout> {
        let backend = backend_arg(py, backend)?;
        // as `--frames N`: always an override (it is part of the scene hash)
        let extra: Vec<String> = frames
            .map(|f| format!("simulation.frames={f}"))
            .into_iter()
            .collect();
        let (ls, mut model, sets) = self.with_sets(py, extra)?;
        let n3 = 3 * model.num_nodes();
        let m = model.num_elements();
        // Read every array first (views, no copy when C-contiguous float64), then copy
        // the checked values into the model (its own, so the scene's stays untouched).
        let x0 = x0
            .map(|a| arrays::F64Array::read(a, "x0", &[Some(n3 / 3), Some(3)]))
            .transpose()?;
        let v0 = v0
            .map(|a| arrays::F64Array::read(a, "v0", &[Some(n3 / 3), Some(3)]))
            .transpose()?;
        let youngs = youngs
            .map(|a| arrays::F64Array::read(a, "youngs", &[Some(m)]))
            .transpose()?;
        if x0.is_some() || v0.is_some() || youngs.is_some() {
            let mm = Arc::make_mut(&mut model);
            if let Some(a) = &x0 {
                a.copy_into(&mut mm.x0);
            }
            if let Some(a) = &v0 {
                a.copy_into(&mut mm.v0);
            }
            if let Some(a) = &youngs {
                arrays::check_positive(py, a, "youngs")?;
                a.copy_into(&mut mm.params.youngs);
            }
        }
        let threads = threads.unwrap_or(ls.scene.solver.threads);
        run_rollout(py, ls, model, backend, threads, &sets)
    }

    /// One forward and backward pass, as `diffphd grad`: the loss of the scene's `[loss]`
    /// and its gradient with respect to the `[[parameter]]`s. `values` maps parameter
    /// names to values (user units) to evaluate at instead of the scene's. Returns a dict:
    /// `loss`, `parameters` (names), `values`, `theta` (ln(value) for `log = true`
    /// parameters, else the value), `gradient` (dL/dθ, as `diffphd grad` prints),
    /// `gradient_values` (dL/dvalue), `evaluation` (grad.json's record) and provenance.
    #[pyo3(signature = (values=None, threads=None, backend="cpu"))]
    fn grad<'py>(
        &self,
        py: Python<'py>,
        values: Option<&Bound<'py, PyDict>>,
        threads: Option<usize>,
        backend: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let backend = backend_arg(py, backend)?;
        let ls = self.ls.clone();
        let mut problem = guarded(py, || session::problem(ls))?.map_err(|e| session_err(py, e))?;
        session::accelerate_problem(&mut problem, backend, |_| {})
            .map_err(|e| session_err(py, e))?;
        if problem.params.is_empty() {
            return Err(py_err(
                py,
                "SceneError",
                format!(
                    "{}: declare at least one [[parameter]] to differentiate the loss with respect to",
                    self.ls.path.display()
                ),
            ));
        }
        let mut theta = problem.theta0();
        if let Some(values) = values {
            for (k, v) in values.iter() {
                let name: String = k.extract().map_err(|_| {
                    py_err(
                        py,
                        "InputError",
                        format!("values: key {k} is not a parameter name"),
                    )
                })?;
                let Some(i) = problem.params.iter().position(|p| p.name == name) else {
                    let names: Vec<&str> = problem.params.iter().map(|p| p.name.as_str()).collect();
                    return Err(py_err(
                        py,
                        "InputError",
                        format!(
                            "values: unknown parameter {name:?} (the scene's: {})",
                            names.join(", ")
                        ),
                    ));
                };
                let x: f64 = v.extract().map_err(|_| {
                    py_err(
                        py,
                        "InputError",
                        format!("values[{name:?}]: expected a number"),
                    )
                })?;
                let p = &problem.params[i];
                if !x.is_finite() || (p.log && x <= 0.0) {
                    return Err(py_err(
                        py,
                        "InputError",
                        format!(
                            "values[{name:?}]: {x} is not {}",
                            if p.log {
                                "a finite positive number (log = true)"
                            } else {
                                "a finite number"
                            }
                        ),
                    ));
                }
                theta[i] = p.to_theta(x);
            }
        }
        let threads = threads.unwrap_or(self.ls.scene.solver.threads);
        let (ev, nthreads) = {
            let problem = &problem;
            let theta = &theta;
            let (r, n) = interruptible(py, threads, |_| problem.evaluate(theta, true))?;
            let ev = r.map_err(|source| {
                session_err(
                    py,
                    session::SessionError::Solver {
                        path: self.ls.path.display().to_string(),
                        source,
                    },
                )
            })?;
            (ev, n)
        };
        let names: Vec<&str> = problem.params.iter().map(|p| p.name.as_str()).collect();
        let vals = problem.values_at(&theta);
        let gv: Vec<f64> = problem
            .params
            .iter()
            .zip(&ev.gradient)
            .zip(&vals)
            .map(|((p, &g), &v)| if p.log { g / v } else { g })
            .collect();
        let mut json = provenance("grad", &self.ls, &self.sets, nthreads, backend);
        let obj = json.as_object_mut().expect("object");
        obj.insert("parameters".into(), serde_json::json!(names));
        obj.insert("theta".into(), serde_json::json!(theta));
        obj.insert("values".into(), serde_json::json!(vals));
        obj.insert("evaluation".into(), serde_json::json!(ev));
        let d = json_to_py(py, &json)?;
        d.set_item("loss", ev.loss)?;
        d.set_item(
            "gradient",
            arrays::out(Array1::from_vec(ev.gradient.clone()).into_pyarray(py)),
        )?;
        d.set_item(
            "gradient_values",
            arrays::out(Array1::from_vec(gv).into_pyarray(py)),
        )?;
        if !ev.nonconverged_backward_frames.is_empty() {
            return Err(py_err(
                py,
                "SolverError",
                format!(
                    "adjoint did not converge in frames {:?}",
                    ev.nonconverged_backward_frames
                ),
            ));
        }
        Ok(d.into_any())
    }

    /// The muscle groups: dicts with `body`, `name`, `stiffness`, `knots` (activation knot
    /// values) and `knot_interval` (s; knot $k$ at time $k\tau$, piecewise linear between).
    #[getter]
    fn muscles<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for g in &self.model.muscles {
            let d = PyDict::new(py);
            d.set_item("body", g.body)?;
            d.set_item("name", &g.name)?;
            d.set_item("stiffness", g.stiffness)?;
            d.set_item("knots", g.knots.clone())?;
            d.set_item("knot_interval", g.knot_interval)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// The differentiable inputs of `diffphd.torch` (one per `[[parameter]]` entry): dicts
    /// with `name`, `parameters` (the scalar names), `indices`, `kind`, `log` and `theta`
    /// (the scene's working variables: ln value for `log = true`).
    fn _inputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let problem = self.diff_problem(py)?;
        diff::inputs(py, &problem)
    }

    /// Record a rollout from the initial state at working variables `theta` (p,) (None: the
    /// scene's), `x0`/`v0` (n, 3) replacing the initial state. Returns a `Tape`.
    #[pyo3(signature = (theta=None, x0=None, v0=None, threads=None))]
    fn _record(
        &self,
        py: Python<'_>,
        theta: Option<&Bound<'_, PyAny>>,
        x0: Option<&Bound<'_, PyAny>>,
        v0: Option<&Bound<'_, PyAny>>,
        threads: Option<usize>,
    ) -> PyResult<diff::Tape> {
        let threads = threads.unwrap_or(self.ls.scene.solver.threads);
        diff::record_rollout(py, self.diff_problem(py)?, theta, x0, v0, threads)
    }

    /// Record one step from `(x_t, v_t)` (n, 3) at frame `frame`, `controls_t` (one
    /// activation per muscle group) replacing the muscles' knots for the step.
    #[pyo3(signature = (frame, x_t, v_t, controls_t=None, theta=None, threads=None))]
    #[allow(clippy::too_many_arguments)]
    fn _record_step(
        &self,
        py: Python<'_>,
        frame: usize,
        x_t: &Bound<'_, PyAny>,
        v_t: &Bound<'_, PyAny>,
        controls_t: Option<&Bound<'_, PyAny>>,
        theta: Option<&Bound<'_, PyAny>>,
        threads: Option<usize>,
    ) -> PyResult<diff::Tape> {
        let threads = threads.unwrap_or(self.ls.scene.solver.threads);
        let problem = self.diff_problem(py)?;
        diff::record_step(py, problem, theta, frame, x_t, v_t, controls_t, threads)
    }

    fn __repr__(&self) -> String {
        format!(
            "Scene({:?}, nodes={}, elements={}, frames={}, overrides={:?})",
            self.path.display().to_string(),
            self.model.num_nodes(),
            self.model.num_elements(),
            self.model.frames,
            self.sets
        )
    }
}

/// The provenance fields every output carries: the library's, as on the command line.
use diffphd::session::provenance;

/// A JSON value as Python objects (through the `json` module: the exact number text).
fn json_to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyDict>> {
    let text = serde_json::to_string(v).map_err(|e| py_err(py, "DiffphdError", e.to_string()))?;
    let obj = py.import("json")?.call_method1("loads", (text,))?;
    Ok(obj.cast_into::<PyDict>()?)
}

/// What the frame callback keeps of a rollout.
struct Recorded {
    x: Vec<f64>,
    v: Vec<f64>,
    fc: Option<Vec<f64>>,
    frames: Vec<serde_json::Value>,
    count: usize,
}

/// Run the rollout with the GIL released on a pool of `threads` ([`interruptible`]): Ctrl-C
/// ends it at the next solver iteration with `KeyboardInterrupt`.
fn run_rollout(
    py: Python<'_>,
    ls: LoadedScene,
    model: Arc<Model>,
    backend: Backend,
    threads: usize,
    sets: &[String],
) -> PyResult<Rollout> {
    let n3 = model.x0.len();
    let has_fc = diffphd::contact::enabled(&model);
    let frames = model.frames + 1;
    let mut rec = Recorded {
        x: Vec::with_capacity(frames * n3),
        v: Vec::with_capacity(frames * n3),
        fc: has_fc.then(|| Vec::with_capacity(frames * n3)),
        frames: vec![],
        count: 0,
    };
    let (outcome, nthreads) = interruptible(py, threads, |cancel| {
        session::simulate(&ls, &model, backend, |f: &FrameState| {
            record(&mut rec, f);
            !cancel.is_cancelled()
        })
    })?;
    let rollout = outcome.map_err(|e| session_err(py, e))?;
    let status = if rollout.incomplete_message().is_some() {
        "incomplete"
    } else {
        "completed"
    };
    let log = serde_json::json!({
        "header": {
            "provenance": provenance("simulate", &ls, sets, nthreads, backend),
            "nodes": model.num_nodes(),
            "elements": model.num_elements(),
            "samples": model.num_samples(),
            "dt": model.h,
            "frames_requested": model.frames,
            "heterogeneous": rollout.heterogeneous,
            "anderson_window": rollout.anderson_window,
            "solver_method": rollout.solver_method,
            "setup_seconds": rollout.setup_seconds,
            "factor_nnz": rollout.factor_nnz,
            "device": rollout.device,
        },
        "status": status,
        "error": rollout.incomplete_message(),
        "initial_diagnostics": rollout.diagnostics.first(),
        "frames": rec.frames,
        "warnings": rollout.warnings,
    });
    let n = model.num_nodes();
    let to3 = |data: Vec<f64>| Array3::from_shape_vec((rec.count, n, 3), data).expect("T x n x 3");
    let out = Python::attach(|py| -> PyResult<Rollout> {
        let log_py = json_to_py(py, &log)?;
        Ok(Rollout {
            positions: arrays::out(to3(std::mem::take(&mut rec.x)).into_pyarray(py)).unbind(),
            velocities: arrays::out(to3(std::mem::take(&mut rec.v)).into_pyarray(py)).unbind(),
            contact_forces: rec
                .fc
                .take()
                .map(|f| arrays::out(to3(f).into_pyarray(py)).unbind()),
            log: log_py.unbind(),
            model: model.clone(),
            output: ls.scene.output.clone(),
            dt: model.h,
        })
    })?;
    if let Some(msg) = rollout.incomplete_message() {
        let e = py_err(
            py,
            "NotConvergedError",
            format!("{}: {msg}", ls.path.display()),
        );
        let r = Py::new(py, out)?;
        e.value(py).setattr("rollout", r)?;
        return Err(e);
    }
    Ok(out)
}

/// Keep frame `f`'s state and log record.
fn record(rec: &mut Recorded, f: &FrameState) {
    rec.x.extend_from_slice(f.x);
    rec.v.extend_from_slice(f.v);
    if let (Some(dst), Some(src)) = (rec.fc.as_mut(), f.contact_force) {
        dst.extend_from_slice(src);
    }
    rec.count += 1;
    if let Some(stats) = f.stats {
        let mut r = serde_json::to_value(stats).unwrap_or(serde_json::Value::Null);
        if let Some(o) = r.as_object_mut() {
            o.insert("frame".into(), f.frame.into());
            o.insert("time".into(), f.time.into());
            o.insert("inverted_elements".into(), serde_json::json!(f.inverted));
            o.insert("diagnostics".into(), serde_json::json!(f.diagnostics));
        }
        rec.frames.push(r);
    }
}

/// A rollout: states of frames 0..=T as arrays, the run log, and the frame writer.
#[pyclass(module = "diffphd._diffphd", frozen)]
struct Rollout {
    /// Positions (T+1, n, 3), frame 0 the initial state.
    #[pyo3(get)]
    positions: Py<PyAny>,
    /// Velocities (T+1, n, 3).
    #[pyo3(get)]
    velocities: Py<PyAny>,
    /// Nodal contact forces (T+1, n, 3) for scenes with obstacles, else None.
    #[pyo3(get)]
    contact_forces: Option<Py<PyAny>>,
    /// The run log (header, status, per-frame statistics, warnings) as a dict.
    #[pyo3(get)]
    log: Py<PyDict>,
    model: Arc<Model>,
    output: diffphd::scene::Output,
    dt: f64,
}

#[pymethods]
impl Rollout {
    /// Number of frames stored (T + 1).
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.positions.bind(py).len()
    }

    /// Write the frames as `diffphd simulate` does (`[output] format`: binary PLY surfaces,
    /// or VTU volumes and `frames.pvd`) into `dir` (created if missing), every `every`-th
    /// frame (default 1). No `log.json`, no folder claim. Returns the file names.
    #[pyo3(signature = (dir, every=1))]
    fn write_frames(&self, py: Python<'_>, dir: PathBuf, every: usize) -> PyResult<Vec<String>> {
        if every == 0 {
            return Err(py_err(py, "InputError", "every: must be at least 1".into()));
        }
        std::fs::create_dir_all(&dir).map_err(|e| {
            py_err(
                py,
                "OutputError",
                format!("cannot create {}: {e}", dir.display()),
            )
        })?;
        let x =
            arrays::F64Array::read(self.positions.bind(py), "positions", &[None, None, Some(3)])?;
        let v = arrays::F64Array::read(
            self.velocities.bind(py),
            "velocities",
            &[None, None, Some(3)],
        )?;
        let fc = match &self.contact_forces {
            Some(f) => Some(arrays::F64Array::read(
                f.bind(py),
                "contact_forces",
                &[None, None, Some(3)],
            )?),
            None => None,
        };
        let (xs, vs) = (x.slice(), v.slice());
        let fcs = fc.as_ref().map(|f| f.slice());
        let n3 = 3 * self.model.num_nodes();
        let count = xs.len() / n3.max(1);
        let frames = (0..count).filter(|f| f % every == 0).map(|f| {
            let r = f * n3..(f + 1) * n3;
            (
                f,
                f as f64 * self.dt,
                &xs[r.clone()],
                &vs[r.clone()],
                fcs.map(|s| &s[r]),
            )
        });
        let model = &self.model;
        let output = &self.output;
        let frames: Vec<_> = frames.collect();
        guarded(py, || {
            session::write_frames(model, output, Path::new(&dir), frames)
        })?
        .map_err(|e| session_err(py, e))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let shape = self
            .positions
            .bind(py)
            .getattr("shape")
            .map(|s| s.to_string())
            .unwrap_or_default();
        format!("Rollout(positions{shape})")
    }
}

/// Whether this build has the `cuda` feature, and why CUDA cannot run here (None: it can).
#[pyfunction]
fn cuda_status() -> Option<String> {
    diffphd::gpu::cuda_status().err().map(|e| e.to_string())
}

#[pymodule]
fn _diffphd(m: &Bound<'_, PyModule>) -> PyResult<()> {
    diffphd::io::set_git_commit(env!("DIFFPHD_GIT_COMMIT"));
    m.add("__version__", diffphd::io::VERSION)?;
    m.add("git_commit", diffphd::io::git_commit())?;
    m.add("cuda_feature", cfg!(feature = "cuda"))?;
    m.add_class::<Scene>()?;
    m.add_class::<Rollout>()?;
    m.add_class::<diff::Tape>()?;
    m.add_function(wrap_pyfunction!(cuda_status, m)?)?;
    Ok(())
}
