"""State of an exception the trace raised and handled (Note [raised exception state] in
src/symbolic/object_protocol.rs): `__traceback__`, the implicit `__context__` of a raise inside an
`except` clause, `raise ... from ...`'s `__cause__` and `__suppress_context__`, compared with
eager on every backend."""

import pytest
import torch

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]


def traceback_of_handled(x):
    try:
        raise ValueError("bad")
    except ValueError as e:
        return x + 1, e.__traceback__ is not None


def context_of_raise_in_handler(x):
    try:
        try:
            {}["k"]
        except KeyError:
            raise ValueError("v")
    except ValueError as e:
        return x + 1, type(e.__context__).__name__, e.__suppress_context__, e.__cause__


def cause_of_raise_from(x):
    try:
        try:
            raise KeyError("k")
        except KeyError as k:
            raise ValueError("v") from k
    except ValueError as e:
        return x + 1, type(e.__cause__).__name__, type(e.__context__).__name__, e.__suppress_context__


def handled_without_reading_state(x):
    try:
        raise ValueError("bad")
    except ValueError:
        return x + 1


def escaping_from_handler(x, d):
    try:
        return d["k"]
    except KeyError:
        raise ValueError("missing k")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [traceback_of_handled, context_of_raise_in_handler, cause_of_raise_from])
def test_state_of_a_handled_exception_equals_eager(backend, fn):
    dynamo.reset()
    e = fn(torch.ones(2))
    c = dynamo.optimize(backend)(fn)(torch.ones(2))
    assert torch.equal(c[0], e[0])
    assert c[1:] == e[1:]
    # One break, where the exception is raised; the `x + 1` after it runs in the resumed Python.
    counts = dynamo.counters()
    assert (counts["graphs"], counts["graph_breaks"]) == (0, 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_handled_exception_whose_state_is_not_read_stays_in_one_graph(backend):
    dynamo.reset()
    assert torch.equal(dynamo.optimize(backend)(handled_without_reading_state)(torch.ones(2)), torch.full((2,), 2.0))
    counts = dynamo.counters()
    assert (counts["graphs"], counts["graph_breaks"]) == (1, 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_escaping_exception_keeps_context_and_traceback(backend):
    dynamo.reset()
    with pytest.raises(ValueError, match="missing k") as info:
        dynamo.optimize(backend)(escaping_from_handler)(torch.ones(1), {})
    assert type(info.value.__context__) is KeyError and info.value.__traceback__ is not None
    assert info.value.__cause__ is None and info.value.__suppress_context__ is False
