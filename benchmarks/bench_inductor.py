"""Inductor benchmark: eager PyTorch vs torch.compile vs dynamo on kernels and small real models.

Runs, in one process, on CPU in float32, under torch.no_grad() with every module in eval mode:
  pointwise    `(torch.sin(x) * 2 + torch.cos(y)).relu() * 0.5 + x`, 4096x4096
  softmax      `torch.softmax(x, dim=-1)`, 4096x4096
  layer_norm   `F.layer_norm(x, (1024,), weight, bias)`, 8192x1024
  var          `x.var(-1)`, 8192x1024 (Note [variance without overflow]; not in the default run)
  mlp          Linear(512, 2048) -> GELU -> Linear(2048, 512), batch 256
  encoder      nn.TransformerEncoderLayer(d_model=256, nhead=4, batch_first=True), input (8, 128, 256)
  resnet18     torchvision resnet18(weights=None), input (2, 3, 224, 224)
  mobilenet    torchvision mobilenet_v3_small(weights=None), input (2, 3, 224, 224)
  gpt2         transformers GPT2Model(n_layer=2, n_embd=128, n_head=4, vocab 1000, n_positions 256),
               random init, input ids (2, 64), use_cache=False
  bert         transformers BertModel(2 layers, hidden 128, 4 heads, intermediate 256, vocab 1000),
               random init, input ids (2, 64)
Per workload and engine: the first call after a reset of both compilers (its time minus the
steady time is the compile time), the steady time per call (median of --steady-iters separately
timed calls after --warmup calls; the engines' timed calls alternate, one call of each per round
in a rotating order, so that load from other processes hits all three alike), the speedup over
eager, dynamo's speed relative to torch.compile's, the max abs diff of every output tensor
against eager's (and whether it is within torch.allclose(rtol=1e-4, atol=1e-4 * max|eager|)),
and the counts: torch.compile's graphs (counters["stats"]["unique_graphs"]), dynamo's graphs and
graph breaks (dynamo.counters()) and the deltas of dynamo._C.inductor_counters() around the
first call (kernels_compiled, fallback_nodes, eager_graphs), plus kernel calls per steady call.
For the bandwidth-bound workloads (pointwise, softmax, layer_norm) the achieved bandwidth (bytes
of inputs + outputs / steady time) is set against the machine's copy bandwidth, measured in the
same run as the median time of cloning a tensor of 64M float32 (256 MiB read + 256 MiB written),
and against `copy_` of the same tensor into an existing one (a clone this large gets fresh pages
from the OS on every call, so its time includes the page faults that a workload's large outputs
pay too; `copy_` is the memory bandwidth without them). Their sizes (32 MiB or more of input and
as much output) are meant to exceed the last-level cache, so that the data come from memory as
in the copy.

Both compilers' one-time start-up (imports, JIT set-up) is paid by a trivial compile before
anything is timed and reported in the header. Both compilers are reset before each workload (and
after it); functions get their own code object per engine and modules their own deep copy, so
neither compiler sees the other's caches or the previous workload's. A failure (or a run over
--time-limit seconds) of one engine on one workload is reported in its row and the run goes on.
Summary: the geometric mean of the speedup over eager of each compiler.

Prints a markdown section; `--write docs/PERF.md` also replaces the section between
`<!-- bench_inductor:begin -->` and `<!-- bench_inductor:end -->` in that file (appending it if
the markers are missing) and draws a bar plot of the speedups, `perf_inductor.png` next to that
file (or where `--plot` says; skipped with a message when matplotlib is not installed).

Usage: python benchmarks/bench_inductor.py [--write docs/PERF.md] [--only pointwise,softmax,...]
                                           [--quick] [--steady-iters N] [--warmup N]
                                           [--threads N] [--time-limit S] [--plot FILE]
                                           [--cold-inductor-cache]
"""

NAME = "bench_inductor"  # names its section in docs/PERF.md and its header there
PLOT_NAME = "perf_inductor.png"  # written next to the --write file

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common when run as a script
import _common  # noqa: E402  (imports no torch, so --cold-inductor-cache still takes effect)

