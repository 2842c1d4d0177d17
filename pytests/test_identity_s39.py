"""Tuples from outside the frame keep their identity (Note [tuples from outside the frame] in
src/symbolic/output_graph.rs): returned, stored into a list, an attribute or a dict, passed
through a graph break, as a default-argument sentinel, a ``torch.return_types`` value or a
namedtuple. Eager returns the very object; a rebuilt tuple broke ``is`` checks and
``id()``-keyed tables (tester 6 #1). Each case also checks that a graph was captured."""

import collections

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]
DEFAULT = (torch.ones(1), "mode")
Pair = collections.namedtuple("Pair", "a b")


def compiled(fn, backend):
    dynamo.reset()
    return dynamo.optimize(backend)(fn)


def captured(breaks=0):
    c = dynamo.counters()
    assert c["graphs"] >= 1 and c["graph_breaks"] == breaks and c["eager_fallbacks"] == 0, c


@pytest.mark.parametrize("backend", BACKENDS)
def test_default_sentinel_returned(backend):
    def f(x, opts=DEFAULT):
        return x + 1, opts

    x = torch.ones(2)
    out, opts = compiled(f, backend)(x)
    assert opts is DEFAULT
    torch.testing.assert_close(out, x + 1)
    captured()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["tuple", "namedtuple", "return_types", "nested_list"])
def test_argument_returned_and_stored(backend, kind):
    x = torch.ones(2)
    t = {
        "tuple": lambda: (torch.zeros(1), 3),
        "namedtuple": lambda: Pair(torch.zeros(1), 3),
        "return_types": lambda: torch.max(torch.arange(3.0), 0),
        "nested_list": lambda: Pair(torch.zeros(1), [1]),
    }[kind]()

    def f(x, t, lst, o, d):
        lst.append(t)
        o.t = t
        d["t"] = t
        return x * 2, t

    class O:
        pass

    lst, o, d = [], O(), {}
    y, r = compiled(f, backend)(x, t, lst, o, d)
    assert r is t and lst[-1] is t and o.t is t and d["t"] is t
    assert type(r) is type(t)
    torch.testing.assert_close(y, x * 2)
    captured()


@pytest.mark.parametrize("backend", BACKENDS)
def test_identity_across_a_graph_break(backend):
    def f(x, t):
        y = x + t[0]
        print("break")
        return y * 2, t

    t = (torch.ones(2), 1)
    y, r = compiled(f, backend)(torch.ones(2), t)
    assert r is t
    torch.testing.assert_close(y, (torch.ones(2) + 1) * 2)
    captured(breaks=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_replaced_tuple_is_new_and_old_one_kept(backend):
    """The old tuple read before its holder is rebound is still that old object; the new one
    is made in the frame."""

    class O:
        pass

    def f(o, d, x):
        old_attr, old_item = o.t, d["a"]
        o.t = (x + 1, 2)
        d["a"] = (x, 3)
        return old_attr, old_item

    o, d = O(), {}
    o.t, d["a"] = (torch.zeros(1), 1), (torch.zeros(1), 1)
    first_attr, first_item = o.t, d["a"]
    a, b = compiled(f, backend)(o, d, torch.ones(1))
    assert a is first_attr and b is first_item
    assert o.t[1] == 2 and d["a"][1] == 3 and o.t is not first_attr
    captured()


@pytest.mark.parametrize("backend", BACKENDS)
def test_tuple_of_a_tuple_and_whole_slice_are_the_tuple(backend):
    """As CPython: ``tuple(t)`` and ``t[:]`` of an exact tuple are ``t`` itself; a tuple made
    from its items, a partial or reversed slice, and ``tuple()`` / ``[:]`` of a namedtuple are
    new objects."""

    def f(t, nt, x):
        return tuple(t), t[:], (t[0], t[1]), t[:1], t[::-1], tuple(nt), nt[:], x + 1

    t, nt = (torch.ones(1), 2), Pair(torch.ones(1), 2)
    got = compiled(f, backend)(t, nt, torch.ones(1))
    eager = f(t, nt, torch.ones(1))
    assert [v is t or v is nt for v in got[:-1]] == [v is t or v is nt for v in eager[:-1]] == [True, True] + [False] * 5
    assert all(type(v) is type(e) for v, e in zip(got, eager))
    captured()
