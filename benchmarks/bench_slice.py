"""First-slice benchmark: eager PyTorch vs torch.compile vs dynamo, side by side in one process.

Measures
  (a) cache-hit overhead: per-call time of `lambda x: x + 1` on torch.ones(8) (median over
      --repeats runs of --calls calls), compiled minus eager;
  (b) compile latency: `sin(x) + cos(y) * 2` on 1024x1024 float32, first call minus steady
      call, right after a reset;
  (c) steady state: the same function on 4096x4096 float32, median of 20 calls after warm-up.
torch.compile and dynamo run one after the other, each from a reset of both, on their own copy
of each function (separate code objects), so neither sees the other's caches. A failure in one
measurement is reported in its row and the run goes on.

Prints a markdown section; `--write docs/PERF.md` also replaces the section between
`<!-- bench_slice:begin -->` and `<!-- bench_slice:end -->` in that file (appending it if the
markers are missing).

Usage: python benchmarks/bench_slice.py [--write docs/PERF.md] [--cold-inductor-cache]
                                        [--calls N] [--repeats R]
"""

NAME = "bench_slice"  # names its section in docs/PERF.md and its header there

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common when run as a script
import _common  # noqa: E402  (imports no torch, so --cold-inductor-cache still takes effect)


def parse_args():
    p = _common.argument_parser(__doc__, NAME, calls=20000, repeats=5, steady_iters=20,
                                steady_iters_help="timed calls in (b) and (c)")
    p.add_argument("--only", default="a,b,c", help="comma-separated subset of the measurements a,b,c")
    return p.parse_args()


ARGS = parse_args()
_common.apply_cold_inductor_cache(ARGS)

import statistics  # noqa: E402

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
from _common import fmt, median_call_ns, per_call_ns, reset_all, timed_call, wrap  # noqa: E402

_common.import_dynamo()  # its import error, if any, is reported in the section header

ENGINES = ("eager", "torch.compile", "dynamo")


# ---- the functions under test -----------------------------------------------------------------

def add_one(x):
    return x + 1


def sin_cos(x, y):
    return torch.sin(x) + torch.cos(y) * 2


# ---- checks -----------------------------------------------------------------------------------

def check_close(out, ref):
    if not torch.allclose(out, ref, rtol=1e-4, atol=1e-5):
        raise AssertionError(f"result differs from eager (max abs diff {(out - ref).abs().max().item():.3e})")


# ---- measurements: each returns {engine: dict | Exception} ------------------------------------

def measure_overhead():
    x = torch.ones(8)
    ref = add_one(x)
    res = {}
    for engine in ENGINES:
        try:
            fn = wrap(engine, add_one)
            for _ in range(3):  # compile, then make sure the cache hit path is warm
                check_close(fn(x), ref)
            times = [per_call_ns(fn, (x,), ARGS.calls) for _ in range(ARGS.repeats)]
            res[engine] = {"us": statistics.median(times) / 1e3}
        except Exception as exc:
            res[engine] = exc
    return res


def measure_compile_latency():
    x, y = torch.randn(1024, 1024), torch.randn(1024, 1024)
    ref = sin_cos(x, y)
    res = {}
    for engine in ("torch.compile", "dynamo"):
        try:
            fn = wrap(engine, sin_cos)
            out, first = timed_call(fn, (x, y))
            check_close(out, ref)
            fn(x, y)
            steady = median_call_ns(fn, (x, y), ARGS.steady_iters)
            res[engine] = {"first_ms": first / 1e6, "steady_ms": steady / 1e6, "latency_ms": (first - steady) / 1e6}
        except Exception as exc:
            res[engine] = exc
    return res


def measure_steady_state():
    x, y = torch.randn(4096, 4096), torch.randn(4096, 4096)
    ref = sin_cos(x, y)
    res = {}
    for engine in ENGINES:
        try:
            fn = wrap(engine, sin_cos)
            for _ in range(3):
                check_close(fn(x, y), ref)
            res[engine] = {"ms": median_call_ns(fn, (x, y), ARGS.steady_iters) / 1e6}
        except Exception as exc:
            res[engine] = exc
    return res


