"""`repr()` / `str()` of a named tuple of literals made in the frame (`collections.namedtuple`
and `typing.NamedTuple` classes, whose `__repr__` namedtuple generated) is folded to eager's text
instead of breaking the graph (issue 7 audit B8); a class with its own `__repr__` keeps its
own path. `NT._make(iterable)` (which calls `tuple.__new__` kept in its closure) is traced too."""

import collections
import typing

import pytest
import torch

import dynamo
from test_python_kinds import check

Point = collections.namedtuple("Point", "x y")


class Typed(typing.NamedTuple):
    a: int
    b: str = "z"


class Custom(collections.namedtuple("CustomBase", "p q")):
    def __repr__(self):
        return f"<custom {self.p}>"


def texts(x):
    return x + 1, repr(Point(1, 2.5)), str(Point("a", None)), repr(Typed(3)), str(Typed(4, "w")), f"{Point(1, 2)}"


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_namedtuple_text_is_folded(backend):
    # One graph, no break; result, arguments and printed text equal to eager's.
    check(texts, torch.ones(2), graphs=1, breaks=0, backend=backend)


def test_custom_repr_is_its_own():
    def f(x):
        return x * 2, repr(Custom(1, 2)), str(Custom(3, 4))

    x = torch.ones(2)
    dynamo.reset()
    want = f(x)
    got = dynamo.optimize("eager")(f)(x)
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:]


def make_from_iterables(x):
    # `_make` calls `tuple.__new__(cls, iterable)` from its closure.
    return x * 3, Point._make([1, 2]), Point._make(v for v in (x.shape[0], 5)), Typed._make((7, "k"))


def make_wrong_length(x):
    try:
        return Point._make([1, 2, 3])
    except TypeError as e:
        return x + 1, str(e)


@pytest.mark.parametrize("fn", [make_from_iterables, make_wrong_length], ids=lambda f: f.__name__)
def test_make_is_traced(fn):
    check(fn, torch.ones(2), graphs=1, breaks=0)
