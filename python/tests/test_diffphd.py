"""Tests of the Python package: scenes and model arrays, rollouts bitwise equal to the
command line's, errors, threads, the GIL and Ctrl-C. Fast: a few cantilever frames each."""

import json
import os
import re
import shutil
import subprocess
import signal
import threading
import time
import _thread
from pathlib import Path

import numpy as np
import pytest

import diffphd

ROOT = Path(__file__).resolve().parents[2]
CANTILEVER = ROOT / "scenes" / "cantilever.toml"
CLI = Path(os.environ.get("DIFFPHD_CLI", ROOT / "target" / "release" / "diffphd"))
# The cantilever on a coarser grid (11 x 4 x 4 nodes): rollouts in milliseconds.
SMALL = {"body.0.mesh.cells": [10, 3, 3]}
N_SMALL = 11 * 4 * 4


def cli_or_skip():
    """The command-line binary, or skip (fail under CI=true: the comparison must run there)."""
    if CLI.is_file() and os.access(CLI, os.X_OK):
        return str(CLI)
    why = f"no diffphd binary at {CLI} (cargo build --release builds it)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def run_cli(*args):
    p = subprocess.run([cli_or_skip(), *map(str, args)], capture_output=True, text=True)
    return p


@pytest.fixture(scope="module")
def scene():
    return diffphd.Scene(CANTILEVER, set={"simulation.frames": 4})


@pytest.fixture(scope="module")
def small():
    return diffphd.Scene(CANTILEVER, set={**SMALL, "simulation.frames": 4})


# ---------------------------------------------------------------- scenes and model arrays


def test_load_from_file(scene):
    assert scene.frames == 4
    assert scene.dt == 0.01
    # 20 x 5 x 5 hex cells
    assert scene.num_nodes == 21 * 6 * 6
    assert scene.num_elements == 20 * 5 * 5
    assert scene.overrides == ["simulation.frames=4"]
    assert re.fullmatch(r"[0-9a-f]{64}", scene.hash)


def test_load_from_string_with_overrides_is_the_same_scene():
    text = CANTILEVER.read_text()
    sets = {"simulation.frames": 3, "body.0.material.youngs_modulus": 2.0e6, "solver.method": "diffphd"}
    a = diffphd.Scene.from_toml(text, set=sets, base_dir=CANTILEVER.parent)
    b = diffphd.Scene(CANTILEVER, set=sets)
    assert a.frames == 3
    assert a.hash == b.hash  # same effective scene
    assert a.overrides == ["simulation.frames=3", "body.0.material.youngs_modulus=2000000.0", "solver.method=diffphd"]
    assert a.path.endswith("<string>")
    # the list form is the command line's --set verbatim
    c = diffphd.Scene(CANTILEVER, set=["simulation.frames=3", "body.0.material.youngs_modulus=2e6", 'solver.method="diffphd"'])
    assert c.hash == b.hash
    e = a.youngs_modulus
    assert set(np.unique(e)) == {2.0e6, 2.0e7}


