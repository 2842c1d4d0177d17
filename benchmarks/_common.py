"""Helpers shared by the benchmark scripts in this folder (bench_slice.py, bench_breaks.py,
bench_inductor.py).

The scripts are run as `python benchmarks/<script>.py` and put this folder on sys.path before
`import _common`. This module must not import torch at import time: the scripts set environment
variables (e.g. TORCHINDUCTOR_FORCE_DISABLE_CACHES) from their arguments before torch is imported,
so everything that needs torch imports it inside the function.
"""

import argparse
import datetime
import gc
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
import types

# Set by import_dynamo(); read by wrap(), require_dynamo(), reset_all() and header_lines().
dynamo = None
DYNAMO_IMPORT_ERROR = None


# ---- command line -----------------------------------------------------------------------------

def argument_parser(doc, name, calls, repeats, steady_iters, steady_iters_help):
    """An ArgumentParser described by the first line of `doc`, with the options every benchmark has.

    Adds, in this order: `--write FILE` (replace the `name` section of FILE),
    `--cold-inductor-cache`, `--calls` (default `calls`: calls per repeat in (a)), `--repeats`
    (default `repeats`: repeats in (a), median reported) and `--steady-iters` (default
    `steady_iters`, help text `steady_iters_help`). `--calls` and `--repeats` are left out when
    `calls` / `repeats` is None (for a script without an (a) measurement). Returns the
    argparse.ArgumentParser, for the script to add its own options to.
    """
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--write", metavar="FILE", help=f"replace the {name} section of FILE (e.g. docs/PERF.md)")
    p.add_argument("--cold-inductor-cache", action="store_true",
                   help="set TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 so torch.compile compiles from scratch"
                        " (dynamo's kernel disk cache honours it too)")
    if calls is not None:
        p.add_argument("--calls", type=int, default=calls, help="calls per repeat in (a)")
    if repeats is not None:
        p.add_argument("--repeats", type=int, default=repeats, help="repeats in (a); the median is reported")
    p.add_argument("--steady-iters", type=int, default=steady_iters, help=steady_iters_help)
    return p


def apply_cold_inductor_cache(args):
    """Sets TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 when `args.cold_inductor_cache` is set: torch.compile
    and dynamo (whose kernel disk cache, llvm/src/jit.rs Note [kernel disk cache], reads the same
    switch) both compile from scratch.

    Must run before torch is imported (torch._inductor.config reads it at import). Returns None.
    """
    if args.cold_inductor_cache:
        # Read when torch._inductor.config is imported, so it must be set before importing torch.
        os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"


def quiet_transformers():
    """Keeps the terminal clean: transformers' advisory messages and warnings are not results.

    Sets environment variables transformers reads at import (call before importing it). Returns
    None.
    """
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def command_line(script):
    """The command that reproduces this run, e.g. "python benchmarks/bench_slice.py --only a".

    `script` is the file name inside benchmarks/; the arguments come from sys.argv. Returns a str.
    """
    return shlex.join(["python", f"benchmarks/{script}", *sys.argv[1:]])


def markers(name):
    """The begin/end HTML comments around the `name` section of docs/PERF.md.

    Returns a (begin, end) tuple of str, e.g. ("<!-- bench_slice:begin -->", "<!-- bench_slice:end -->").
    """
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


# ---- engines ----------------------------------------------------------------------------------

def import_dynamo():
    """Imports the `dynamo` package, remembering why it failed if it did (eager and torch.compile
    are still measured then).

    Returns (module or None, error text "Type: message" or None); both are also kept in this
    module for wrap(), require_dynamo() and header_lines().
    """
    global dynamo, DYNAMO_IMPORT_ERROR
    try:
        import dynamo as module
    except Exception as exc:  # still measure eager and torch.compile, and say why dynamo is absent
        dynamo, DYNAMO_IMPORT_ERROR = None, f"{type(exc).__name__}: {exc}"
    else:
        dynamo, DYNAMO_IMPORT_ERROR = module, None
    return dynamo, DYNAMO_IMPORT_ERROR


def fresh_copy(fn):
    """The same function with its own code object, so per-code caches are not shared.

    Returns a new types.FunctionType sharing fn's globals, name, defaults and closure.
    """
    code = fn.__code__.replace()
    assert code is not fn.__code__
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def reset_all(clear_torch_counters=False):
    """Resets torch.compile (torch._dynamo.reset()) and dynamo (dynamo.reset(), if imported), then
    runs the garbage collector; with `clear_torch_counters`, also clears torch._dynamo.utils.counters.

    Returns None.
    """
    import torch._dynamo
    torch._dynamo.reset()
    if clear_torch_counters:
        from torch._dynamo.utils import counters
        counters.clear()
    if dynamo is not None and hasattr(dynamo, "reset"):
        dynamo.reset()
    gc.collect()


