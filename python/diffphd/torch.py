"""diffphd.torch: a scene's rollout and one step as differentiable PyTorch functions.

``import diffphd`` never imports torch; this module does (``pip install 'diffphd[torch]'``).

>>> import torch, diffphd, diffphd.torch as dt
>>> scene = diffphd.Scene("tests/fixtures/torch_cantilever.toml")
>>> names = dt.inputs(scene)          # {name: (shape, theta)} of the scene's [[parameter]]s
>>> logE = torch.tensor(names["log youngs_modulus[0].region0"][1], requires_grad=True)
>>> x, v = dt.rollout(scene, **{"log youngs_modulus[0].region0": logE})
>>> (x[-1] ** 2).sum().backward()     # logE.grad: the native adjoint's

Inputs are generic over the scene's ``[[parameter]]`` entries (``inputs(scene)``): one per
entry, keyed by its name, in its working variable θ (ln value for ``log = true``, else the
value; the variable ``diffphd grad`` differentiates), a 0-d tensor for a scalar entry and a
``(k,)`` tensor for a vector entry (the three components of ``initial_velocity``) or a muscle
group's knots. Entries not passed keep the scene's values and get no gradient. Tensors are
float64 on the CPU (others are refused; CUDA tensors are copied to the CPU and their
gradients back). The backward calls the native adjoint with the cotangents of every
returned frame, at the scene's ``[backward]`` settings. See docs/python.md.
"""

from __future__ import annotations

import numpy as np
import torch

from ._errors import InputError

__all__ = ["frame_activations", "inputs", "rollout", "step"]


def inputs(scene):
    """The differentiable inputs of ``scene``: ``{name: (shape, theta)}`` with θ the
    scene's working variables (a float for shape ``()``, else a list)."""
    out = {}
    for e in scene._inputs():
        k = len(e["indices"])
        out[e["name"]] = ((), e["theta"][0]) if k == 1 else ((k,), list(e["theta"]))
    return out


def _array(t, name):
    """A float64 CPU NumPy copy of tensor (or array-like) ``t`` (argument ``name``)."""
    if isinstance(t, torch.Tensor):
        if t.dtype != torch.float64:
            raise InputError(f"{name}: expected a float64 tensor, got {t.dtype}")
        return np.array(t.detach().cpu().numpy(), dtype=np.float64, order="C")  # keeps 0-d
    return t


def _not_differentiable(name, value):
    if isinstance(value, torch.Tensor) and value.requires_grad:
        raise InputError(f"{name}: requires_grad is set, but {name} is not differentiable")


def _theta(scene, values):
    """θ of every scalar parameter (the scene's, with ``values`` replacing entries) and the
    indices and shapes of the entries given."""
    entries = {e["name"]: e for e in scene._inputs()}
    theta = np.concatenate([np.asarray(e["theta"], dtype=np.float64) for e in entries.values()]) if entries else np.zeros(0)
    where = []
    for name, t in values.items():
        e = entries.get(name)
        if e is None:
            known = ", ".join(entries) or "none"
            raise InputError(f"{name}: unknown input (the scene's [[parameter]] inputs: {known})")
        k = len(e["indices"])
        shape = () if k == 1 else (k,)
        a = _array(t, name)
        a = np.asarray(a, dtype=np.float64)
        if a.shape != shape:
            raise InputError(f"{name}: expected shape {shape}, got {tuple(a.shape)}")
        bad = np.argwhere(~np.isfinite(a))
        if len(bad):
            at = "".join(f"[{i}]" for i in bad[0])
            raise InputError(f"{name}{at} = {a[tuple(bad[0])]} is not a finite number")
        theta[e["indices"]] = a.reshape(-1)
        where.append((e["indices"], shape))
    return theta, where


def _where(scene, names):
    """The scalar indices of the entries ``names`` (checked by ``_theta`` in ``forward``)."""
    entries = {e["name"]: e for e in scene._inputs()}
    return [(entries[n]["indices"], None) for n in names]


def _like(g, t):
    """Gradient tensor ``g`` shaped as input ``t`` and on its device (None for a non-tensor)."""
    if not isinstance(t, torch.Tensor):
        return None
    return g.reshape(t.shape).to(t.device)


def _check_backward(grads):
    """Refuse higher-order use: the native adjoint is not differentiable."""
    if not torch.is_grad_enabled():
        return
    try:
        from torch._C._functorch import is_gradtrackingtensor, maybe_get_level
    except ImportError:  # pragma: no cover - torch without functorch
        is_gradtrackingtensor = maybe_get_level = None
    for g in grads:
        if g is None:
            continue
        if is_gradtrackingtensor is not None and is_gradtrackingtensor(g) and maybe_get_level(g) == 1:
            return  # torch.func.grad (one level): first derivatives only
        break
    raise RuntimeError(_HIGHER_ORDER)


