"""Guard check cost of a compiled frame, timed in Rust (Note [guard check timing] in src/guards/mod.rs).

Compiles a model with dynamo.optimize("inductor") (tiny BertForMaskedLM, the bench_train config,
train mode, grad on, forward + loss; or nn.Linear(16, 16)), then runs the check of the compiled
frame's most recent cache entry N times through `dynamo._C.time_guards` with the arguments the
frame was called with, and prints: the mean time of one whole check (the cache-hit path's
code), the guards by kind (count, summed per-guard ns) and the access-plan steps by kind, and
the costliest steps and guards. Per-piece figures (each piece's least mean over the repeats)
carry the clock's own cost (~20-30 ns each): they rank, they do not sum to the whole.

Usage: python benchmarks/bench_guards.py [--model bert|linear|gpt2] [-n N] [--top K]
"""

import argparse
import builtins
import collections
import inspect
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402


def compiled_frame(fn):
    """The first function along `fn`'s `__wrapped__` chain whose code has a cache entry."""
    import dynamo
    f = inspect.unwrap(fn, stop=lambda f: dynamo._C.cache_info(f.__code__)[0] > 0)
    if dynamo._C.cache_info(f.__code__)[0] == 0:
        raise RuntimeError(f"no cache entry on {fn} or what it wraps")
    return f


def frame_args(fn, args, kwargs):
    """`fn`'s argument slots, in `co_varnames` order, as a call `fn(*args, **kwargs)` fills them."""
    bound = inspect.signature(fn, follow_wrapped=False).bind(*args, **kwargs)
    bound.apply_defaults()
    code = fn.__code__
    nargs = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return [bound.arguments[n] for n in code.co_varnames[:nargs]]


def setup(name):
    """(compiled frame's function, argument slots) after one compiled training forward + loss."""
    import dynamo
    torch.manual_seed(0)
    if name == "linear":
        model = nn.Linear(16, 16)
        x = torch.randn(16)
        f = _common.wrap("dynamo", model)
        for _ in range(3):
            f(x)
        fn = compiled_frame(type(model).forward)
        return fn, frame_args(fn, (model, x), {})
    model = _common.tiny_lm(name)
    ids = torch.randint(0, 128, (4, 32))
    f = _common.wrap("dynamo", model)
    for _ in range(2):
        f(input_ids=ids, labels=ids).loss.backward()
    assert dynamo._C is not None
    fn = compiled_frame(type(model).forward)
    return fn, frame_args(fn, (model,), {"input_ids": ids, "labels": ids})


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="bert", choices=("bert", "gpt2", "linear"))
    p.add_argument("-n", type=int, default=2000, help="checks timed")
    p.add_argument("--top", type=int, default=15, help="costliest steps and guards listed")
    p.add_argument("--repeats", type=int, default=5, help="whole-check timings (median reported)")
    a = p.parse_args()
    torch.set_num_threads(1)
    _common.import_dynamo()
    import dynamo
    fn, slots = setup(a.model)
    g = fn.__globals__
    b = g.get("__builtins__", builtins.__dict__)
    b = b if isinstance(b, dict) else b.__dict__
    runs = [dynamo._C.time_guards(fn.__code__, slots, fn.__closure__, g, b, a.n) for _ in range(a.repeats)]
    wholes = sorted(r[0] for r in runs)
    # Per piece, the least of the repeats' means: one preemption (a few ms on a loaded machine)
    # inside a repeat's timed pass adds ms / n to whichever piece it lands in.
    steps = [(t, min(r[1][i][1] for r in runs)) for i, (t, _) in enumerate(runs[0][1])]
    guards = [(t, min(r[2][i][1] for r in runs)) for i, (t, _) in enumerate(runs[0][2])]
    print(f"{a.model}: frame {fn.__code__.co_name} ({fn.__code__.co_filename.rsplit('/', 2)[-1]}): "
          f"{len(guards)} guards, {len(steps)} plan steps")
    print(f"whole check: median {wholes[len(wholes) // 2] / 1e3:.2f} us (min {wholes[0] / 1e3:.2f}, "
          f"max {wholes[-1] / 1e3:.2f}) over {a.repeats} x {a.n} checks")
    for label, items, key in (("guards", guards, lambda t: t.split(":")[0]), ("steps", steps, lambda t: t.split(" ")[0])):
        by = collections.defaultdict(lambda: [0, 0.0])
        for text, ns in items:
            by[key(text)][0] += 1
            by[key(text)][1] += ns
        total = sum(v[1] for v in by.values())
        print(f"{label} by kind (sum of per-piece ns {total / 1e3:.1f} us):")
        for k, (c, ns) in sorted(by.items(), key=lambda kv: -kv[1][1]):
            print(f"  {k:18s} {c:5d}  {ns / 1e3:8.2f} us  {ns / max(c, 1):7.0f} ns each")
    for label, items in (("steps", steps), ("guards", guards)):
        print(f"costliest {label}:")
        for text, ns in sorted(items, key=lambda t: -t[1])[:a.top]:
            print(f"  {ns:8.0f} ns  {text[:160]}")


if __name__ == "__main__":
    main()
