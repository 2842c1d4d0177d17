"""`raise exc from cause` inside the trace (RAISE_VARARGS 2, Python/ceval.c `do_raise`): the
exception carries `__cause__` and `__suppress_context__` as in eager, a `try` in the frame takes
its handler without a graph break, and an uncaught one reaches the caller unchanged. The
everyday case is `os.environ.get(name)` for an unset variable (`os._Environ.__getitem__` raises
`KeyError(key) from None`, which `Mapping.get` catches): transformers' Llama read it in every
layer and broke into 13 graphs."""

import os

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]


def _outcome(fn, *args):
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001 - compared with eager's
        return None, (type(e), str(e), type(e.__cause__), e.__suppress_context__)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cause", ["none", "instance", "class"])
def test_raise_from_caught_in_the_frame(backend, cause):
    def f(x):
        try:
            if cause == "none":
                raise KeyError("k") from None
            if cause == "instance":
                raise ValueError("v") from KeyError("inner")
            raise IndexError("i") from TypeError
        except (KeyError, ValueError, IndexError) as e:
            return x * 2, type(e.__cause__), e.__suppress_context__, str(e.__cause__)

    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(2))
    want = f(torch.ones(2))
    torch.testing.assert_close(got[0], want[0])
    assert got[1:] == want[1:]
    assert dynamo.counters()["graph_breaks"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_uncaught_raise_from_reaches_the_caller(backend):
    def f(x):
        y = x + 1
        if y.sum() > 0:
            raise RuntimeError("boom") from ValueError("why")
        return y

    dynamo.reset()
    assert _outcome(dynamo.optimize(backend)(f), torch.ones(2)) == _outcome(f, torch.ones(2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_environment_reads_are_traced_and_guarded(backend):
    name = "DYNAMO_TEST_RAISE_FROM_FLAG"
    os.environ.pop(name, None)

    def f(x):
        flag = os.environ.get(name)
        return x * 3 if flag == "1" else x - 1

    opt = dynamo.optimize(backend)(f)
    dynamo.reset()
    try:
        torch.testing.assert_close(opt(torch.ones(2)), torch.zeros(2))
        assert dynamo.counters()["graph_breaks"] == 0
        os.environ[name] = "1"
        torch.testing.assert_close(opt(torch.ones(2)), torch.full((2,), 3.0))
        del os.environ[name]
        torch.testing.assert_close(opt(torch.ones(2)), torch.zeros(2))
    finally:
        os.environ.pop(name, None)