def test_model_arrays(scene):
    rest = scene.rest_positions
    assert rest.shape == (756, 3) and rest.dtype == np.float64
    np.testing.assert_allclose(rest.min(axis=0), [0.0, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(rest.max(axis=0), [0.32, 0.08, 0.08], atol=1e-12)
    el = scene.elements
    assert el.shape == (500, 8) and el.dtype == np.int64
    assert el.min() == 0 and el.max() == 755
    np.testing.assert_array_equal(scene.element_offsets, np.arange(0, 8 * 501, 8))
    np.testing.assert_array_equal(scene.element_nodes, el.ravel())
    # hex surface: 2 (20x5 + 20x5 + 5x5) quads, two triangles each
    surf = scene.surface
    assert surf.shape == (2 * 2 * (100 + 100 + 25), 3)
    assert set(np.unique(surf)) <= set(range(756))
    # clamped at x = 0: every node of that face and no other
    fixed = scene.fixed_nodes
    np.testing.assert_array_equal(fixed, np.flatnonzero(rest[:, 0] == 0.0))
    assert len(fixed) == 36
    # the stiff middle third: E = 10 x 1e6 exactly on the region's elements (by centroid)
    (region,) = scene.regions
    assert region["name"] == "stiff middle third" and region["body"] == 0
    E = scene.youngs_modulus
    stiff = np.zeros(500, bool)
    stiff[region["elements"]] = True
    assert np.all(E[stiff] == 1.0e7) and np.all(E[~stiff] == 1.0e6)
    cx = rest[el].mean(axis=1)[:, 0]
    assert np.all((cx[stiff] > 0.32 / 3) & (cx[stiff] < 0.64 / 3))
    (body,) = scene.bodies
    assert body["name"] == "beam" and body["element"] == "hex8" and body["material"] == "corotated"
    assert body["nodes"] == (0, 756) and body["elements"] == (0, 500)
    assert body["poisson_ratio"] == 0.45 and body["density"] == 1000.0
    # the initial twist about the beam's axis (y = z = 0.04): distances to it are kept
    x0 = scene.initial_positions
    r0 = np.hypot(rest[:, 1] - 0.04, rest[:, 2] - 0.04)
    r1 = np.hypot(x0[:, 1] - 0.04, x0[:, 2] - 0.04)
    np.testing.assert_allclose(r0, r1, atol=1e-12)
    assert np.abs(x0 - rest).max() > 1e-3


def test_parameters(scene):
    ps = scene.parameters
    assert [p["kind"] for p in ps] == ["youngs_modulus", "poisson_ratio", "density"]
    assert [p["log"] for p in ps] == [True, False, True]
    assert ps[1]["value"] == 0.45 and ps[2]["value"] == 1000.0
    assert all(p["shape"] == () and p["lower"] is None and p["upper"] is None for p in ps)
    assert len({p["name"] for p in ps}) == 3


# ---------------------------------------------------------------- rollouts


def test_simulate_arrays(small):
    scene = small
    r = scene.simulate(threads=1)
    x, v = r.positions, r.velocities
    assert x.shape == v.shape == (5, N_SMALL, 3) and len(r) == 5
    assert r.contact_forces is None  # no obstacles
    np.testing.assert_array_equal(x[0], scene.initial_positions)
    np.testing.assert_array_equal(v[0], scene.initial_velocities)
    # v_{t+1} = (x_{t+1} - x_t) / h, the command line's update, bit for bit
    np.testing.assert_array_equal(v[1:], (x[1:] - x[:-1]) / scene.dt)
    # clamped nodes stay put; the free end moves
    fixed = scene.fixed_nodes
    np.testing.assert_array_equal(x[:, fixed], np.broadcast_to(x[0, fixed], (5, len(fixed), 3)))
    assert np.abs(x[-1] - x[0]).max() > 1e-4
    log = r.log
    assert log["status"] == "completed" and log["error"] is None
    assert [f["frame"] for f in log["frames"]] == [1, 2, 3, 4]
    assert all(f["converged"] and f["iterations"] > 0 for f in log["frames"])
    prov = log["header"]["provenance"]
    assert prov["threads"] == 1 and prov["backend"] == "cpu" and prov["command"] == "simulate"
    assert prov["scene_hash"] == scene.hash and prov["overrides"] == scene.overrides
    assert prov["diffphd_version"] == diffphd.__version__


def test_frames_argument_is_the_cli_override(small):
    scene = small
    r = scene.simulate(frames=2, threads=1)
    assert r.positions.shape == (3, N_SMALL, 3)
    np.testing.assert_array_equal(r.positions, scene.simulate(threads=1).positions[:3])


def test_threads_per_call_and_determinism(small):
    scene = small
    a = scene.simulate(frames=2, threads=2)
    b = scene.simulate(frames=2, threads=2)
    c = scene.simulate(frames=2, threads=1)
    assert a.log["header"]["provenance"]["threads"] == 2
    assert c.log["header"]["provenance"]["threads"] == 1
    np.testing.assert_array_equal(a.positions, b.positions)
    # across thread counts: within 1e-12 m (docs/RELIABILITY.md "Determinism")
    np.testing.assert_allclose(a.positions, c.positions, rtol=0, atol=1e-12)


def test_initial_state_and_youngs_arrays_in(small):
    scene = small
    n = N_SMALL
    x0 = np.array(scene.rest_positions)  # at rest instead of twisted
    r = scene.simulate(frames=1, threads=1, x0=x0, v0=np.zeros((n, 3)), youngs=scene.youngs_modulus)
    np.testing.assert_array_equal(r.positions[0], x0)
    # a non-contiguous view and an integer array are read too (converted once)
    big = np.zeros((n, 6))
    big[:, ::2] = x0
    r2 = scene.simulate(frames=1, threads=1, x0=big[:, ::2], v0=np.zeros((n, 3), dtype=np.int32))
    np.testing.assert_array_equal(r.positions, r2.positions)
    # the scene's own model is untouched
    assert not np.array_equal(scene.initial_positions, x0)


def _vtu_array(text, name):
    m = re.search(rf'Name="{name}"[^>]*>\n(.*?)</DataArray>', text, re.S)
    return np.array([float(t) for t in m.group(1).split()])


@pytest.mark.parametrize("fmt", ["vtu", "ply"])
def test_simulate_bitwise_equal_to_cli(tmp_path, fmt):
    # ASCII VTU so the states can be read back as text below (the binary encodings are
    # compared byte for byte by the same test through the frame files)
    sets = [f'output.format="{fmt}"', 'output.vtu_encoding="ascii"', "body.0.mesh.cells=[10, 3, 3]"]
    out = tmp_path / "cli"
    p = run_cli("simulate", CANTILEVER, "--frames", 3, "--threads", 2, "--quiet", "--out", out,
                *[a for s in sets for a in ("--set", s)])
    assert p.returncode == 0, p.stderr
    scene = diffphd.Scene(CANTILEVER, set=sets)
    r = scene.simulate(frames=3, threads=2)
    assert r.positions.shape == (4, N_SMALL, 3)
    mine = tmp_path / "py"
    names = r.write_frames(mine)
    assert len(names) == 4
    for name in names:
        assert (mine / name).read_bytes() == (out / name).read_bytes(), name
    if fmt == "vtu":
        assert (mine / "frames.pvd").read_bytes() == (out / "frames.pvd").read_bytes()
        # the states themselves, full precision (the VTU text is exact), bit for bit
        for t, name in enumerate(names):
            text = (out / name).read_text()
            np.testing.assert_array_equal(_vtu_array(text, "Points").reshape(-1, 3), r.positions[t])
            np.testing.assert_array_equal(_vtu_array(text, "velocity").reshape(-1, 3), r.velocities[t])
    log = json.loads((out / "log.json").read_text())
    assert [f["iterations"] for f in log["frames"]] == [f["iterations"] for f in r.log["frames"]]
    # the same effective scene: the CLI's --frames is an override, and frames= too
    # (--threads is one on the command line, threads= is not: it sizes the call's pool)
    prov = r.log["header"]["provenance"]
    assert prov["overrides"] == log["header"]["overrides"][:-1]
    assert log["header"]["overrides"][-1] == "solver.threads=2"
    assert prov["threads"] == log["header"]["threads"] == 2


def test_simulate_log_diagnostics_equal_the_clis(tmp_path):
    """The log's physics diagnostics (energies, centre of mass, momenta, strains) are
    log.json's: `initial_diagnostics` for frame 0 and `frames[i].diagnostics`, equal as
    JSON values (the same numbers to the last bit)."""
    out = tmp_path / "cli"
    p = run_cli("simulate", CANTILEVER, "--frames", 3, "--threads", 1, "--quiet", "--out", out,
                "--set", "body.0.mesh.cells=[10, 3, 3]")
    assert p.returncode == 0, p.stderr
    log = json.loads((out / "log.json").read_text())
    r = diffphd.Scene(CANTILEVER, set=SMALL).simulate(frames=3, threads=1)
    assert r.log["initial_diagnostics"] == log["initial_diagnostics"]
    mine = [f["diagnostics"] for f in r.log["frames"]]
    assert mine == [f["diagnostics"] for f in log["frames"]] and len(mine) == 3
    keys = {"elastic_energy", "kinetic_energy", "gravitational_energy", "total_energy", "center_of_mass",
            "linear_momentum", "angular_momentum", "max_principal_strain", "min_principal_strain",
            "inverted_elements"}
    assert set(mine[-1]) == keys
    # they describe these states: the kinetic energy from the velocities and lumped masses
    # is not at hand here, but the twisted beam is strained and moving
    assert mine[-1]["elastic_energy"] > 0 and mine[-1]["kinetic_energy"] > 0


def test_grad_equal_to_cli(tmp_path):
    out = tmp_path / "g"
    p = run_cli("grad", CANTILEVER, "--frames", 2, "--threads", 2, "--quiet", "--out", out,
                "--set", "body.0.mesh.cells=[10, 3, 3]")
    assert p.returncode == 0, p.stderr
    cli = json.loads((out / "grad.json").read_text())
    scene = diffphd.Scene(CANTILEVER, set={**SMALL, "simulation.frames": 2})
    g = scene.grad(threads=2)
    assert g["loss"] == cli["evaluation"]["loss"]
    assert g["gradient"].tolist() == cli["evaluation"]["gradient"]
    assert g["parameters"] == cli["parameters"] and g["values"] == cli["values"]
    # dL/dvalue = dL/dθ / value for log parameters
    v = np.array(g["values"])
    np.testing.assert_array_equal(g["gradient_values"], np.where([True, False, True], g["gradient"] / v, g["gradient"]))
    assert g["diffphd_version"] == cli["diffphd_version"] and g["scene_hash"] != ""


def test_grad_at_values_moves_the_loss(small):
    scene = small
    base = scene.grad(threads=1)
    name = scene.parameters[1]["name"]  # Poisson ratio
    g = scene.grad(values={name: 0.40}, threads=1)
    assert g["values"][1] == 0.40 and g["values"][0] == base["values"][0]
    assert g["loss"] != base["loss"]


# ---------------------------------------------------------------- errors


def _cli_error(*args):
    p = run_cli(*args)
    assert p.returncode == 2, p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith("error: ")
    return line[len("error: "):]


def test_scene_errors_carry_the_cli_message():
    with pytest.raises(diffphd.SceneError) as e:
        diffphd.Scene(CANTILEVER, set={"simulation.dt": -1.0})
    assert "simulation.dt" in str(e.value) and e.value.exit_code == 2
    assert str(e.value) == _cli_error("simulate", CANTILEVER, "--dry-run", "--set", "simulation.dt=-1.0")
    with pytest.raises(diffphd.SceneError) as e:
        diffphd.Scene(CANTILEVER, set={"solver.no_such_key": 1})
    assert "no_such_key" in str(e.value)
    assert str(e.value) == _cli_error("simulate", CANTILEVER, "--dry-run", "--set", "solver.no_such_key=1")
    with pytest.raises(diffphd.SceneError, match="cannot read scene file"):
        diffphd.Scene(ROOT / "no" / "such.toml")
    with pytest.raises(diffphd.SceneError, match=r"<string>"):
        diffphd.Scene.from_toml("schema_version = 1\n[simulation\n")
    with pytest.raises(diffphd.SceneError, match=r"--set body\.7\.material"):
        diffphd.Scene(CANTILEVER, set={"body.7.material.youngs_modulus": 1})
    with pytest.raises(diffphd.InputError, match=r"set\[.simulation\.dt.\]: NaN is not a finite number"):
        diffphd.Scene(CANTILEVER, set={"simulation.dt": float("nan")})
    with pytest.raises(diffphd.InputError, match="cannot use a dict"):
        diffphd.Scene(CANTILEVER, set={"simulation.dt": {}})
    # SceneError is a ValueError too
    assert issubclass(diffphd.SceneError, ValueError)


def test_model_error_names_the_file(tmp_path):
    text = re.sub(r"\[body\.mesh\]\n(.*\n)*?dx = 0\.016\n", '[body.mesh]\nfile = "missing.msh"\n', CANTILEVER.read_text())
    assert 'file = "missing.msh"' in text
    with pytest.raises(diffphd.ModelError, match="missing.msh") as e:
        diffphd.Scene.from_toml(text, base_dir=tmp_path)
    assert isinstance(e.value, diffphd.SceneError)


def test_array_errors_name_the_argument(scene):
    with pytest.raises(diffphd.InputError, match=r"^x0: expected shape \(756, 3\), got \(5, 3\)$"):
        scene.simulate(x0=np.zeros((5, 3)))
    with pytest.raises(diffphd.InputError, match=r"^youngs: expected shape \(500,\), got \(500, 1\)$"):
        scene.simulate(youngs=np.ones((500, 1)))
    with pytest.raises(diffphd.InputError, match=r"^v0: expected real numbers \(float64\), got dtype complex128$"):
        scene.simulate(v0=np.zeros((756, 3), complex))
    with pytest.raises(diffphd.InputError, match=r"^x0: expected real numbers"):
        scene.simulate(x0=[["a", "b", "c"]] * 756)
    bad = np.array(scene.initial_positions)
    bad[12, 1] = np.nan
    with pytest.raises(diffphd.InputError, match=r"^x0\[12, 1\] = NaN is not a finite number$"):
        scene.simulate(x0=bad)
    E = np.array(scene.youngs_modulus)
    E[7] = -1.0
    with pytest.raises(diffphd.InputError, match=r"^youngs\[7\] = -1 must be positive$"):
        scene.simulate(youngs=E)
    E[7] = 1e300
    with pytest.raises(diffphd.InputError, match=r"^youngs\[7\] = 1e300 is beyond the range"):
        scene.simulate(youngs=E)
    with pytest.raises(diffphd.InputError, match=r"unknown parameter \"nope\""):
        scene.grad(values={"nope": 1.0})
    with pytest.raises(diffphd.InputError, match=r"a finite positive number"):
        scene.grad(values={scene.parameters[0]["name"]: -1.0})
    with pytest.raises(TypeError):
        scene.simulate(frames="many")
    with pytest.raises(OverflowError):
        scene.simulate(threads=-1)


def test_backend_errors():
    scene = diffphd.Scene(CANTILEVER, set={"simulation.frames": 1})
    with pytest.raises(diffphd.BackendError, match="unknown backend"):
        scene.simulate(backend="gpu")
    why = diffphd.cuda_status()
    if why is None:
        pytest.skip("CUDA runs here")
    with pytest.raises(diffphd.BackendError) as e:
        scene.simulate(backend="cuda")
    assert str(e.value) == f"--backend cuda requested but CUDA is unavailable: {why}"
    assert e.value.exit_code == 2
    assert str(e.value) == _cli_error("simulate", CANTILEVER, "--frames", 1, "--backend", "cuda", "--out", "/nonexistent/x")


def test_not_converged_keeps_the_rollout():
    s = diffphd.Scene(CANTILEVER, set={**SMALL, "simulation.frames": 2, "solver.max_iterations": 1,
                                       "solver.method": "diffphd",
                                       "solver.mode": "paper", "solver.on_nonconvergence": "fail"})
    with pytest.raises(diffphd.NotConvergedError, match=r"2 of 2 frames did not meet") as e:
        s.simulate(threads=1)
    assert e.value.exit_code == 3
    assert e.value.rollout.positions.shape == (3, N_SMALL, 3)
    assert e.value.rollout.log["status"] == "incomplete"


# ---------------------------------------------------------------- a Python library


def test_gil_released_during_simulate():
    scene = diffphd.Scene(CANTILEVER, set={**SMALL, "simulation.frames": 10})
    count = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.05)
        before = count[0]
        t0 = time.perf_counter()
        scene.simulate(threads=1)
        seconds = time.perf_counter() - t0
        after = count[0]
    finally:
        stop.set()
        t.join()
    # a GIL held by the call would freeze the counter for its whole duration
    assert after - before > 1000, (after - before, seconds)


def interrupted_after(seconds, call):
    """Run `call()` with Python's SIGINT handler installed and interrupt the main thread after
    `seconds` from a timer thread; assert it raised KeyboardInterrupt and return the seconds
    from the interrupt to the exception."""
    # A runner started in the background (`cmd &` in a script) inherits SIGINT ignored, and
    # then `interrupt_main` does nothing: install Python's own handler for the call.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    sent = []

    def fire():
        sent.append(time.perf_counter())
        _thread.interrupt_main()

    timer = threading.Timer(seconds, fire)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
        return time.perf_counter() - sent[0]
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)


