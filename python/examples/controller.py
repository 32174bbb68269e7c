"""A closed-loop muscle controller: a small network reads the body's state every step and
outputs the muscle activations; it is trained through the differentiable step
``diffphd.torch.step`` (backpropagation through time over the whole rollout).

    python python/examples/controller.py [scene.toml] [--iterations N]

The scene (default: tests/fixtures/muscle_frames.toml, a clamped beam with a top and a
bottom muscle group) sags under gravity; the task is to hold the free end's centre at
``LIFT`` above its rest height over the second half of the rollout.
"""

import argparse
import pathlib

import torch

import diffphd
import diffphd.torch as dt

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIFT = 0.005  # m


class Controller(torch.nn.Module):
    """centroid offset (m) and velocity (m/s) -> one activation per muscle group in 1 ± 0.3
    (1 = the fibre's rest length: no active force)."""

    def __init__(self, groups, hidden=16):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(6, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, groups))
        torch.nn.init.zeros_(self.net[2].weight)  # start from activations of exactly 1
        torch.nn.init.zeros_(self.net[2].bias)
        self.double()

    def forward(self, offset, velocity):
        return 1.0 + 0.3 * torch.tanh(self.net(torch.cat([100.0 * offset, 10.0 * velocity])))


def train(scene_path, iterations=10, lr=0.01, seed=0):
    torch.manual_seed(seed)
    scene = diffphd.Scene(scene_path)
    rest = torch.from_numpy(scene.rest_positions)
    tip = torch.from_numpy((scene.rest_positions[:, 0] >= scene.rest_positions[:, 0].max() - 1e-9).nonzero()[0])
    target = rest[tip, 2].mean() + LIFT
    policy = Controller(len(scene.muscles))
    opt = torch.optim.Adam(policy.parameters(), lr=lr, betas=(0.5, 0.999))  # little momentum: no overshoot
    T = scene.frames
    losses = []
    for _ in range(iterations):
        x = torch.from_numpy(scene.initial_positions)
        v = torch.from_numpy(scene.initial_velocities)
        loss = torch.zeros((), dtype=torch.float64)
        for t in range(T):
            a = policy(x.mean(0) - rest.mean(0), v.mean(0))   # the state -> activations
            x, v = dt.step(scene, x, v, a, frame=t)           # one implicit step, differentiable
            if t + 1 > T // 2:
                loss = loss + 1e4 * (x[tip, 2].mean() - target) ** 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return policy, losses


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scene", nargs="?", default=str(ROOT / "tests/fixtures/muscle_frames.toml"))
    ap.add_argument("--iterations", type=int, default=10)
    args = ap.parse_args(argv)
    _, losses = train(args.scene, args.iterations)
    for i, l in enumerate(losses):
        print(f"iteration {i}: loss {l:.4e}")
    return losses


if __name__ == "__main__":
    main()