WORKLOADS = ("pointwise", "softmax", "layer_norm", "mlp", "encoder", "resnet18", "mobilenet", "gpt2", "bert")
EXTRA_WORKLOADS = ("var",)  # run only when named in --only


def parse_args():
    p = _common.argument_parser(__doc__, NAME, calls=None, repeats=None, steady_iters=None,
                                steady_iters_help="timed calls per engine and workload, median reported "
                                                  "(default 15, 3 with --quick)")
    p.add_argument("--only", default=",".join(WORKLOADS),
                   help=f"comma-separated subset of the workloads {','.join(WORKLOADS)}")
    p.add_argument("--quick", action="store_true", help="fewer warm-up and timed calls (for trying the script)")
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed calls after the first call (default 3, 1 with --quick)")
    p.add_argument("--threads", type=int, default=0,
                   help="torch intra-op threads (default 0: torch's default, one per core)")
    p.add_argument("--time-limit", type=int, default=420,
                   help="seconds one engine may spend on one workload before it is abandoned (SIGALRM)")
    p.add_argument("--plot", metavar="FILE",
                   help=f"write the bar plot to FILE (default with --write: {PLOT_NAME} next to that file)")
    args = p.parse_args()
    unknown = [w for w in args.only.split(",") if w and w not in WORKLOADS + EXTRA_WORKLOADS]
    if unknown:
        p.error(f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS + EXTRA_WORKLOADS)}")
    if args.steady_iters is None:
        args.steady_iters = 3 if args.quick else 15
    if args.warmup is None:
        args.warmup = 1 if args.quick else 3
    if args.plot is None and args.write:
        args.plot = os.path.join(os.path.dirname(args.write), PLOT_NAME)
    return args


ARGS = parse_args()
_common.apply_cold_inductor_cache(ARGS)
_common.quiet_transformers()

import contextlib  # noqa: E402
import copy  # noqa: E402
import functools  # noqa: E402
import logging  # noqa: E402
import math  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch._dynamo.utils import counters as torch_counters  # noqa: E402
from _common import error_text, fmt, median_call_ns, timed_call  # noqa: E402

if ARGS.threads > 0:
    torch.set_num_threads(ARGS.threads)

for _name in ("torch._dynamo", "torch._inductor", "torch.fx", "transformers"):
    logging.getLogger(_name).setLevel(logging.ERROR)

dynamo = _common.import_dynamo()[0]  # None if the import failed (the header says why)


def optional_import(name):
    """(module, None) or (None, "Type: message")."""
    try:
        module = __import__(name)
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"
    return module, None


torchvision, TORCHVISION_ERROR = optional_import("torchvision")
transformers, TRANSFORMERS_ERROR = optional_import("transformers")
if transformers is not None:
    transformers.logging.set_verbosity_error()

ENGINES = ("eager", "torch.compile", "dynamo")
COMPILERS = ("torch.compile", "dynamo")
RTOL = 1e-4
COPY_FLOATS = 64 * 2**20

# Both also clear torch.compile's counters, which its graph count is read from.
reset_all = functools.partial(_common.reset_all, clear_torch_counters=True)
wrap = functools.partial(_common.wrap, clear_torch_counters=True)  # for the warm-up compile


# ---- the workloads ----------------------------------------------------------------------------

def pointwise(x, y):
    return (torch.sin(x) * 2 + torch.cos(y)).relu() * 0.5 + x


def softmax(x):
    return torch.softmax(x, dim=-1)


def layer_norm(x, weight, bias):
    return F.layer_norm(x, (1024,), weight, bias)


def variance(x):
    return x.var(-1)


def warm_fn(x):
    return x * 2 + 1


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def token_ids(vocab, shape):
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(0))


def need(module, error, what):
    if module is None:
        raise RuntimeError(f"import {what} failed: {error}")
    return module


def make_mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512)).eval(), (randn(256, 512),), {}


def make_encoder():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=256, nhead=4, batch_first=True).eval()
    return layer, (randn(8, 128, 256),), {}


def make_vision(name):
    tv = need(torchvision, TORCHVISION_ERROR, "torchvision")
    torch.manual_seed(0)
    return getattr(tv.models, name)(weights=None).eval(), (randn(2, 3, 224, 224),), {}


