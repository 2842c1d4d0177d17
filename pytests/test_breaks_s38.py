"""Graph breaks HF transformers models hit that torch.compile does not, round s38: each program
runs eagerly and compiled and is compared exactly, with graph, break and recompile counts."""

import functools
import sys
import types

import pytest
import torch

import dynamo


def _module(name, source):
    """A module `name` made from `source` and registered in `sys.modules`, so that its functions'
    globals are that module's dict, as for any imported module."""
    m = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), m.__dict__)
    sys.modules[name] = m
    return m


@pytest.fixture
def helper_module():
    name = "_dynamo_s38_helpers"
    m = _module(name, (
        "import functools, importlib.util\n"
        "MODE = 'double'\n"
        "def _marked(fn):\n"
        "    fn._dynamo_marked_constant = True\n"
        "    return fn\n"
        "@functools.lru_cache\n"
        "def scale(k):\n"
        "    return 2 * k if MODE == 'double' else 5 * k\n"
        "@functools.lru_cache\n"
        "@_marked\n"
        "def has_package(name):\n"
        "    return importlib.util.find_spec(name) is not None\n"
        "@_marked\n"
        "def version_ok(v):\n"
        "    return importlib.util.find_spec('torch') is not None and v > 1\n"
    ))
    yield m
    del sys.modules[name]


def _counts():
    c = dynamo.counters()
    return c["graphs"], c["graph_breaks"], c["recompiles"]


def test_lru_cached_function_of_another_module_reads_its_globals(helper_module):
    # The `__wrapped__` of an lru_cache wrapper has no source of its own; its globals are its
    # module's dict, reached as `sys.modules[name].__dict__` (Note [globals of functions without
    # a source]). Before: GB0011 "function scale from other globals without a source".
    def f(x):
        return x * helper_module.scale(3)

    x = torch.arange(4.0)
    want = f(x)
    dynamo.reset()
    g = dynamo.optimize("eager")(f)
    assert torch.equal(g(x), want)
    assert torch.equal(g(x), want)
    assert _counts() == (1, 0, 0)
    # The global the body read is guarded: a new value after `cache_clear` recompiles, as eager
    # then computes the new product.
    helper_module.MODE = "five"
    helper_module.scale.cache_clear()
    assert torch.equal(g(x), f(x))
    assert torch.equal(g(x), x * 15)
    assert _counts() == (2, 0, 1)


def test_lru_cached_function_keeps_its_cache_counts(helper_module):
    def f(x):
        return x + helper_module.scale(4)

    x = torch.ones(2)
    helper_module.scale.cache_clear()
    f(x), f(x)
    want = helper_module.scale.cache_info()
    helper_module.scale.cache_clear()
    dynamo.reset()
    g = dynamo.optimize("eager")(f)
    g(x), g(x)
    assert helper_module.scale.cache_info() == want
    assert _counts() == (1, 0, 0)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_function_marked_constant_runs_at_trace_time(helper_module, backend):
    # `_dynamo_marked_constant` (torch._dynamo.assume_constant_result; transformers'
    # `_make_compile_constant` on `is_torch_greater_or_equal`): the body, which walks importlib,
    # is run once while tracing and its result kept (Note [functions marked constant]).
    def f(x):
        if helper_module.has_package("torch") and helper_module.version_ok(3):
            x = x + 1
        if helper_module.has_package("_surely_not_installed_pkg_s38"):
            x = x * 100
        return x * 2

    x = torch.arange(3.0)
    want = f(x)
    dynamo.reset()
    g = dynamo.optimize(backend)(f)
    assert torch.equal(g(x), want)
    assert torch.equal(g(x), want)
    assert _counts() == (1, 0, 0)


