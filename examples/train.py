"""Demo: train a small MLP eagerly and under dynamo, and check that both give the same losses.

Part 1 trains the same MLP (same initial weights, same data, SGD, 20 steps) twice:
  - eagerly, and
  - with the forward pass and loss computed by `compute_loss` called inside
    `with dynamo.optimize("inductor"):` (backward and the optimizer step run normally, so
    they exercise the compiled forward's autograd graph).
It prints the losses side by side and fails if any step differs by more than 1e-5.

Part 2 runs torchvision's resnet18 (random weights, eval mode) on a 2x3x224x224 batch through
`dynamo.optimize("inductor")(model)` and compares it with eager.

Exit status: 0 when everything matches, 1 when a result differs or nothing was compiled; an
exception from dynamo propagates (non-zero exit, with its traceback).

Usage: python examples/train.py [--steps N] [--skip-resnet]
"""

import argparse
import copy
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import dynamo

LOSS_TOLERANCE = 1e-5
RESNET_RTOL = 1e-3
RESNET_ATOL = 1e-3


class MLP(nn.Module):
    """Two Linear+ReLU layers and a Linear head. `forward` is user code, so dynamo traces it."""

    def __init__(self, n_features: int, hidden: int, n_outputs: int):
        super().__init__()
        self.fc1 = nn.Linear(n_features, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, n_outputs)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.head(x)


def compute_loss(model, x, y):
    """Forward pass and loss: the frame that dynamo captures (it starts inside the `with`)."""
    return F.mse_loss(model(x), y)


def make_dataset(n_samples: int = 256, n_features: int = 64, seed: int = 0):
    """A synthetic regression problem: a noisy nonlinear function of the features."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n_samples, n_features, generator=gen)
    w = torch.randn(n_features, 1, generator=gen) / n_features**0.5
    y = torch.tanh(x @ w) + 0.1 * torch.randn(n_samples, 1, generator=gen)
    return x, y


def train(model, x, y, steps: int, use_dynamo: bool):
    """SGD for `steps` steps; returns the loss of each step and the total wall time."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    t0 = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        if use_dynamo:
            with dynamo.optimize("inductor"):
                loss = compute_loss(model, x, y)
        else:
            loss = compute_loss(model, x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, time.perf_counter() - t0


def print_counters(title: str) -> dict:
    counters = dict(dynamo.counters())
    print(f"{title}:")
    if not counters:
        print("  (empty)")
    width = max((len(k) for k in counters), default=0)
    for key in sorted(counters):
        print(f"  {key:<{width}}  {counters[key]}")
    return counters


def nothing_compiled(counters: dict) -> bool:
    """True if the counters that say how much was compiled exist and are all zero."""
    keys = [k for k in ("compiles", "graphs") if k in counters]
    return bool(keys) and all(counters[k] == 0 for k in keys)


def part_mlp(steps: int) -> bool:
    print(f"== part 1: MLP regression, SGD, {steps} steps, eager vs dynamo.optimize('inductor')")
    x, y = make_dataset()
    torch.manual_seed(0)
    eager_model = MLP(x.shape[1], 128, y.shape[1])
    dynamo_model = copy.deepcopy(eager_model)  # identical initial state

    eager_losses, eager_s = train(eager_model, x, y, steps, use_dynamo=False)
    dynamo.reset()
    dynamo_losses, dynamo_s = train(dynamo_model, x, y, steps, use_dynamo=True)

    print(f"{'step':>4}  {'eager loss':>14}  {'dynamo loss':>14}  {'abs diff':>10}")
    worst = 0.0
    for step, (le, ld) in enumerate(zip(eager_losses, dynamo_losses)):
        diff = abs(le - ld)
        worst = max(worst, diff) if diff == diff else float("inf")  # NaN counts as a mismatch
        print(f"{step:>4}  {le:>14.8f}  {ld:>14.8f}  {diff:>10.2e}")
    print(f"time: eager {eager_s * 1e3:.1f} ms, dynamo {dynamo_s * 1e3:.1f} ms (dynamo includes compilation)")
    counters = print_counters("dynamo.counters()")

    ok = True
    if worst > LOSS_TOLERANCE:
        print(f"FAIL: max |eager - dynamo| loss difference {worst:.3e} > {LOSS_TOLERANCE:g}")
        ok = False
    if nothing_compiled(counters):
        print("FAIL: dynamo compiled nothing (the losses match only because everything ran eagerly)")
        ok = False
    if ok:
        print(f"ok: losses match within {LOSS_TOLERANCE:g} (max diff {worst:.3e})")
    return ok


def part_resnet() -> bool:
    import torchvision

    print("\n== part 2: torchvision resnet18(weights=None).eval(), input 2x3x224x224")
    dynamo.reset()
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(2, 3, 224, 224)
    compiled = dynamo.optimize("inductor")(model)
    with torch.no_grad():
        t0 = time.perf_counter()
        expected = model(x)
        t1 = time.perf_counter()
        out1 = compiled(x)
        t2 = time.perf_counter()
        out2 = compiled(x)
        t3 = time.perf_counter()
    print(f"time: eager {(t1 - t0) * 1e3:.1f} ms, dynamo call 1 {(t2 - t1) * 1e3:.1f} ms "
          f"(includes compilation), call 2 {(t3 - t2) * 1e3:.1f} ms")
    diffs = [(out - expected).abs().max().item() for out in (out1, out2)]
    print(f"max abs diff vs eager: call 1 {diffs[0]:.3e}, call 2 {diffs[1]:.3e} "
          f"(output max abs {expected.abs().max().item():.3e})")
    counters = print_counters("dynamo.counters() after two calls")

    ok = True
    for i, out in enumerate((out1, out2), 1):
        if out.shape != expected.shape or not torch.allclose(out, expected, rtol=RESNET_RTOL, atol=RESNET_ATOL):
            print(f"FAIL: call {i} differs from eager beyond rtol={RESNET_RTOL:g}, atol={RESNET_ATOL:g}")
            ok = False
    if nothing_compiled(counters):
        print("FAIL: dynamo compiled nothing")
        ok = False
    if ok:
        print("ok: resnet18 matches eager")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--skip-resnet", action="store_true", help="run part 1 only")
    args = parser.parse_args()

    missing = [name for name in ("optimize", "reset", "counters") if not hasattr(dynamo, name)]
    if missing:
        print(f"error: this dynamo build lacks the public API {', '.join(missing)} "
              f"(module {dynamo.__file__}); the compiler is not there yet", file=sys.stderr)
        return 2

    print(f"torch {torch.__version__}, dynamo {getattr(dynamo, '__version__', '?')}, "
          f"{torch.get_num_threads()} threads")
    ok = part_mlp(args.steps)
    if not args.skip_resnet:
        ok = part_resnet() and ok
    print("\nRESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
