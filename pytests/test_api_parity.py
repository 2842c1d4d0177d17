"""Parity with torch._dynamo / torch.compile where users and PyTorch's own tooling call in:
`disable`'s keywords, optimized modules as drop-in nn.Modules (pickling, torch.save,
state_dict, .to, parameters, attribute access), code without a file (`python -c`, `exec`),
and a clean import."""

import copy
import io
import os
import pickle
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

import dynamo

ROOT = Path(__file__).resolve().parent.parent


class CompileCounter:
    """A backend counting the graphs it is given (module level, so it pickles by reference)."""

    def __init__(self):
        self.frame_count = 0

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        return gm.forward


counter_backend = CompileCounter()


def pickle_backend(gm, example_inputs):
    """A module-level backend: pickles by reference."""
    return gm.forward


def make_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


# --- disable ------------------------------------------------------------------------------------
def test_disable_accepts_torch_keywords():
    def f(x):
        return x + 1

    d = dynamo.disable(f, recursive=True, reason="flaky kernel", wrapping=True)
    assert d.__name__ == "f" and d._dynamo_disable_msg == "flaky kernel"
    # wrapping=False: the wrapper keeps its own name (torch's DisableContext does the same).
    nw = dynamo.disable(f, wrapping=False)
    assert nw.__name__ != "f" and nw._dynamo_disable
    cnt = CompileCounter()
    with dynamo.optimize(cnt):
        torch.testing.assert_close(d(torch.ones(2)), torch.full((2,), 2.0))
        torch.testing.assert_close(nw(torch.ones(2)), torch.full((2,), 2.0))
    assert cnt.frame_count == 0
    # As a decorator factory and a context manager, as torch's test base classes use it.
    deco = dynamo.disable(reason="r", wrapping=False)

    @deco
    def g(x):
        return x * 2

    with dynamo.optimize(cnt):
        g(torch.ones(2))
        with dynamo.disable():
            f(torch.ones(3))
    assert cnt.frame_count == 0


def test_disable_non_recursive_compiles_callees():
    def callee(x):
        return torch.sin(x) + 1

    def caller(x):
        return callee(x) * 2

    cnt = CompileCounter()
    same = dynamo.disable(caller, recursive=False)
    assert same is caller  # the code is marked, the function returned as is (torch: same behaviour)
    x = torch.randn(4)
    with dynamo.optimize(cnt):
        out = caller(x)
    torch.testing.assert_close(out, (torch.sin(x) + 1) * 2)
    assert cnt.frame_count == 1  # callee's frame was compiled, caller's was not
    cnt2 = CompileCounter()

    def caller2(x):
        return callee(x) * 2

    with dynamo.optimize(cnt2):
        dynamo.disable(caller2)(x)
    assert cnt2.frame_count == 0  # recursive: nothing under it is compiled


def test_disable_rejects_non_callables():
    with pytest.raises(TypeError):
        dynamo.disable(3)
    with pytest.raises(TypeError):
        dynamo.disable(3, recursive=False)


# --- optimized modules ----------------------------------------------------------------------------
def test_optimized_module_pickles_and_torch_saves():
    m = make_mlp()
    opt = dynamo.optimize("inductor")(m)
    x = torch.randn(3, 4)
    ref = m(x)
    torch.testing.assert_close(opt(x), ref)
    buf = io.BytesIO()
    torch.save(opt, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    assert isinstance(loaded, dynamo.OptimizedModule)
    graphs, hits = dynamo.counters()["graphs"], dynamo.counters()["cache_hits"]
    torch.testing.assert_close(loaded(x), ref)
    # The loaded module is another instance of the same class: it runs the compiled entry
    # (Note [modules guarded by type]), as under torch.compile.
    assert dynamo.counters()["graphs"] == graphs
    assert dynamo.counters()["cache_hits"] == hits + 1
    for backend in ("eager", pickle_backend):
        o = dynamo.optimize(backend, nopython=True)(make_mlp())
        p = pickle.loads(pickle.dumps(o))
        assert p._ctx._spec == (backend, True)
        torch.testing.assert_close(p(x), ref)
    d = copy.deepcopy(opt)
    assert d._orig_mod is not m
    torch.testing.assert_close(d(x), ref)


def test_optimized_module_state_dict_and_parameters_match_torch_compile():
    m = make_mlp()
    opt = dynamo.optimize("eager")(m)
    ref = torch.compile(make_mlp(), backend="eager")  # never called: no compilation happens
    assert list(opt.state_dict()) == list(ref.state_dict())
    assert [n for n, _ in opt.named_parameters()] == [n for n, _ in ref.named_parameters()]
    assert all(a is b for a, b in zip(opt.parameters(), m.parameters()))
    other = dynamo.optimize("eager")(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)))
    other.load_state_dict(opt.state_dict())
    x = torch.randn(2, 4)
    torch.testing.assert_close(other(x), m(x))
    # The original's own state dict loads through _orig_mod, as with torch.compile.
    other._orig_mod.load_state_dict(m.state_dict())