def make_gpt2():
    tf = need(transformers, TRANSFORMERS_ERROR, "transformers")
    torch.manual_seed(0)
    cfg = tf.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=256)
    return tf.GPT2Model(cfg).eval(), (token_ids(1000, (2, 64)),), {"use_cache": False}


def make_bert():
    tf = need(transformers, TRANSFORMERS_ERROR, "transformers")
    torch.manual_seed(0)
    cfg = tf.BertConfig(num_hidden_layers=2, hidden_size=128, num_attention_heads=4, intermediate_size=256,
                        vocab_size=1000)
    return tf.BertModel(cfg).eval(), (token_ids(1000, (2, 64)),), {}


# name -> (title, make() -> (function or module, args, kwargs), bandwidth-bound?)
SPECS = {
    "pointwise": ("`(sin(x) * 2 + cos(y)).relu() * 0.5 + x`, 4096x4096",
                  lambda: (pointwise, (randn(4096, 4096, seed=0), randn(4096, 4096, seed=1)), {}), True),
    "softmax": ("`torch.softmax(x, -1)`, 4096x4096", lambda: (softmax, (randn(4096, 4096),), {}), True),
    "layer_norm": ("`F.layer_norm` with weight and bias over the last dim, 8192x1024",
                   lambda: (layer_norm, (randn(8192, 1024), randn(1024, seed=1), randn(1024, seed=2)), {}), True),
    "var": ("`x.var(-1)`, 8192x1024", lambda: (variance, (randn(8192, 1024),), {}), True),
    "mlp": ("Linear(512, 2048) -> GELU -> Linear(2048, 512), batch 256", make_mlp, False),
    "encoder": ("`nn.TransformerEncoderLayer(256, nhead=4, batch_first=True)`, (8, 128, 256)", make_encoder, False),
    "resnet18": ("torchvision resnet18, (2, 3, 224, 224)", functools.partial(make_vision, "resnet18"), False),
    "mobilenet": ("torchvision mobilenet_v3_small, (2, 3, 224, 224)",
                  functools.partial(make_vision, "mobilenet_v3_small"), False),
    "gpt2": ("transformers GPT2Model (2 layers, n_embd 128, 4 heads, vocab 1000), ids (2, 64), use_cache=False",
             make_gpt2, False),
    "bert": ("transformers BertModel (2 layers, hidden 128, 4 heads, intermediate 256, vocab 1000), ids (2, 64)",
             make_bert, False),
}


# ---- helpers ----------------------------------------------------------------------------------

