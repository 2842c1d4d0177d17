"""Lists a frame only appends to (Note [append-only lists] in src/symbolic/variables/lists.rs):
wrapped without a length guard or item guards, so an evaluation loop that collects one result
per batch compiles its body once, not once per batch (breaker2 finding 09). The contents, order
and identity of the list are eager's; a frame that reads the list still guards on it."""

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]
DATA = TensorDataset(torch.arange(40.0).view(20, 2), torch.arange(20))
LIN = torch.nn.Linear(2, 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_evaluation_loop_compiles_its_body_once(backend):
    def evaluate(dl):
        outs = []
        for x, y in dl:
            outs.append(LIN(x).sum() * y.sum())
        return torch.stack(outs)

    dynamo.reset()
    got = dynamo.optimize(backend)(evaluate)(DataLoader(DATA, batch_size=2))
    want = evaluate(DataLoader(DATA, batch_size=2))
    torch.testing.assert_close(got, want)
    c = dynamo.counters()
    assert c["recompiles"] <= 1 and c["cache_limit_hits"] == 0, dict(c)
    # Nine of ten batches ran compiled code: the cache was hit.
    assert c["cache_hits"] >= 9, dict(c)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loop_appending_python_floats_compiles_its_body_once(backend):
    def evaluate(dl):
        losses = []
        for x, y in dl:
            losses.append(LIN(x).sum().item())
        return losses

    dynamo.reset()
    got = dynamo.optimize(backend)(evaluate)(DataLoader(DATA, batch_size=2))
    want = evaluate(DataLoader(DATA, batch_size=2))
    assert type(got) is list and got == pytest.approx(want)
    c = dynamo.counters()
    assert c["recompiles"] <= 2 and c["cache_limit_hits"] == 0, dict(c)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_list_argument_only_appended_to_is_not_guarded_on_its_length(backend):
    def f(acc, x):
        acc.append(x * 2)
        acc.append(x.sum())
        return acc

    opt = dynamo.optimize(backend)(f)
    dynamo.reset()
    for n in range(5):
        start = [torch.tensor(float(i)) for i in range(n)] + ["other"]
        mine, theirs = list(start), list(start)
        x = torch.arange(3.0) + n
        out = opt(mine, x)
        f(theirs, x)
        assert out is mine and len(mine) == len(theirs) == n + 3
        assert mine[: n + 1] == start  # the items it had are untouched, in place
        for a, b in zip(mine[n + 1:], theirs[n + 1:]):
            torch.testing.assert_close(a, b)
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["recompiles"] == 0, dict(c)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_list_the_frame_reads_is_still_guarded(backend):
    def f(acc, x):
        acc.append(x)
        return x * len(acc)

    opt = dynamo.optimize(backend)(f)
    dynamo.reset()
    for n in range(3):
        mine, theirs = [0] * n, [0] * n
        torch.testing.assert_close(opt(mine, torch.ones(2)), f(theirs, torch.ones(2)))
        assert len(mine) == len(theirs)
    assert dynamo.counters()["recompiles"] == 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("order", ["appended_first", "read_first"])
def test_an_append_only_list_that_is_also_another_argument(backend, order):
    if order == "appended_first":

        def f(a, b, x):
            a.append(x + 1)
            return b[-1] * 2, len(b)

    else:

        def f(a, b, x):
            n = len(b)
            a.append(x + 1)
            return b[-1] * 2, n

    dynamo.reset()
    mine, theirs = [torch.zeros(2)], [torch.zeros(2)]
    got = dynamo.optimize(backend)(f)(mine, mine, torch.ones(2))
    want = f(theirs, theirs, torch.ones(2))
    torch.testing.assert_close(got, want)
    assert len(mine) == len(theirs) == 2
    torch.testing.assert_close(mine, theirs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_iterator_over_an_append_only_list_sees_its_items_and_appends(backend):
    # The list is wrapped first as append-only; the iterator reaches it again and reads it
    # live, as CPython's list iterator does (it yields what was appended before it got there).
    def f(acc, it, x):
        acc.append(x * 2)
        return list(it)

    def make():
        acc = [torch.zeros(2), torch.ones(2)]
        it = iter(acc)
        next(it)
        return acc, it

    dynamo.reset()
    acc_e, it_e = make()
    want = f(acc_e, it_e, torch.ones(2))
    acc_c, it_c = make()
    got = dynamo.optimize(backend)(f)(acc_c, it_c, torch.ones(2))
    assert len(got) == len(want) == 2
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(acc_c, acc_e)
    assert list(it_c) == list(it_e) == []
    assert dynamo.counters()["graph_breaks"] == 0


ACTS = []


def _collect(module, args, out):
    ACTS.append(out.detach())


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_hook_appending_to_a_global_list_compiles_once(backend):
    # A forward hook collecting activations in a module-level list: the hook names the list
    # only through `ACTS.append`, so its length is not guarded and each call reuses the graph.
    m = torch.nn.Linear(3, 3)
    handle = m.register_forward_hook(_collect)
    try:
        opt = dynamo.optimize(backend)(lambda x: m(x).relu())
        dynamo.reset()
        ACTS.clear()
        xs = [torch.randn(2, 3) for _ in range(12)]
        got = [opt(x) for x in xs]
        got_acts = list(ACTS)
        ACTS.clear()
        want = [m(x).relu() for x in xs]
        assert len(got_acts) == len(ACTS) == 12
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(got_acts, ACTS)
        c = dynamo.counters()
        assert c["graphs"] == 1 and c["recompiles"] == 0 and c["graph_breaks"] == 0, dict(c)
    finally:
        handle.remove()
        ACTS.clear()


LOG = []


def _log_then_read(x):
    LOG.append(x.sum())
    return len(LOG)


def _log_only(x):
    LOG.append(x * 2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("order", ["appended_first", "read_first"])
def test_a_global_list_read_by_another_function_is_still_guarded(backend, order):
    # One helper only appends, the other reads the length: the read wraps the list's items
    # (a length guard), after or before the append-only site, and sees every append.
    if order == "appended_first":

        def f(x):
            _log_only(x)
            return x * _log_then_read(x)

    else:

        def f(x):
            n = _log_then_read(x)
            _log_only(x)
            return x * n

    opt = dynamo.optimize(backend)(f)
    dynamo.reset()
    LOG.clear()
    got = [opt(torch.ones(2)) for _ in range(3)]
    got_log = list(LOG)
    LOG.clear()
    want = [f(torch.ones(2)) for _ in range(3)]
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_log, LOG)
    LOG.clear()
    assert dynamo.counters()["recompiles"] == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_rebound_global_list_gets_the_appends(backend):
    # The replay appends to whatever list the global names when the graph runs.
    global LOG

    def f(x):
        LOG.append(x + 1)
        return x * 2

    opt = dynamo.optimize(backend)(f)
    dynamo.reset()
    old = LOG
    try:
        opt(torch.ones(2))
        LOG = []
        opt(torch.zeros(2))
        assert len(old) == 1 and len(LOG) == 1
        torch.testing.assert_close(LOG[0], torch.ones(2))
        assert dynamo.counters()["recompiles"] == 0
    finally:
        LOG = old
        LOG.clear()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_closure_list_appended_before_a_break_compiles_once(backend):
    """A free variable the frame only appends to (`LOAD_DEREF; LOAD_METHOD append`) is not
    length-guarded, in the frame or in its resume function (which receives the cell but never
    reads it): before, every call recompiled both until the cache limit."""

    def make():
        losses = []

        def step(x):
            loss = LIN(x).sum()
            losses.append(loss.detach())
            print("step")  # a graph break after the append
            return loss * 2

        return step, losses

    eager_step, eager_losses = make()
    step, losses = make()
    compiled = dynamo.optimize(backend)(step)
    dynamo.reset()
    xs = [torch.randn(2, 2) for _ in range(5)]
    for x in xs:
        torch.testing.assert_close(compiled(x), eager_step(x))
    assert len(losses) == len(eager_losses) == 5
    for a, b in zip(losses, eager_losses):
        torch.testing.assert_close(a, b)
    c = dynamo.counters()
    assert c["recompiles"] == 0 and c["graph_breaks"] >= 1, dict(c)
