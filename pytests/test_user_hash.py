"""`hash(o)` of a user object whose class defines `__hash__` in Python (a frozen dataclass's
generated one, a user's own): the method runs in the trace and its result becomes a hash as
CPython's `slot_tp_hash` makes it (-1 becomes -2, a big int is hashed again, a non-int raises
TypeError). Before, it was a graph break."""

import dataclasses

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]


@dataclasses.dataclass(frozen=True)
class Point:
    a: int
    b: int


class Hashed:
    def __init__(self, v):
        self.v = v

    def __hash__(self):
        return self.v


class NotAnInt:
    def __hash__(self):
        return "x"


def _compare(fn, backend, *args):
    want = fn(*args)
    dynamo.reset()
    got = dynamo.optimize(backend)(fn)(*args)
    torch.testing.assert_close(got[0], want[0])
    assert got[1:] == want[1:]
    assert dynamo.counters()["graph_breaks"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_frozen_dataclass_built_in_the_frame(backend):
    def f(x):
        p = Point(1, 2)
        return x + hash(p) % 7, hash(p) == hash((1, 2))

    _compare(f, backend, torch.ones(3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_hash_results_as_slot_tp_hash_makes_them(backend):
    class Big:
        def __hash__(self):
            return 2**70

    def f(x):
        return x * 2, hash(Hashed(-1)), hash(Hashed(5)), hash(Big()), hash(Hashed(True))

    _compare(f, backend, torch.ones(3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_int_hash_raises_type_error(backend):
    def f(x):
        try:
            hash(NotAnInt())
        except TypeError as e:
            return x - 1, str(e)
        return x, ""

    _compare(f, backend, torch.ones(3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_object_from_outside_is_guarded_on_its_fields(backend):
    h = Hashed(3)

    def f(x):
        return x + hash(h), hash(h)

    dynamo.reset()
    opt = dynamo.optimize(backend)(f)
    assert opt(torch.ones(2))[1] == 3
    h.v = 4
    got = opt(torch.ones(2))
    assert got[1] == 4
    torch.testing.assert_close(got[0], torch.full((2,), 5.0))