def require_dynamo():
    """Raises RuntimeError with the import error if `dynamo` could not be imported; returns None."""
    if dynamo is None:
        raise RuntimeError(f"import dynamo failed: {DYNAMO_IMPORT_ERROR}")


def wrap(engine, fn, clear_torch_counters=False):
    """`fn` (function or module) prepared for `engine`, from a reset of both compilers.

    `engine` is "eager", "torch.compile" (inductor backend) or "dynamo" (dynamo.optimize("inductor")).
    A plain function is first given its own code object (fresh_copy). `clear_torch_counters` is
    passed to reset_all(). Returns the callable to time; raises RuntimeError for "dynamo" when
    dynamo could not be imported.
    """
    import torch
    reset_all(clear_torch_counters)
    if isinstance(fn, types.FunctionType):
        fn = fresh_copy(fn)
    if engine == "eager":
        return fn
    if engine == "torch.compile":
        return torch.compile(fn, backend="inductor")
    require_dynamo()
    return dynamo.optimize("inductor")(fn)


def error_text(exc):
    """One-line, table-safe text for an exception: "Type: message", newlines removed, `|` escaped,
    cut to at most 200 characters. Returns a str."""
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ").replace("|", "\\|")
    return text if len(text) < 200 else text[:197] + "..."


def report_errors(res, label):
    """Prints "#   <label><engine>: <error>" to stderr for each engine whose result in `res`
    ({engine: dict | Exception}) is an exception. Returns None."""
    for engine, r in res.items():  # errors also go to stderr as they happen
        if isinstance(r, Exception):
            print(f"#   {label}{engine}: {error_text(r)}", file=sys.stderr, flush=True)


# ---- timing -----------------------------------------------------------------------------------

def per_call_ns(fn, args, calls):
    """Mean wall time of one `fn(*args)` over `calls` back-to-back calls, with the garbage
    collector disabled. Returns nanoseconds per call (float)."""
    gc.disable()
    try:
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn(*args)
        return (time.perf_counter_ns() - t0) / calls
    finally:
        gc.enable()


def timed_call(fn, args):
    """Calls `fn(*args)` once. Returns (its result, wall time in nanoseconds as int)."""
    t0 = time.perf_counter_ns()
    out = fn(*args)
    return out, time.perf_counter_ns() - t0


def median_call_ns(fn, args, iters):
    """Median wall time of `iters` separately timed calls `fn(*args)`. Returns nanoseconds
    (int or float, as statistics.median gives)."""
    return statistics.median(timed_call(fn, args)[1] for _ in range(iters))


def warm_up_compilers(engines, fn, make_args):
    """Pays each engine's one-time costs (imports, worker pools, JIT set-up) before anything is
    timed: wraps `fn` for every engine of `engines` ("torch.compile", "dynamo") and calls it once
    on `make_args()` (a tuple); when the result is a tensor that requires grad, its `.sum()` is
    also backpropagated, so the training path (AOTAutograd, the backward compile) is warm too.

    Returns {engine: "N ms" (the warm-up's wall time) or "error: ..."}; ends with reset_all().
    """
    notes = {}
    for engine in engines:
        try:
            wrapped = wrap(engine, fn)
            t0 = time.perf_counter_ns()
            out = wrapped(*make_args())
            if getattr(out, "requires_grad", False):
                out.sum().backward()
            notes[engine] = f"{(time.perf_counter_ns() - t0) / 1e6:.0f} ms"
        except Exception as exc:  # noqa: BLE001 - reported in the header
            notes[engine] = f"error: {error_text(exc)}"
    reset_all()
    return notes


# ---- report -----------------------------------------------------------------------------------

def cpu_model():
    """The CPU's model name from /proc/cpuinfo, else platform.processor() or platform.machine().
    Returns a str."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_describe():
    """The short commit hash of HEAD of the repository holding this folder, with "+dirty" when
    tracked files have changes. Returns a str; "unknown" if git fails."""
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here, capture_output=True, text=True, check=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except Exception:
        return "unknown"


def inductor_cache_note():
    """A sentence on torch.compile's inductor caches: disabled, or enabled with the number of files
    in the cache directory now, and on dynamo's kernel disk cache likewise (call it before
    measuring). Returns a str."""
    if os.environ.get("TORCHINDUCTOR_FORCE_DISABLE_CACHES") == "1":
        return ("disabled (TORCHINDUCTOR_FORCE_DISABLE_CACHES=1): torch.compile compiled from scratch,"
                " and so did dynamo (its kernel disk cache reads the same switch)")
    def files(path):
        return sum(len(f) for _, _, f in os.walk(path)) if path and os.path.isdir(path) else 0

    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir
        n = files(cache_dir())
        note = (f"enabled, {n} files in the cache dir before this run"
                f" ({'likely warm if this benchmark ran before' if n else 'cold'})")
    except Exception:
        note = "enabled (state unknown)"
    try:
        import dynamo._C
        path = dynamo._C.kernel_disk_cache_dir()
        ours = f"dynamo's kernel disk cache {files(path)} entries" if path else "dynamo's kernel disk cache off"
    except Exception:
        ours = "dynamo's kernel disk cache: state unknown"
    return f"{note}; {ours}; `--cold-inductor-cache` disables both"


def load_average():
    """The 1-minute load average (runnable processes), formatted with 2 decimals. Returns a str;
    "unknown" where the OS does not give it."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "unknown"


