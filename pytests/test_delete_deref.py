"""`del` of a cell variable (DELETE_DEREF): the cell is emptied in the trace, so closures made
in the frame see it empty, a later write fills it again, and the frame stays one graph. A cell
that outlives the frame, or an empty one (`del` raises NameError), stays a graph break."""

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]


def _compare(fn, backend, *args, breaks):
    want = fn(*args)
    dynamo.reset()
    opt = dynamo.optimize(backend)(fn)
    for _ in range(2):
        got = opt(*args)
        assert type(got) is type(want)
        for g, w in zip(got, want):
            if isinstance(w, torch.Tensor):
                torch.testing.assert_close(g, w)
            else:
                assert g == w
    c = dynamo.counters()
    # A frame whose break leaves no graph worth compiling runs eagerly (an eager fallback).
    assert c["graph_breaks"] + c["eager_fallbacks"] == breaks


@pytest.mark.parametrize("backend", BACKENDS)
def test_del_then_rebind_a_captured_variable(backend):
    def f(x):
        y = x + 1
        get = lambda: y  # noqa: E731
        first = get()
        del y
        y = x * 5
        return first, get()

    _compare(f, backend, torch.ones(3), breaks=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_deleted_cell_seen_by_a_returned_closure(backend):
    def f(x):
        y = x + 1
        get = lambda: y  # noqa: E731
        out = get() * 2
        del y
        return out, get

    want_out, want_get = f(torch.ones(3))
    dynamo.reset()
    got_out, got_get = dynamo.optimize(backend)(f)(torch.ones(3))
    torch.testing.assert_close(got_out, want_out)
    for get in (want_get, got_get):
        with pytest.raises(NameError, match="free variable 'y'"):
            get()
    c = dynamo.counters()
    assert (c["graphs"], c["graph_breaks"], c["eager_fallbacks"]) == (1, 0, 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_del_before_a_graph_break(backend):
    def f(x):
        y = x + 1
        get = lambda: y  # noqa: E731
        a = get()
        del y
        dynamo.graph_break()
        y = x * 3
        return a, get()

    _compare(f, backend, torch.ones(3), breaks=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_del_of_an_empty_cell_raises_as_eager(backend):
    def f(x):
        y = x + 1
        get = lambda: y  # noqa: E731
        del y
        try:
            del y
        except NameError as e:
            return x * 2, type(e).__name__, get.__code__.co_freevars

    _compare(f, backend, torch.ones(3), breaks=1)
