"""Training steps under eager, torch.compile and dynamo (AOTAutograd + inductor), in one run.

Measures, for an MLP, torchvision resnet18 (train mode, small batch) and tiny random-init GPT-2
and BERT (transformers, LM losses, no dropout; `gpt2_dropout`/`bert_dropout` with dropout 0.1):
  (a) the training step (zero_grad, forward, loss, backward, SGD step; the model is compiled, the
      optimizer step runs eagerly for every engine): median over --rounds x --steady-iters steps,
      the engines taking turns each round (Note [interleaved steps]), and the
      compile time: what the first 3 steps took above 3 steady steps (a compiler may compile on a
      later step than the first), after both compilers' one-time start-up was paid;
  (b) the per-call overhead of a tiny graph whose parameter requires grad (`(x * w).sum()` on 16
      floats, forward only) and of an `nn.Linear(16, 16)` call;
  (c) memory under eager and under dynamo with each partitioner ("save every intermediate",
      `dynamo.config.aot_partitioner = "save_all"`, and the default min-cut): the bytes of the
      tensors saved for backward in one forward (a `saved_tensors_hooks` count) and the peak of
      torch's CPU allocator during one forward + backward (torch.profiler's memory events).

Usage: python benchmarks/bench_train.py [--write docs/PERF.md] [--only mlp,resnet18,gpt2,bert,gpt2_dropout,bert_dropout]
       [--steady-iters N] [--rounds N] [--calls N]
"""

import copy
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

NAME = "bench_train"
ENGINES = ("eager", "torch.compile", "dynamo")
EARLY_STEPS = 3  # steps timed one by one before the steady ones; their excess is the compile time


def parse_args():
    p = _common.argument_parser(__doc__, NAME, calls=20000, repeats=3, steady_iters=20,
                                steady_iters_help="training steps timed per engine in each round")
    p.add_argument("--rounds", type=int, default=10,
                   help="rounds of steady steps, the engines in turn (Note [interleaved steps]); the "
                        "median is over all rounds")
    p.add_argument("--only", default="mlp,resnet18,gpt2,bert", help="models for (a) and (c)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (default 1: on a small machine shared with other processes, "
                        "OpenMP barriers of 2 threads stall whole milliseconds and swamp the medians)")
    return p.parse_args()


ARGS = parse_args()
_common.apply_cold_inductor_cache(ARGS)
_common.quiet_transformers()

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(ARGS.threads)
dynamo, _ = _common.import_dynamo()
WARM_NOTES = {}  # {engine: text}, from main()'s warm-up


def make_model(name):
    """(model, inputs tuple, loss function(model, *inputs))."""
    torch.manual_seed(0)
    if name == "mlp":
        model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
        return model, (torch.randn(128, 64), torch.randint(0, 10, (128,))), lambda m, x, y: F.cross_entropy(m(x), y)
    if name == "resnet18":
        import torchvision
        model = torchvision.models.resnet18(num_classes=10).train()
        return model, (torch.randn(4, 3, 64, 64), torch.randint(0, 10, (4,))), lambda m, x, y: F.cross_entropy(m(x), y)
    # "gpt2_dropout" / "bert_dropout": transformers' default dropout (0.1) everywhere.
    model = _common.tiny_lm(name.removesuffix("_dropout"), 0.1 if name.endswith("_dropout") else 0.0)
    ids = torch.randint(0, 128, (4, 32))
    return model, (ids,), lambda m, ids: m(input_ids=ids, labels=ids).loss


MODEL_TEXT = {
    "mlp": "MLP 64-256-256-10, batch 128, cross_entropy",
    "resnet18": "torchvision resnet18 (train mode), batch 4x3x64x64, cross_entropy",
    "gpt2": "GPT2LMHeadModel n_layer=2 n_head=2 n_embd=64 vocab 128, ids 4x32",
    "bert": "BertForMaskedLM 2 layers, 2 heads, hidden 64, vocab 128, ids 4x32",
    "gpt2_dropout": "the GPT-2 above with transformers' default dropout 0.1",
    "bert_dropout": "the BERT above with transformers' default dropout 0.1",
}


