"""diffphd.torch: rollout and step as torch.autograd.Functions over the native adjoint.

CI size: the 6x2x2 hex cantilever of tests/fixtures/torch_cantilever.toml (two log E regions,
v0, one activation knot; residual_tol and backward rel_tol 1e-12) and a coarse bouncing ball.
"""

import os
import pathlib

import numpy as np
import pytest

torch = pytest.importorskip("torch") if os.environ.get("CI") != "true" else __import__("torch")

import diffphd  # noqa: E402
import diffphd.torch as dt  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
CANTILEVER = ROOT / "tests" / "fixtures" / "torch_cantilever.toml"
LOGE0, LOGE1 = "log youngs_modulus[0].region0", "log youngs_modulus[0].region1"
V0, KNOT = "initial_velocity[0]", "muscle_activation[0].muscle0.knot1"


def scene(frames=4, **extra):
    return diffphd.Scene(CANTILEVER, set={"simulation.frames": frames, **extra})


def leaves(s):
    """The scene's inputs as float64 leaf tensors requiring grad."""
    return {n: torch.tensor(th, dtype=torch.float64, requires_grad=True) for n, (_, th) in dt.inputs(s).items()}


def several_frames_loss(x, v):
    """A scalar loss on the states of several frames (positions of 1, 3, 4; velocities of 2,
    4), scaled so that its gradients are O(1)."""
    g = torch.Generator().manual_seed(7)
    wx = torch.rand(x[0].shape, generator=g, dtype=torch.float64)
    wv = torch.rand(v[0].shape, generator=g, dtype=torch.float64)
    return 1e3 * (((x[1] - x[0]) * wx).sum() + ((x[3] - x[0]) ** 2).sum() * 10 + (x[4] * wx).sum() ** 2
                  + (v[2] * wv).sum() + ((v[4] * wv) ** 2).sum())


def test_inputs_follow_the_scenes_parameters():
    names = dt.inputs(scene())
    assert list(names) == [LOGE0, LOGE1, V0, KNOT]
    assert names[V0][0] == (3,) and names[LOGE0][0] == ()
    assert names[V0][1] == [0.0, 0.0, 0.0]  # added to [body.initial] velocity
    assert names[LOGE1][1] == pytest.approx(np.log(4e5))


def test_gradcheck_log_e_per_region_v0_and_a_knot():
    s = scene()
    p = leaves(s)

    def f(e0, e1, v0, knot):
        x, v = dt.rollout(s, **{LOGE0: e0, LOGE1: e1, V0: v0, KNOT: knot})
        return several_frames_loss(x, v)

    args = (p[LOGE0], p[LOGE1], p[V0], p[KNOT])
    # a zero adjoint would pass a loose absolute tolerance: the reference must be far from 0
    grads = torch.autograd.grad(f(*args), args)
    for g in grads:
        assert g.abs().max() > 1e-2, grads
    assert torch.autograd.gradcheck(f, args, eps=1e-6, atol=1e-7, rtol=1e-5)


def test_gradient_equals_diffphd_grad():
    """The scene's [loss] (node_target: half the squared distance of the mean of the x_max
    face at the last frame from the target) in torch, against `grad` (the command line's
    evaluation): every parameter's dL/dtheta to 1e-10 relative."""
    s = scene(frames=6)
    p = leaves(s)
    x, _ = dt.rollout(s, **p)
    rest = s.rest_positions
    face = np.flatnonzero(rest[:, 0] >= rest[:, 0].max() - 1e-9)
    target = torch.tensor([0.12, 0.0, -0.01], dtype=torch.float64)
    loss = 0.5 * ((x[-1][face].mean(0) - target) ** 2).sum()
    loss.backward()
    ref = s.grad(threads=1)
    assert loss.item() == pytest.approx(ref["loss"], rel=1e-12)
    ours = np.concatenate([p[n].grad.reshape(-1).numpy() for n in (LOGE0, LOGE1, V0, KNOT)])
    assert list(ref["parameters"]) == [LOGE0, LOGE1, V0 + ".x", V0 + ".y", V0 + ".z", KNOT]
    theirs = np.asarray(ref["gradient"])
    assert np.abs(theirs).max() > 0
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10 * np.abs(theirs).max())