# One frame that does not end: a gate nobody meets (rel_tol 1e-300, abs_tol 0) and an
# iteration cap of 1e9. Without cancellation inside the solver's iterations Ctrl-C would wait
# for the frame; with it, the call ends at the next PD iteration.
ENDLESS = {
    **SMALL,
    "solver.method": "diffphd",  # PD's iteration (the default `auto` runs Newton here)
    "simulation.frames": 1,
    "solver.mode": "paper",
    "solver.rel_tol": 1e-300,
    "solver.abs_tol": 0.0,
    "solver.max_iterations": 10**9,
    "solver.on_nonconvergence": "warn",
}


def test_ctrl_c_raises_keyboard_interrupt():
    long_run = {**SMALL, "simulation.frames": 200000}
    scene = diffphd.Scene(CANTILEVER, set=long_run)
    t0 = time.perf_counter()
    interrupted_after(0.5, lambda: scene.simulate(threads=1))
    # far before 200000 frames
    assert time.perf_counter() - t0 < 20
    # the scene is untouched: a second call gives a fresh scene's numbers, bit for bit
    again = scene.simulate(frames=3, threads=1)
    fresh = diffphd.Scene(CANTILEVER, set=long_run).simulate(frames=3, threads=1)
    assert np.array_equal(again.positions, fresh.positions)
    assert np.array_equal(again.velocities, fresh.velocities)


