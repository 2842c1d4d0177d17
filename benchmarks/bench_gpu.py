"""GPU benchmark: eager PyTorch vs torch.compile (inductor, Triton) vs dynamo (inductor, NVPTX).

Runs, in one process, on the first CUDA device, float32:
  pointwise      `(torch.tanh(x) * 2 + y).relu() * 0.5 + x`, x and y 8192x8192 (no grad)
  softmax        `torch.softmax(x, dim=-1)`, 8192x8192 (no grad)
  layer_norm     `F.layer_norm(x, (8192,), weight, bias)`, 8192x8192 (no grad)
  gelu_mlp       Linear(1024, 4096) -> GELU -> Linear(4096, 1024) on 8192x1024 (no grad)
  encoder_layer  nn.TransformerEncoderLayer(1024, 16, 4096, dropout 0, batch_first), eval,
                 16x512x1024 (no grad)
  conv_bn_relu   Conv2d(64, 64, 3, padding 1, no bias) -> BatchNorm2d (eval) -> ReLU on
                 32x64x112x112 (no grad)
  resnet18       torchvision resnet18, eval, 64x3x224x224 (no grad)
  gpt2           transformers GPT2LMHeadModel (GPT2Config(): 12 layers, 768 wide), eval,
                 token ids 8x512 -> logits (no grad)
  gpt2_train     one training step of that model (dropout 0): zero_grad, forward with labels,
                 loss.backward(), SGD step (the model is compiled, the optimizer runs eagerly),
                 ids 8x256
Per workload and engine: the compile time (the first call, synchronized, minus the steady time
per call), the steady time per call (median over --iters calls, each timed with CUDA events,
after --warmup calls), for the bandwidth-bound workloads the achieved bandwidth (bytes of the
inputs read once plus the outputs written once, over the steady time) and its share of the
device's copy bandwidth, the speedup over eager, dynamo's speed relative to torch.compile's and
how many times faster dynamo compiles, and the error against eager (max abs diff for the
bandwidth-bound workloads, ||out - eager|| / ||eager|| for the others; the training step
compares its first loss). The copy bandwidth is measured in the same run: the median time of
`dst.copy_(src)` on 256 MiB float32 tensors, counting bytes read plus bytes written. The last
lines give the geomeans over the workloads.

Compile times are cold for both compilers (Note [cold compiles]): before torch is imported,
this script points torch.compile's and Triton's on-disk caches at fresh empty folders and sets
TORCHINDUCTOR_FORCE_DISABLE_CACHES=1, and switches off the CUDA driver's cache of JIT-compiled
PTX (CUDA_CACHE_DISABLE=1). In-process caches stay on for both, and start empty for each
workload: dynamo's module cache (cuda.rs, Note [module cache]) holds only modules of live
compiled graphs, and both compilers are reset before each workload, so it can only reuse a
module compiled earlier in the same workload (a GPT-2 layer compiled as its own graph once per
layer); its hits are counted in the last column.
Both compilers' one-time start-up (imports, their first compile) is paid before timing, by a
trivial compile of each. `--warm-caches` leaves all caches on (then a second run in the same
environment shows warm figures for both).

Prints a markdown table (and writes it to --out if given).

Usage: python benchmarks/bench_gpu.py [--iters 50] [--warmup 5] [--only softmax,...]
                                      [--out FILE] [--warm-caches] [--dynamo-first]
"""

import argparse
import math
import os
import statistics
import sys
import tempfile
import time

WORKLOADS = ("pointwise", "softmax", "layer_norm", "gelu_mlp", "encoder_layer", "conv_bn_relu",
             "resnet18", "gpt2", "gpt2_train")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--out", default=None)
    ap.add_argument("--warm-caches", action="store_true", help="leave the compilers' caches on")
    ap.add_argument("--dynamo-first", action="store_true",
                    help="compile each workload with dynamo before torch.compile (default: after), to see "
                         "whether one compiler's leftovers (worker processes, caches) slow the other's compile")
    return ap.parse_args()


