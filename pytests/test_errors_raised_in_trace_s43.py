"""Errors of builtin operations raised in the trace, so a `try` around them takes its handler
without a graph break: `min()`/`max()` of an empty iterable (eager's ValueError, whose text
differs between CPython versions, taken from the real function) and unpacking a list, tuple or
str of the wrong length (Python/ceval.c's ValueError). Unpacking an iterator of the wrong length
stays a break: CPython stops taking items at the first extra one."""

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]


def _compare(fn, backend, *args, breaks=0):
    want = fn(torch.ones(2), *args)
    dynamo.reset()
    got = dynamo.optimize(backend)(fn)(torch.ones(2), *args)
    torch.testing.assert_close(got[0], want[0])
    assert got[1:] == want[1:]
    c = dynamo.counters()
    assert (c["graph_breaks"], c["eager_fallbacks"]) == (breaks, 0)
    assert c["graphs"] >= 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_min_max_of_empty(backend):
    def f(x, items):
        out = []
        for fn in (min, max):
            try:
                fn(items)
            except ValueError as e:
                out.append(str(e))
        try:
            min(v for v in items)
        except ValueError as e:
            out.append(str(e))
        return x + len(out), out

    _compare(f, backend, [])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("value", [[1, 2, 3], (1,), "abc", [], (1, 2)])
def test_unpack_of_the_wrong_length(backend, value):
    def f(x, v):
        try:
            a, b = v
            return x + 1, (a, b)
        except ValueError as e:
            return x - 1, str(e)

    _compare(f, backend, value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_unpack_of_an_iterator_stops_at_the_extra_item(backend):
    def f(x, v):
        it = iter(v)
        try:
            a, b = it
        except ValueError as e:
            return x - 1, str(e), list(it)
        return x, None, []

    want = f(torch.ones(2), [1, 2, 3, 4])
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(2), [1, 2, 3, 4])
    assert got[1:] == want[1:] == ("too many values to unpack (expected 2)", [4])
