"""Calling a weak reference and `zip(..., strict=True)` are traced, not graph breaks.

`ref()` on an exact `weakref.ref` gives its referent, guarded through the call (Note [calling a
weak reference] in src/symbolic/object_protocol.rs); `zip(strict=True)` raises CPython's own
`ValueError` when the lengths differ (Python/bltinmodule.c, `zip_next`). Together they let
nn.LSTM/GRU/RNN's forward (`_weights_have_changed` zips its weight refs strictly and calls
each) compile into one graph."""

import weakref

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]


def _run(fn, *args):
    """(result or exception) of fn(*args): the exception's type and text."""
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001 - compared with eager's
        return None, (type(e), str(e))


@pytest.mark.parametrize("backend", BACKENDS)
def test_strict_zip_of_equal_lengths_is_captured(backend):
    def f(x, names):
        out = []
        for n, k in zip(names, range(3), strict=True):
            out.append((n, x * k))
        return out

    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(2), ["a", "b", "c"])
    want = f(torch.ones(2), ["a", "b", "c"])
    assert [n for n, _ in got] == [n for n, _ in want]
    torch.testing.assert_close([t for _, t in got], [t for _, t in want])
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, dict(c)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("lengths", [(2, 3), (3, 2), (3, 3, 2), (3, 4, 3), (0, 1)])
def test_strict_zip_of_unequal_lengths_raises_cpythons_error(backend, lengths):
    # Uncaught: the same ValueError as eager. Caught in the frame: the handler runs in the trace
    # and sees the items the zip had already given.
    def uncaught(x, *seqs):
        return [x * sum(t) for t in zip(*seqs, strict=True)]

    def caught(x, *seqs):
        got = []
        try:
            for t in zip(*seqs, strict=True):
                got.append(sum(t))
        except ValueError as e:
            return x * len(got), str(e)
        return x, "no error"

    seqs = [list(range(n)) for n in lengths]
    for fn in (uncaught, caught):
        dynamo.reset()
        got, got_exc = _run(dynamo.optimize(backend)(fn), torch.ones(2), *seqs)
        want, want_exc = _run(fn, torch.ones(2), *seqs)
        assert got_exc == want_exc
        if fn is caught:
            assert got_exc is None and got[1] == want[1] and "zip() argument" in want[1]
            torch.testing.assert_close(got[0], want[0])
            assert dynamo.counters()["graph_breaks"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_strict_zip_across_a_graph_break_stays_strict(backend):
    # The iterator outlives the first graph: it is made again (strict) for the resume function,
    # which must still raise at the end.
    def f(x, a, b):
        it = zip(a, b, strict=True)
        first = next(it)
        print("between")  # graph break
        return x * first[0], list(it)

    for b in ([1, 2, 3], [1, 2]):
        dynamo.reset()
        got = _run(dynamo.optimize(backend)(f), torch.ones(2), [1, 2, 3], list(b))
        want = _run(f, torch.ones(2), [1, 2, 3], list(b))
        assert got[1] == want[1]
        if want[1] is None:
            torch.testing.assert_close(got[0][0], want[0][0])
            assert got[0][1] == want[0][1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_calling_a_weak_reference_is_traced_and_guarded(backend):
    def f(x, ref):
        t = ref()
        if t is None:
            return x - 1
        return x * t

    opt = dynamo.optimize(backend)(f)
    dynamo.reset()
    w = torch.nn.Parameter(torch.full((2,), 3.0))
    r = weakref.ref(w)
    torch.testing.assert_close(opt(torch.ones(2), r), f(torch.ones(2), r))
    assert dynamo.counters()["graph_breaks"] == 0
    # Another referent of the same shape: the guard reads it through the call, no recompile.
    w2 = torch.nn.Parameter(torch.full((2,), 5.0))
    r2 = weakref.ref(w2)
    torch.testing.assert_close(opt(torch.ones(2), r2), torch.full((2,), 5.0))
    assert dynamo.counters()["recompiles"] == 0
    # A dead reference gives None: the guard fails and the None branch is compiled.
    del w2
    torch.testing.assert_close(opt(torch.ones(2), r2), torch.zeros(2))
    assert dynamo.counters()["recompiles"] == 1
    assert dynamo.counters()["graph_breaks"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_weak_reference_to_a_plain_tensor_runs_in_python(backend):
    # A plain tensor's life may depend on the frame (a local the code deletes): the call is a
    # graph break, so Python answers it when eager would (test_resume_lifetimes covers frees).
    def f(x, ref):
        t = ref()
        return x * (0 if t is None else t)

    w = torch.full((2,), 3.0)
    r = weakref.ref(w)
    dynamo.reset()
    torch.testing.assert_close(dynamo.optimize(backend)(f)(torch.ones(2), r), w)
    assert dynamo.counters()["graph_breaks"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_weak_reference_subclass_is_not_called_in_the_trace(backend):
    calls = []

    class Ref(weakref.ref):
        def __call__(self):
            calls.append(1)
            return super().__call__()

    def f(x, ref):
        return x * ref()

    w = torch.nn.Parameter(torch.full((2,), 2.0))
    r = Ref(w)
    dynamo.reset()
    torch.testing.assert_close(dynamo.optimize(backend)(f)(torch.ones(2), r), w)
    assert calls == [1]  # once, by Python, as eager does


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN])
def test_recurrent_modules_compile_to_one_graph(backend, cls):
    torch.manual_seed(0)
    m = cls(4, 6, num_layers=2, batch_first=True)
    x = torch.randn(3, 5, 4)
    opt = dynamo.optimize(backend)(m)
    dynamo.reset()
    with torch.no_grad():
        torch.testing.assert_close(opt(x), m(x))
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, dict(c)
    # A replaced weight (what torch.func.functional_call does) is seen: the flat weights are
    # rebuilt as in eager.
    m.weight_hh_l0 = torch.nn.Parameter(torch.randn_like(m.weight_hh_l0))
    with torch.no_grad():
        torch.testing.assert_close(opt(x), m(x))
    # Training: gradients equal eager's.
    opt(x)[0].sum().backward()
    got = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    m(x)[0].sum().backward()
    torch.testing.assert_close(got, [p.grad for p in m.parameters()])