ARGS = parse_args()
if not ARGS.warm_caches:
    # Note [cold compiles]: read at import by torch._inductor.config and Triton, and by the
    # CUDA driver when it starts, so set before torch is imported.
    _cache_root = tempfile.mkdtemp(prefix="bench_gpu_caches_")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(_cache_root, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(_cache_root, "triton")
    os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    os.environ["CUDA_CACHE_DISABLE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import copy  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

N = 8192


def pointwise(x, y):
    return (torch.tanh(x) * 2 + y).relu() * 0.5 + x


def softmax(x):
    return torch.softmax(x, dim=-1)


def layer_norm(x, w, b):
    return F.layer_norm(x, (N,), w, b)


class GeluMlp(nn.Module):
    def __init__(self, d=1024, h=4096):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, h), nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class ConvBnRelu(nn.Module):
    def __init__(self, c=64):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


def gpt2_model(train):
    import transformers
    cfg = transformers.GPT2Config(attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)
    return transformers.GPT2LMHeadModel(cfg).to("cuda").train(train)


def make(name, dev):
    """(callable to compile, input tuple, bytes moved or None, training step or not)."""
    torch.manual_seed(0)
    g = torch.Generator(device=dev).manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, device=dev, generator=g)

    if name == "pointwise":
        return pointwise, (randn(N, N), randn(N, N)), 3 * N * N * 4, False
    if name == "softmax":
        return softmax, (randn(N, N),), 2 * N * N * 4, False
    if name == "layer_norm":
        return layer_norm, (randn(N, N), randn(N), randn(N)), 2 * N * N * 4 + 2 * N * 4, False
    if name == "gelu_mlp":
        return GeluMlp().to(dev).eval(), (randn(8192, 1024),), None, False
    if name == "encoder_layer":
        m = nn.TransformerEncoderLayer(1024, 16, 4096, dropout=0.0, batch_first=True).to(dev).eval()
        return m, (randn(16, 512, 1024),), None, False
    if name == "conv_bn_relu":
        m = ConvBnRelu().to(dev).eval()
        with torch.no_grad():  # running statistics that are not the identity
            m.bn.running_mean.uniform_(-1, 1)
            m.bn.running_var.uniform_(0.5, 2)
            m.bn.weight.uniform_(0.5, 1.5)
            m.bn.bias.uniform_(-0.5, 0.5)
        return m, (randn(32, 64, 112, 112),), None, False
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18().to(dev).eval(), (randn(64, 3, 224, 224),), None, False
    if name == "gpt2":
        ids = torch.randint(0, 50257, (8, 512), device=dev, generator=g)
        m = gpt2_model(False)
        return (lambda model: (lambda ids: model(input_ids=ids).logits))(m), (ids,), None, False
    if name == "gpt2_train":
        ids = torch.randint(0, 50257, (8, 256), device=dev, generator=g)
        return gpt2_model(True), (ids,), None, True
    raise ValueError(name)


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
    if isinstance(fn, types.FunctionType):
        return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    return fn


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


