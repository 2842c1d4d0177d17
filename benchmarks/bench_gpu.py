"""GPU benchmark: eager PyTorch vs torch.compile (inductor, Triton) vs dynamo (inductor, NVPTX).

Runs, in one process, on the first CUDA device, in float32 under torch.no_grad():
  pointwise   `(torch.tanh(x) * 2 + y).relu() * 0.5 + x`, x and y 8192x8192
  softmax     `torch.softmax(x, dim=-1)`, 8192x8192
  layer_norm  `F.layer_norm(x, (8192,), weight, bias)`, 8192x8192
Per workload and engine: the compile time (the first call, synchronized, minus the steady time
per call), the steady time per call (median over --iters calls, each timed with CUDA events,
after --warmup calls), the achieved bandwidth (bytes of the inputs read once plus the outputs
written once, over the steady time), that bandwidth as a share of the device's copy bandwidth,
the speedup over eager and dynamo's speed relative to torch.compile's, and the max abs diff of
the output against eager's. The copy bandwidth is measured in the same run: the median time of
`dst.copy_(src)` on 256 MiB float32 tensors, counting bytes read plus bytes written. For dynamo
it also reports the kernels generated and whether the graph fell back to eager (from
`dynamo._C.inductor_counters()`).

Prints a markdown table (and writes it to --out if given).

Usage: python benchmarks/bench_gpu.py [--size 8192] [--iters 50] [--warmup 5] [--only softmax,...]
                                      [--out FILE]
"""

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def pointwise(x, y):
    return (torch.tanh(x) * 2 + y).relu() * 0.5 + x


def softmax(x):
    return torch.softmax(x, dim=-1)


def make_layer_norm(n):
    def layer_norm(x, w, b):
        return F.layer_norm(x, (n,), w, b)
    return layer_norm


def inputs_for(name, n, dev):
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(n, n, device=dev, generator=g)
    if name == "pointwise":
        return pointwise, (x, torch.randn(n, n, device=dev, generator=g)), 3 * n * n * 4
    if name == "softmax":
        return softmax, (x,), 2 * n * n * 4
    w, b = torch.randn(n, device=dev, generator=g), torch.randn(n, device=dev, generator=g)
    return make_layer_norm(n), (x, w, b), 2 * n * n * 4 + 2 * n * 4


def time_calls(fn, args, iters, warmup):
    """Median milliseconds per call, each call timed with CUDA events."""
    for _ in range(warmup):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(*args)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def copy_bandwidth(dev, iters):
    """Device-to-device copy bandwidth in GB/s (bytes read + written), median of `iters`."""
    src = torch.randn(64 * 1024 * 1024, device=dev)
    dst = torch.empty_like(src)
    ms = time_calls(lambda: dst.copy_(src), (), iters, 5)
    return 2 * src.numel() * 4 / (ms * 1e-3) / 1e9


def fresh(fn):
    import types
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def engine_fn(engine, fn):
    import torch._dynamo
    torch._dynamo.reset()
    if engine == "eager":
        return fn
    if engine == "torch.compile":
        return torch.compile(fresh(fn), backend="inductor")
    import dynamo
    dynamo.reset()
    return dynamo.optimize("inductor")(fresh(fn))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--only", default="pointwise,softmax,layer_norm")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_gpu: no CUDA device; nothing to measure", file=sys.stderr)
        return 0
    dev = torch.device("cuda", 0)
    torch.set_grad_enabled(False)
    import dynamo
    import dynamo._C as C
    # One-time start-up of both compilers (imports, JIT set-up) stays out of the compile times.
    warm = torch.randn(64, device=dev)
    torch.compile(lambda t: t + 1)(warm)
    dynamo.optimize("inductor")(lambda t: t + 1)(warm)
    torch.cuda.synchronize()
    copy_gbs = copy_bandwidth(dev, 20)
    lines = [
        f"GPU: {torch.cuda.get_device_name(dev)}, torch {torch.__version__}, float32, "
        f"{args.size}x{args.size}; copy bandwidth (copy_, read+write) {copy_gbs:.0f} GB/s",
        "",
        "| workload | engine | compile s | ms/call | GB/s | % of copy | vs eager | dynamo / torch.compile | max abs diff | dynamo kernels |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in args.only.split(","):
        fn, inputs, nbytes = inputs_for(name, args.size, dev)
        want = fn(*inputs)
        res = {}
        for engine in ("eager", "torch.compile", "dynamo"):
            try:
                C.inductor_reset_counters()
                f = engine_fn(engine, fn)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                got = f(*inputs)
                torch.cuda.synchronize()
                first = time.perf_counter() - t0
                counters = dict(C.inductor_counters())
                ms = time_calls(f, inputs, args.iters, args.warmup)
                diff = (got - want).abs().max().item()
                res[engine] = dict(ms=ms, compile=max(first - ms * 1e-3, 0.0), diff=diff, counters=counters)
            except Exception as exc:  # one engine failing must not hide the others
                res[engine] = exc
                print(f"# {name} {engine}: {type(exc).__name__}: {exc}", file=sys.stderr)
        for engine, r in res.items():
            if isinstance(r, Exception):
                lines.append(f"| {name} | {engine} | failed: {type(r).__name__} | | | | | | | |")
                continue
            gbs = nbytes / (r["ms"] * 1e-3) / 1e9
            eager_ms = res["eager"]["ms"] if isinstance(res.get("eager"), dict) else float("nan")
            tc = res.get("torch.compile")
            ratio = f"{tc['ms'] / r['ms']:.2f}x" if engine == "dynamo" and isinstance(tc, dict) else ""
            comp = "" if engine == "eager" else f"{r['compile']:.3f}"
            kern = ""
            if engine == "dynamo":
                c = r["counters"]
                kern = f"{c.get('kernels_compiled', 0)} kernels, {c.get('eager_graphs', 0)} eager graphs"
            lines.append(
                f"| {name} | {engine} | {comp} | {r['ms']:.3f} | {gbs:.0f} | {100 * gbs / copy_gbs:.0f}% | "
                f"{eager_ms / r['ms']:.2f}x | {ratio} | {r['diff']:.2e} | {kern} |"
            )
        del inputs, want
        torch.cuda.empty_cache()
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
