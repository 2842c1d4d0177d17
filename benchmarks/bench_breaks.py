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
  (c) capture table: per model (transformers GPT-2, BERT, T5 encoder, LLaMA, BART, DistilBERT
      with tiny configs and random init; torchvision resnet18, mobilenet_v3_small,
      efficientnet_b0; timm ViT and ConvNeXt when timm is installed), inference under
      torch.no_grad(): graphs and graph breaks from `dynamo.explain` and `torch._dynamo.explain`
      side by side, then graphs compiled by the second call of a fresh `optimize(--backend)` /
      `torch.compile(backend="eager")` (0 = no recompile) and dynamo's max abs diff vs eager;
      then one training step per model (`.train()`, grad mode on): the forward and a loss
      (`mean(first_output ** 2)`) compiled, `backward()` after it; graphs and breaks of that
      forward-and-loss function from both explains, graphs the second step compiles, and the
      max abs diff of the loss and of the parameters' gradients vs eager (same seed);
  (d) a break on every iteration: a Python loop calling an nn.LSTMCell per step with a
      `print` per step, 20/40/80 steps: dynamo's first (compiling) call, graphs, compiles;
  (e) a DataLoader training loop as pytorch/examples writes it (`model.train()`, then per batch
      `zero_grad()`, forward, MSE loss, `backward()`, SGD `step()`; 16 samples in batches of 4),
      two epochs (two calls of the epoch function) under `with dynamo.optimize("inductor"):` and
      through `torch.compile(epoch_fn)`: graphs after each epoch, compiles in epoch 2, parameters
      vs eager, for a user-defined model class and an nn.Sequential.
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
markers are missing). With `--only`, the subsections not measured ("### (a)" ... "### (e)") are
kept from the file's current section, and the header says which ones were.

Usage: python benchmarks/bench_breaks.py [--write docs/PERF.md] [--cold-inductor-cache]
                                         [--calls N] [--repeats R] [--steady-iters N]
                                         [--only a,b,c,d,e] [--capture-models M,...] [--backend B]