class TimeLimit(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds):
    """Abandons a measurement that runs too long (checked between Python bytecodes)."""
    def on_alarm(signum, frame):
        raise TimeLimit(f"gave up after {seconds} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def tensors_of(out):
    """Every tensor in a (nested) output: tensors, tuples, lists, dicts and transformers' ModelOutput."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in tensors_of(v)]
    return []


def compare(outs, refs):
    """(max abs diff over all output tensors, all within tolerance?) against eager's outputs."""
    if len(outs) != len(refs):
        raise AssertionError(f"{len(outs)} output tensors, eager has {len(refs)}")
    diff, ok = 0.0, True
    for o, r in zip(outs, refs):
        if o.shape != r.shape:
            raise AssertionError(f"output shape {tuple(o.shape)}, eager's {tuple(r.shape)}")
        o, r = o.detach().double(), r.detach().double()
        if o.numel():
            diff = max(diff, (o - r).abs().nan_to_num(nan=math.inf).max().item())
            scale = r.abs().nan_to_num(nan=0.0, posinf=0.0, neginf=0.0).max().item()
            ok = ok and torch.allclose(o, r, rtol=RTOL, atol=RTOL * scale, equal_nan=True)
    return diff, ok


def inductor_counters():
    try:
        return dict(dynamo._C.inductor_counters())
    except Exception:
        return {}


def delta(after, before, key):
    return after.get(key, 0) - before.get(key, 0) if key in after else None


# ---- measurements -----------------------------------------------------------------------------

def copy_bandwidth():
    """GB/s of cloning COPY_FLOATS float32 (bytes read + written / median time), and of copy_ into
    an existing tensor."""
    x = torch.rand(COPY_FLOATS)
    iters = 5 if ARGS.quick else 15
    x.clone()
    clone_ns = median_call_ns(x.clone, (), iters)
    dst = torch.empty_like(x)
    dst.copy_(x)
    copy_ns = median_call_ns(dst.copy_, (x,), iters)
    return 2 * x.nbytes / clone_ns, 2 * x.nbytes / copy_ns


def prepare(engine, target):
    """`target` ready for `engine` without resetting anything: a function gets its own code object,
    a module its own deep copy, so that no two engines share a cache or a module."""
    if isinstance(target, nn.Module):
        target = copy.deepcopy(target)
    else:
        target = _common.fresh_copy(target)
    if engine == "eager":
        return target
    if engine == "torch.compile":
        return torch.compile(target, backend="inductor")
    _common.require_dynamo()
    return dynamo.optimize("inductor")(target)


def first_call(engine, made, refs):
    """Prepares `engine`, makes its first (compiling) call and the warm-up calls. Returns (the call
    to time, its result dict)."""
    target, args, kwargs = made
    r = {}
    with time_limit(ARGS.time_limit), torch.no_grad():
        call = functools.partial(prepare(engine, target), *args, **kwargs)
        before = inductor_counters()
        out, first = timed_call(call, ())
        after = inductor_counters()
        outs = tensors_of(out)
        r["first_ms"] = first / 1e6
        r["out_bytes"] = sum(t.nbytes for t in outs)
        if refs is None:
            r["outs"] = [t.detach().clone() for t in outs]
        else:
            r["diff"], r["ok"] = compare(outs, refs)
        del out, outs
        if engine == "torch.compile":
            r["graphs"] = int(torch_counters["stats"]["unique_graphs"])
        elif engine == "dynamo":
            c = dynamo.counters()
            r["graphs"], r["breaks"], r["recompiles"] = c.get("graphs"), c.get("graph_breaks"), c.get("recompiles", 0)
            r["eager_frames"] = c.get("eager_fallbacks")
            for key in ("kernels_compiled", "fallback_nodes", "eager_graphs"):
                r[key] = delta(after, before, key)
        for _ in range(ARGS.warmup):
            call()
        if engine == "dynamo":
            r["recompiles_before_timing"] = dynamo.counters().get("recompiles", 0)
    return call, r


def steady_times(calls):
    """Median time per call (ns) of each engine's call in `calls` ({engine: call}), timed in rounds:
    one call of each engine per round, so that a burst of load from other processes hits every
    engine alike, starting with a different engine each round (which engine's output buffers the
    allocator hands to which is then no bias either). Returns ({engine: median ns | Exception},
    dynamo's inductor counter deltas)."""
    samples = {engine: [] for engine in calls}
    failed = {}
    before = inductor_counters()
    try:
        with time_limit(ARGS.time_limit), torch.no_grad():
            order = list(calls.items())
            for i in range(ARGS.steady_iters):
                for engine, call in order[i % len(order):] + order[:i % len(order)]:
                    if engine in failed:
                        continue
                    try:
                        samples[engine].append(timed_call(call, ())[1])
                    except TimeLimit:
                        raise
                    except Exception as exc:
                        failed[engine] = exc
    except TimeLimit as exc:  # keep what was measured
        for engine in calls:
            if not samples[engine]:
                failed.setdefault(engine, exc)
    after = inductor_counters()
    out = {engine: failed.get(engine) or statistics.median(samples[engine]) for engine in calls}
    counts = {key: delta(after, before, key) for key in ("kernel_calls", "guard_failures")}
    counts["n"] = len(samples.get("dynamo", ()))
    return out, counts


def measure_workload(name):
    """{engine: dict | Exception} plus "_bytes" (inputs + outputs) for bandwidth-bound workloads.

    Both compilers are reset once, then each engine in turn makes its first call (compiling) and
    its warm-up calls; then all are timed together (steady_times)."""
    title, make, bandwidth_bound = SPECS[name]
    try:
        made = make()
    except Exception as exc:
        return {engine: exc for engine in ENGINES}
    reset_all()
    res, calls = {}, {}
    refs = None
    for engine in ENGINES:
        if engine != "eager" and refs is None:
            res[engine] = RuntimeError("no eager reference (eager failed)")
            continue
        try:
            calls[engine], res[engine] = first_call(engine, made, refs)
            if engine == "eager":
                refs = res[engine].pop("outs")
        except Exception as exc:
            res[engine] = exc
    times, counts = steady_times(calls)
    for engine, t in times.items():
        if isinstance(t, Exception):
            res[engine] = t
            continue
        r = res[engine]
        r["ms"] = t / 1e6
        if engine != "eager":
            r["compile_ms"] = r["first_ms"] - r["ms"]
        if engine == "dynamo":
            r["kernel_calls"] = counts["kernel_calls"] / counts["n"] if counts["kernel_calls"] is not None else None
            r["guard_failures"] = counts["guard_failures"]
            r["later_recompiles"] = dynamo.counters().get("recompiles", 0) - r["recompiles"]
            r["timed_recompiles"] = dynamo.counters().get("recompiles", 0) - r["recompiles_before_timing"]
    del calls
    reset_all()
    eager = res.get("eager")
    if bandwidth_bound and isinstance(eager, dict):
        res["_bytes"] = sum(a.nbytes for a in made[1] if isinstance(a, torch.Tensor)) + eager["out_bytes"]
    return res


# ---- report -----------------------------------------------------------------------------------

LOAD_AT_START = _common.load_average()


def ok(res, engine):
    r = res.get(engine)
    return r if isinstance(r, dict) else None


def speedup(res, engine):
    e, r = ok(res, "eager"), ok(res, engine)
    return e["ms"] / r["ms"] if e and r and r["ms"] > 0 else None


def cell(res, engine, key, spec):
    r = res.get(engine)
    if isinstance(r, Exception):
        return "error"
    return fmt(r.get(key) if r else None, spec)


def times(v, spec=".2f"):
    """"1.23x", or "–" for None."""
    return "–" if v is None else f"{v:{spec}}x"


def geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def render(command, cache_note, warm_notes, bandwidth, results, plot_note, elapsed_s):
    clone_bw, copy_bw = bandwidth
    versions = (f"torchvision {getattr(torchvision, '__version__', 'absent')}, "
                f"transformers {getattr(transformers, '__version__', 'absent')}, ")
    lines = _common.header_lines(
        NAME, command, cache_note, LOAD_AT_START, libs=versions,
        before_load=[
            "- one-time start-up paid before timing (a trivial compile): "
            + ", ".join(f"{k} {v}" for k, v in warm_notes.items()),
            f"- copy bandwidth: {fmt(clone_bw, '.1f')} GB/s cloning {COPY_FLOATS // 2**20}M float32 "
            f"(the reference below), {fmt(copy_bw, '.1f')} GB/s `copy_` into an existing tensor (no page faults)",
            f"- per workload and engine: first call after a reset of both compilers, {ARGS.warmup} warm-up "
            f"call(s), then the median of {ARGS.steady_iters} timed calls, the three engines' calls alternating; "
            "CPU, float32, `torch.no_grad()`, eval",
        ],
        after_load=[f"- whole run: {elapsed_s:.0f} s"])
    names = list(results)
    lines += ["", "Workloads (float32, random inputs and random-init weights):", ""]
    lines += [f"- {n}: {SPECS[n][0]}" for n in names]
    lines += render_summary(names, results)
    lines += render_times(names, results)
    lines += render_compile(names, results)
    lines += render_bandwidth(names, results, clone_bw, copy_bw)
    lines += render_counts(names, results)
    lines += render_errors(names, results)
    lines += render_targets(names, results, clone_bw, copy_bw)
    if plot_note:
        lines += ["", plot_note]
    return _common.section_text(NAME, lines)


def render_summary(names, results):
    lines = ["", "### Summary", ""]
    for engine in COMPILERS:
        values = [speedup(results[n], engine) for n in names]
        g = geomean(values)
        got = sum(1 for v in values if v)
        lines.append(f"- {engine}: geometric-mean speedup over eager {fmt(g, '.2f')}x "
                     f"({got} of {len(names)} workloads)")
    common = [n for n in names if all(speedup(results[n], e) for e in COMPILERS)]
    if common and len(common) != len(names):
        tc = geomean(speedup(results[n], "torch.compile") for n in common)
        dy = geomean(speedup(results[n], "dynamo") for n in common)
        lines.append(f"- on the {len(common)} workloads both ran: torch.compile {tc:.2f}x, dynamo {dy:.2f}x")
    return lines


def render_times(names, results):
    lines = [
        "",
        "### Steady state",
        "",
        "Median time per call (ms), the engines' calls alternating; speedup = eager time / engine time; "
        "dynamo / torch.compile = torch.compile's time / dynamo's (above 1: dynamo faster).",
        "",
        "| workload | eager (ms) | torch.compile (ms) | dynamo (ms) | torch.compile speedup | dynamo speedup "
        "| dynamo / torch.compile |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in names:
        res = results[n]
        tc, dy = ok(res, "torch.compile"), ok(res, "dynamo")
        rel = tc["ms"] / dy["ms"] if tc and dy and dy["ms"] > 0 else None
        lines.append(f"| {n} | " + " | ".join(cell(res, e, "ms", ".3f") for e in ENGINES)
                     + f" | {times(speedup(res, 'torch.compile'))} | {times(speedup(res, 'dynamo'))} | {fmt(rel, '.2f')} |")
    return lines


def render_compile(names, results):
    lines = [
        "",
        "### Compile time",
        "",
        "First call after a reset of both compilers at the start of the workload (eager, then torch.compile, "
        "then dynamo), and compile time = first call minus steady call (one-time start-up already paid, see "
        "above; a compile time at or below 0 is within the noise of the steady time). Last column: "
        "torch.compile's compile time / dynamo's.",
        "",
        "| workload | torch.compile first call (ms) | torch.compile compile (ms) | dynamo first call (ms) "
        "| dynamo compile (ms) | torch.compile / dynamo |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in names:
        res = results[n]
        tc, dy = ok(res, "torch.compile"), ok(res, "dynamo")
        rel = tc["compile_ms"] / dy["compile_ms"] if tc and dy and dy["compile_ms"] > 0 else None
        lines.append(f"| {n} | {cell(res, 'torch.compile', 'first_ms', '.1f')} "
                     f"| {cell(res, 'torch.compile', 'compile_ms', '.1f')} | {cell(res, 'dynamo', 'first_ms', '.1f')} "
                     f"| {cell(res, 'dynamo', 'compile_ms', '.1f')} | {times(rel, '.1f')} |")
    return lines


def render_bandwidth(names, results, clone_bw, copy_bw):
    bw_names = [n for n in names if SPECS[n][2]]
    if not bw_names:
        return []
    lines = [
        "",
        "### Bandwidth (bandwidth-bound workloads)",
        "",
        "Bytes of inputs + outputs / steady time, in GB/s and as a share of the copy bandwidth measured by "
        f"a clone ({fmt(clone_bw, '.1f')} GB/s) / by `copy_` into an existing tensor ({fmt(copy_bw, '.1f')} GB/s).",
        "",
        "| workload | MB moved | eager | torch.compile | dynamo |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for n in bw_names:
        res = results[n]
        nbytes = res.get("_bytes")
        cells = []
        for e in ENGINES:
            r = res.get(e)
            if isinstance(r, Exception):
                cells.append("error")
            elif r and nbytes:
                gbs = nbytes / (r["ms"] * 1e6)
                cells.append(f"{gbs:.1f} GB/s ({100 * gbs / clone_bw:.0f}% / {100 * gbs / copy_bw:.0f}%)")
            else:
                cells.append("–")
        lines.append(f"| {n} | {fmt(nbytes / 1e6 if nbytes else None, '.1f')} | " + " | ".join(cells) + " |")
    return lines


def ok_cell(res, engine):
    r = res.get(engine)
    if isinstance(r, Exception):
        return "error"
    if not r or "diff" not in r:
        return "–"
    return f"{r['diff']:.2e} {'ok' if r['ok'] else '**NOT within tolerance**'}"


def render_counts(names, results):
    lines = [
        "",
        "### Correctness and counts",
        "",
        "Max abs diff over every output tensor against eager's, and whether all are within "
        f"`torch.allclose(rtol={RTOL:g}, atol={RTOL:g} * max|eager|)`. Graphs: torch.compile's "
        "`counters[\"stats\"][\"unique_graphs\"]`, dynamo's `counters()[\"graphs\"]` (and `graph_breaks`) after "
        "its first call. Kernels, fallback nodes and eager graphs (graphs run entirely through `gm.forward`): "
        "deltas of `dynamo._C.inductor_counters()` over the first call; kernel calls: per steady call.",
        "",
        "| workload | torch.compile diff | dynamo diff | torch.compile graphs | dynamo graphs | dynamo breaks "
        "| kernels | fallback nodes | eager graphs | kernel calls / call |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in names:
        res = results[n]
        dy = ok(res, "dynamo") or {}
        graphs = fmt(dy.get("graphs"), "d")
        if dy.get("later_recompiles"):
            graphs += (f" (+{dy['later_recompiles']} recompiles after the first call, "
                       f"{dy['timed_recompiles']} of them in the timed calls)")
        lines.append(f"| {n} | {ok_cell(res, 'torch.compile')} | {ok_cell(res, 'dynamo')} "
                     f"| {cell(res, 'torch.compile', 'graphs', 'd')} | {graphs if dy else cell(res, 'dynamo', 'graphs', 'd')} "
                     f"| {fmt(dy.get('breaks'), 'd')} | {fmt(dy.get('kernels_compiled'), 'd')} "
                     f"| {fmt(dy.get('fallback_nodes'), 'd')} | {fmt(dy.get('eager_graphs'), 'd')} "
                     f"| {fmt(dy.get('kernel_calls'), '.1f')} |")
    nothing = [f"{n} (graphs {ok(results[n], 'dynamo')['graphs']}, run through `gm.forward` "
               f"{ok(results[n], 'dynamo')['eager_graphs']}, frames run as plain Python "
               f"{ok(results[n], 'dynamo')['eager_frames']})"
               for n in names if ok(results[n], "dynamo") and not ok(results[n], "dynamo").get("kernels_compiled")]
    if nothing:
        lines += ["", "dynamo runs no generated kernel for: " + "; ".join(nothing) + "."]
    guard = [f"{n} {ok(results[n], 'dynamo')['guard_failures']}" for n in names
             if ok(results[n], "dynamo") and ok(results[n], "dynamo").get("guard_failures")]
    if guard:
        lines += ["", "dynamo's inductor guard failures during the timed calls (calls run through `gm.forward`): "
                  + ", ".join(guard) + "."]
    return lines


def render_errors(names, results):
    errors = [f"- {n} / {e}: {error_text(results[n][e])}" for n in names for e in ENGINES
              if isinstance(results[n].get(e), Exception)]
    return ["", "Errors:", "", *errors] if errors else []


def render_targets(names, results, clone_bw, copy_bw):
    """Issue 6's done-when criteria that this benchmark measures."""
    lines = ["", "### Against the targets (issue 6)", ""]
    common = [n for n in names if all(speedup(results[n], e) for e in COMPILERS)]
    tc_g = geomean(speedup(results[n], "torch.compile") for n in common)
    dy_g = geomean(speedup(results[n], "dynamo") for n in common)
    if tc_g and dy_g:
        lines.append(f"- geometric-mean speedup at least torch.compile's: {'yes' if dy_g >= tc_g else 'no'} "
                     f"({dy_g:.2f}x vs {tc_g:.2f}x on the {len(common)} workloads both ran)")
    slow = []
    for n in names:
        tc, dy = ok(results[n], "torch.compile"), ok(results[n], "dynamo")
        if tc and dy and tc["ms"] / dy["ms"] < 0.9:
            slow.append(f"{n} {tc['ms'] / dy['ms']:.2f}")
        elif tc and not dy:
            slow.append(f"{n} (dynamo failed)")
        elif not tc:
            slow.append(f"{n} (torch.compile failed, not compared)")
    below = [x for x in slow if "not compared" not in x]
    lines.append("- no workload below 0.9x torch.compile's speed: " + ("yes" if not below else "no")
                 + (" (" + ", ".join(slow) + ")" if slow else ""))
    bw = []
    for n in names:
        dy, nbytes = ok(results[n], "dynamo"), results[n].get("_bytes")
        if SPECS[n][2] and dy and nbytes and clone_bw:
            gbs = nbytes / (dy["ms"] * 1e6)
            bw.append((n + ("" if dy.get("kernels_compiled") else " (no generated kernel)"),
                       100 * gbs / clone_bw, 100 * gbs / copy_bw))
    if bw:
        lines.append("- bandwidth-bound kernels at least 70% of copy bandwidth (clone): "
                     + ("yes" if all(p >= 70 for _, p, _ in bw) else "no") + " ("
                     + ", ".join(f"{n} {p:.0f}%" for n, p, _ in bw) + "; of `copy_`: "
                     + ", ".join(f"{n.split(' ')[0]} {q:.0f}%" for n, _, q in bw) + ")")
    lat = []
    for n in names:
        tc, dy = ok(results[n], "torch.compile"), ok(results[n], "dynamo")
        if tc and dy:
            lat.append((n, tc["compile_ms"] / dy["compile_ms"] if dy["compile_ms"] > 0 else math.inf))
    if lat:  # dynamo's compile time can come out <= 0 when it is within the noise of the steady time
        lines.append("- compile time at least 20x lower than torch.compile's: "
                     + ("yes" if all(v >= 20 for _, v in lat) else "no") + " ("
                     + ", ".join(f"{n} {v:.0f}x" if v < math.inf else f"{n} (dynamo's within noise)"
                                 for n, v in lat) + ")")
    return lines


def draw_plot(path, names, results):
    """Bar plot of the speedup over eager per workload; returns the markdown line for the section."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except Exception as exc:
        print(f"# no plot: matplotlib is not available ({error_text(exc)})", file=sys.stderr)
        return None
    colors = {"torch.compile": "#4c72b0", "dynamo": "#dd8452"}
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(names) + 2), 4.5))
    width = 0.38
    for i, engine in enumerate(COMPILERS):
        xs = [j + (i - 0.5) * width for j in range(len(names))]
        values = [speedup(results[n], engine) for n in names]
        # Bars start at 1 (eager) on a log axis, so slowdowns hang below the line as far as speedups rise.
        ax.bar(xs, [(v or 1) - 1 for v in values], width, bottom=1, label=engine, color=colors[engine])
        for x, v in zip(xs, values):
            ax.annotate(f"{v:.2f}" if v else "failed", (x, v or 1), textcoords="offset points",
                        xytext=(0, 2 if (v or 1) >= 1 else -9), ha="center", fontsize=7)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:g}x"))
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=20)
    ax.set_ylabel("speedup over eager (log scale; 1 = eager)")
    g = {e: geomean(speedup(results[n], e) for n in names) for e in COMPILERS}
    ax.set_title(f"{NAME} (git {_common.git_describe()}): geomean torch.compile {fmt(g['torch.compile'], '.2f')}x, "
                 f"dynamo {fmt(g['dynamo'], '.2f')}x", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"# wrote the plot {path}", file=sys.stderr)
    rel = os.path.relpath(path, os.path.dirname(ARGS.write)) if ARGS.write else path
    return f"![speedup over eager per workload]({rel})"


def main():
    t_start = time.perf_counter()
    command = _common.command_line("bench_inductor.py")
    cache_note = _common.inductor_cache_note()
    print("# warming up both compilers ...", file=sys.stderr, flush=True)
    warm_notes = _common.warm_up_compilers(COMPILERS, warm_fn, lambda: (torch.randn(16),))
    print("# measuring the copy bandwidth ...", file=sys.stderr, flush=True)
    bandwidth = copy_bandwidth()
    results = {}
    for name in [w for w in ARGS.only.split(",") if w]:
        print(f"# measuring {name} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        results[name] = measure_workload(name)
        _common.report_errors({e: results[name][e] for e in ENGINES}, f"{name} ")
        print(f"#   {name}: " + ", ".join(f"{e} {cell(results[name], e, 'ms', '.3f')} ms" for e in ENGINES)
              + f" ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    reset_all()
    plot_note = draw_plot(ARGS.plot, list(results), results) if ARGS.plot and results else None
    section = render(command, cache_note, warm_notes, bandwidth, results, plot_note, time.perf_counter() - t_start)
    _common.emit_section(section, NAME, ARGS.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
