"""Graph-break benchmark: eager PyTorch vs torch.compile vs dynamo on code that breaks graphs.

Measures, in one process,
  (a) a graph-break-heavy microbenchmark: 100 steps of `x = torch.sin(x) * 1.01 + 0.1` on 64
      float32s with a `print(i)` every 10th step (printed into a StringIO). Per engine: the first
      (compiling) call, the per-call time after warm-up (median over --repeats runs of --calls
      calls), the graphs compiled and the graph breaks;
  (b) tiny random-init transformers models (no downloads): GPT-2 (2 layers, 2 heads, n_embd 64,
      vocab 128) and BERT (2 layers, 2 heads, hidden 64, intermediate 128, vocab 128), `.eval()`,
      input ids of shape (2, 16), under torch.no_grad(). Per engine: first call, steady per-call
      time (median of --steady-iters calls after warm-up), max abs diff of last_hidden_state vs
      eager, graphs and graph breaks.
Graph counts: torch.compile from torch._dynamo.utils.counters["stats"]["unique_graphs"] of the
timed run in (a) and from `torch._dynamo.explain` in (b), breaks from `torch._dynamo.explain`;
dynamo from `dynamo.counters()` ("graphs", "graph_breaks") right after its first call (all its
non-zero counters are listed under each table); recompiles after the first call are reported too,
as they mean the first call did not reach the steady state.
Both compilers are reset before every measurement, and each engine gets its own copy of the
function in (a) (separate code objects). Both compilers' one-time start-up costs (imports, JIT
initialisation) are paid by a trivial warm-up compile before anything is timed. torch runs with
--threads intra-op threads (default 1, see --help). A failure in one
measurement is reported in its row and the run goes on.

Prints a markdown section; `--write docs/PERF.md` also replaces the section between
`<!-- bench_breaks:begin -->` and `<!-- bench_breaks:end -->` in that file (appending it if the
markers are missing).

Usage: python benchmarks/bench_breaks.py [--write docs/PERF.md] [--cold-inductor-cache]
                                         [--calls N] [--repeats R] [--steady-iters N]
"""

import argparse
import os
import shlex
import sys

BEGIN = "<!-- bench_breaks:begin -->"
END = "<!-- bench_breaks:end -->"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", metavar="FILE", help="replace the bench_breaks section of FILE (e.g. docs/PERF.md)")
    p.add_argument("--cold-inductor-cache", action="store_true",
                   help="set TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 so torch.compile compiles from scratch")
    p.add_argument("--calls", type=int, default=20, help="calls per repeat in (a)")
    p.add_argument("--repeats", type=int, default=7, help="repeats in (a); the median is reported")
    p.add_argument("--steady-iters", type=int, default=50, help="timed calls per engine in (b)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1: with other processes on a 2-core machine, 2 OpenMP "
                        "threads make eager GPT-2 calls jump from ~1 ms to ~130 ms; dynamo's kernels are single-threaded)")
    p.add_argument("--only", default="a,b", help="comma-separated subset of the measurements a,b")
    p.add_argument("--models", default="gpt2,bert", help="comma-separated subset of gpt2,bert for (b)")
    p.add_argument("--time-limit", type=int, default=150,
                   help="seconds one engine's measurement may take before it is abandoned (SIGALRM)")
    return p.parse_args()


ARGS = parse_args()
if ARGS.cold_inductor_cache:
    # Read when torch._inductor.config is imported, so it must be set before importing torch.
    os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
# Keep the terminal clean: transformers' advisory messages and warnings are not results.
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import contextlib  # noqa: E402
import datetime  # noqa: E402
import gc  # noqa: E402
import io  # noqa: E402
import logging  # noqa: E402
import platform  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
import warnings  # noqa: E402

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
from torch._dynamo.utils import counters as torch_counters  # noqa: E402

torch.set_num_threads(ARGS.threads)

for _name in ("torch._dynamo", "torch._inductor", "torch.fx", "transformers"):
    logging.getLogger(_name).setLevel(logging.ERROR)

try:
    import dynamo
except Exception as exc:  # still measure eager and torch.compile, and say why dynamo is absent
    dynamo = None
    DYNAMO_IMPORT_ERROR = f"{type(exc).__name__}: {exc}"
else:
    DYNAMO_IMPORT_ERROR = None

try:
    import transformers
    transformers.logging.set_verbosity_error()
except Exception as exc:
    transformers = None
    TRANSFORMERS_IMPORT_ERROR = f"{type(exc).__name__}: {exc}"
else:
    TRANSFORMERS_IMPORT_ERROR = None

ENGINES = ("eager", "torch.compile", "dynamo")
STEPS = 100
BREAK_EVERY = 10
MICRO_N = 64


# ---- the code under test ----------------------------------------------------------------------