def test_function_marked_constant_with_tensor_argument_is_traced(helper_module):
    # Only constant arguments make the call a constant; a tensor argument is traced as usual.
    m = _module("_dynamo_s38_helpers2", (
        "def _marked(fn):\n"
        "    fn._dynamo_marked_constant = True\n"
        "    return fn\n"
        "@_marked\n"
        "def double(x):\n"
        "    return x * 2\n"
    ))
    try:
        def f(x):
            return m.double(x) + 1

        x = torch.arange(3.0)
        want = f(x)
        dynamo.reset()
        g = dynamo.optimize("eager")(f)
        assert torch.equal(g(x), want)
        assert torch.equal(g(x + 1), f(x + 1))
        assert _counts() == (1, 0, 0)
    finally:
        del sys.modules["_dynamo_s38_helpers2"]


def test_mamba_selective_scan_one_graph():
    # transformers' `mamba_selective_scan` behind `use_kernel_func_from_hub_with_fallback` and
    # the `kernels` package's `Func` module: its `is_torch_greater_or_equal("2.9.0")` is an
    # lru_cache'd, constant-marked function of another module. Before: 5 breaks (GB0011 in
    # every frame of the chain), 1 graph.
    transformers = pytest.importorskip("transformers")
    mm = pytest.importorskip("transformers.models.mamba.modeling_mamba")
    transformers.logging.set_verbosity_error()

    def f(hs, dt, A, B, C, D):
        return mm.mamba_selective_scan(hs, dt, A, B, C, D)

    g = torch.Generator().manual_seed(0)
    args = (torch.randn(2, 8, 5, generator=g), torch.rand(2, 8, 5, generator=g), -torch.rand(8, 4, generator=g),
            torch.randn(2, 4, 5, generator=g), torch.randn(2, 4, 5, generator=g), torch.randn(8, generator=g))
    want = f(*args)
    dynamo.reset()
    c = dynamo.optimize("eager")(f)
    assert torch.equal(c(*args), want)
    assert _counts() == (1, 0, 0)


def _check(f, *args, graphs, breaks, backend="eager"):
    """`f(*args)` eagerly and compiled (twice): equal results, and the counts after the first
    compiled call."""
    want = f(*args)
    dynamo.reset()
    g = dynamo.optimize(backend)(f)
    got = g(*args)
    c = dynamo.counters()
    assert (c["graphs"], c["graph_breaks"]) == (graphs, breaks), c
    assert repr(got) == repr(want)
    assert repr(g(*args)) == repr(want)


def test_dict_copy_is_a_new_dict_of_the_same_objects():
    # `model_kwargs.copy()` in transformers' `generate`. Before: GB0016 "dict.copy()".
    def f(x, d):
        c = d.copy()
        c["y"] = x + 1
        shared = c["l"] is d["l"]
        c["l"].append(3)
        return c, d, shared, type(c)

    _check(f, torch.ones(2), {"a": 1, "l": [1]}, graphs=1, breaks=0)


class _Out:
    def __init__(self, t):
        self.t = t


class _Finalized:
    log = []

    def __del__(self):
        _Finalized.log.append("freed")


def test_del_of_object_from_outside_without_finalizers():
    # `del outputs` in transformers' `_sample`, where `outputs` (a ModelOutput) came into the
    # resume function from outside. Before: GB0026 "del of a user object".
    def f(x, o):
        y = o.t + x
        del o
        return y * 2

    _check(f, torch.ones(2), _Out(torch.arange(2.0)), graphs=1, breaks=0)


def test_del_of_object_made_in_the_trace_without_finalizers():
    def f(x):
        o = _Out(x + 1)
        y = o.t * 2
        del o
        return y

    _check(f, torch.ones(2), graphs=1, breaks=0)