def fmt(v, spec):
    """`format(v, spec)`, or "–" (an en dash) when `v` is None. Returns a str."""
    return format(v, spec) if v is not None else "–"


def header_lines(name, command, cache_note, load_at_start, libs="", before_load=(), after_load=()):
    """The start of the `name` markdown section: its begin marker, "## <name>", and bullet lines with the
    command, UTC date and git commit, versions (torch, then `libs` verbatim, e.g.
    "transformers 5.0, ", then Python), CPU and threads, the inductor cache note, the lines
    `before_load`, the load average at start (`load_at_start`) and now, the lines `after_load`, and
    dynamo's import error if any. Returns a list of str (lines without newlines).
    """
    import torch
    lines = [
        markers(name)[0],
        f"## {name}",
        "",
        f"- command: `{command}`",
        f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; git {git_describe()}",
        f"- torch {torch.__version__}, {libs}Python {platform.python_version()}, CPU: {cpu_model()} "
        f"({os.cpu_count()} logical cores, torch threads {torch.get_num_threads()})",
        f"- torch.compile inductor caches: {cache_note}",
        *before_load,
        f"- load average (1 min) at start / end: {load_at_start} / {load_average()}"
        " (other processes on the machine make these numbers noisy; compare ratios within one run)",
        *after_load,
    ]
    if DYNAMO_IMPORT_ERROR:
        lines.append(f"- dynamo: import failed: {DYNAMO_IMPORT_ERROR}")
    return lines


def engine_rows(res, engines, key, row, empty_cells):
    """Markdown table rows, one per engine in `engines`, from `res` ({engine: dict | Exception}).

    A dict result gives `row(engine, r, eager_value)`, where eager_value is `res["eager"][key]`
    (None if `key` is None or eager has no dict result); an exception gives
    "| engine | error: ... |" followed by `empty_cells` empty cells. Returns a list of str.
    """
    eager = res.get("eager")
    eager_value = eager[key] if key is not None and isinstance(eager, dict) else None
    lines = []
    for engine in engines:
        r = res[engine]
        if isinstance(r, Exception):
            lines.append(f"| {engine} | error: {error_text(r)} |" + " |" * empty_cells)
        else:
            lines.append(row(engine, r, eager_value))
    return lines


def section_text(name, lines):
    """The `name` section as one str: `lines` (from header_lines() on), then its end marker, joined
    with newlines, with a final newline."""
    return "\n".join([*lines, markers(name)[1]]) + "\n"


def write_section(path, section, name):
    """Replaces the `name` section (begin marker through end marker, see markers()) in the file at
    `path` with `section` (from section_text()); appends it after a blank line if the markers are
    missing, and creates the file with a "# Performance" title if it is absent. Returns None.
    """
    begin, end = markers(name)
    text = open(path).read() if os.path.exists(path) else "# Performance\n\n"
    b, e = text.find(begin), text.find(end)
    if b != -1 and e > b:
        text = text[:b] + section + text[e + len(end):].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(text)


def emit_section(section, name, path):
    """Prints the `name` section `section` to stdout and, when `path` is given, writes it into that
    file (write_section) and says so on stderr. Returns None."""
    print(section, end="")
    if path:
        write_section(path, section, name)
        print(f"# wrote the {name} section of {path}", file=sys.stderr)


def tiny_lm(name, dropout=0.0):
    """A tiny transformers language model in train mode, every dropout probability `dropout`
    (0: off; transformers' default is 0.1): "gpt2" is a GPT2LMHeadModel (2 layers, 2 heads,
    width 64, vocabulary 128), anything else a BertForMaskedLM of the same size (intermediate
    128). Inputs: ids in [0, 128), up to 64 long."""
    import transformers

    if name == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=128, n_positions=64,
                                      attn_pdrop=dropout, resid_pdrop=dropout, embd_pdrop=dropout)
        return transformers.GPT2LMHeadModel(cfg).train()
    cfg = transformers.BertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=64,
                                  intermediate_size=128, vocab_size=128, max_position_embeddings=64,
                                  hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    return transformers.BertForMaskedLM(cfg).train()