def measure_training(name):
    """{engine: {"first_ms", "compile_ms", "step_ms", "best_ms", "loss0"} or Exception}.

    Note [interleaved steps]: each engine first compiles (its first EARLY_STEPS steps, timed
    one by one); then the steady steps run in --rounds rounds, each engine --steady-iters steps
    per round in turn, and the median is over all of an engine's steps. Timed one engine after
    the other, a slow spell of this shared machine (other processes, frequency) fell on one
    engine's steps only and moved the ratio by several percent from run to run."""
    res = {}
    steppers = {}
    base, inputs, loss_fn = make_model(name)
    for engine in ENGINES:
        try:
            model = copy.deepcopy(base)
            compiled = _common.wrap(engine, model)
            opt = torch.optim.SGD(model.parameters(), lr=0.01)

            def step(compiled=compiled, opt=opt):
                opt.zero_grad()
                loss = loss_fn(compiled, *inputs)
                loss.backward()
                opt.step()
                return loss

            t0 = time.perf_counter()
            loss0 = step().item()
            early = [time.perf_counter() - t0]
            for _ in range(EARLY_STEPS - 1):
                t0 = time.perf_counter()
                step()
                early.append(time.perf_counter() - t0)
            res[engine] = {"early": early, "loss0": loss0, "times": []}
            steppers[engine] = step
            if engine == "dynamo":
                c = dynamo.counters()
                res[engine]["counters"] = {k: c.get(k, 0) for k in ("aot_graphs", "aot_backward_graphs", "aot_graph_splits",
                                                                     "aot_eager_graphs", "inductor_kernels_compiled")}
        except Exception as exc:  # noqa: BLE001 - reported in the table
            res[engine] = exc
    for _ in range(ARGS.rounds):
        for engine, step in list(steppers.items()):
            try:
                for _ in range(ARGS.steady_iters):
                    t0 = time.perf_counter()
                    step()
                    res[engine]["times"].append(time.perf_counter() - t0)
            except Exception as exc:  # noqa: BLE001 - reported in the table
                res[engine] = exc
                del steppers[engine]
    for engine in steppers:
        entry = res[engine]
        times, early = entry.pop("times"), entry.pop("early")
        median = statistics.median(times)
        # Note [delayed compiles]: torch.compile may run a step without compiling it (a graph
        # break on transformers' `logger.warning_once` in GPT-2's loss made its first two
        # steps run eagerly, and the compile came with the third), so the compile time is
        # what the first EARLY_STEPS steps took above as many steady steps.
        entry.update({"first_ms": early[0] * 1e3, "compile_ms": (sum(early) - EARLY_STEPS * median) * 1e3,
                      "step_ms": median * 1e3, "best_ms": min(times) * 1e3})
    return res


def measure_overhead():
    """{case: {engine: ns per call}}."""
    out = {}
    w = nn.Parameter(torch.randn(16))
    x = torch.randn(16)

    def tiny(x):
        return (x * w).sum()

    lin = nn.Linear(16, 16)
    for case, fn in (("tiny graph, param requires grad", tiny), ("nn.Linear(16, 16)", lin)):
        row = {}
        for engine in ENGINES:
            try:
                f = _common.wrap(engine, fn)
                for _ in range(3):
                    f(x)
                row[engine] = statistics.median(_common.per_call_ns(f, (x,), ARGS.calls) for _ in range(ARGS.repeats))
            except Exception as exc:  # noqa: BLE001
                row[engine] = exc
        out[case] = row
    return out


def saved_bytes(fn, *args):
    """Bytes of the distinct tensors saved for backward while `fn(*args)` runs."""
    seen = {}

    def pack(t):
        seen[(t.data_ptr(), t.dtype, tuple(t.shape), t.stride())] = t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*args)
    del out
    return sum(seen.values())