_HIGHER_ORDER = (
    "diffphd.torch: higher-order gradients (create_graph=True, nested torch.func.grad) are "
    "not supported: the native adjoint's result is not itself differentiable"
)


def _cotangent(g):
    if g is None:
        return None
    return np.array(g.detach().cpu().numpy(), dtype=np.float64, order="C")


def _no_vmap(*args, **kwargs):
    raise RuntimeError(
        "diffphd.torch: vmap is not supported (each rollout is one native solve); loop over the batch instead"
    )


class _Adjoint(torch.autograd.Function):
    """The native reverse sweep of a tape for the cotangents ``gx``, ``gv`` of its frames
    (None: zero; for a step only its end frame's): dL/dθ, dL/dx_s, dL/dv_s, dL/d(controls).
    A Function of its own so that its NumPy work sees plain tensors under ``torch.func``;
    it is not differentiable itself."""

    @staticmethod
    def forward(tape, one_step, gx, gv):
        dx, dv = _cotangent(gx), _cotangent(gv)
        if one_step:  # the recorded frames are (t, t+1): none on the start state

            def both(c):
                return None if c is None else np.stack([np.zeros_like(c), c])

            dx, dv = both(dx), both(dv)
        g = tape.gradient(dx=dx, dv=dv)
        return tuple(torch.from_numpy(g[k]) for k in ("theta", "x0", "v0", "controls"))

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(_HIGHER_ORDER)

    vmap = staticmethod(_no_vmap)


class _Holder:
    """Carries the native tape from ``forward`` to ``setup_context`` (an object, not a
    list: torch.func rebuilds containers it flattens)."""

    tape = None


class _Rollout(torch.autograd.Function):
    """positions, velocities (T+1, n, 3) of a rollout at θ (see ``rollout``)."""

    @staticmethod
    def forward(scene, holder, names, threads, x0, v0, *values):
        theta, _ = _theta(scene, dict(zip(names, values)))
        tape = scene._record(theta=theta, x0=_array(x0, "x0"), v0=_array(v0, "v0"), threads=threads)
        holder.tape = tape
        return torch.from_numpy(tape.positions), torch.from_numpy(tape.velocities)

    @staticmethod
    def setup_context(ctx, inputs, output):
        scene, holder, names, threads, x0, v0, *values = inputs
        ctx.set_materialize_grads(False)
        ctx.tape = holder.tape
        ctx.where = _where(scene, names)
        ctx.inputs = (x0, v0, values)

    @staticmethod
    def backward(ctx, gx, gv):
        _check_backward((gx, gv))
        x0, v0, values = ctx.inputs
        theta, gx0, gv0, _ = _Adjoint.apply(ctx.tape, False, gx, gv)
        out = [None, None, None, None, _like(gx0, x0), _like(gv0, v0)]
        for (idx, _), t in zip(ctx.where, values):
            out.append(_like(theta[idx], t))
        return tuple(out)

    vmap = staticmethod(_no_vmap)


class _Step(torch.autograd.Function):
    """x_{t+1}, v_{t+1} (n, 3) of one step (see ``step``)."""

    @staticmethod
    def forward(scene, holder, names, threads, frame, x_t, v_t, controls_t, *values):
        theta, _ = _theta(scene, dict(zip(names, values)))
        tape = scene._record_step(
            frame,
            _array(x_t, "x_t"),
            _array(v_t, "v_t"),
            controls_t=_array(controls_t, "controls_t"),
            theta=theta,
            threads=threads,
        )
        holder.tape = tape
        return torch.from_numpy(tape.positions[1]), torch.from_numpy(tape.velocities[1])

    @staticmethod
    def setup_context(ctx, inputs, output):
        scene, holder, names, threads, frame, x_t, v_t, controls_t, *values = inputs
        ctx.set_materialize_grads(False)
        ctx.tape = holder.tape
        ctx.where = _where(scene, names)
        ctx.inputs = (x_t, v_t, controls_t, values)

    @staticmethod
    def backward(ctx, gx, gv):
        _check_backward((gx, gv))
        x_t, v_t, controls_t, values = ctx.inputs
        theta, gx0, gv0, gc = _Adjoint.apply(ctx.tape, True, gx, gv)
        out = [None, None, None, None, None, _like(gx0, x_t), _like(gv0, v_t), _like(gc, controls_t)]
        for (idx, _), t in zip(ctx.where, values):
            out.append(_like(theta[idx], t))
        return tuple(out)

    vmap = staticmethod(_no_vmap)


