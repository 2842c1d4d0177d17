"""Activation checkpointing under eager, torch.compile and dynamo's inductor in one run (Note
[activation checkpointing]: the region is traced and recomputed in the compiled backward).

Model: 4 residual blocks Linear(256, 1024)-GELU-Linear(1024, 256), batch 64, each block under
`torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`, and the same model without the
checkpoint. For each: activation bytes autograd keeps for the backward after one forward
(`saved_tensors_hooks`, parameters aside), median ms of a training step (forward + backward),
first-step seconds (compile included), graphs and breaks (dynamo). Gradients are checked
against eager's. Usage: `python benchmarks/bench_checkpoint.py [--steps 20]`."""

import argparse
import copy
import time

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

import dynamo


class Net(nn.Module):
    def __init__(self, ck):
        super().__init__()
        self.ck = ck
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256)) for _ in range(4))

    def forward(self, x):
        for b in self.blocks:
            x = x + (checkpoint(b, x, use_reentrant=False) if self.ck else b(x))
        return x.square().mean()


def saved_bytes(f, x, params):
    """Bytes autograd packs for the backward in one forward of `f(x)`, parameters aside."""
    ptrs = {p.data_ptr() for p in params}
    total = [0]

    def pack(t):
        if t.data_ptr() not in ptrs:
            total[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = f(x)
    out.backward()
    return total[0]


def step_ms(f, x, model, steps):
    """First step's seconds and the median ms of the next `steps` (forward + backward)."""
    t0 = time.perf_counter()
    f(x).backward()
    first = time.perf_counter() - t0
    ts = []
    for _ in range(steps):
        model.zero_grad(set_to_none=True)
        t = time.perf_counter()
        f(x).backward()
        ts.append(time.perf_counter() - t)
    ts.sort()
    return first, ts[len(ts) // 2] * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    x = torch.randn(64, 256)
    print(f"torch {torch.__version__}, threads 1, 4 blocks 256-1024-256, batch 64")
    print("| checkpoint | runner | saved activations KiB | first step s | median step ms | graphs / breaks |")
    print("| --- | --- | --- | --- | --- | --- |")
    for ck in (False, True):
        base = Net(ck)
        grads = {}
        for runner in ("eager", "torch.compile", "dynamo"):
            model = copy.deepcopy(base)
            dynamo.reset()
            if runner == "eager":
                f = model
            elif runner == "torch.compile":
                torch._dynamo.reset()
                f = torch.compile(model)
            else:
                f = dynamo.optimize("inductor")(model)
            first, med = step_ms(f, x, model, args.steps)
            model.zero_grad(set_to_none=True)
            kib = saved_bytes(f, x, list(model.parameters())) / 1024
            grads[runner] = [p.grad.clone() for p in model.parameters()]
            c = dynamo.counters()
            gb = f"{c['graphs']} / {c['graph_breaks']}" if runner == "dynamo" else ""
            print(f"| {ck} | {runner} | {kib:.0f} | {first:.2f} | {med:.2f} | {gb} |")
        for runner in ("torch.compile", "dynamo"):
            torch.testing.assert_close(grads[runner], grads["eager"], rtol=1e-4, atol=1e-5)
    print("gradients of torch.compile and dynamo equal eager's (rtol 1e-4)")


if __name__ == "__main__":
    main()