def test_step_through_ten_steps_equals_the_rollout():
    s = scene(frames=10)
    p = {n: t for n, t in leaves(s).items() if n != V0}
    x0 = torch.tensor(s.initial_positions, requires_grad=True)
    v0 = torch.tensor(s.initial_velocities, requires_grad=True)
    w = torch.rand(x0.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)

    def loss_of(xs, vs):
        return 1e3 * sum(((x - x0.detach()) * w).sum() ** 2 + (v * w).sum() for x, v in zip(xs, vs))

    x, v = dt.rollout(s, x0=x0, v0=v0, **p)
    loss_of(x[1:], v[1:]).backward()
    rollout_grads = {n: t.grad.clone() for n, t in p.items()}
    gx0, gv0 = x0.grad.clone(), v0.grad.clone()
    for t in list(p.values()) + [x0, v0]:
        t.grad = None
    xs, vs = [], []
    xt, vt = x0, v0
    for t in range(10):
        xt, vt = dt.step(s, xt, vt, frame=t, **p)
        xs.append(xt)
        vs.append(vt)
    assert torch.equal(torch.stack(xs), x[1:].detach())
    loss_of(xs, vs).backward()
    for n, g in rollout_grads.items():
        assert g.abs() > 1e-3
        np.testing.assert_allclose(p[n].grad.numpy(), g.numpy(), rtol=1e-9)
    np.testing.assert_allclose(v0.grad.numpy(), gv0.numpy(), rtol=1e-9, atol=1e-12 * gv0.abs().max().item())
    # the clamped nodes' prescribed values follow x0 in the rollout, the scene's x0 in a step
    free = s.rest_positions[:, 0] > 1e-9
    np.testing.assert_allclose(x0.grad.numpy()[free], gx0.numpy()[free], rtol=1e-9,
                               atol=1e-12 * gx0.abs().max().item())


def test_step_controls_gradient_matches_central_difference():
    s = scene(frames=2)
    x0 = torch.tensor(s.initial_positions)
    v0 = torch.tensor(s.initial_velocities)
    c = torch.tensor([0.8], dtype=torch.float64, requires_grad=True)

    def f(c):
        x, _ = dt.step(s, x0, v0, c, frame=1)
        return 1e4 * (x[:, 2] ** 2).sum()

    f(c).backward()
    eps = 1e-5
    fd = (f(torch.tensor([0.8 + eps], dtype=torch.float64)) - f(torch.tensor([0.8 - eps], dtype=torch.float64))).item() / (2 * eps)
    assert abs(c.grad.item()) > 1e-3
    assert c.grad.item() == pytest.approx(fd, rel=1e-5)


def test_bouncing_ball_through_contact_matches_central_differences():
    """A coarse bouncing ball that reaches the ground (friction 0.5): the gradient of its
    final centre of mass (x and z) in log E and log density against central differences with
    `diffphd gradcheck`'s rule (steps 1e-2 .. 1e-6, the consecutive pair that agrees best,
    rtol 1e-4)."""
    ball = diffphd.Scene(ROOT / "scenes" / "bouncing_ball.toml",
                         set={"simulation.frames": 30, "body.0.mesh.dx": 0.042, "solver.rel_tol": 1e-10,
                              "solver.residual_tol": 1e-12, "backward.rel_tol": 1e-12, "solver.threads": 1})
    names = ["log youngs_modulus[0]", "log density[0]"]
    th = dt.inputs(ball)

    def loss(**vals):
        x, _ = dt.rollout(ball, **vals)
        c = x[-1].mean(0)
        return 10.0 * c[0] + 30.0 * c[2]

    r = diffphd.Scene.simulate(ball)
    assert r.positions[:, :, 2].min() < 1e-3, "the ball reaches the ground"
    for n in names:
        t = torch.tensor(th[n][1], dtype=torch.float64, requires_grad=True)
        loss(**{n: t}).backward()
        g = t.grad.item()
        fds = []
        for eta in [1e-2, 1e-3, 1e-4, 1e-5, 1e-6]:
            up = loss(**{n: torch.tensor(th[n][1] + eta, dtype=torch.float64)}).item()
            dn = loss(**{n: torch.tensor(th[n][1] - eta, dtype=torch.float64)}).item()
            fds.append((up - dn) / (2 * eta))
        k = min(range(len(fds) - 1), key=lambda i: abs(fds[i] - fds[i + 1]))
        fd = fds[k + 1]
        assert abs(g) > 1e-4, (n, g)
        assert abs(g - fd) <= 1e-4 * max(abs(g), abs(fd)), (n, g, fds)


def test_backward_twice_with_retain_graph_is_identical():
    s = scene()
    p = leaves(s)
    x, v = dt.rollout(s, **p)
    loss = several_frames_loss(x, v)
    loss.backward(retain_graph=True)
    first = {n: t.grad.clone() for n, t in p.items()}
    for t in p.values():
        t.grad = None
    loss.backward()
    for n, t in p.items():
        assert torch.equal(t.grad, first[n]), n