def train_step(model, compiled):
    """A training step of `model` through `compiled` (its compiled forward): returns the loss."""
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step(ids):
        opt.zero_grad(set_to_none=True)
        loss = compiled(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def run_engine(engine, fn, inputs, training, C):
    """{ms, compile, out, counters} for one engine."""
    C.inductor_reset_counters()
    if training:
        model = copy.deepcopy(fn)
        call = train_step(model, engine_fn(engine, model))
        grad = torch.enable_grad()
    else:
        call = engine_fn(engine, fn)
        grad = torch.no_grad()
    with grad:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = call(*inputs)
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        counters = dict(C.inductor_counters())
        iters = ARGS.iters if not training else max(ARGS.iters // 5, 5)
        ms = time_calls(call, inputs, iters, ARGS.warmup)
    return dict(ms=ms, compile=max(first - ms * 1e-3, 0.0), out=out, counters=counters)


def error(got, want, bandwidth_bound):
    if bandwidth_bound:
        return f"{(got - want).abs().max().item():.1e} max"
    got, want = got.double(), want.double()
    return f"{((got - want).norm() / want.norm().clamp_min(1e-30)).item():.1e} rel"


def geomean(xs):
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    if not torch.cuda.is_available():
        print("bench_gpu: no CUDA device; nothing to measure", file=sys.stderr)
        return 0
    dev = torch.device("cuda", 0)
    import dynamo
    import dynamo._C as C
    # One-time start-up of both compilers (imports, JIT set-up) stays out of the compile times.
    warm = torch.randn(64, device=dev)
    with torch.no_grad():
        torch.compile(lambda t: t + 1)(warm)
        dynamo.optimize("inductor")(lambda t: t + 1)(warm)
    torch.cuda.synchronize()
    copy_gbs = copy_bandwidth(dev, 20)
    lines = [
        f"GPU: {torch.cuda.get_device_name(dev)}, torch {torch.__version__}, float32; "
        f"copy bandwidth (copy_, read+write) {copy_gbs:.0f} GB/s; caches: "
        f"{'warm (left on)' if ARGS.warm_caches else 'cold (off for both compilers)'}",
        "",
        "| workload | engine | compile s | ms/call | GB/s | % of copy | vs eager | dynamo / torch.compile | compiles faster | error vs eager | dynamo kernels (LLVM ms summed over compile threads, driver JIT ms) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    ratios, speedups, compile_x = [], {"torch.compile": [], "dynamo": []}, []
    for name in ARGS.only.split(","):
        fn, inputs, nbytes, training = make(name, dev)
        res = {}
        for engine in ("eager", "dynamo", "torch.compile") if ARGS.dynamo_first else ("eager", "torch.compile", "dynamo"):
            try:
                res[engine] = run_engine(engine, fn, inputs, training, C)
            except Exception as exc:  # one engine failing must not hide the others
                res[engine] = exc
                print(f"# {name} {engine}: {type(exc).__name__}: {exc}", file=sys.stderr)
        want = res["eager"]["out"] if isinstance(res.get("eager"), dict) else None
        tc = res.get("torch.compile")
        for engine, r in res.items():
            if isinstance(r, Exception):
                lines.append(f"| {name} | {engine} | failed: {type(r).__name__} | | | | | | | | |")
                continue
            gbs = f"{nbytes / (r['ms'] * 1e-3) / 1e9:.0f}" if nbytes else ""
            share = f"{100 * nbytes / (r['ms'] * 1e-3) / 1e9 / copy_gbs:.0f}%" if nbytes else ""
            eager_ms = res["eager"]["ms"] if isinstance(res.get("eager"), dict) else float("nan")
            ratio = faster = kern = ""
            if engine != "eager":
                speedups[engine].append(eager_ms / r["ms"])
            if engine == "dynamo" and isinstance(tc, dict):
                ratio = f"{tc['ms'] / r['ms']:.2f}x"
                ratios.append(tc["ms"] / r["ms"])
                cx = tc["compile"] / max(r["compile"], 1e-6)
                compile_x.append(cx)
                faster = f"{cx:.0f}x"
            comp = "" if engine == "eager" else f"{r['compile']:.3f}"
            if engine == "dynamo":
                c = r["counters"]
                kern = (f"{c.get('kernels_compiled', 0)} kernels, {c.get('graphs_compiled', 0)} graphs, "
                        f"{c.get('eager_graphs', 0)} eager, {c.get('gpu_module_cache_hits', 0)} cache hits "
                        f"({c.get('gpu_llvm_us', 0) / 1e3:.0f}, {c.get('gpu_jit_us', 0) / 1e3:.0f})")
            err = error(r["out"], want, nbytes is not None) if want is not None else ""
            lines.append(
                f"| {name} | {engine} | {comp} | {r['ms']:.3f} | {gbs} | {share} | "
                f"{eager_ms / r['ms']:.2f}x | {ratio} | {faster} | {err} | {kern} |"
            )
        del inputs, res, fn
        torch.cuda.empty_cache()
    lines += [
        "",
        f"geomean over {len(ratios)} workloads: speedup vs eager torch.compile {geomean(speedups['torch.compile']):.2f}x, "
        f"dynamo {geomean(speedups['dynamo']):.2f}x; dynamo / torch.compile {geomean(ratios):.2f}x "
        f"(lowest {min(ratios, default=float('nan')):.2f}x); dynamo compiles {geomean(compile_x):.0f}x faster "
        f"(least {min(compile_x, default=float('nan')):.0f}x)",
    ]
    text = "\n".join(lines)
    print(text)
    if ARGS.out:
        with open(ARGS.out, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
