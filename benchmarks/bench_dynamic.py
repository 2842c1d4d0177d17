"""Dynamic-shapes benchmark: compiles per program when sizes and numbers vary, dynamo vs torch.compile.

Measures, in one process,
  (a) recompiles under varying shapes: tiny random-init transformers GPT-2 and BERT (2 layers,
      hidden 64, `.eval()`, no_grad) called with two draws of 20 random input-id (batch, sequence) pairs (batch 1-4 and
      sequence 2-32, then batch 2-8 and sequence 2-64), and torchvision resnet18 (eval, no_grad, 32x32 images) with 10 batch sizes. Every
      result is compared with eager (max abs diff). Per engine: graphs compiled (frames +
      recompiles that handed a graph to the backend) and, for dynamo, the static kernel
      specializations its inductor made for the dynamic graphs (`shape_specializations`).
  (b) a training loop whose last batch is smaller: 3 epochs over 70 samples in batches of 16
      (4 full + one of 6), forward + cross-entropy + backward + SGD step inside the compiled
      function, for an MLP (8-64-2) and resnet18 (16x16 images, 6 samples, batches of 4). Graphs
      compiled over the 3 epochs, and whether the final parameters equal eager's.
  (c) numbers: a function whose float argument changes on every call (8 calls), an nn.Module
      whose int attribute counts its calls (8 calls), and inputs of size 0 and 1 alternating
      with other sizes (9 calls). Graphs compiled per engine.
  (d) steady state of a dynamic graph against the static one, same shapes: dynamo with
      `dynamic=False` and with `dynamic=True` on the Inductor benchmark's pointwise chain,
      softmax and layer_norm (1024x1024 float32); median per-call time and the ratio.
torch.compile's graph counts come from a counting backend (its graphs are the same with any
backend; the counting backend avoids its inductor's multi-second compiles on this machine);
dynamo runs with its "inductor" backend. Counts are graphs handed to a backend, so a frame
that runs eagerly counts nothing.

Prints a markdown section; `--write docs/PERF.md` also replaces the section between
`<!-- bench_dynamic:begin -->` and `<!-- bench_dynamic:end -->` in that file.

Usage: python benchmarks/bench_dynamic.py [--write docs/PERF.md] [--only a,b,c,d] [--steady-iters N]
"""

NAME = "bench_dynamic"

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402


def parse_args():
    p = _common.argument_parser(__doc__, NAME, calls=None, repeats=None, steady_iters=50,
                                steady_iters_help="timed calls per engine in (d)")
    p.add_argument("--only", default="a,b,c,d", help="comma-separated subset of a,b,c,d")
    return p.parse_args()


ARGS = parse_args()
_common.apply_cold_inductor_cache(ARGS)
_common.quiet_transformers()

import random  # noqa: E402
import statistics  # noqa: E402

import torch  # noqa: E402

dynamo, _ = _common.import_dynamo()
torch.set_num_threads(1)