def peak_bytes(step):
    """Peak of the bytes held by torch's CPU allocator while `step()` runs, above the level at
    its start: the running sum of the allocation (+) and free (-) events that torch.profiler
    records with ``profile_memory=True``, in time order (every tensor torch or our kernels
    allocate goes through that allocator)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_ns())
    level = peak = 0
    for e in events:
        level += e.nbytes()
        peak = max(peak, level)
    return peak


PARTITIONERS = (("save all", "save_all"), ("min-cut", "min_cut"))


def measure_memory(name):
    """{"eager" | "save all" | "min-cut": {"saved": bytes, "peak": bytes} or Exception}."""
    base, inputs, loss_fn = make_model(name)

    def measure(model, call):
        def step():
            for p in model.parameters():
                p.grad = None
            loss_fn(call, *inputs).backward()

        step()  # compile (dynamo), allocate .grad once
        step()
        return {"saved": saved_bytes(lambda *a: loss_fn(call, *a), *inputs), "peak": peak_bytes(step)}

    model = copy.deepcopy(base)
    res = {"eager": measure(model, model)}
    if dynamo is None:
        return res
    for label, partitioner in PARTITIONERS:
        _common.reset_all()
        dynamo.config.aot_partitioner = partitioner
        try:
            model = copy.deepcopy(base)
            res[label] = measure(model, dynamo.optimize("inductor")(model))
        except Exception as exc:  # noqa: BLE001
            res[label] = exc
        finally:
            dynamo.config.aot_partitioner = "min_cut"
    return res


def fmt_ms(r, key):
    return _common.error_text(r) if isinstance(r, Exception) else f"{r[key]:.2f}"


def render(command, cache_note, load0, train, overhead, memory, wall):
    libs = ""
    try:
        import transformers
        libs = f"transformers {transformers.__version__}, "
    except ImportError:
        pass
    lines = _common.header_lines(NAME, command, cache_note, load0, libs=libs)
    lines += [f"- torch threads for this run: {ARGS.threads} (`--threads`); wall time of this run: {wall:.0f} s",
              "- the model is compiled (torch.compile(model) / dynamo.optimize(\"inductor\")(model)); the SGD step runs eagerly",
              ""]
    lines += [f"- one-time start-up paid before timing (a trivial training compile): torch.compile {WARM_NOTES.get('torch.compile', '-')}, "
              f"dynamo {WARM_NOTES.get('dynamo', '-')}", ""]
    lines += ["### (a) training step (forward + backward + SGD step), median ms, and compile time", "",
              f"Steps: the median of {ARGS.rounds} rounds x {ARGS.steady_iters} steps per engine, the engines taking turns "
              "each round (so a slow spell of the machine falls on all three).",
              "",
              f"Compile: the time of the first {EARLY_STEPS} steps minus {EARLY_STEPS} steady (median) steps, since a "
              "compiler may compile on a later step than the first (torch.compile's GPT-2 broke its graph on "
              "transformers' `logger.warning_once` in its first two steps when measured here); the first step's own time is shown too.", ""]
    lines += ["| model | eager | torch.compile | dynamo | dynamo / torch.compile | best of the steps: eager / torch.compile / dynamo "
              "| compile ms: torch.compile / dynamo | compile: times faster | first step ms: torch.compile / dynamo | dynamo counters |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, res in train.items():
        e, t, d = (res.get(k) for k in ENGINES)
        ratio = ""
        if isinstance(t, dict) and isinstance(d, dict):
            ratio = f"{d['step_ms'] / t['step_ms']:.2f}x"
        counters = ", ".join(f"{k} {v}" for k, v in d.get("counters", {}).items()) if isinstance(d, dict) else ""
        best = " / ".join(fmt_ms(r, "best_ms") for r in (e, t, d))
        faster = ""
        if isinstance(t, dict) and isinstance(d, dict) and d["compile_ms"] > 0:
            faster = f"{t['compile_ms'] / d['compile_ms']:.1f}x"
        lines.append(f"| {MODEL_TEXT[name]} | {fmt_ms(e, 'step_ms')} | {fmt_ms(t, 'step_ms')} | {fmt_ms(d, 'step_ms')} | {ratio} "
                     f"| {best} | {fmt_ms(t, 'compile_ms')} / {fmt_ms(d, 'compile_ms')} | {faster} "
                     f"| {fmt_ms(t, 'first_ms')} / {fmt_ms(d, 'first_ms')} | {counters} |")
    lines += ["", "### (b) per-call overhead (forward only), us per call", "",
              "| case | eager | torch.compile | dynamo | dynamo - eager |", "| --- | --- | --- | --- | --- |"]
    for case, row in overhead.items():
        cells = [(_common.error_text(v) if isinstance(v, Exception) else f"{v / 1e3:.2f}") for v in (row.get(k) for k in ENGINES)]
        diff = ""
        if all(isinstance(row.get(k), float) for k in ("eager", "dynamo")):
            diff = f"{(row['dynamo'] - row['eager']) / 1e3:+.2f}"
        lines.append(f"| {case} | {' | '.join(cells)} | {diff} |")
    lines += ["", "### (c) memory: tensors saved for backward in one forward, and peak CPU allocation of a forward + backward (KiB)", "",
              "Saved: the distinct tensors `saved_tensors_hooks` sees packed (what a partitioner controls). Peak: the "
              "highest level of torch's CPU allocator above the step's start (`torch.profiler` with `profile_memory=True`: "
              "the running sum of its allocation and free events), `.grad` set to None before the step.", "",
              "| model | saved: eager | saved: dynamo, save every intermediate | saved: dynamo, min-cut "
              "| peak: eager | peak: dynamo, save every intermediate | peak: dynamo, min-cut | min-cut / save-all (peak) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    keys = ("eager", "save all", "min-cut")
    for name, res in memory.items():
        def cell(v, field):
            if v is None:
                return "-"
            return _common.error_text(v) if isinstance(v, Exception) else f"{v[field] / 1024:.0f}"
        saved = [cell(res.get(k), "saved") for k in keys]
        peak = [cell(res.get(k), "peak") for k in keys]
        a, b = res.get("save all"), res.get("min-cut")
        ratio = f"{b['peak'] / a['peak']:.2f}" if isinstance(a, dict) and isinstance(b, dict) and a["peak"] else ""
        lines.append(f"| {name} | {' | '.join(saved)} | {' | '.join(peak)} | {ratio} |")
    return _common.section_text(NAME, lines)


def main():
    t0 = time.perf_counter()
    command = _common.command_line("bench_train.py")
    cache_note = _common.inductor_cache_note()
    load0 = _common.load_average()
    names = [n for n in ARGS.only.split(",") if n]
    global WARM_NOTES
    WARM_NOTES = _common.warm_up_compilers(("torch.compile", "dynamo"), nn.Linear(8, 8), lambda: (torch.randn(4, 8),))
    train, memory = {}, {}
    for name in names:
        print(f"# training steps: {name} ...", file=sys.stderr, flush=True)
        train[name] = measure_training(name)
        _common.report_errors(train[name], f"{name} ")
    print("# per-call overhead ...", file=sys.stderr, flush=True)
    overhead = measure_overhead()
    for name in names:
        print(f"# saved tensors: {name} ...", file=sys.stderr, flush=True)
        memory[name] = measure_memory(name)
    _common.reset_all()
    section = render(command, cache_note, load0, train, overhead, memory, time.perf_counter() - t0)
    _common.emit_section(section, NAME, ARGS.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
