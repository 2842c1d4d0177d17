"""`==` and `!=` with a user object return what the deciding method returns, as
`PyObject_RichCompare` does (Note [rich comparison results] in
`src/symbolic/variables/user_defined.rs`). The trace used to give the truth value of `__eq__`
for every `==` (`K(1) == K(1)` was True where eager gives "yes") and to break on `!=` of a class
defining `__ne__`."""

import dataclasses

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]


class Loose:
    """An `__eq__` that returns neither True nor False."""

    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        if not isinstance(other, Loose):
            return NotImplemented
        return "yes" if self.v == other.v else 0


class WithNe(Loose):
    def __ne__(self, other):
        if not isinstance(other, Loose):
            return NotImplemented
        return ("differ", self.v, other.v)


class Vec:
    """Elementwise comparison, numpy style: `==` returns a tensor."""

    def __init__(self, t):
        self.t = t

    def __eq__(self, other):
        return self.t == (other.t if isinstance(other, Vec) else other)


class Base:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return ("base", self.v)


class Derived(Base):
    def __eq__(self, other):
        return ("derived", self.v)


class Plain:
    pass


@dataclasses.dataclass
class Point:
    x: int
    y: int


def _outcome(fn, *args):
    try:
        r = fn(torch.ones(2), *args)
        return ("ok", [(type(v), v.tolist() if isinstance(v, torch.Tensor) else v) for v in r])
    except Exception as e:  # noqa: BLE001 - compared with eager's
        return ("raised", type(e).__name__, str(e))


def _compare(fn, backend, *args, graphs=1):
    want = _outcome(fn, *args)
    dynamo.reset()
    count = [0]

    def counting(gm, example_inputs):
        count[0] += 1
        return dynamo.lookup_backend(backend)(gm, example_inputs)

    opt = dynamo.optimize(counting)(fn)
    for _ in range(2):
        assert _outcome(opt, *args) == want
    assert count[0] == graphs
    return want


@pytest.mark.parametrize("backend", BACKENDS)
def test_eq_returns_the_methods_value(backend):
    def f(x):
        return x + 1, Loose(5) == Loose(5), Loose(4) == Loose(5), Loose(4) != Loose(5), Loose(5) != Loose(5)

    assert _compare(f, backend)[1][1:] == [(str, "yes"), (int, 0), (bool, True), (bool, False)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_ne_runs_a_python_ne(backend):
    def f(x):
        return x + 1, WithNe(1) != WithNe(2), WithNe(1) == WithNe(1), Loose(3) != WithNe(4)

    _compare(f, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_eq_with_an_object_from_outside(backend):
    def f(x, a):
        return x + 1, Loose(1) == a, a == Loose(1), Loose(2) != a

    _compare(f, backend, Loose(1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_eq_against_literals(backend):
    # A literal's own method answers NotImplemented: the object decides, or identity does.
    def f(x):
        return x + 1, Loose(1) == 5, 5 == Loose(1), Loose(1) != "a", None == Plain(), Plain() != 3, Base(1) == 2, 2 == Base(1)

    _compare(f, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reflected_method_of_a_subclass_first(backend):
    def f(x):
        return x + 1, Base(1) == Derived(2), Derived(2) == Base(1), Base(1) == Base(2)

    _compare(f, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_valued_eq(backend):
    def f(x):
        v = Vec(x * 2)
        return x + 1, v == 2.0, v == Vec(x + 1)

    _compare(f, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_truth_of_results_in_branches_and_containers(backend):
    def f(x):
        out = []
        if Loose(1) == Loose(1):
            out.append("eq")
        if Loose(1) == Loose(2):
            out.append("never")
        out.append([Loose(1)] == [Loose(1)])
        out.append(Loose(2) in [Loose(1), Loose(2)])
        out.append(Point(1, 2) == Point(1, 2))
        out.append(Point(1, 2) != Point(1, 3))
        out.append(Point(1, 2) == (1, 2))
        p = Plain()
        out.append(p == p)
        out.append(p != Plain())
        return x + 1, out

    _compare(f, backend)