class TorchCounter:
    """A torch.compile backend that counts the graphs it is handed and runs them as they are."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward


def engines(fn):
    """(name, compiled fn, graph-count reader) for torch.compile and dynamo, each from a reset."""
    _common.reset_all(clear_torch_counters=True)
    counter = TorchCounter()
    tc = torch.compile(fn, backend=counter)
    yield "torch.compile", tc, lambda: {"graphs": counter.graphs}
    _common.reset_all()
    dy = dynamo.optimize("inductor")(fn)
    yield "dynamo", dy, lambda: {k: dynamo.counters()[k] for k in ("graphs", "shape_specializations", "graph_breaks")}


def max_diff(a, b):
    if isinstance(a, torch.Tensor):
        return (a.float() - b.float()).abs().max().item() if a.numel() else 0.0
    if isinstance(a, (tuple, list)):
        return max([max_diff(x, y) for x, y in zip(a, b)] or [0.0])
    return 0.0 if a == b else float("inf")


def run_calls(name, model_fn, calls):
    """Runs `calls` (a list of argument tuples) through each engine; eager results compared."""
    rows = {}
    for engine, fn, counts in engines(model_fn):
        try:
            diff = 0.0
            t0 = time.perf_counter()
            with torch.no_grad():
                for args in calls:
                    diff = max(diff, max_diff(fn(*args), model_fn(*args)))
            rows[engine] = {**counts(), "diff": diff, "s": time.perf_counter() - t0}
        except Exception as exc:  # reported in the table
            rows[engine] = exc
    return rows


def transformers_model(name):
    import transformers

    if name == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=128)
        model = transformers.GPT2Model(cfg)
    else:
        cfg = transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                      intermediate_size=128, vocab_size=1000, max_position_embeddings=128)
        model = transformers.BertModel(cfg)
    model.eval()

    def run(ids):
        return model(ids).last_hidden_state

    return run


#: The two draws of (batch, sequence) pairs in (a): with batch 1 among them (0/1 specialization
#: gives batch 1 a graph of its own in both engines) and without.
DRAWS = (("batch 1-4, sequence 2-32", 1, 4, 32), ("batch 2-8, sequence 2-64", 2, 8, 64))


def measure_a():
    rng = random.Random(0)
    out = {}
    draws = []
    for label, b_lo, b_hi, t_hi in DRAWS:
        pairs = [(rng.randint(b_lo, b_hi), rng.randint(2, t_hi)) for _ in range(20)]
        draws.append((label, pairs))
        for name in ("gpt2", "bert"):
            torch.manual_seed(0)
            run = transformers_model(name)
            calls = [(torch.randint(0, 1000, (b, t)),) for b, t in pairs]
            out[f"{name} ({label})"] = run_calls(name, run, calls)
    import torchvision

    torch.manual_seed(0)
    resnet = torchvision.models.resnet18().eval()
    calls = [(torch.randn(b, 3, 32, 32),) for b in (2, 3, 4, 5, 6, 7, 8, 3, 5, 9)]
    out["resnet18 (batch 2-9)"] = run_calls("resnet18", resnet, calls)
    return out, draws


def training(model_fn, data, target, batch, epochs=3):
    """Per engine: graphs compiled over `epochs` epochs of a step function, and whether the
    final parameters equal eager's (same initial weights)."""
    rows = {}
    torch.manual_seed(0)
    ref = model_fn()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)

    def step(m, o, x, y):
        o.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        o.step()
        return loss

    state = {k: v.clone() for k, v in ref.state_dict().items()}
    for _ in range(epochs):
        for i in range(0, len(data), batch):
            step(ref, ref_opt, data[i:i + batch], target[i:i + batch])
    for engine, fn, counts in engines(step):
        try:
            m = model_fn()
            m.load_state_dict(state)
            o = torch.optim.SGD(m.parameters(), lr=0.05)
            for _ in range(epochs):
                for i in range(0, len(data), batch):
                    fn(m, o, data[i:i + batch], target[i:i + batch])
            diff = max((p - q).abs().max().item() for p, q in zip(m.parameters(), ref.parameters()))
            rows[engine] = {**counts(), "diff": diff}
        except Exception as exc:
            rows[engine] = exc
    return rows


def measure_b():
    import torchvision

    torch.manual_seed(0)
    out = {}
    mlp = lambda: torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))  # noqa: E731
    out["mlp"] = training(mlp, torch.randn(70, 8), torch.randint(0, 2, (70,)), 16)

    def resnet():
        torch.manual_seed(0)
        return torchvision.models.resnet18(num_classes=4)

    out["resnet18"] = training(resnet, torch.randn(6, 3, 16, 16), torch.randint(0, 4, (6,)), 4)
    return out


class CallCounter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x) * self.calls


def measure_c():
    out = {}

    def scale(x, lr):
        return x - lr * x.sin()

    x = torch.randn(16)
    out["float argument (8 values)"] = run_calls("float", scale, [(x, 0.1 * (i + 1)) for i in range(8)])
    rows = {}
    for engine in ("torch.compile", "dynamo"):
        torch.manual_seed(0)
        m, ref = CallCounter(), CallCounter()
        ref.load_state_dict(m.state_dict())
        _common.reset_all(clear_torch_counters=True)
        counter = TorchCounter()
        fn = torch.compile(m, backend=counter) if engine == "torch.compile" else dynamo.optimize("inductor")(m)
        try:
            diff = 0.0
            with torch.no_grad():
                for _ in range(8):
                    diff = max(diff, max_diff(fn(x[:4]), ref(x[:4])))
            got = {"graphs": counter.graphs} if engine == "torch.compile" else {
                k: dynamo.counters()[k] for k in ("graphs", "shape_specializations", "graph_breaks")}
            rows[engine] = {**got, "diff": diff}
        except Exception as exc:
            rows[engine] = exc
    out["module int attribute counting calls (8 calls)"] = rows

    def norm(x):
        return x * 2 + x.sum(0)

    sizes = [3, 0, 1, 4, 0, 1, 5, 0, 1]
    out["sizes 3,0,1,4,0,1,5,0,1"] = run_calls("zero-one", norm, [(torch.randn(n, 8),) for n in sizes])
    return out


