"""Binding the arguments of an inlined user function follows CPython's `initialize_locals`
exactly: a call that does not bind raises CPython's own TypeError inside the trace, so a `try`
in the frame takes its handler without a graph break (Note [argument binding errors] in
python/dynamo/_binding.py; breaker5 finding 21)."""

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]

DEFS = """
def pos(a, /, b):
    return a + b
def posd(a, b=2, /, c=3):
    return a + b + c
def posk(a, /, **kw):
    return a + len(kw)
def kwo(a, *, b, c=1):
    return a + b + c
def star(a, *args, b=1, **kw):
    return a + len(args) + b + len(kw)
def many(a, b, c, d=1):
    return a + b + c + d
class C:
    def m(self, a, /, b):
        return a + b
    def __init__(self, p=0):
        self.p = p
"""

CALLS = [
    "pos(a=x, b=2)", "pos(x, a=2, b=2)", "pos(x, 2)", "pos(x, b=2)", "pos(x)", "pos()",
    "pos(x, 2, 3)", "pos(x, 2, c=1)", "pos(x, 2, b=1)", "posd(x, c=1)", "posd(a=x, b=1)",
    "posd(x, 1, 2, 3)", "posk(x, a=1)", "posk(a=x)", "kwo(x)", "kwo(x, 1)", "kwo(x, b=1, d=2)",
    "kwo(b=1, c=2)", "star(x, 1, 2, a=1)", "star(x, 1, 2, z=3)", "star()", "many(x)",
    "many(x, 1)", "many(1, 2, 3, 4, 5)", "many(x, 1, 2, e=1, f=2)", "many(x, *[1, 2], c=2)",
    "many(x, **{'b': 1, 'c': 2})", "(lambda q, /: q)(q=x)", "(lambda: 1)(x)",
    "C().m(a=x, b=1)", "C().m(x)", "C(1, 2)", "C(q=1)", "C.m(x, 1)",
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("call", CALLS)
def test_binding_matches_cpython(call, backend):
    ns = {}
    exec(DEFS + f"def f(x):\n    y = x + 1\n    try:\n        r = {call}\n"
         f"        r = ('returned', r if isinstance(r, (int, str)) else type(r).__name__)\n"
         f"    except TypeError as e:\n        r = ('TypeError', str(e))\n    return y * 2, r\n", ns)
    f = ns["f"]
    want = f(torch.ones(1))
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(1))
    assert got[1] == want[1]
    assert torch.equal(got[0], want[0])
    c = dynamo.counters()
    if want[1][0] == "TypeError":
        # The error is raised and caught inside the trace: one graph, no break.
        assert c["graphs"] == 1 and c["graph_breaks"] == 0, c


@pytest.mark.parametrize("backend", BACKENDS)
def test_uncaught_binding_error_leaves_the_frame(backend):
    def pos(a, /, b):
        return a + b

    def f(x):
        y = x + 1
        return pos(a=y, b=2)

    with pytest.raises(TypeError) as want:
        f(torch.ones(1))
    dynamo.reset()
    with pytest.raises(TypeError) as got:
        dynamo.optimize(backend)(f)(torch.ones(1))
    assert str(got.value) == str(want.value)
    assert str(want.value).endswith("pos() got some positional-only arguments passed as keyword arguments: 'a'")
