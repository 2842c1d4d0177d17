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

import argparse
import os
import shlex
import sys

BEGIN = "<!-- bench_slice:begin -->"
END = "<!-- bench_slice:end -->"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", metavar="FILE", help="replace the bench_slice section of FILE (e.g. docs/PERF.md)")
    p.add_argument("--cold-inductor-cache", action="store_true",
                   help="set TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 so torch.compile compiles from scratch")
    p.add_argument("--calls", type=int, default=20000, help="calls per repeat in (a)")
    p.add_argument("--repeats", type=int, default=5, help="repeats in (a); the median is reported")
    p.add_argument("--steady-iters", type=int, default=20, help="timed calls in (b) and (c)")
    p.add_argument("--only", default="a,b,c", help="comma-separated subset of the measurements a,b,c")
    return p.parse_args()


ARGS = parse_args()
if ARGS.cold_inductor_cache:
    # Read when torch._inductor.config is imported, so it must be set before importing torch.
    os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"

import datetime  # noqa: E402
import gc  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402

import torch  # noqa: E402
import torch._dynamo  # noqa: E402

try:
    import dynamo
except Exception as exc:  # still measure eager and torch.compile, and say why dynamo is absent
    dynamo = None
    DYNAMO_IMPORT_ERROR = f"{type(exc).__name__}: {exc}"
else:
    DYNAMO_IMPORT_ERROR = None

ENGINES = ("eager", "torch.compile", "dynamo")


# ---- the functions under test -----------------------------------------------------------------

def add_one(x):
    return x + 1


def sin_cos(x, y):
    return torch.sin(x) + torch.cos(y) * 2


def fresh_copy(fn):
    """The same function with its own code object, so per-code caches are not shared."""
    code = fn.__code__.replace()
    assert code is not fn.__code__
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def reset_all():
    torch._dynamo.reset()
    if dynamo is not None and hasattr(dynamo, "reset"):
        dynamo.reset()
    gc.collect()


def wrap(engine, fn):
    """`fn` prepared for `engine`, from a reset of both compilers."""
    reset_all()
    fn = fresh_copy(fn)
    if engine == "eager":
        return fn
    if engine == "torch.compile":
        return torch.compile(fn, backend="inductor")
    if dynamo is None:
        raise RuntimeError(f"import dynamo failed: {DYNAMO_IMPORT_ERROR}")
    return dynamo.optimize("inductor")(fn)


def error_text(exc):
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ").replace("|", "\\|")
    return text if len(text) < 200 else text[:197] + "..."


# ---- timing -----------------------------------------------------------------------------------

def per_call_ns(fn, args, calls):
    gc.disable()
    try:
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn(*args)
        return (time.perf_counter_ns() - t0) / calls
    finally:
        gc.enable()


def one_call_ns(fn, args):
    t0 = time.perf_counter_ns()
    fn(*args)
    return time.perf_counter_ns() - t0


def median_call_ns(fn, args, iters):
    return statistics.median(one_call_ns(fn, args) for _ in range(iters))


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
            t0 = time.perf_counter_ns()
            out = fn(x, y)
            first = time.perf_counter_ns() - t0
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

def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_describe():
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here, capture_output=True, text=True, check=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except Exception:
        return "unknown"


def inductor_cache_note():
    if os.environ.get("TORCHINDUCTOR_FORCE_DISABLE_CACHES") == "1":
        return "disabled (TORCHINDUCTOR_FORCE_DISABLE_CACHES=1): torch.compile compiled from scratch"
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir
        path = cache_dir()
        n = sum(len(files) for _, _, files in os.walk(path)) if os.path.isdir(path) else 0
        return (f"enabled, {n} files in the cache dir before this run"
                f" ({'likely warm if this benchmark ran before' if n else 'cold'});"
                " `--cold-inductor-cache` disables it")
    except Exception:
        return "enabled (state unknown); `--cold-inductor-cache` disables it"


def load_average():
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "unknown"


LOAD_AT_START = load_average()


def fmt(v, spec):
    return format(v, spec) if v is not None else "–"


def render(command, cache_note, overhead, latency, steady):
    lines = [
        BEGIN,
        "## bench_slice",
        "",
        f"- command: `{command}`",
        f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; git {git_describe()}",
        f"- torch {torch.__version__}, Python {platform.python_version()}, CPU: {cpu_model()} "
        f"({os.cpu_count()} logical cores, torch threads {torch.get_num_threads()})",
        f"- torch.compile inductor caches: {cache_note}",
        f"- load average (1 min) at start / end: {LOAD_AT_START} / {load_average()}"
        " (other processes on the machine make these numbers noisy; compare ratios within one run)",
    ]
    if DYNAMO_IMPORT_ERROR:
        lines.append(f"- dynamo: import failed: {DYNAMO_IMPORT_ERROR}")
    if overhead is not None:
        lines += render_overhead(overhead)
    if latency is not None:
        lines += render_latency(latency)
    if steady is not None:
        lines += render_steady(steady)
    lines.append(END)
    return "\n".join(lines) + "\n"


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
    eager = overhead.get("eager")
    eager_us = eager["us"] if isinstance(eager, dict) else None
    for engine in ENGINES:
        r = overhead[engine]
        if isinstance(r, Exception):
            lines.append(f"| {engine} | error: {error_text(r)} | | |")
            continue
        over = r["us"] - eager_us if eager_us is not None and engine != "eager" else None
        ratio = r["us"] / eager_us if eager_us else None
        lines.append(f"| {engine} | {r['us']:.2f} | {fmt(over, '+.2f')} | {fmt(ratio, '.2f')} |")
    return lines


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
    for engine in ("torch.compile", "dynamo"):
        r = latency[engine]
        if isinstance(r, Exception):
            lines.append(f"| {engine} | error: {error_text(r)} | | |")
        else:
            lines.append(f"| {engine} | {r['first_ms']:.1f} | {r['steady_ms']:.3f} | {r['latency_ms']:.1f} |")
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
    eager = steady.get("eager")
    eager_ms = eager["ms"] if isinstance(eager, dict) else None
    for engine in ENGINES:
        r = steady[engine]
        if isinstance(r, Exception):
            lines.append(f"| {engine} | error: {error_text(r)} | | |")
            continue
        ratio = r["ms"] / eager_ms if eager_ms else None
        speedup = eager_ms / r["ms"] if eager_ms else None
        lines.append(f"| {engine} | {r['ms']:.2f} | {fmt(ratio, '.2f')} | {fmt(speedup, '.2f')}x |")
    return lines


def write_section(path, section):
    text = open(path).read() if os.path.exists(path) else "# Performance\n\n"
    begin, end = text.find(BEGIN), text.find(END)
    if begin != -1 and end > begin:
        text = text[:begin] + section + text[end + len(END):].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(text)


def main():
    command = shlex.join(["python", "benchmarks/bench_slice.py", *sys.argv[1:]])
    cache_note = inductor_cache_note()
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
        for engine, r in results[-1].items():  # errors also go to stderr as they happen
            if isinstance(r, Exception):
                print(f"#   {engine}: {error_text(r)}", file=sys.stderr, flush=True)
    reset_all()
    section = render(command, cache_note, *results)
    print(section, end="")
    if ARGS.write:
        write_section(ARGS.write, section)
        print(f"# wrote the bench_slice section of {ARGS.write}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