def rollout(scene, *, x0=None, v0=None, threads=None, **values):
    """Roll ``scene`` out from its initial state (``x0``, ``v0`` (n, 3) tensors replacing
    it; a replaced ``x0`` moves the clamped nodes' prescribed values with it, as the scene's
    ``[body.initial]`` does) with the ``[[parameter]]`` inputs ``values`` (``inputs(scene)``;
    pass names that are not identifiers as ``**{name: tensor}``). Returns positions and
    velocities ``(T+1, n, 3)``; frame 0 is the initial state and
    ``v_t = (x_t - x_{t-1}) / h``."""
    _not_differentiable("threads", threads)
    names = tuple(values)
    return _Rollout.apply(scene, _Holder(), names, threads, x0, v0, *values.values())


def step(scene, x_t, v_t, controls_t=None, *, frame=0, threads=None, **values):
    """One step from ``(x_t, v_t)`` (n, 3) at frame ``frame`` (its time: prescribed motions,
    muscle knots, moving obstacles), ``controls_t`` (one activation per muscle group, or
    None: the scene's knots) held for the step. Returns ``x_{t+1}``, ``v_{t+1} = (x_{t+1} -
    x_t) / h``. The clamped nodes follow the scene's initial state, not ``x_t``."""
    _not_differentiable("threads", threads)
    _not_differentiable("frame", frame)
    if controls_t is not None:
        kinds = {e["name"]: e["kind"] for e in scene._inputs()}
        held = [n for n in values if kinds.get(n) == "muscle_activation"]
        if held:
            raise InputError(f"{held[0]}: a muscle activation input and controls_t together (controls_t replaces the knots for the step)")
    if isinstance(frame, torch.Tensor):
        frame = int(frame)
    names = tuple(values)
    return _Step.apply(scene, _Holder(), names, threads, frame, x_t, v_t, controls_t, *values.values())


def frame_activations(scene, activations):
    """Per-frame muscle activations as ``rollout``/``step`` inputs: ``activations`` ``(T, k)``
    (a tensor or array; row ``t - 1`` is the activation of the step into frame ``t``, column
    ``g`` muscle group ``g`` of ``scene.muscles``) becomes ``{name: θ}`` for the scene's
    ``muscle_activation`` entries, to pass as ``rollout(scene, **frame_activations(scene, a))``.

    The step into frame ``t`` evaluates the group's knots at time ``t·h`` (piecewise linear,
    knot ``j`` at ``j·τ``), so with ``knot_interval = dt`` and ``T + 1`` knots, knot ``t`` is
    exactly the activation of that step: row ``t - 1`` goes to knot ``t`` and knot 0 (time 0,
    used by no step) takes row 0. Each group needs that layout and one ``[[parameter]] kind =
    "muscle_activation"`` entry over all its knots (no ``knot``); θ is ln a for ``log =
    true``. Gradients flow back to ``activations``."""
    muscles = scene.muscles
    frames = scene.frames
    a = activations if isinstance(activations, torch.Tensor) else torch.as_tensor(np.asarray(activations, dtype=np.float64))
    if a.dtype != torch.float64:
        raise InputError(f"activations: expected a float64 tensor, got {a.dtype}")
    if tuple(a.shape) != (frames, len(muscles)):
        raise InputError(f"activations: expected shape ({frames}, {len(muscles)}) (frames, muscle groups), got {tuple(a.shape)}")
    if not bool(torch.isfinite(a).all()):
        bad = tuple(int(i) for i in torch.nonzero(~torch.isfinite(a))[0])
        raise InputError(f"activations[{bad[0]}, {bad[1]}] = {a[bad].item()} is not a finite number")
    entries = {e["muscle"]: e for e in scene._inputs() if e["kind"] == "muscle_activation"}
    out = {}
    for g, m in enumerate(muscles):
        where = f"muscle group {g} ({m['name']!r})"
        if len(m["knots"]) != frames + 1 or abs(m["knot_interval"] - scene.dt) > 1e-12 * scene.dt:
            raise InputError(
                f"activations: {where} has {len(m['knots'])} knots {m['knot_interval']} s apart; per-frame "
                f"activations need {frames + 1} knots dt = {scene.dt} s apart (activation = [...], knot_interval = dt)"
            )
        e = entries.get(g)
        if e is None or list(e["knots"]) != list(range(frames + 1)):
            raise InputError(
                f"activations: {where} needs a [[parameter]] kind = \"muscle_activation\" entry over all its knots (muscle = {g}, no knot)"
            )
        knots = torch.cat([a[:1, g], a[:, g]])
        if e["log"]:
            if not bool((knots > 0).all()):
                raise InputError(f"activations: {where}: log = true needs positive activations")
            knots = torch.log(knots)
        out[e["name"]] = knots
    return out