def breaky(x):
    for i in range(100):
        x = torch.sin(x) * 1.01 + 0.1
        if i % 10 == 9:
            print(i)
    return x


def warm_fn(x):
    return x * 2 + 1


def fresh_copy(fn):
    """The same function with its own code object, so per-code caches are not shared."""
    code = fn.__code__.replace()
    assert code is not fn.__code__
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def make_model(name):
    if transformers is None:
        raise RuntimeError(f"import transformers failed: {TRANSFORMERS_IMPORT_ERROR}")
    torch.manual_seed(0)
    if name == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=128, n_positions=64)
        model = transformers.GPT2Model(cfg)
    elif name == "bert":
        cfg = transformers.BertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=64,
                                      intermediate_size=128, vocab_size=128, max_position_embeddings=64)
        model = transformers.BertModel(cfg)
    else:
        raise ValueError(f"unknown model {name!r}")
    return model.eval()


MODEL_TITLES = {
    "gpt2": "GPT-2 (`GPT2Model`, n_layer=2, n_head=2, n_embd=64, vocab_size=128, n_positions=64)",
    "bert": "BERT (`BertModel`, 2 layers, 2 heads, hidden 64, intermediate 128, vocab 128, max positions 64)",
}


# ---- engines ----------------------------------------------------------------------------------

def reset_all():
    torch._dynamo.reset()
    torch_counters.clear()
    if dynamo is not None and hasattr(dynamo, "reset"):
        dynamo.reset()
    gc.collect()


def require_dynamo():
    if dynamo is None:
        raise RuntimeError(f"import dynamo failed: {DYNAMO_IMPORT_ERROR}")


def wrap(engine, fn):
    """`fn` (function or module) prepared for `engine`, from a reset of both compilers."""
    reset_all()
    if isinstance(fn, types.FunctionType):
        fn = fresh_copy(fn)
    if engine == "eager":
        return fn
    if engine == "torch.compile":
        return torch.compile(fn, backend="inductor")
    require_dynamo()
    return dynamo.optimize("inductor")(fn)


def torch_unique_graphs():
    return int(torch_counters["stats"]["unique_graphs"])


def torch_skipped_frames():
    """How many frames torch.compile gave up on and ran eagerly (e.g. "graph break in loop")."""
    return sum(n for reason, n in torch_counters["unimplemented"].items()
               if "Skipping the frame" in reason or "frame skipped" in reason)


def dynamo_counts():
    c = dynamo.counters()
    return {"graphs": c.get("graphs"), "breaks": c.get("graph_breaks"), "recompiles": c.get("recompiles", 0),
            "counters": {k: v for k, v in c.items() if v}}


def error_text(exc):
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ").replace("|", "\\|")
    return text if len(text) < 200 else text[:197] + "..."


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


def quiet():
    """Swallow stdout (the prints of the code under test)."""
    return contextlib.redirect_stdout(io.StringIO())


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


def timed_call(fn, args):
    t0 = time.perf_counter_ns()
    out = fn(*args)
    return out, time.perf_counter_ns() - t0


def median_call_ns(fn, args, iters):
    return statistics.median(timed_call(fn, args)[1] for _ in range(iters))


def max_abs_diff(out, ref):
    return (out - ref).abs().max().item()


def warm_up_compilers():
    """Pay both compilers' one-time costs (imports, JIT set-up) before anything is timed."""
    x = torch.randn(16)
    notes = {}
    for engine in ("torch.compile", "dynamo"):
        try:
            fn = wrap(engine, warm_fn)
            _, ns = timed_call(fn, (x,))
            notes[engine] = f"{ns / 1e6:.0f} ms"
        except Exception as exc:
            notes[engine] = f"error: {error_text(exc)}"
    reset_all()
    return notes


# ---- measurements: each returns {engine: dict | Exception} ------------------------------------

def measure_micro():
    x = torch.randn(MICRO_N)
    with quiet():
        ref = breaky(x)
    res = {}
    for engine in ENGINES:
        try:
            with time_limit(ARGS.time_limit), quiet():
                fn = wrap(engine, breaky)
                out, first = timed_call(fn, (x,))
                r = {"first_ms": first / 1e6, "diff": max_abs_diff(out, ref)}
                if engine == "dynamo":
                    r.update(dynamo_counts())
                for _ in range(3):
                    fn(x)
                times = [per_call_ns(fn, (x,), ARGS.calls) for _ in range(ARGS.repeats)]
                r["us"] = statistics.median(times) / 1e3
                if engine == "torch.compile":
                    r["graphs"], r["skipped"] = torch_unique_graphs(), torch_skipped_frames()
                    reset_all()
                    breaks = torch._dynamo.explain(fresh_copy(breaky))(x).graph_break_count
                    r["breaks"] = breaks if breaks >= 0 else None  # -1 when the frame was skipped
                elif engine == "dynamo":
                    r["later_recompiles"] = dynamo.counters().get("recompiles", 0) - r["recompiles"]
            res[engine] = r
        except Exception as exc:
            res[engine] = exc
    reset_all()
    return res