def test_torch_func_grad_works():
    s = scene()
    base = {n: torch.tensor(th, dtype=torch.float64) for n, (_, th) in dt.inputs(s).items()}

    def f(e0):
        x, v = dt.rollout(s, **{**base, LOGE0: e0})
        return several_frames_loss(x, v)

    g = torch.func.grad(f)(base[LOGE0])
    e0 = base[LOGE0].clone().requires_grad_(True)
    f(e0).backward()
    assert g.item() == e0.grad.item() and g.item() != 0.0


def test_higher_order_and_vmap_raise_clear_errors():
    s = scene(frames=2)
    e0 = torch.tensor(dt.inputs(s)[LOGE0][1], dtype=torch.float64, requires_grad=True)
    x, _ = dt.rollout(s, **{LOGE0: e0})
    with pytest.raises(RuntimeError, match="higher-order gradients"):
        torch.autograd.grad(x.sum(), e0, create_graph=True)
    batch = torch.stack([e0.detach(), e0.detach() + 0.1])
    with pytest.raises(RuntimeError, match="vmap is not supported"):
        torch.vmap(lambda e: dt.rollout(s, **{LOGE0: e})[0].sum())(batch)


def test_nothing_is_taped_under_no_grad():
    s = scene(frames=2)
    e0 = torch.tensor(dt.inputs(s)[LOGE0][1], dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        x, v = dt.rollout(s, **{LOGE0: e0})
    assert x.grad_fn is None and v.grad_fn is None and not x.requires_grad


def test_bad_inputs_are_refused():
    s = scene(frames=2)
    with pytest.raises(diffphd.InputError, match="threads: requires_grad is set"):
        dt.rollout(s, threads=torch.tensor(1.0, requires_grad=True))
    with pytest.raises(diffphd.InputError, match='nope: unknown input'):
        dt.rollout(s, nope=torch.tensor(1.0, dtype=torch.float64))
    with pytest.raises(diffphd.InputError, match="expected a float64 tensor"):
        dt.rollout(s, **{LOGE0: torch.tensor(12.0, dtype=torch.float32)})
    with pytest.raises(diffphd.InputError, match=r"expected shape \(3,\)"):
        dt.rollout(s, **{V0: torch.zeros(2, dtype=torch.float64)})
    with pytest.raises(diffphd.InputError, match="x0"):
        dt.rollout(s, x0=torch.zeros(5, 3, dtype=torch.float64))
    with pytest.raises(diffphd.InputError, match="controls_t"):
        dt.step(s, torch.tensor(s.initial_positions), torch.tensor(s.initial_velocities),
                torch.zeros(3, dtype=torch.float64))


def test_bad_tensors_name_the_argument_and_index():
    """NaN or the wrong dtype/shape in any tensor argument: an InputError naming it."""
    s = scene(frames=2)
    x, v = torch.tensor(s.initial_positions), torch.tensor(s.initial_velocities)
    nan_x = x.clone()
    nan_x[5, 2] = float("nan")
    with pytest.raises(diffphd.InputError, match=r"^x0\[5, 2\] = NaN is not a finite number$"):
        dt.rollout(s, x0=nan_x)
    with pytest.raises(diffphd.InputError, match=r"^x_t\[5, 2\] = NaN is not a finite number$"):
        dt.step(s, nan_x, v)
    with pytest.raises(diffphd.InputError, match=r"^log youngs_modulus\[0\]\.region0 = nan is not a finite number$"):
        dt.rollout(s, **{LOGE0: torch.tensor(float("nan"), dtype=torch.float64)})
    with pytest.raises(diffphd.InputError, match=r"^initial_velocity\[0\]\[2\] = inf is not a finite number$"):
        dt.rollout(s, **{V0: torch.tensor([0.0, 0.0, float("inf")], dtype=torch.float64)})
    with pytest.raises(diffphd.InputError, match=r"^v_t: expected a float64 tensor, got torch.float32$"):
        dt.step(s, x, v.float())
    with pytest.raises(diffphd.InputError, match=r"^v0: expected shape \(\d+, 3\), got \(3,\)$"):
        dt.rollout(s, v0=torch.zeros(3, dtype=torch.float64))
    with pytest.raises(diffphd.InputError, match=r"^controls_t\[0\] = (NaN|inf)"):
        dt.step(s, x, v, torch.tensor([float("inf")], dtype=torch.float64))
    with pytest.raises(diffphd.InputError, match="frame: requires_grad is set"):
        dt.step(s, x, v, frame=torch.tensor(1.0, requires_grad=True))


# ------------------------------------------------------- per-frame muscle activations

MUSCLES = ROOT / "tests" / "fixtures" / "muscle_frames.toml"


def frame_activations_tensor(T, seed=5):
    """(T, 2) activations around 1 (contracting and stretching), float64."""
    g = torch.Generator().manual_seed(seed)
    return 1.0 + 0.2 * (torch.rand(T, 2, generator=g, dtype=torch.float64) - 0.5)


def test_frame_activations_drive_the_frames_and_equal_a_knot_scene():
    """Row t-1 of a (T, k) tensor is the activation of the step into frame t: the rollout
    equals the scene with those knots written as `activation` arrays (Scene.simulate), bit
    for bit, and chained steps with controls_t = row t equal the rollout."""
    s = diffphd.Scene(MUSCLES)
    T = s.frames
    a = frame_activations_tensor(T)
    x, v = dt.rollout(s, **dt.frame_activations(s, a))
    knots = torch.cat([a[:1], a]).numpy()
    ref = diffphd.Scene(MUSCLES, set={f"body.0.muscle.{g}.activation": knots[:, g].tolist() for g in range(2)}).simulate()
    np.testing.assert_array_equal(x.numpy(), ref.positions)
    still = s.simulate().positions
    assert np.abs(still[-1] - ref.positions[-1]).max() > 1e-4  # the activations do move it
    xt, vt = torch.tensor(s.initial_positions), torch.tensor(s.initial_velocities)
    for t in range(T):
        xt, vt = dt.step(s, xt, vt, a[t], frame=t)
        np.testing.assert_allclose(xt.numpy(), x[t + 1].numpy(), rtol=0, atol=1e-12)


def test_frame_activations_gradient_per_frame():
    """d loss / d a[t, g] through the knots: gradcheck, and the chained steps' control
    gradients (one per step) equal the rollout's per-frame gradient."""
    s = diffphd.Scene(MUSCLES, set={"simulation.frames": 3, "body.0.muscle.0.activation": [1.0] * 4,
                                    "body.0.muscle.1.activation": [1.0] * 4})
    a = frame_activations_tensor(3).requires_grad_(True)

    def f(a):
        x, v = dt.rollout(s, **dt.frame_activations(s, a))
        return 1e3 * ((x[1:, :, 2] - x[0, :, 2]).sum() + (v[-1, :, 2] ** 2).sum())

    f(a).backward()
    g = a.grad.clone()
    assert (g.abs() > 1e-3).all(), g
    assert torch.autograd.gradcheck(f, (a.detach().requires_grad_(True),), eps=1e-6, atol=1e-7, rtol=1e-5)
    b = a.detach().clone().requires_grad_(True)
    xt, vt = torch.tensor(s.initial_positions), torch.tensor(s.initial_velocities)
    x0 = xt
    xs, vs = [], []
    for t in range(3):
        xt, vt = dt.step(s, xt, vt, b[t], frame=t)
        xs.append(xt)
        vs.append(vt)
    (1e3 * ((torch.stack(xs)[:, :, 2] - x0[:, 2]).sum() + (vs[-1][:, 2] ** 2).sum())).backward()
    np.testing.assert_allclose(b.grad.numpy(), g.numpy(), rtol=1e-9)


def test_frame_activations_refuse_a_scene_without_per_frame_knots():
    with pytest.raises(diffphd.InputError, match=r"^activations: expected shape \(8, 2\)"):
        dt.frame_activations(diffphd.Scene(MUSCLES), torch.ones(7, 2, dtype=torch.float64))
    with pytest.raises(diffphd.InputError, match=r"^activations\[2, 1\] = nan is not a finite number$"):
        a = torch.ones(8, 2, dtype=torch.float64)
        a[2, 1] = float("nan")
        dt.frame_activations(diffphd.Scene(MUSCLES), a)
    # the fixture cantilever: two knots 0.06 s apart, a [[parameter]] on knot 1 only
    with pytest.raises(diffphd.InputError, match=r"muscle group 0 \('top'\) has 2 knots 0.06 s apart"):
        dt.frame_activations(scene(frames=4), torch.ones(4, 1, dtype=torch.float64))


def test_per_element_youngs_modulus_input_is_generic():
    """A per-element E input is whatever the registry's per-element class gives: one (m,)
    tensor, taken by the same generic Python code as every other parameter."""
    text = CANTILEVER.read_text() + '\n[[parameter]]\nkind = "youngs_modulus_field"\nlog = true\n'
    s = diffphd.Scene.from_toml(text, base_dir=CANTILEVER.parent, set={"simulation.frames": 2})
    (name, ((m,), theta)), = [(n, i) for n, i in dt.inputs(s).items() if "youngs_modulus_field" in n]
    assert m == s.num_elements
    logE = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
    x, _ = dt.rollout(s, **{name: logE})
    (x[-1, :, 2] ** 2).sum().backward()
    assert logE.grad.shape == (m,) and logE.grad.abs().max() > 0


def test_import_diffphd_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, diffphd; sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
