"""Exceptions of user classes derived from a traced builtin exception (`class
ShapeError(ValueError)`, dataclasses' `FrozenInstanceError(AttributeError)`) whose construction
runs no Python code are made and raised in the trace like builtin ones, so a `try` around them
is one graph (issue 7 audit B2: assigning a frozen dataclass field inside `try` ran the frame
eagerly). A class with its own `__init__` still breaks; uncaught, each leaves the frame with
eager's exception."""

import dataclasses

import pytest
import torch

import dynamo
from test_python_kinds import check


class ShapeError(ValueError):
    pass


class DeepError(ShapeError):
    pass


class WithInit(ValueError):
    def __init__(self, msg):
        super().__init__(msg)
        self.extra = 1


@dataclasses.dataclass(frozen=True)
class Frozen:
    x: torch.Tensor


def raise_subclass(x):
    try:
        raise ShapeError("bad shape %d" % x.shape[0])
    except ValueError as e:
        return x + 1, str(e), type(e).__name__, e.args


def frozen_assignment(x):
    d = Frozen(x)
    try:
        d.x = x * 2
    except dataclasses.FrozenInstanceError as e:
        return d.x + 1, str(e), isinstance(e, AttributeError)


def clause_order(x):
    try:
        raise DeepError("s")
    except KeyError:
        return x, "key"
    except ShapeError as e:
        return x + 4, type(e).__name__


class RaisingProperty:
    @property
    def v(self):
        raise dataclasses.FrozenInstanceError("nope")


def getattr_default(x):
    # getattr's default is taken for an AttributeError subclass raised by a property.
    p = RaisingProperty()
    return x + 5, getattr(p, "v", "default"), hasattr(p, "v")


@pytest.mark.parametrize("fn", [raise_subclass, frozen_assignment, clause_order, getattr_default], ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_user_exception_handled_in_the_trace(fn, backend):
    # One graph, no break; result, arguments and printed text equal to eager's.
    check(fn, torch.ones(3), graphs=1, breaks=0, backend=backend)


def with_init(x):
    try:
        raise WithInit("w")
    except WithInit as e:
        return x + 3, e.extra


def uncaught(x):
    y = x * 2
    raise DeepError("uncaught %d" % y.shape[0])


def test_class_with_own_init_still_matches_eager():
    x = torch.ones(3)
    dynamo.reset()
    got = dynamo.optimize("eager")(with_init)(x)
    want = with_init(x)
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:]


def test_uncaught_user_exception_is_eagers():
    x = torch.ones(3)
    dynamo.reset()
    with pytest.raises(DeepError, match="uncaught 3") as info:
        dynamo.optimize("eager")(uncaught)(x)
    assert info.traceback[-1].name == "uncaught"