"""

NAME = "bench_breaks"  # names its section in docs/PERF.md and its header there

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common when run as a script
import _common  # noqa: E402  (imports no torch, so --cold-inductor-cache still takes effect)


CAPTURE_MODELS = ("gpt2", "bert", "t5", "llama", "bart", "distilbert", "resnet18", "mobilenet_v3_small",
                  "efficientnet_b0", "vit", "convnext")


def parse_args():
    p = _common.argument_parser(__doc__, NAME, calls=20, repeats=7, steady_iters=50,
                                steady_iters_help="timed calls per engine in (b)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1: with other processes on a 2-core machine, 2 OpenMP "
                        "threads make eager GPT-2 calls jump from ~1 ms to ~130 ms; dynamo's kernels are single-threaded)")
    p.add_argument("--only", default="a,b,c,d,e", help="comma-separated subset of the measurements a,b,c,d,e")
    p.add_argument("--capture-models", default=",".join(CAPTURE_MODELS),
                   help="comma-separated subset of the models of (c)")
    p.add_argument("--backend", default="inductor", help="dynamo backend of the second-call check in (c)")
    p.add_argument("--lstm-steps", default="20,40,80", help="loop lengths of (d)")
    p.add_argument("--models", default="gpt2,bert", help="comma-separated subset of gpt2,bert for (b)")
    p.add_argument("--time-limit", type=int, default=150,
                   help="seconds one engine's measurement may take before it is abandoned (SIGALRM)")
    return p.parse_args()


ARGS = parse_args()
_common.apply_cold_inductor_cache(ARGS)
_common.quiet_transformers()

import contextlib  # noqa: E402
import functools  # noqa: E402
import io  # noqa: E402
import logging  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
from torch._dynamo.utils import counters as torch_counters  # noqa: E402
from _common import error_text, fmt, fresh_copy, median_call_ns, per_call_ns, timed_call  # noqa: E402

torch.set_num_threads(ARGS.threads)

for _name in ("torch._dynamo", "torch._inductor", "torch.fx", "transformers"):
    logging.getLogger(_name).setLevel(logging.ERROR)

dynamo = _common.import_dynamo()[0]  # None if the import failed (the header says why)

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


def make_capture_model(name):
    """(model, example input) for (c): tiny random-init models, `.eval()`."""
    torch.manual_seed(0)
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    img = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    T = transformers
    if name in ("gpt2", "bert"):
        return make_model(name), ids
    if name in ("t5", "llama", "bart", "distilbert") and T is None:
        raise RuntimeError(f"import transformers failed: {TRANSFORMERS_IMPORT_ERROR}")
    if name == "t5":
        m = T.T5EncoderModel(T.T5Config(num_layers=2, num_heads=2, d_model=64, d_kv=32, d_ff=128, vocab_size=128))
    elif name == "llama":
        m = T.LlamaModel(T.LlamaConfig(num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                                       hidden_size=64, intermediate_size=128, vocab_size=128,
                                       max_position_embeddings=64))
    elif name == "bart":
        m = T.BartModel(T.BartConfig(encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                                     decoder_attention_heads=2, d_model=64, encoder_ffn_dim=128,
                                     decoder_ffn_dim=128, vocab_size=128, max_position_embeddings=64))
    elif name == "distilbert":
        m = T.DistilBertModel(T.DistilBertConfig(n_layers=2, n_heads=2, dim=64, hidden_dim=128, vocab_size=128,
                                                 max_position_embeddings=64))
    elif name in ("resnet18", "mobilenet_v3_small", "efficientnet_b0"):
        import torchvision
        m = getattr(torchvision.models, name)(weights=None)
    elif name in ("vit", "convnext"):
        import timm  # absent: the row says so
        m = timm.create_model("vit_tiny_patch16_224" if name == "vit" else "convnext_atto", pretrained=False,
                              **({"img_size": 64} if name == "vit" else {}))
    else:
        raise ValueError(f"unknown model {name!r}")
    return m.eval(), (img if name in ("resnet18", "mobilenet_v3_small", "efficientnet_b0", "vit", "convnext") else ids)


CAPTURE_TITLES = {
    "gpt2": "GPT-2", "bert": "BERT", "t5": "T5 (encoder)", "llama": "LLaMA", "bart": "BART",
    "distilbert": "DistilBERT", "resnet18": "resnet18", "mobilenet_v3_small": "mobilenet_v3_small",
    "efficientnet_b0": "efficientnet_b0", "vit": "timm ViT (tiny, 64 px)", "convnext": "timm ConvNeXt (atto)",
}


def lstm_loop(cell, xs):
    h = torch.zeros(2, 16)
    c = torch.zeros(2, 16)
    outs = []
    for x in xs:
        h, c = cell(x, (h, c))
        outs.append(h)
        print(len(outs))  # a graph break on every iteration
    return torch.stack(outs)


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(3, 8)
        self.fc2 = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def train_epoch(model, opt, loader, loss_fn):
    model.train()
    for x, y in loader:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    return loss


def train_epoch_logged(model, opt, loader, loss_fn, sched, epoch):
    """An epoch that logs with its number and steps an LR scheduler (row "epoch" of (e))."""
    model.train()
    for i, (x, y) in enumerate(loader):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if i % 2 == 0:
            print(f"epoch {epoch} batch {i} loss {loss.item():.4f}")
    sched.step()
    return loss


def loop_setup(kind):
    """(model, optimizer, loader, epoch function, epoch number -> the function's extra arguments)
    for a row of (e)."""
    torch.manual_seed(0)
    model = SmallNet() if kind != "sequential" else torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    g = torch.Generator().manual_seed(1)
    data = torch.utils.data.TensorDataset(torch.randn(16, 3, generator=g), torch.randn(16, 2, generator=g))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    if kind == "epoch":
        opt = torch.optim.AdamW(model.parameters(), lr=0.01)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        return model, opt, loader, train_epoch_logged, lambda epoch: (sched, epoch)
    return model, torch.optim.SGD(model.parameters(), lr=0.1), loader, train_epoch, lambda epoch: ()


MODEL_TITLES = {
    "gpt2": "GPT-2 (`GPT2Model`, n_layer=2, n_head=2, n_embd=64, vocab_size=128, n_positions=64)",
    "bert": "BERT (`BertModel`, 2 layers, 2 heads, hidden 64, intermediate 128, vocab 128, max positions 64)",
}


# ---- engines ----------------------------------------------------------------------------------

# Both also clear torch.compile's counters, which the graph counts below are read from.
reset_all = functools.partial(_common.reset_all, clear_torch_counters=True)
wrap = functools.partial(_common.wrap, clear_torch_counters=True)


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

def max_abs_diff(out, ref):
    return (out - ref).abs().max().item()


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


def first_tensor(out):
    """The tensor a model call gives (`last_hidden_state` of a ModelOutput, or the output itself)."""
    if isinstance(out, torch.Tensor):
        return out
    return out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]


def measure_capture(name):
    """(c) for one model: {"dynamo": {...}, "torch": {...}} or exceptions in their place."""
    try:
        model, inp = make_capture_model(name)
        with torch.no_grad():
            ref = first_tensor(model(inp)).clone()
    except Exception as exc:
        return {"dynamo": exc, "torch": exc}
    res = {}
    try:
        with time_limit(ARGS.time_limit), quiet(), torch.no_grad():
            reset_all()
            ex = dynamo.explain(model)(inp)
            r = {"graphs": ex.graph_count, "breaks": ex.graph_break_count,
                 "reasons": list(ex.break_reasons)}
            reset_all()
            opt = dynamo.optimize(ARGS.backend)(model)
            t0 = time.perf_counter()
            out = opt(inp)
            r["first_s"] = time.perf_counter() - t0
            r["diff"] = max_abs_diff(first_tensor(out), ref)
            before = dynamo.counters()
            opt(inp)
            after = dynamo.counters()
            r["second_compiles"] = after.get("compiles", 0) - before.get("compiles", 0)
            r["second_recompiles"] = after.get("recompiles", 0) - before.get("recompiles", 0)
        res["dynamo"] = r
    except Exception as exc:
        res["dynamo"] = exc
    try:
        with time_limit(ARGS.time_limit), quiet(), torch.no_grad():
            reset_all()
            ex = torch._dynamo.explain(model)(inp)
            r = {"graphs": ex.graph_count, "breaks": ex.graph_break_count}
            reset_all()
            opt = torch.compile(model, backend="eager")
            opt(inp)
            before = torch_unique_graphs()
            opt(inp)
            r["second_compiles"] = torch_unique_graphs() - before
        res["torch"] = r
    except Exception as exc:
        res["torch"] = exc
    reset_all()
    return res


def train_loss(model, inp):
    """The compiled part of a training step: forward and a scalar loss."""
    return first_tensor(model(inp)).float().pow(2).mean()


def grads_of(model):
    return [p.grad for p in model.parameters() if p.grad is not None]


def measure_training(name):
    """(c), training step: {"dynamo": {...}, "torch": {...}} or exceptions in their place."""
    def fresh():
        model, inp = make_capture_model(name)
        return model.train(), inp
    try:
        model, inp = fresh()
        torch.manual_seed(1)
        ref_loss = train_loss(model, inp)
        ref_loss.backward()
        ref_grads = grads_of(model)
    except Exception as exc:
        return {"dynamo": exc, "torch": exc}
    res = {}
    try:
        with time_limit(ARGS.time_limit), quiet():
            reset_all()
            model, inp = fresh()
            ex = dynamo.explain(train_loss)(model, inp)
            r = {"graphs": ex.graph_count, "breaks": ex.graph_break_count, "reasons": list(ex.break_reasons)}
            reset_all()
            model, inp = fresh()
            fn = dynamo.optimize(ARGS.backend)(train_loss)
            torch.manual_seed(1)
            loss = fn(model, inp)
            loss.backward()
            grads = grads_of(model)
            r["diff"] = max([abs(loss.item() - ref_loss.item())]
                            + [max_abs_diff(g, h) for g, h in zip(grads, ref_grads)]
                            + [float("inf")] * abs(len(grads) - len(ref_grads)))
            before = dynamo.counters()
            model.zero_grad()
            fn(model, inp).backward()
            r["second_compiles"] = dynamo.counters().get("compiles", 0) - before.get("compiles", 0)
        res["dynamo"] = r
    except Exception as exc:
        res["dynamo"] = exc
    try:
        with time_limit(ARGS.time_limit), quiet():
            reset_all()
            model, inp = fresh()
            ex = torch._dynamo.explain(train_loss)(model, inp)
            r = {"graphs": ex.graph_count, "breaks": ex.graph_break_count}
            reset_all()
            model, inp = fresh()
            fn = torch.compile(train_loss, backend="eager")
            fn(model, inp).backward()
            before = torch_unique_graphs()
            fn(model, inp).backward()
            r["second_compiles"] = torch_unique_graphs() - before
        res["torch"] = r
    except Exception as exc:
        res["torch"] = exc
    reset_all()
    return res


def measure_lstm():
    """(d): {steps: {"dynamo": {...}, "torch.compile": {...}}} for each loop length."""
    out = {}
    cell = torch.nn.LSTMCell(8, 16)
    for steps in [int(n) for n in ARGS.lstm_steps.split(",") if n]:
        xs = [torch.randn(2, 8, generator=torch.Generator().manual_seed(i)) for i in range(steps)]
        with quiet(), torch.no_grad():
            ref = lstm_loop(cell, xs)
        row = {}
        for engine in ("dynamo", "torch.compile"):
            try:
                with time_limit(ARGS.time_limit), quiet(), torch.no_grad():
                    reset_all()
                    fn = wrap(engine, lstm_loop)
                    out_, ns = timed_call(fn, (cell, xs))
                    r = {"first_s": ns / 1e9, "diff": max_abs_diff(out_, ref)}
                    if engine == "dynamo":
                        c = dynamo.counters()
                        r.update(graphs=c.get("graphs"), compiles=c.get("compiles"), breaks=c.get("graph_breaks"))
                    else:
                        r.update(graphs=torch_unique_graphs(), skipped=torch_skipped_frames())
                row[engine] = r
            except Exception as exc:
                row[engine] = exc
        out[steps] = row
    reset_all()
    return out


def measure_loop():
    """(e): {kind: {"dynamo": {...}, "torch.compile": {...}}}."""
    out = {}
    loss_fn = torch.nn.MSELoss()
    for kind in ("net", "sequential", "epoch"):
        ref_model, ref_opt, loader, epoch_fn, extra = loop_setup(kind)
        with quiet():
            for e in (1, 2):
                epoch_fn(ref_model, ref_opt, loader, loss_fn, *extra(e))
        row = {}
        for engine in ("dynamo", "torch.compile"):
            try:
                with time_limit(ARGS.time_limit), quiet():
                    reset_all()
                    model, opt, loader, epoch_fn, extra = loop_setup(kind)
                    args1, args2 = extra(1), extra(2)  # made outside the compiled region
                    t0 = time.perf_counter()
                    if engine == "dynamo":
                        with dynamo.optimize("inductor"):
                            epoch_fn(model, opt, loader, loss_fn, *args1)
                            c1 = dynamo.counters()
                            epoch_fn(model, opt, loader, loss_fn, *args2)
                        c2 = dynamo.counters()
                        r = {"graphs1": c1.get("graphs"), "graphs2": c2.get("graphs"), "compiles2": c2.get("compiles", 0) - c1.get("compiles", 0),
                             "breaks": c1.get("graph_breaks"), "fallbacks": c1.get("eager_fallbacks")}
                    else:
                        fn = torch.compile(epoch_fn)
                        fn(model, opt, loader, loss_fn, *args1)
                        g1 = torch_unique_graphs()
                        fn(model, opt, loader, loss_fn, *args2)
                        r = {"graphs1": g1, "graphs2": torch_unique_graphs(), "compiles2": torch_unique_graphs() - g1, "skipped": torch_skipped_frames()}
                    r["s"] = time.perf_counter() - t0
                    r["diff"] = max(max_abs_diff(p, q) for p, q in zip(model.parameters(), ref_model.parameters()))
                row[engine] = r
            except Exception as exc:
                row[engine] = exc
        out[kind] = row
    reset_all()
    return out


def render_loop(loop):
    lines = [
        "",
        "### (e) DataLoader training loop: `model.train()`; per batch `zero_grad()`, forward, MSE loss, `backward()`, SGD `step()`; two epochs",
        "",
        "dynamo: `with dynamo.optimize(\"inductor\"):` around two calls of the epoch function; torch.compile: "
        "`torch.compile(epoch_fn)` called twice. Graphs: dynamo's `counters()[\"graphs\"]`, torch's "
        "`counters[\"stats\"][\"unique_graphs\"]`, after epoch 1 and after epoch 2 (equal: epoch 2 compiled nothing). "
        "Time: both epochs, compiles included. Diff: max abs diff of the parameters vs eager after two epochs.",
        "",
        "| model | dynamo graphs (epoch 1 / 2) | dynamo compiles in epoch 2 | dynamo breaks (epoch 1) | torch.compile graphs (epoch 1 / 2) | dynamo 2 epochs (s) | torch.compile 2 epochs (s) | dynamo diff | torch diff |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    titles = {"net": "user class (2 Linear + ReLU)", "sequential": "nn.Sequential (same layers)",
              "epoch": "user class, AdamW + StepLR, `epoch` argument printed per batch"}
    for kind, row in loop.items():
        dy, tc = row.get("dynamo"), row.get("torch.compile")
        def cell(r, key, spec="d"):
            return "error" if isinstance(r, Exception) else fmt(r.get(key), spec)
        lines.append(f"| {titles[kind]} | {cell(dy, 'graphs1')} / {cell(dy, 'graphs2')} | {cell(dy, 'compiles2')} | {cell(dy, 'breaks')} | "
                     f"{cell(tc, 'graphs1')} / {cell(tc, 'graphs2')} | {cell(dy, 's', '.1f')} | {cell(tc, 's', '.1f')} | "
                     f"{cell(dy, 'diff', '.2e')} | {cell(tc, 'diff', '.2e')} |")
        for who, r in (("dynamo", dy), ("torch.compile", tc)):
            if isinstance(r, Exception):
                lines.append(f"\n{titles[kind]}, {who}: {error_text(r)}")
    lines += ["", "torch.compile skips the epoch function (a graph break inside a loop) and compiles what it calls: "
              "a user model's forward and the optimizer step (the loss and torch's own `nn.Sequential` run eagerly); "
              "dynamo runs the loop in a driver and compiles the body once: forward and loss in one graph, trained "
              "through its backward; `zero_grad()`, `backward()` and `step()` run eagerly. Row \"epoch\": the epoch function also "
              "takes the epoch number, prints it in an f-string every other batch and steps a StepLR scheduler after the loop; "
              "an int or str argument only passed along or formatted is not guarded by value (Note [lazy constants]); "
              "the compiles left in epoch 2 come from `loss.item()` formatted with `:.4f` (a float input specialized by the "
              "formatting in a resume function) and the batch index, not from `epoch`."]
    return lines


# ---- report -----------------------------------------------------------------------------------

LOAD_AT_START = _common.load_average()


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


def result_row(engine, r, eager_value, key, spec):
    """A row of the (a) and (b) tables; `key` is the steady per-call time's key in `r`, shown with `spec`."""
    ratio = r[key] / eager_value if eager_value else None
    return (f"| {engine} | {r['first_ms']:.1f} | {format(r[key], spec)} | {fmt(ratio, '.2f')} | "
            f"{count_cell(r, 'graphs')} | {count_cell(r, 'breaks')} | {fmt(r.get('diff'), '.2e')} |")


def render_capture(capture):
    lines = [
        "",
        "### (c) capture: graphs, graph breaks and recompiles per model (tiny configs, random init, inference)",
        "",
        "Graphs / breaks: `dynamo.explain(model)(x)` and `torch._dynamo.explain(model)(x)` (graph_count, "
        f"graph_break_count). 2nd call: graphs compiled by the second call of a fresh `dynamo.optimize({ARGS.backend!r})` "
        "/ `torch.compile(backend=\"eager\")` (0: no recompile). Diff: max abs diff of the first output tensor "
        f"(`last_hidden_state` for transformers) of `optimize({ARGS.backend!r})` vs eager. Input: ids (2, 16) for "
        "text models, images (2, 3, 64, 64) for vision models.",
        "",
        "| model | dynamo graphs | torch graphs | dynamo breaks | torch breaks | dynamo 2nd call | torch 2nd call | dynamo first call (s) | diff vs eager |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += _model_rows(capture, [("dynamo", "graphs", "d"), ("torch", "graphs", "d"), ("dynamo", "breaks", "d"),
                                   ("torch", "breaks", "d"), ("dynamo", "second_compiles", "d"),
                                   ("torch", "second_compiles", "d"), ("dynamo", "first_s", ".1f"), ("dynamo", "diff", ".2e")])
    return lines + _break_reason_details(capture, "dynamo's break reasons per model (most frequent first, first 8)")


