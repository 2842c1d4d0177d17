"""Demo: train a small MLP eagerly and under dynamo, and check that both give the same losses.

Part 1 trains the same MLP (same initial weights, same data, SGD, 20 steps) twice:
  - eagerly, and
  - with the forward pass and loss computed by `compute_loss` called inside
    `with dynamo.optimize("inductor"):`. The parameters require grad, so the graph goes through
    AOTAutograd: dynamo differentiates it, and both the forward and the backward graph are
    compiled by the inductor; `loss.backward()` runs the compiled backward.
It prints the losses side by side, the forward/backward graphs and kernels compiled and called,
and fails if any step differs by more than 1e-5 or the backward did not run compiled.

Part 2 runs torchvision's resnet18 (random weights, eval mode) on a 2x3x224x224 batch through
`dynamo.optimize("inductor")(model)` and compares it with eager.

Part 3 runs a transformer block written as users write one (eval) the same way: softmax,
layer_norm, GELU and residual adds become fused loops; matrix products stay on PyTorch's kernels.

For parts 2 and 3 it prints the inductor counters (kernels compiled and called, fallback nodes,
graphs that ran entirely on PyTorch) and the steady-state speedup over eager, measured in this
run (median of --iters calls each, after warm-up); they fail when no generated kernel ran.

Exit status: 0 when everything matches, 1 when a result differs or nothing was compiled; an
exception from dynamo propagates (non-zero exit, with its traceback).

Usage: python examples/train.py [--steps N] [--iters N] [--skip-resnet]
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


def inductor_counters() -> dict:
    """dynamo's inductor counters (kernels compiled/called, fallback nodes, eager graphs)."""
    return dict(dynamo._C.inductor_counters())


def print_inductor(title: str, before: dict) -> dict:
    """Prints the inductor counters accumulated since `before`; returns the differences."""
    now = inductor_counters()
    delta = {k: now[k] - before.get(k, 0) for k in now}
    print(f"{title}: " + ", ".join(f"{k} {v}" for k, v in delta.items()))
    return delta


def median_ms(fn, x, iters: int) -> float:
    """Median wall time of `fn(x)` in ms over `iters` calls, after two warm-up calls."""
    for _ in range(2):
        fn(x)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2] * 1e3


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
    before = inductor_counters()
    dynamo_losses, dynamo_s = train(dynamo_model, x, y, steps, use_dynamo=True)

    print(f"{'step':>4}  {'eager loss':>14}  {'dynamo loss':>14}  {'abs diff':>10}")
    worst = 0.0
    for step, (le, ld) in enumerate(zip(eager_losses, dynamo_losses)):
        diff = abs(le - ld)
        worst = max(worst, diff) if diff == diff else float("inf")  # NaN counts as a mismatch
        print(f"{step:>4}  {le:>14.8f}  {ld:>14.8f}  {diff:>10.2e}")
    print(f"time: eager {eager_s * 1e3:.1f} ms, dynamo {dynamo_s * 1e3:.1f} ms (dynamo includes compilation)")
    counters = print_counters("dynamo.counters()")
    delta = print_inductor("inductor counters (forward and backward graphs)", before)
    print(f"AOTAutograd: {counters.get('aot_graphs', 0)} joint graph(s) differentiated, "
          f"{counters.get('aot_backward_graphs', 0)} backward graph(s) compiled, "
          f"{counters.get('aot_eager_graphs', 0)} left to torch's autograd; "
          f"{delta.get('kernels_compiled', 0)} kernels compiled, {delta.get('kernel_calls', 0)} kernel calls")

    ok = True
    if counters.get("aot_backward_graphs", 0) == 0 or delta.get("kernel_calls", 0) == 0:
        print("FAIL: the training step did not run on compiled forward and backward graphs")
        ok = False
    if worst > LOSS_TOLERANCE:
        print(f"FAIL: max |eager - dynamo| loss difference {worst:.3e} > {LOSS_TOLERANCE:g}")
        ok = False
    if nothing_compiled(counters):
        print("FAIL: dynamo compiled nothing (the losses match only because everything ran eagerly)")
        ok = False
    if ok:
        print(f"ok: losses match within {LOSS_TOLERANCE:g} (max diff {worst:.3e})")
    return ok


def run_inference_part(title: str, model, x, iters: int, rtol: float, atol: float) -> bool:
    """Compiles `model` with dynamo.optimize("inductor"), compares two calls with eager, prints
    the counters and the steady-state speedup; True when it matches and kernels ran."""
    print(f"\n== {title}")
    dynamo.reset()
    before = inductor_counters()
    compiled = dynamo.optimize("inductor")(model)
    with torch.no_grad():
        t0 = time.perf_counter()
        expected = model(x)
        t1 = time.perf_counter()
        out1 = compiled(x)
        t2 = time.perf_counter()
        out2 = compiled(x)
        t3 = time.perf_counter()
        print(f"first calls: eager {(t1 - t0) * 1e3:.1f} ms, dynamo call 1 {(t2 - t1) * 1e3:.1f} ms "
              f"(includes compilation), call 2 {(t3 - t2) * 1e3:.1f} ms")
        diffs = [(out - expected).abs().max().item() for out in (out1, out2)]
        print(f"max abs diff vs eager: call 1 {diffs[0]:.3e}, call 2 {diffs[1]:.3e} "
              f"(output max abs {expected.abs().max().item():.3e})")
        counters = print_counters("dynamo.counters() after two calls")
        delta = print_inductor("inductor counters after two calls", before)
        eager_ms = median_ms(model, x, iters)
        dynamo_ms = median_ms(compiled, x, iters)
    print(f"steady state (median of {iters} calls): eager {eager_ms:.2f} ms, dynamo {dynamo_ms:.2f} ms, "
          f"speedup over eager {eager_ms / dynamo_ms:.2f}x")

    ok = True
    for i, out in enumerate((out1, out2), 1):
        if out.shape != expected.shape or not torch.allclose(out, expected, rtol=rtol, atol=atol):
            print(f"FAIL: call {i} differs from eager beyond rtol={rtol:g}, atol={atol:g}")
            ok = False
    if nothing_compiled(counters):
        print("FAIL: dynamo compiled nothing")
        ok = False
    if delta.get("kernel_calls", 0) == 0 or delta.get("eager_graphs", 0) != 0:
        print("FAIL: the graph did not run on generated kernels")
        ok = False
    if ok:
        print(f"ok: matches eager; {delta['kernels_compiled']} kernels compiled, {delta['kernel_calls']} kernel calls")
    return ok


def part_resnet(iters: int) -> bool:
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(2, 3, 224, 224)
    return run_inference_part("part 2: torchvision resnet18(weights=None).eval(), input 2x3x224x224",
                              model, x, iters, RESNET_RTOL, RESNET_ATOL)


class Block(nn.Module):
    """A pre-norm transformer block as users write it: attention with softmax, a GELU MLP,
    layer norms and residual adds (user code, so dynamo traces every line)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        q = q.reshape(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.reshape(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.reshape(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (c // self.heads) ** 0.5)
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def part_transformer(iters: int) -> bool:
    torch.manual_seed(0)
    model = Block(256, 4).eval()
    x = torch.randn(8, 128, 256)
    return run_inference_part("part 3: a transformer block (attention, softmax, layer_norm, GELU MLP), input 8x128x256",
                              model, x, iters, 1e-4, 1e-4)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--iters", type=int, default=20, help="timed calls per engine for the speedup")
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
        ok = part_resnet(args.iters) and ok
        ok = part_transformer(args.iters) and ok
    print("\nRESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
