"""A bare `raise` inside an `except` clause the trace runs (RAISE_VARARGS 0, Python/ceval.c
`do_raise` with no exception): it re-raises the exception that clause handles, so a
`try: ... except: cleanup; raise` inside another `try` of the frame, or of a function the frame
calls, stays in one graph. A bare raise with no clause of the trace around it (the frame called
from a handler, or none at all) stays a graph break, and Python raises what it would."""

import sys

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]


def _run(fn, *args):
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001 - compared with eager's
        return None, (type(e), str(e), type(e.__context__), e.__traceback__ is not None)


def _compare(fn, backend, *args, breaks=0):
    want = _run(fn, *(a.clone() if isinstance(a, torch.Tensor) else a for a in args))
    dynamo.reset()
    opt = dynamo.optimize(backend)(fn)
    for _ in range(2):
        got = _run(opt, *(a.clone() if isinstance(a, torch.Tensor) else a for a in args))
        assert got[1] == want[1]
        if want[0] is not None:
            assert type(got[0]) is type(want[0])
            for g, w in zip(got[0] if isinstance(got[0], tuple) else (got[0],), want[0] if isinstance(want[0], tuple) else (want[0],)):
                if isinstance(w, torch.Tensor):
                    torch.testing.assert_close(g, w)
                else:
                    assert g == w
    assert dynamo.counters()["graph_breaks"] == breaks


@pytest.mark.parametrize("backend", BACKENDS)
def test_reraise_caught_by_an_outer_try(backend):
    def f(x):
        log = []
        try:
            try:
                raise ValueError("inner")
            except ValueError:
                log.append("cleanup")
                raise
        except ValueError as e:
            return x * 2 + len(str(e)), len(log)

    _compare(f, backend, torch.ones(3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_reraise_of_a_trace_error_in_a_called_function(backend):
    def lookup(d, k):
        try:
            return d[k]
        except KeyError:
            raise

    def f(x):
        try:
            return lookup({"a": 1}, "b") + x
        except KeyError as e:
            return x - 1, str(e)

    _compare(f, backend, torch.ones(3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_reraise_after_an_inner_handler_finished(backend):
    # The inner clause's POP_EXCEPT restores the outer clause's exception: `raise` re-raises it.
    def f(x):
        try:
            try:
                raise KeyError("outer")
            except KeyError:
                try:
                    raise IndexError("inner")
                except IndexError:
                    pass
                raise
        except (KeyError, IndexError) as e:
            return x + 1, type(e).__name__

    _compare(f, backend, torch.ones(3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_reraise_leaving_the_frame(backend):
    def f(x):
        y = x.sin()
        try:
            raise ValueError("leaves")
        except ValueError:
            y = y + 1
            raise

    # The exception leaves the frame: Python re-runs the clause (one break).
    _compare(f, backend, torch.ones(3), breaks=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bare_raise_with_no_active_exception(backend):
    def f(x):
        y = x + 1
        raise

    _compare(f, backend, torch.ones(3), breaks=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bare_raise_in_a_frame_called_from_a_handler(backend):
    def g(x):
        y = x * 3
        raise

    opt = dynamo.optimize(backend)(g)
    dynamo.reset()
    for fn in (g, opt):
        try:
            raise KeyError("from the caller")
        except KeyError:
            with pytest.raises(KeyError, match="from the caller"):
                fn(torch.ones(2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_new_exception_in_a_handler_has_the_handled_one_as_context(backend):
    # Reading `__context__` of an exception the trace raised is a break (Note [raised exception
    # state]): Python raises and chains it for real.
    def f(x):
        try:
            try:
                raise ValueError("first")
            except ValueError:
                raise KeyError("second")
        except KeyError as e:
            return x * 2, type(e.__context__).__name__, str(e.__context__)

    _compare(f, backend, torch.ones(3), breaks=1)
