"""A statement inside `try` that assigns to a local and raises at a graph break: the handler must
see the local's old value, as in eager (the exception leaves before the store). Liveness
(`bytecode::live_locals`) counts what a handler reads as live across the covered store, so the
resume function at the break receives the old value."""

import pytest
import torch

import dynamo


def compute(x):
    if x.shape[0] > 2:
        raise ValueError("too big")
    return x * 2


def view_error(x):
    result = torch.zeros_like(x)
    try:
        result = x.view(2, 2)  # RuntimeError for 3 elements
    except RuntimeError:
        pass
    return result + 1


def index_error(x):
    y = x * 2
    try:
        y = y[100]
    except IndexError:
        y = y + 1
    return y


def empty_list(x, lst):
    y = x * 2
    try:
        y = lst[5]
    except IndexError:
        y = y + 1
    return y


def callee_raises(x):
    result = torch.zeros_like(x)
    try:
        result = compute(x)
    except ValueError:
        pass
    return result + 1


def after_print(x):
    y = x * 2
    try:
        print("break", end="")
        y = y[100]
    except IndexError:
        y = y + 1
    return y


CASES = [
    (view_error, lambda: (torch.ones(3),)),
    (index_error, lambda: (torch.ones(5),)),
    (empty_list, lambda: (torch.ones(3), [])),
    (callee_raises, lambda: (torch.ones(3),)),
    (after_print, lambda: (torch.ones(3),)),
]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("fn,make", CASES, ids=[f.__name__ for f, _ in CASES])
def test_handler_sees_old_value_of_the_assigned_local(backend, fn, make, capsys):
    want = fn(*make())
    dynamo.reset()
    opt = dynamo.optimize(backend)(fn)
    for _ in range(2):
        got = opt(*make())
        assert torch.equal(got, want)
    capsys.readouterr()


def test_handler_reading_a_never_assigned_local_raises_as_eager():
    """The local is live in the handler but was never bound: UnboundLocalError, as in eager."""

    def f(x, lst):
        z = x * 2
        try:
            y = lst[5]
        except IndexError:
            return y + z
        return y

    with pytest.raises(UnboundLocalError):
        f(torch.ones(2), [])
    dynamo.reset()
    with pytest.raises(UnboundLocalError):
        dynamo.optimize("eager")(f)(torch.ones(2), [])
