"""User code that a lookup runs is run at every call, as eager runs it, never once at trace time
and baked in (Note [user code at class lookups] in src/symbolic/variables/descriptors.rs).

A descriptor read through its class (`A.d` is `__get__(None, A)`), a metaclass property, a
metaclass `__instancecheck__` / `__subclasscheck__`, a module's PEP 562 `__getattr__`, an object
whose `__class__` is a property, and torch's backend flags (`ContextProp` properties of a module
subclass) each run Python code or read mutable state. The Python ones are traced through (their
side effects replay, their answers are traced), the `__getattr__` hooks break the graph, and
torch's flags are read and guarded. Each case compares values and the order of side effects with
eager over several calls, and checks what was captured (graph count, breaks)."""

import sys
import types

import pytest
import torch

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]

LOG = []


class D:
    def __get__(self, obj, typ=None):
        LOG.append(("get", obj is None, typ.__name__))
        return len(LOG)


class A:
    d = D()


class Meta(type):
    @property
    def mp(cls):
        LOG.append("mp")
        return len(LOG)


class WM(metaclass=Meta):
    pass


class CheckMeta(type):
    def __instancecheck__(cls, obj):
        LOG.append("instancecheck")
        return len(LOG) % 2 == 1

    def __subclasscheck__(cls, sub):
        LOG.append("subclasscheck")
        return len(LOG) % 2 == 1


class C(metaclass=CheckMeta):
    pass


class Disguised:
    @property
    def __class__(self):
        LOG.append("__class__")
        return int if len(LOG) % 2 else float


MOD = types.ModuleType("mod")


def _mod_getattr(name):
    LOG.append(("mod", name))
    return len(LOG)


MOD.__getattr__ = _mod_getattr


def run(fn, n=3, arg=lambda i: torch.zeros(1) + i):
    out = []
    for i in range(n):
        LOG.clear()
        r = fn(arg(i))
        out.append((r.tolist() if isinstance(r, torch.Tensor) else r, list(LOG)))
    return out


def check(fn, backend, graphs, breaks, **kw):
    want = run(fn, **kw)
    dynamo.reset()
    got = run(dynamo.optimize(backend)(fn), **kw)
    assert got == want
    c = dynamo.counters()
    assert (c["graphs"], c["graph_breaks"]) == (graphs, breaks), c


@pytest.mark.parametrize("backend", BACKENDS)
def test_descriptor_read_through_its_class_runs_at_each_call(backend):
    # breaker5 08: `A.d` was read once at trace time (values 1, 5, 7 instead of 1, 2, 3).
    def fn(x):
        return x + A.d

    check(fn, backend, graphs=1, breaks=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_metaclass_property_runs_at_each_call(backend):
    def fn(x):
        return x + WM.mp + WM.mp

    check(fn, backend, graphs=1, breaks=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_pep562_getattr_runs_at_each_call(backend):
    # A module's `__getattr__` is user code: the graph breaks there and Python asks it.
    def fn(x):
        return x + MOD.foo

    check(fn, backend, graphs=1, breaks=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_metaclass_instancecheck_runs_at_each_call(backend):
    # breaker5 18: eager 1, 2, 1; compiled gave 1, 1, 1 with the hook run once.
    def fn(x):
        return x + (1 if isinstance(x, C) else 2)

    check(fn, backend, graphs=1, breaks=0, n=4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_metaclass_subclasscheck_runs_at_each_call(backend):
    def fn(x):
        return x + (1 if issubclass(int, C) else 2)

    check(fn, backend, graphs=1, breaks=0, n=4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_class_property_read_by_isinstance_runs_at_each_call(backend):
    def fn(x, o):
        return x + (1 if isinstance(o, int) else 2)

    o = Disguised()
    want = run(lambda x: fn(x, o), n=4)
    dynamo.reset()
    cf = dynamo.optimize(backend)(fn)
    got = run(lambda x: cf(x, o), n=4)
    assert got == want
    assert dynamo.counters()["graph_breaks"] >= 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("flag", ["enabled", "benchmark", "deterministic", "allow_tf32"])
def test_cudnn_flags_are_guarded(backend, flag):
    # breaker5 31: the flag was baked in without a guard (eager 2, 3, 2, 3; compiled 2, 2, 2, 2).
    def fn(x):
        return x * (2 if getattr(torch.backends.cudnn, flag) else 3)

    def go(f):
        old = getattr(torch.backends.cudnn, flag)
        out = []
        try:
            for n in range(4):
                setattr(torch.backends.cudnn, flag, n % 2 == 0)
                out.append(f(torch.ones(1)).item())
        finally:
            setattr(torch.backends.cudnn, flag, old)
        return out

    want = go(fn)
    dynamo.reset()
    got = go(dynamo.optimize(backend)(fn))
    assert got == want == [2.0, 3.0, 2.0, 3.0]
    assert dynamo.counters()["graph_breaks"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_mkldnn_enabled_is_guarded(backend):
    def fn(x):
        return x * (2 if torch.backends.mkldnn.enabled else 3)

    def go(f):
        old = torch.backends.mkldnn.enabled
        out = []
        try:
            for n in range(4):
                torch.backends.mkldnn.enabled = n % 2 == 0
                out.append(f(torch.ones(1)).item())
        finally:
            torch.backends.mkldnn.enabled = old
        return out

    want = go(fn)
    dynamo.reset()
    got = go(dynamo.optimize(backend)(fn))
    assert got == want == [2.0, 3.0, 2.0, 3.0]
    assert dynamo.counters()["graph_breaks"] == 0