def measure_model(name):
    res = {}
    try:
        model = make_model(name)
    except Exception as exc:
        return {engine: exc for engine in ENGINES}
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    ref = None
    for engine in ENGINES:
        try:
            with time_limit(ARGS.time_limit), quiet(), torch.no_grad():
                fn = wrap(engine, model)
                out, first = timed_call(fn, (ids,))
                hidden = out.last_hidden_state
                if engine == "eager":
                    ref = hidden.clone()
                r = {"first_ms": first / 1e6,
                     "diff": max_abs_diff(hidden, ref) if ref is not None else None}
                if engine == "dynamo":
                    r.update(dynamo_counts())
                for _ in range(3):
                    fn(ids)
                r["ms"] = median_call_ns(fn, (ids,), ARGS.steady_iters) / 1e6
                if engine == "torch.compile":
                    r["unique_graphs"], r["skipped"] = torch_unique_graphs(), torch_skipped_frames()
                    reset_all()
                    ex = torch._dynamo.explain(model)(ids)
                    r["graphs"] = ex.graph_count
                    r["breaks"] = ex.graph_break_count if ex.graph_break_count >= 0 else None
                elif engine == "dynamo":
                    r["later_recompiles"] = dynamo.counters().get("recompiles", 0) - r["recompiles"]
            res[engine] = r
        except Exception as exc:
            res[engine] = exc
    reset_all()
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


def count_cell(r, key):
    v = r.get(key)
    text = "–" if v is None else str(v)
    if key == "graphs":
        notes = []
        if r.get("skipped"):
            notes.append(f"{r['skipped']} frame{'s' if r['skipped'] > 1 else ''} skipped, run eagerly")
        if r.get("later_recompiles"):
            notes.append(f"+{r['later_recompiles']} recompiles after the first call")
        if notes:
            text += f" ({'; '.join(notes)})"
    return text


def render(command, cache_note, warm_notes, micro, models, elapsed_s):
    lines = [
        BEGIN,
        "## bench_breaks",
        "",
        f"- command: `{command}`",
        f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; git {git_describe()}",
        f"- torch {torch.__version__}, transformers {getattr(transformers, '__version__', 'absent')}, "
        f"Python {platform.python_version()}, CPU: {cpu_model()} "
        f"({os.cpu_count()} logical cores, torch threads {torch.get_num_threads()})",
        f"- torch.compile inductor caches: {cache_note}",
        "- one-time start-up paid before timing (a trivial compile): "
        + ", ".join(f"{k} {v}" for k, v in warm_notes.items()),
        f"- load average (1 min) at start / end: {LOAD_AT_START} / {load_average()}"
        " (other processes on the machine make these numbers noisy; compare ratios within one run)",
        f"- whole run: {elapsed_s:.0f} s",
    ]
    if DYNAMO_IMPORT_ERROR:
        lines.append(f"- dynamo: import failed: {DYNAMO_IMPORT_ERROR}")
    if micro is not None:
        lines += render_micro(micro)
    if models:
        lines += render_models(models)
    lines.append(END)
    return "\n".join(lines) + "\n"