def measure_d():
    import torch.nn.functional as F

    workloads = {
        "pointwise": (lambda x: ((x * 1.5 + 0.5).relu() * x.sigmoid()).tanh(), (1024, 1024)),
        "softmax": (lambda x: torch.softmax(x, -1), (1024, 1024)),
        "layer_norm": (lambda x: F.layer_norm(x, (1024,)), (1024, 1024)),
    }
    out = {}
    for name, (fn, shape) in workloads.items():
        x = torch.randn(*shape)
        _common.reset_all()
        # Both versions compiled side by side (each over its own copy of the code), then their
        # calls alternate, so that load changes on the machine hit both alike.
        fns = {mode: dynamo.optimize("inductor", dynamic=mode)(_common.fresh_copy(fn)) for mode in (False, True)}
        row = {}
        times = {False: [], True: []}
        with torch.no_grad():
            for mode, f in fns.items():
                before = dynamo.counters()["graphs"]
                f(x)
                f(x)
                row[f"graphs_{mode}"] = dynamo.counters()["graphs"] - before
            for _ in range(ARGS.steady_iters):
                for mode, f in fns.items():
                    times[mode].append(_common.timed_call(f, (x,))[1])
        for mode in (False, True):
            row["dynamic" if mode else "static"] = statistics.median(times[mode]) / 1e3
        out[name] = row
    return out


def fmt_counts(r):
    if isinstance(r, Exception):
        return f"error: {_common.error_text(r)}", "", ""
    spec = r.get("shape_specializations")
    return str(r["graphs"]), ("–" if spec is None else str(spec)), f"{r['diff']:.1e}"


def count_table(what, diff_label, results):
    """Markdown lines (a blank line first) of a table of graph counts per program in `results`
    ({name: {"torch.compile": row, "dynamo": row}})."""
    lines = ["", f"| {what} | torch.compile graphs | dynamo graphs | dynamo kernel specializations | {diff_label} |",
             "| --- | --- | --- | --- | --- |"]
    for name, rows in results.items():
        tc, dy = fmt_counts(rows["torch.compile"]), fmt_counts(rows["dynamo"])
        lines.append(f"| {name} | {tc[0]} | {dy[0]} | {dy[1]} | {dy[2]} |")
    return lines


def render(command, a, b, c, d, elapsed):
    lines = _common.header_lines(NAME, command, _common.inductor_cache_note(), LOAD_AT_START,
                                 after_load=[f"- wall time of the run: {elapsed:.0f} s"])
    if a is not None:
        res, draws = a
        lines += ["", "### (a) graphs compiled under varying shapes", ""]
        lines += [f"- {label}: {pairs}" for label, pairs in draws]
        lines += ["", "dynamo makes every dimension of a tensor input symbolic once any of them changed "
                  "(`config.automatic_dynamic_whole_tensor`), torch.compile only the changed ones; a batch "
                  "of 1 after the batch became symbolic is a graph of its own in both (0/1 specialization).",
                  *count_table("model", "dynamo max abs diff", res)]
    if b is not None:
        lines += ["", "### (b) training loop with a smaller last batch (3 epochs)",
                  *count_table("model", "dynamo max param diff vs eager", b)]
    if c is not None:
        lines += ["", "### (c) numbers and 0/1 sizes", *count_table("program", "dynamo max abs diff", c)]
    if d is not None:
        lines += ["", "### (d) steady state: dynamic graph vs static graph (dynamo, same shapes)", "",
                  "Both compiled side by side, their calls alternating; median per call.", "",
                  "| workload | static µs/call | dynamic µs/call | dynamic / static |", "| --- | --- | --- | --- |"]
        for name, r in d.items():
            lines.append(f"| {name} | {r['static']:.1f} | {r['dynamic']:.1f} | {r['dynamic'] / r['static']:.2f} |")
    return _common.section_text(NAME, lines)


LOAD_AT_START = _common.load_average()


def main():
    t0 = time.perf_counter()
    command = _common.command_line("bench_dynamic.py")
    wanted = set(ARGS.only.split(","))
    a = b = c = d = None
    if "a" in wanted:
        print("# (a) varying shapes ...", file=sys.stderr, flush=True)
        a = measure_a()
    if "b" in wanted:
        print("# (b) training loops ...", file=sys.stderr, flush=True)
        b = measure_b()
    if "c" in wanted:
        print("# (c) numbers ...", file=sys.stderr, flush=True)
        c = measure_c()
    if "d" in wanted:
        print("# (d) steady state ...", file=sys.stderr, flush=True)
        d = measure_d()
    _common.reset_all()
    _common.emit_section(render(command, a, b, c, d, time.perf_counter() - t0), NAME, ARGS.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