def render_training(training):
    lines = [
        "",
        "#### (c) training step: forward and loss compiled, `backward()` after it (`.train()`, grad mode on)",
        "",
        "Compiled function: `loss = mean(first_output(model(x)).float() ** 2)`. Graphs / breaks: "
        "`dynamo.explain(f)(model, x)` and `torch._dynamo.explain(f)(model, x)`. 2nd step: graphs compiled by the "
        f"second step of a fresh `dynamo.optimize({ARGS.backend!r})(f)` / `torch.compile(f, backend=\"eager\")`. "
        "Diff: max abs diff of the loss and of every parameter's gradient vs eager (same seed before both).",
        "",
        "| model | dynamo graphs | torch graphs | dynamo breaks | torch breaks | dynamo 2nd step | torch 2nd step | diff vs eager |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += _model_rows(training, [("dynamo", "graphs", "d"), ("torch", "graphs", "d"), ("dynamo", "breaks", "d"),
                                    ("torch", "breaks", "d"), ("dynamo", "second_compiles", "d"),
                                    ("torch", "second_compiles", "d"), ("dynamo", "diff", ".2e")])
    return lines + _break_reason_details(training, "dynamo's break reasons per model, training step (first 8)")


def _model_rows(results, columns):
    """Markdown table rows, one per model in `results` ({name: {"dynamo": row, "torch": row}}, a row
    a dict or the exception it raised), with a cell per `(engine, key, format spec)` of `columns`;
    then the errors, one line each. A model both engines failed on alike gets one error cell."""
    lines, notes = [], []
    for name, res in results.items():
        rows = {"dynamo": res.get("dynamo"), "torch": res.get("torch")}
        dy, tc = rows["dynamo"], rows["torch"]
        title = CAPTURE_TITLES.get(name, name)
        if isinstance(dy, Exception) and isinstance(tc, Exception) and str(dy) == str(tc):
            lines.append(f"| {title} | " + " | ".join(["–"] * (len(columns) - 1)) + f" | {error_text(dy)} |")
            continue
        cells = ["error" if isinstance(rows[who], Exception) else fmt(rows[who].get(key), spec) for who, key, spec in columns]
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
        for who, r in rows.items():
            if isinstance(r, Exception):
                notes.append(f"- {title}, {who}: {error_text(r)}")
    if notes:
        lines += ["", "Errors:", ""] + notes
    return lines