def test_del_of_object_holding_a_finalizer_still_breaks():
    # Freeing `o` frees the `_Finalized` only it holds: its `__del__` runs at the `del`, so the
    # `del` runs as Python (GB0026) and the log is read after it.
    def f(x):
        o = _Out(_Finalized())
        del o
        return x + len(_Finalized.log)

    _Finalized.log.clear()
    want = f(torch.ones(2))
    _Finalized.log.clear()
    dynamo.reset()
    got = dynamo.optimize("eager")(f)(torch.ones(2))
    assert torch.equal(got, want)
    assert dynamo.counters()["graph_breaks"] >= 1

    def g(x, o):
        del o
        return x + len(_Finalized.log)

    _Finalized.log.clear()
    want = g(torch.ones(2), _Out(_Finalized()))
    _Finalized.log.clear()
    dynamo.reset()
    got = dynamo.optimize("eager")(g)(torch.ones(2), _Out(_Finalized()))
    assert torch.equal(got, want)


class _Procs(list):
    """A list subclass with a `__call__` walking `self`, as transformers' `LogitsProcessorList`."""

    def __call__(self, x):
        for p in self:
            x = p(x)
        return x


class _OwnIter(list):
    def __iter__(self):
        return reversed(list(list.__iter__(self)))


def test_iterating_list_subclass_from_outside():
    # Before: GB0006 "iterating _Procs object (its __iter__ runs in Python)" in each call.
    procs = _Procs([torch.sin, lambda t: t * 2, torch.cos])

    def f(x):
        return procs(x) + sum(1 for _ in procs)

    _check(f, torch.arange(3.0), graphs=1, breaks=0)
    # A new item misses the length guard.
    procs.append(torch.neg)
    dynamo.reset()
    x = torch.arange(3.0)
    g = dynamo.optimize("eager")(f)
    assert torch.equal(g(x), f(x))
    procs.append(torch.exp)
    assert torch.equal(g(x), f(x))


def test_iterating_list_subclass_with_its_own_iter_keeps_it():
    own = _OwnIter([1, 2, 3])

    def f(x):
        out = []
        for i in own:
            out.append(i)
        return x + out[0], out

    want = f(torch.ones(1))
    dynamo.reset()
    assert repr(dynamo.optimize("eager")(f)(torch.ones(1))) == repr(want)


def test_list_subclass_grown_while_iterated():
    # The loop body appends through a method the trace leaves to Python: the walk continues
    # over the real object and sees the new item, as eager's list iterator does.
    def f(x, procs):
        n = 0
        for p in procs:
            x = p(x)
            n += 1
            if n == 1:
                procs.append(torch.neg)
        return x, n

    want = f(torch.arange(3.0), _Procs([torch.sin, torch.cos]))
    dynamo.reset()
    got = dynamo.optimize("eager")(f)(torch.arange(3.0), _Procs([torch.sin, torch.cos]))
    assert repr(got) == repr(want)


def _callee(a, b=2, *, c=3):
    return a


def test_signature_parameter_views_fold():
    # transformers' generate: `"x" in set(inspect.signature(self.forward).parameters.keys())`.
    # Before: GB0016 "constant method returned a non-literal", then GB0006 iterating odict_keys.
    import inspect

    def f(x):
        params = inspect.signature(_callee).parameters
        has_b = "b" in set(params.keys())
        names = list(params.keys())
        kinds = [p.kind.name for p in list(params.values())]
        defaults = [p.default for p in list(params.values())]
        return (x + 1 if has_b else x - 1), names, kinds, defaults, type(params.keys()).__name__, "zz" in params.keys()

    _check(f, torch.ones(2), graphs=1, breaks=0)


def test_mapping_proxy_of_a_class_is_not_folded():
    # A class's `__dict__` proxy may change between calls: its views are not folded.
    class K:
        a = 1

    def f(x):
        return x + len(list(K.__dict__.keys())), "b" in K.__dict__.keys()

    want = f(torch.ones(1))
    dynamo.reset()
    g = dynamo.optimize("eager")(f)
    assert repr(g(torch.ones(1))) == repr(want)
    K.b = 2
    assert repr(g(torch.ones(1))) == repr(f(torch.ones(1)))
