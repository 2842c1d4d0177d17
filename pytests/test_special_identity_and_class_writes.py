"""`is` against a symbolic size follows CPython's small-int cache (Note [identity of symbolic
numbers] in src/symbolic/object_protocol.rs; breaker5 finding 32), and writes of special
attributes of a class (`__bases__`, `__add__`, ...) or of an object's `__class__` inside the
frame are seen by the code after them (Note [special attributes of classes]; finding 37)."""

import warnings

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]

warnings.simplefilter("ignore", SyntaxWarning)
_NS = {}
exec(
    "def is_small(x):\n"
    "    n = x.shape[0]\n"
    "    return x + 1, (n is 3, n is not 3, n is 1000, n is None, (n == 3) is True, n is 3.0, n is True)\n",
    _NS,
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_size_is_small_int(backend):
    f = _NS["is_small"]
    sizes = (2, 3, 4, 3, 1000, 7)
    want = [f(torch.ones(s))[1] for s in sizes]
    dynamo.reset()
    opt = dynamo.optimize(backend)(f)
    got = [opt(torch.ones(s))[1] for s in sizes]
    assert got == want
    c = dynamo.counters()
    # Captured: every call ran a graph, and the size stayed symbolic after the first recompile
    # (`n is 3` guards `n == 3` / `n != 3` like `==` does, not the exact size).
    assert c["graph_breaks"] == 0 and c["compiles"] <= 4, c


class A:
    def who(self):
        return "A"


class B:
    def who(self):
        return "B"

    def __add__(self, other):
        return "B+"


class C(A):
    def who(self):
        return "C" + super().who()


def _rebases(x):
    o = C()
    r = [o.who()]
    C.__bases__ = (B,)
    r.append(o.who())
    C.__bases__ = (A,)
    r.append(o.who())
    return x + 1, r


def _slot_and_class_writes(x):
    o = C()
    r = [o.who()]
    C.__add__ = lambda s, other: "add"
    r.append(o + o)
    del C.__add__
    o.__class__ = B
    r.append(o.who())
    r.append(o + o)
    o.__class__ = C
    return x + 1, r


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_rebases, _slot_and_class_writes])
def test_special_class_writes_are_seen(fn, backend):
    want = fn(torch.ones(1))
    dynamo.reset()
    try:
        got = dynamo.optimize(backend)(fn)(torch.ones(1))
    finally:
        C.__bases__ = (A,)
    assert got[1] == want[1]
    assert torch.equal(got[0], want[0])
    assert dynamo.counters()["graphs"] >= 1