def test_optimized_module_to_train_and_attributes_reach_the_original():
    m = make_mlp()
    opt = dynamo.optimize("inductor")(m)
    assert opt.to(torch.float64) is opt
    assert m[0].weight.dtype == torch.float64
    opt.eval()
    assert not m.training and not opt.training
    opt.train()
    assert m.training
    opt.scale = 3  # attribute writes go to the original, as torch's OptimizedModule does
    assert m.scale == 3 and opt.scale == 3
    assert opt._orig_mod[0] is m[0]
    assert "scale" in dir(opt)
    del opt.scale
    assert not hasattr(m, "scale")
    x = torch.randn(2, 4, dtype=torch.float64)
    torch.testing.assert_close(opt(x), m(x))


# --- code without a file --------------------------------------------------------------------------
def _run_python(code, env=None):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})}, cwd=str(ROOT))


def test_python_dash_c_is_compiled():
    r = _run_python(
        "import torch, dynamo\n"
        "f = dynamo.optimize('inductor')(lambda x: torch.sin(x) + 1)\n"
        "x = torch.randn(8)\n"
        "torch.testing.assert_close(f(x), torch.sin(x) + 1)\n"
        "def g(x):\n    return x.cos() * 2\n"
        "with dynamo.optimize('eager'):\n    g(x)\n"
        "c = dynamo.counters()\n"
        "print(c['graphs'], c['inductor_kernels_compiled'])\n"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2", "1"], r.stdout


def test_exec_code_is_compiled_but_namedtuple_constructors_are_not():
    import collections

    ns = {"torch": torch}
    exec(compile("def h(x):\n    return x.cos() * 3\n", "<notebook cell>", "exec"), ns)
    cnt = CompileCounter()
    P = collections.namedtuple("P", "a b")
    x = torch.randn(5)
    with dynamo.optimize(cnt):
        torch.testing.assert_close(ns["h"](x), x.cos() * 3)
        assert P(1, 2) == (1, 2)
    assert cnt.frame_count == 1
    assert dynamo.counters()["frames_seen"] == 1  # P.__new__ (generated by eval) was skipped


def test_first_compile_inside_an_import_does_not_break_it():
    # assert_close imports torch.distributed.tensor lazily; the first frame compiled used to be
    # a meta-path finder's, in the middle of that import, and the compiler's own lazy imports
    # broke it ("DTensor already registered in python_key_table").
    r = _run_python(
        "import torch, dynamo\n"
        "with dynamo.optimize('eager'):\n"
        "    torch.testing.assert_close(torch.ones(2), torch.ones(2))\n"
        "print('ok')\n"
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


# --- installation ---------------------------------------------------------------------------------
def test_import_prints_nothing():
    r = _run_python("import dynamo", env={"PYTHONWARNINGS": "default"})
    assert r.returncode == 0 and r.stderr == "" and r.stdout == "", r.stderr


def test_distribution_metadata():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    # `dynamo` on PyPI is an unrelated project; the import name stays `dynamo`.
    assert meta["name"] == "dynamo-rs"
    deps = [d.split(">")[0].split("=")[0].strip() for d in meta["dependencies"]]
    # torch warns at import ("Failed to initialize NumPy") when numpy is missing.
    assert "torch" in deps and "numpy" in deps
    assert meta["entry-points"]["pytest11"] == {"dynamo": "dynamo.pytest_plugin"}
    assert dynamo.__version__ == meta["version"]