# ---- report -----------------------------------------------------------------------------------

LOAD_AT_START = _common.load_average()


def render(command, cache_note, overhead, latency, steady):
    lines = _common.header_lines(NAME, command, cache_note, LOAD_AT_START)
    if overhead is not None:
        lines += render_overhead(overhead)
    if latency is not None:
        lines += render_latency(latency)
    if steady is not None:
        lines += render_steady(steady)
    return _common.section_text(NAME, lines)


def render_overhead(overhead):
    lines = [
        "",
        f"### (a) cache-hit overhead: `lambda x: x + 1` on `torch.ones(8)`",
        "",
        f"Median over {ARGS.repeats} repeats of {ARGS.calls} calls.",
        "",
        "| engine | per call (µs) | overhead vs eager (µs) | time / eager |",
        "| --- | ---: | ---: | ---: |",
    ]
    def row(engine, r, eager_us):
        over = r["us"] - eager_us if eager_us is not None and engine != "eager" else None
        ratio = r["us"] / eager_us if eager_us else None
        return f"| {engine} | {r['us']:.2f} | {fmt(over, '+.2f')} | {fmt(ratio, '.2f')} |"
    return lines + _common.engine_rows(overhead, ENGINES, "us", row, 2)


def render_latency(latency):
    lines = [
        "",
        "### (b) compile latency: `torch.sin(x) + torch.cos(y) * 2`, 1024x1024 float32",
        "",
        "First call after a reset minus the steady per-call time (median of "
        f"{ARGS.steady_iters}). torch.compile's one-time imports were already paid in (a).",
        "",
        "| engine | first call (ms) | steady call (ms) | compile latency (ms) |",
        "| --- | ---: | ---: | ---: |",
    ]
    def row(engine, r, _):
        return f"| {engine} | {r['first_ms']:.1f} | {r['steady_ms']:.3f} | {r['latency_ms']:.1f} |"
    lines += _common.engine_rows(latency, ("torch.compile", "dynamo"), None, row, 2)
    tc, dy = latency.get("torch.compile"), latency.get("dynamo")
    if isinstance(tc, dict) and isinstance(dy, dict) and dy["latency_ms"] > 0:
        lines += ["", f"dynamo compiles {tc['latency_ms'] / dy['latency_ms']:.1f}x faster than torch.compile here."]
    return lines


def render_steady(steady):
    lines = [
        "",
        "### (c) steady state: `torch.sin(x) + torch.cos(y) * 2`, 4096x4096 float32",
        "",
        f"Median of {ARGS.steady_iters} calls after 3 warm-up calls.",
        "",
        "| engine | per call (ms) | time / eager | speedup vs eager |",
        "| --- | ---: | ---: | ---: |",
    ]
    def row(engine, r, eager_ms):
        ratio = r["ms"] / eager_ms if eager_ms else None
        speedup = eager_ms / r["ms"] if eager_ms else None
        return f"| {engine} | {r['ms']:.2f} | {fmt(ratio, '.2f')} | {fmt(speedup, '.2f')}x |"
    return lines + _common.engine_rows(steady, ENGINES, "ms", row, 2)


def main():
    command = _common.command_line("bench_slice.py")
    cache_note = _common.inductor_cache_note()
    steps = [("a", "(a) cache-hit overhead", measure_overhead),
             ("b", "(b) compile latency", measure_compile_latency),
             ("c", "(c) steady state", measure_steady_state)]
    wanted = set(ARGS.only.split(","))
    results = []
    for key, name, measure in steps:
        if key not in wanted:
            results.append(None)
            continue
        print(f"# measuring {name} ...", file=sys.stderr, flush=True)
        results.append(measure())
        _common.report_errors(results[-1], "")
    reset_all()
    section = render(command, cache_note, *results)
    _common.emit_section(section, NAME, ARGS.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