def test_ctrl_c_ends_a_frame_within_one_solver_iteration():
    scene = diffphd.Scene(CANTILEVER, set=ENDLESS)
    # simulate (the frame loop) and the differentiable rollout (diffphd.torch's tape)
    for call in (lambda: scene.simulate(threads=2), lambda: scene._record(threads=1)):
        latency = interrupted_after(0.3, call)
        assert latency < 1.0, latency


def test_version_and_provenance():
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", diffphd.__version__)
    assert diffphd.git_commit is None or re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?", diffphd.git_commit)
    assert isinstance(diffphd.cuda_feature, bool)


# ---------------------------------------------------------------- scenes from arrays


def test_scene_from_arrays_is_the_same_model(small):
    s = diffphd.scene_from_arrays(
        small.rest_positions, small.elements, youngs_modulus=small.youngs_modulus,
        fixed=small.fixed_nodes, poisson_ratio=0.45, density=1000.0, dt=0.01, frames=4,
        set={"solver.rel_tol": 1e-4, "solver.anderson_window": "auto"})
    np.testing.assert_array_equal(s.rest_positions, small.rest_positions)
    np.testing.assert_array_equal(s.elements, small.elements)
    np.testing.assert_array_equal(s.youngs_modulus, small.youngs_modulus)
    np.testing.assert_array_equal(s.fixed_nodes, small.fixed_nodes)
    np.testing.assert_array_equal(s.surface, small.surface)
    # with the cantilever's initial twist, the same rollout bit for bit
    a = small.simulate(threads=1)
    b = s.simulate(threads=1, x0=small.initial_positions, v0=small.initial_velocities)
    np.testing.assert_array_equal(a.positions, b.positions)


