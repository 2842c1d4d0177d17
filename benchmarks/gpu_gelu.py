"""GPU time of GPT-2's GELU kernel and the accuracy of `tanh`, eager / torch.compile / dynamo.

GPT-2's MLP activation (transformers' `gelu_new`: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
x^3)))) on its inference shape [4096, 3072] float32: per engine, the GPU time of one call's
kernels (torch.profiler, --iters calls after --warmup) and the largest difference from the
float64 result. Then `tanh` alone over [-12, 12] (1,000,003 points) and around dynamo's branch
point |x| = 0.6 (nvptx.rs, Note [fast tanh]): the largest error in float32 ulps of float64's
tanh, per engine. Needs a CUDA device; run from the repository root.

Usage: python benchmarks/gpu_gelu.py [--engines eager,torch.compile,dynamo] [--iters 50] [--warmup 10]
"""

import argparse
import sys


def gelu_new(x):
    """transformers' NewGELUActivation, as GPT-2 calls it."""
    import torch
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0))))


def compiled(engine, fn, inputs):
    """`fn` compiled by `engine` for `inputs` (a callable returning one tensor)."""
    import torch
    if engine == "eager":
        return fn
    if engine == "torch.compile":
        return torch.compile(fn)
    import dynamo._C as C
    g = C.inductor_compile(torch.fx.symbolic_trace(fn), list(inputs))

    def call(*args):
        out = g(*args)
        return out[0] if isinstance(out, (tuple, list)) else out
    return call


def kernel_us(call, x, iters, warmup):
    """Microseconds of GPU kernels per call of `call(x)` (torch.profiler, summed over kernels)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    for _ in range(warmup):
        call(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            call(x)
        torch.cuda.synchronize()
    total = 0.0
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None)
        if t is None:
            t = ev.cuda_time_total
        if t > 0 and ev.device_type == torch.autograd.DeviceType.CUDA:
            total += t
    return total / iters


def max_ulps(got, ref):
    """Largest |got - ref| in units of the float32 spacing at |ref| (ref in float64)."""
    import torch
    r = ref.float().abs()
    ulp = (r.nextafter(torch.full_like(r, float("inf"))) - r).double()
    return ((got.double() - ref).abs() / ulp).max().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default="eager,torch.compile,dynamo")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("gpu_gelu: no CUDA device; nothing to measure", file=sys.stderr)
        return 0
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(4096, 3072, generator=g) * 2).cuda()
    want = gelu_new(x.double())
    t = torch.cat([torch.linspace(-12, 12, 1_000_003), torch.linspace(0.55, 0.65, 100_001),
                   torch.linspace(-0.65, -0.55, 100_001)]).cuda()
    t_ref = torch.tanh(t.double())
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}; gelu_new on [4096, 3072] float32 "
          f"({2 * x.numel() * 4 / 1e6:.0f} MB moved)")
    print("| engine | GELU kernel us per call | GB/s | max abs error vs float64 | tanh max ulps |")
    print("| --- | --- | --- | --- | --- |")
    for engine in args.engines.split(","):
        call = compiled(engine, gelu_new, [x])
        err = (call(x).double() - want).abs().max().item()
        us = kernel_us(call, x, args.iters, args.warmup)
        tanh = compiled(engine, lambda v: torch.tanh(v), [t])
        ulps = max_ulps(tanh(t), t_ref)
        print(f"| {engine} | {us:.1f} | {2 * x.numel() * 4 / us / 1e3:.0f} | {err:.1e} | {ulps:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
