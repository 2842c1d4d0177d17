"""`collections.defaultdict` built in the frame and the globals of functions made in the trace
(issue 7, items 3 and 5; Note [defaultdict objects], Note [globals of functions made in the
trace]). Each program runs eagerly and compiled (`test_python_kinds.check`: values, exact types
at every level, the factory, mutated arguments, printed text, exceptions), with the graph and
break counts that show it was captured."""

import collections
import copy
from collections import defaultdict

import pytest
import torch

import dynamo
from test_python_kinds import check

X = torch.arange(4.0)
BACKENDS = ["eager", "inductor"]


class Grouped(defaultdict):
    """A Python subclass whose `__init__` passes the factory to `defaultdict.__init__`."""

    def __init__(self):
        super().__init__(list)
        self.tag = "g"


PROGRAMS = {
    # `d[k] += 1` and `d[k].append(v)` call the factory for missing keys (`defdict_missing`).
    "count_and_group": lambda x: (lambda d, g: (d.__setitem__("a", d["a"] + 1), g[1].append(x + 1), x + d["a"], d, g)[2:])(
        defaultdict(int), collections.defaultdict(list)),
    # The first positional argument is the factory; the rest are dict's; a keyword is an item.
    "init_forms": lambda x: (x + 1, defaultdict(list, {"k": [1]}, z=[3]), defaultdict(None, [("a", 1)]),
                             defaultdict(default_factory=list), defaultdict()),
    # `dict.get`, `in`, `len`, keys: the storage, the factory never called.
    "reads_do_not_call_the_factory": lambda x: (lambda d: (x + len(d), d.get("b"), "b" in d, list(d), d))(defaultdict(int, a=1)),
    # A factory made in the frame: a lambda building tensors.
    "tensor_factory": lambda x: (lambda d: (d.__setitem__("t", d["t"] + x), d["t"] * 2, d))(defaultdict(lambda: torch.zeros(4))),
    # `==` is dict's: order ignored, against dicts and other dict subclasses.
    "equality": lambda x: (lambda d: (x + 1, d == {"b": 0, "a": 0}, d != {"a": 0}, d == collections.OrderedDict(b=0, a=0)))(
        (lambda d: (d["a"], d["b"], d)[2])(defaultdict(int))),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_defaultdict_programs(name, backend):
    check(PROGRAMS[name], X, graphs=1, breaks=0, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_copy_keeps_type_factory_and_items(backend):
    def f(x):
        d = defaultdict(list, k=[1])
        c = d.copy()
        c["new"].append(x + 1)
        d.default_factory = set
        d["s"].add(3)
        c2 = copy.copy(c)
        return x * len(d), d, c, c2, d.default_factory, type(c2)

    check(f, X, graphs=1, breaks=0, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_missing_key_without_factory_raises_key_error_in_the_trace(backend):
    def f(x):
        d = defaultdict(None)
        try:
            d["missing"]
        except KeyError as e:
            caught = repr(e)
        return x + 1, caught, d, len(d)

    check(f, X, graphs=1, breaks=0, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_factory_and_arity_raise_eagers_type_error(backend):
    def f(x):
        out = []
        for args in ((3,), (list, {}, {})):
            try:
                defaultdict(*args)
            except TypeError as e:
                out.append(str(e))
        return x + 1, out

    check(f, X, graphs=1, breaks=0, backend=backend)
    assert f(X)[1] == ["first argument must be callable or None", "dict expected at most 1 argument, got 2"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_subclass(backend):
    def f(x):
        g = Grouped()
        g["a"].append(x + 1)
        return g, g.tag, g.default_factory, type(g)

    check(f, X, graphs=1, breaks=0, backend=backend)


def test_missing_calls_the_subclass_setitem():
    # `defdict_missing` stores through `PyObject_SetItem`: a subclass's `__setitem__` runs.
    class Logged(defaultdict):
        def __setitem__(self, k, v):
            self.log.append(k)
            super().__setitem__(k, v)

    def f(x):
        d = Logged(int)
        d.log = []
        d["a"] += 2
        return x + d["a"], d.log, dict(d)

    check(f, X, graphs=1, breaks=0)


# ----- Note [globals of functions made in the trace] -------------------------------------------

K = 1


def test_lambda_called_by_another_modules_helper_reads_its_own_globals(tmp_path, monkeypatch):
    # The lambda is made in this module (K = 1); the helper that calls it lives in a module whose
    # K is 100. Compiled code used to run the lambda with the helper's globals: 101 for 2.
    (tmp_path / "other_globals_mod.py").write_text("K = 100\ndef apply(g):\n    return g()\ndef make():\n    return lambda: K\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import other_globals_mod

    def f(x):
        return x + other_globals_mod.apply(lambda: K)

    check(f, X, graphs=1, breaks=0)

    # A function made by the other module's code and returned: it keeps that module's globals
    # (the frame runs eagerly rather than remake it with the frame's).
    def g(x):
        h = other_globals_mod.make()
        return x + h(), h()

    check(g, X, graphs=0)
    got = dynamo.optimize("eager")(lambda: other_globals_mod.make())()
    assert got() == 100