def render_micro(micro):
    lines = [
        "",
        f"### (a) graph-break-heavy loop: {STEPS} x `x = torch.sin(x) * 1.01 + 0.1`, `print(i)` every "
        f"{BREAK_EVERY}th step, {MICRO_N} float32",
        "",
        "First call right after a reset (compiles every graph); per call: median over "
        f"{ARGS.repeats} repeats of {ARGS.calls} calls after 3 warm-up calls. Graphs: torch.compile's "
        "`counters[\"stats\"][\"unique_graphs\"]`, dynamo's `counters()[\"graphs\"]`; breaks: "
        "`torch._dynamo.explain(f)(x).graph_break_count`, dynamo's `counters()[\"graph_breaks\"]`.",
        "",
        "| engine | first call (ms) | per call (µs) | time / eager | graphs | graph breaks | max abs diff vs eager |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    eager = micro.get("eager")
    eager_us = eager["us"] if isinstance(eager, dict) else None
    for engine in ENGINES:
        r = micro[engine]
        if isinstance(r, Exception):
            lines.append(f"| {engine} | error: {error_text(r)} | | | | | |")
            continue
        ratio = r["us"] / eager_us if eager_us else None
        lines.append(f"| {engine} | {r['first_ms']:.1f} | {r['us']:.1f} | {fmt(ratio, '.2f')} | "
                     f"{count_cell(r, 'graphs')} | {count_cell(r, 'breaks')} | {fmt(r.get('diff'), '.2e')} |")
    tc = micro.get("torch.compile")
    if isinstance(tc, dict) and tc.get("skipped"):
        lines += ["", "torch.compile captures no graph here: a graph break inside a for/while loop makes it skip "
                  "the whole frame (\"graph break in loop\") and run it eagerly, so its per-call time is eager's "
                  "plus the frame hook."]
    lines += counters_note(micro)
    lines += ratio_notes(micro, "us", "per call")
    return lines


def render_models(models):
    lines = [
        "",
        "### (b) tiny transformers models (random init), input ids (2, 16), `torch.no_grad()`",
        "",
        f"First call right after a reset; steady: median of {ARGS.steady_iters} calls after 3 warm-up "
        "calls. Graphs / breaks: torch.compile's from `torch._dynamo.explain(model)(ids)` "
        "(graph_count, graph_break_count), dynamo's from `counters()` after its first call. "
        "Max abs diff of `last_hidden_state` vs eager.",
    ]
    for name, res in models.items():
        lines += [
            "",
            f"#### {MODEL_TITLES.get(name, name)}",
            "",
            "| engine | first call (ms) | steady call (ms) | time / eager | graphs | graph breaks | max abs diff vs eager |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        eager = res.get("eager")
        eager_ms = eager["ms"] if isinstance(eager, dict) else None
        for engine in ENGINES:
            r = res[engine]
            if isinstance(r, Exception):
                lines.append(f"| {engine} | error: {error_text(r)} | | | | | |")
                continue
            ratio = r["ms"] / eager_ms if eager_ms else None
            lines.append(f"| {engine} | {r['first_ms']:.1f} | {r['ms']:.3f} | {fmt(ratio, '.2f')} | "
                         f"{count_cell(r, 'graphs')} | {count_cell(r, 'breaks')} | {fmt(r.get('diff'), '.2e')} |")
        tc = res.get("torch.compile")
        if isinstance(tc, dict) and tc.get("unique_graphs") is not None and tc["unique_graphs"] != tc.get("graphs"):
            lines += ["", f"torch.compile's timed run compiled {tc['unique_graphs']} graphs (explain: {tc.get('graphs')})."]
        lines += counters_note(res)
        lines += ratio_notes(res, "ms", "steady call")
    return lines


def counters_note(res):
    dy = res.get("dynamo")
    if not (isinstance(dy, dict) and dy.get("counters")):
        return []
    return ["", "dynamo's non-zero counters after its first call: "
            + ", ".join(f"{k} {v}" for k, v in dy["counters"].items()) + "."]


def ratio_notes(res, key, what):
    tc, dy = res.get("torch.compile"), res.get("dynamo")
    if not (isinstance(tc, dict) and isinstance(dy, dict)):
        return []
    def compare(what, d, t):
        if d <= 0 or t <= 0:
            return None
        if d <= t:
            return f"{what}: dynamo {t / d:.1f}x faster than torch.compile"
        return f"{what}: dynamo {d / t:.1f}x slower than torch.compile"
    parts = [p for p in (compare("first call", dy["first_ms"], tc["first_ms"]), compare(what, dy[key], tc[key])) if p]
    return ["", "; ".join(parts) + "."] if parts else []


def write_section(path, section):
    text = open(path).read() if os.path.exists(path) else "# Performance\n\n"
    begin, end = text.find(BEGIN), text.find(END)
    if begin != -1 and end > begin:
        text = text[:begin] + section + text[end + len(END):].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(text)


def report_errors(res, label):
    for engine, r in res.items():  # errors also go to stderr as they happen
        if isinstance(r, Exception):
            print(f"#   {label}{engine}: {error_text(r)}", file=sys.stderr, flush=True)


def main():
    t_start = time.perf_counter()
    command = shlex.join(["python", "benchmarks/bench_breaks.py", *sys.argv[1:]])
    cache_note = inductor_cache_note()
    wanted = set(ARGS.only.split(","))
    print("# warming up both compilers ...", file=sys.stderr, flush=True)
    warm_notes = warm_up_compilers()
    micro = None
    if "a" in wanted:
        print("# measuring (a) graph-break-heavy loop ...", file=sys.stderr, flush=True)
        micro = measure_micro()
        report_errors(micro, "")
    models = {}
    if "b" in wanted:
        for name in [m for m in ARGS.models.split(",") if m]:
            print(f"# measuring (b) {name} ...", file=sys.stderr, flush=True)
            models[name] = measure_model(name)
            report_errors(models[name], f"{name} ")
    reset_all()
    section = render(command, cache_note, warm_notes, micro, models, time.perf_counter() - t_start)
    print(section, end="")
    if ARGS.write:
        write_section(ARGS.write, section)
        print(f"# wrote the bench_breaks section of {ARGS.write}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