def test_scene_from_arrays_per_element_youngs_modulus(small):
    """A per-element modulus array becomes the model's per-element E (Scene.youngs_modulus),
    and the rollout is the one of the same mesh with `youngs=` that array, bit for bit."""
    m = len(small.elements)
    e = 1e5 * (1.0 + np.random.default_rng(1).random(m))  # every element its own value
    s = diffphd.scene_from_arrays(small.rest_positions, small.elements, youngs_modulus=e,
                                  fixed=small.fixed_nodes, dt=0.01, frames=3, set={"solver.threads": 1})
    np.testing.assert_array_equal(s.youngs_modulus, e)
    uniform = diffphd.scene_from_arrays(small.rest_positions, small.elements, youngs_modulus=float(e.mean()),
                                        fixed=small.fixed_nodes, dt=0.01, frames=3, set={"solver.threads": 1})
    a, b = s.simulate(), uniform.simulate(youngs=e)
    np.testing.assert_array_equal(a.positions, b.positions)
    assert np.abs(a.positions - uniform.simulate().positions).max() > 1e-6


def test_scene_from_arrays_tets_and_obstacles():
    # one tetrahedron dropped onto a plane 1 cm below it
    x = np.array([[0, 0, 0.01], [0.1, 0, 0.01], [0, 0.1, 0.01], [0, 0, 0.11]])
    ground = {"type": "plane", "point": [0.0, 0.0, 0.0], "normal": [0.0, 0.0, 1.0], "friction": 0.0}
    s = diffphd.scene_from_arrays(x, [[0, 1, 2, 3]], youngs_modulus=1e5, obstacles=[ground], frames=10)
    assert s.num_elements == 1 and s.elements.shape == (1, 4)
    r = s.simulate(threads=1)
    assert r.contact_forces is not None and r.contact_forces.shape == (11, 4, 3)
    assert r.positions[:, :, 2].min() > -1e-3  # stopped by the plane
    assert r.positions[-1, :, 2].min() < 0.005  # it did fall onto it
    with pytest.raises(diffphd.InputError, match=r"^elements\[0, 3\] = 4 is not a node index \(0 <= i < 4\)$"):
        diffphd.scene_from_arrays(x, [[0, 1, 2, 4]])
    with pytest.raises(diffphd.InputError, match=r"^vertices\[2, 1\] = nan is not a finite number$"):
        diffphd.scene_from_arrays(np.where(np.arange(12).reshape(4, 3) == 7, np.nan, x), [[0, 1, 2, 3]])
    with pytest.raises(diffphd.InputError, match=r"^youngs_modulus\[0\] = -1.0 must be positive$"):
        diffphd.scene_from_arrays(x, [[0, 1, 2, 3]], youngs_modulus=[-1.0])
    with pytest.raises(diffphd.InputError, match=r"expected integer node indices"):
        diffphd.scene_from_arrays(x, [[0.0, 1, 2, 3]])
    with pytest.raises(diffphd.SceneError, match=r"unknown field `bogus`"):
        diffphd.scene_from_arrays(x, [[0, 1, 2, 3]], obstacles=[{"type": "plane", "bogus": 1}])