def _break_reason_details(results, summary):
    """Markdown lines of a collapsed list of dynamo's break reasons per model in `results`
    ({name: {"dynamo": row, ...}}), the 8 most frequent first; empty when no model broke."""
    import collections

    worst = [(n, r["dynamo"]) for n, r in results.items() if isinstance(r.get("dynamo"), dict) and r["dynamo"].get("reasons")]
    if not worst:
        return []
    lines = ["", f"<details><summary>{summary}</summary>", ""]
    for n, r in worst:
        lines.append(f"- {CAPTURE_TITLES.get(n, n)}:")
        for reason, k in collections.Counter(_short_reason(x) for x in r["reasons"]).most_common(8):
            lines.append(f"  - {k} x {reason}")
    return lines + ["", "</details>"]


def _short_reason(reason):
    """A break reason without the site-packages prefix of file names, cut to 200 characters."""
    import re
    reason = re.sub(r"/[^ ]*/site-packages/", "", reason)
    reason = re.sub(r"/[^ ]*/lib/python3[.0-9]*/", "", reason)
    return reason.replace("|", "\\|")[:200]


def render_lstm(lstm):
    lines = [
        "",
        "### (d) a graph break on every iteration: nn.LSTMCell(8, 16) stepped over N inputs (2, 8), `print` per step",
        "",
        "First (compiling) call right after a reset, in seconds, both engines with their inductor backends "
        "(`optimize(\"inductor\")`, `torch.compile()`). A break in a resume function "
        "continues in a resume function of the original code, shared by every iteration, so the compiles stop at "
        "the recompile limit (`config.cache_size_limit`) and the rest runs eagerly. Before that change (commit "
        "b703b63, a resume function of the previous resume function on every iteration, each with a longer "
        "prologue and its own cache) the same loop compiled one graph per step in 1.52 / 3.68 / 14.74 s for "
        "20 / 40 / 80 steps (`optimize(\"eager\")`), quadratic in the number of steps.",
        "",
        "| steps | dynamo first call (s) | dynamo graphs | dynamo compiles | torch.compile first call (s) | torch.compile graphs | max abs diff (dynamo) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for steps, row in lstm.items():
        dy, tc = row.get("dynamo"), row.get("torch.compile")
        def cell(r, key, spec="d"):
            return "error" if isinstance(r, Exception) else fmt(r.get(key), spec)
        lines.append(f"| {steps} | {cell(dy, 'first_s', '.2f')} | {cell(dy, 'graphs')} | {cell(dy, 'compiles')} | "
                     f"{cell(tc, 'first_s', '.2f')} | {cell(tc, 'graphs')} | {cell(dy, 'diff', '.2e')} |")
        for who, r in (("dynamo", dy), ("torch.compile", tc)):
            if isinstance(r, Exception):
                lines.append(f"\n{steps} steps, {who}: {error_text(r)}")
    return lines


def split_subsections(text):
    """{letter: text} of the "### (x) ..." subsections of a section's text (up to the next one
    or the end marker), and the text before the first."""
    import re
    parts = re.split(r"(?m)^(?=### \(([a-z])\) )", text)
    head, subs = parts[0], {}
    for i in range(1, len(parts) - 1, 2):
        subs[parts[i]] = parts[i + 1]
    return head, subs


def keep_unmeasured(section, path, wanted):
    """`section` with the subsections this run did not measure taken from the current `NAME`
    section of the file at `path` (when it has them), in letter order, and a header line naming
    them."""
    begin, end = _common.markers(NAME)
    try:
        text = open(path).read()
    except OSError:
        return section
    b, e = text.find(begin), text.find(end)
    if b == -1 or e <= b:
        return section
    _, old = split_subsections(text[b:e])
    body = section[:section.rfind(end)]
    head, new = split_subsections(body)
    kept = sorted(k for k in old if k not in wanted and k not in new)
    if not kept:
        return section
    new.update({k: old[k] for k in kept})
    note = (f"- subsections {', '.join(f'({k})' for k in kept)} are kept from an earlier run "
            "(this run measured " + ", ".join(f"({k})" for k in sorted(wanted)) + ")\n")
    head = head.rstrip("\n") + "\n" + note + "\n"
    return head + "".join(new[k].rstrip("\n") + "\n\n" for k in sorted(new)).rstrip("\n") + "\n" + end + "\n"


def render(command, cache_note, warm_notes, micro, models, elapsed_s, capture=None, lstm=None, loop=None, training=None):
    lines = _common.header_lines(
        NAME, command, cache_note, LOAD_AT_START,
        libs=f"transformers {getattr(transformers, '__version__', 'absent')}, ",
        before_load=["- one-time start-up paid before timing (a trivial compile): "
                     + ", ".join(f"{k} {v}" for k, v in warm_notes.items())],
        after_load=[f"- whole run: {elapsed_s:.0f} s"])
    if micro is not None:
        lines += render_micro(micro)
    if models:
        lines += render_models(models)
    if capture:
        lines += render_capture(capture)
    if training:
        lines += render_training(training)
    if lstm:
        lines += render_lstm(lstm)
    if loop:
        lines += render_loop(loop)
    return _common.section_text(NAME, lines)


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
    lines += _common.engine_rows(micro, ENGINES, "us", functools.partial(result_row, key="us", spec=".1f"), 5)
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
        lines += _common.engine_rows(res, ENGINES, "ms", functools.partial(result_row, key="ms", spec=".3f"), 5)
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


def main():
    t_start = time.perf_counter()
    command = _common.command_line("bench_breaks.py")
    cache_note = _common.inductor_cache_note()
    wanted = set(ARGS.only.split(","))
    print("# warming up both compilers ...", file=sys.stderr, flush=True)
    warm_notes = _common.warm_up_compilers(("torch.compile", "dynamo"), warm_fn, lambda: (torch.randn(16),))
    micro = None
    if "a" in wanted:
        print("# measuring (a) graph-break-heavy loop ...", file=sys.stderr, flush=True)
        micro = measure_micro()
        _common.report_errors(micro, "")
    models = {}
    if "b" in wanted:
        for name in [m for m in ARGS.models.split(",") if m]:
            print(f"# measuring (b) {name} ...", file=sys.stderr, flush=True)
            models[name] = measure_model(name)
            _common.report_errors(models[name], f"{name} ")
    capture = {}
    training = {}
    if "c" in wanted:
        for name in [m for m in ARGS.capture_models.split(",") if m]:
            print(f"# measuring (c) {name} ...", file=sys.stderr, flush=True)
            capture[name] = measure_capture(name)
            print(f"# measuring (c) {name} training step ...", file=sys.stderr, flush=True)
            training[name] = measure_training(name)
    lstm = None
    if "d" in wanted:
        print("# measuring (d) LSTMCell loop ...", file=sys.stderr, flush=True)
        lstm = measure_lstm()
    loop = None
    if "e" in wanted:
        print("# measuring (e) DataLoader training loop ...", file=sys.stderr, flush=True)
        loop = measure_loop()
    reset_all()
    section = render(command, cache_note, warm_notes, micro, models, time.perf_counter() - t_start, capture, lstm, loop,
                     training)
    if ARGS.write:
        section = keep_unmeasured(section, ARGS.write, wanted)
    _common.emit_section(section, NAME, ARGS.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
