"""System identification: Young's modulus per region from observed frames, fitted with a
PyTorch optimizer through the differentiable rollout ``diffphd.torch.rollout``.

    python python/examples/sysid.py [scene.toml] [--iterations N]

The scene (default: tests/fixtures/sysid_regions.toml) declares one ``[[parameter]] kind =
"youngs_modulus" region = r log = true`` per region and a ``[loss.reference]``: the observed
frames here are that reference rollout (in practice: your measured node positions, shape
(T+1, n, 3)). The loss is the scene's tracking loss, ½ Σ_t Σ_i ‖x_t,i − x̂_t,i‖², so the
answer can be compared with ``diffphd optimize`` on the same scene.
"""

import argparse
import pathlib

import torch

import diffphd
import diffphd.torch as dt

ROOT = pathlib.Path(__file__).resolve().parents[2]
# the true moduli: the fixture's [loss.reference] overrides (root half 1e5 Pa, tip half 3e5 Pa)
TRUTH = ["body.0.region.0.scale=0.5", "body.0.region.1.scale=1.5"]


def observed_frames(scene_path):
    """The 'measurement': the scene rolled out at the true moduli."""
    truth = diffphd.Scene(scene_path, set=TRUTH)
    return torch.from_numpy(truth.simulate().positions)


def fit(scene_path, iterations=20):
    scene = diffphd.Scene(scene_path)
    x_obs = observed_frames(scene_path)
    # one leaf per [[parameter]] entry, in its working variable: θ = ln E
    theta = {name: torch.tensor(th, dtype=torch.float64, requires_grad=True)
             for name, (_, th) in dt.inputs(scene).items()}

    def tracking_loss():
        x, _ = dt.rollout(scene, **theta)
        return 0.5 * ((x[1:] - x_obs[1:]) ** 2).sum()

    with torch.no_grad():  # the loss is ~1e-5 m²: scale it to O(1) for L-BFGS's tolerances
        scale = 1.0 / tracking_loss().item()
    opt = torch.optim.LBFGS(list(theta.values()), lr=1.0, max_iter=iterations,
                            tolerance_grad=1e-12, tolerance_change=1e-16,
                            line_search_fn="strong_wolfe")
    history = []

    def closure():
        opt.zero_grad()
        loss = tracking_loss()
        history.append(loss.item())
        (scale * loss).backward()
        return loss

    opt.step(closure)
    moduli = {name: float(torch.exp(t.detach())) for name, t in theta.items()}
    return moduli, history


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scene", nargs="?", default=str(ROOT / "tests/fixtures/sysid_regions.toml"))
    ap.add_argument("--iterations", type=int, default=20)
    args = ap.parse_args(argv)
    moduli, history = fit(args.scene, args.iterations)
    print(f"{len(history)} rollouts, loss {history[0]:.3e} -> {history[-1]:.3e}")
    for name, e in moduli.items():
        print(f"{name[4:]} = {e:.7e} Pa")
    return moduli, history


if __name__ == "__main__":
    main()
