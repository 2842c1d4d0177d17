"""Generators the frame makes and drops unfinished (Note [dropped generators] in
src/symbolic/convert_frame.rs): CPython closes them when the frame lets go, running their
`finally` blocks and `with` exits. Compiled code must show the same effects (breaker3 finding
05); a generator dropped outside any such block is still traced into the graph."""

import contextlib

import pytest
import torch

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]


def gen_finally(x, log):
    try:
        yield x + 1
        yield x + 2
        yield x + 3
    finally:
        log.append("closed")


@contextlib.contextmanager
def ctx(log):
    try:
        yield
    finally:
        log.append("exit")


def gen_with(x, log):
    with ctx(log):
        yield x * 2
        yield x * 3


def gen_plain(x):
    yield x + 1
    yield x + 2
    yield x + 3


def next_of_a_fresh_generator(x, log):
    return next(gen_finally(x, log)) * 2


def zip_stops_early(x, log):
    out = []
    for v, k in zip(gen_finally(x, log), range(2)):
        out.append(v * k)
    return out


def loop_breaks(x, log):
    total = x
    for v in gen_with(x, log):
        total = total + v
        break
    log.append("after")
    return total


def two_steps_then_dropped(x, log):
    g = gen_finally(x, log)
    a = next(g)
    b = next(g)
    return a + b


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [next_of_a_fresh_generator, zip_stops_early, loop_breaks, two_steps_then_dropped])
def test_a_dropped_generator_runs_its_finally(backend, fn):
    want_log, got_log = [], []
    want = fn(torch.ones(2), want_log)
    dynamo.reset()
    got = dynamo.optimize(backend)(fn)(torch.ones(2), got_log)
    torch.testing.assert_close(got, want)
    assert got_log == want_log and ("closed" in want_log or "exit" in want_log), (got_log, want_log)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_generator_dropped_outside_any_block_is_traced(backend):
    def fn(x):
        return next(gen_plain(x)) * 2, [v for v, _ in zip(gen_plain(x), range(2))]

    dynamo.reset()
    got = dynamo.optimize(backend)(fn)(torch.ones(2))
    torch.testing.assert_close(got, fn(torch.ones(2)))
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["eager_fallbacks"] == 0 and c["graph_breaks"] == 0, dict(c)


def gen_except(x):
    i = 0
    try:
        while True:
            yield x + i
            i += 1
    except IndexError:  # does not match the GeneratorExit close() throws in
        return


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_generator_dropped_inside_an_except_clause_is_traced(backend):
    # The shape of `Sequence.__iter__` in `_collections_abc`: closing it runs no code.
    def fn(x):
        return next(gen_except(x)) * 2, [v for v, _ in zip(gen_except(x), range(3))]

    dynamo.reset()
    got = dynamo.optimize(backend)(fn)(torch.ones(2))
    torch.testing.assert_close(got, fn(torch.ones(2)))
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["eager_fallbacks"] == 0 and c["graph_breaks"] == 0, dict(c)


def gen_closing(x, log):
    try:
        yield x * 2
        yield x * 3
    finally:
        log.append("closed")


@dynamo.disable
def _make_untraced(x, log):
    return gen_closing(x, log)


def loop_over_an_untraced_generator_breaks(x, log):
    total = x
    for v in _make_untraced(x, log):
        total = total + v
        log.append("body")
        break
    log.append("after")
    return total


def loop_over_an_untraced_generator_raises(x, log):
    total = x
    try:
        for v in _make_untraced(x, log):
            total = total + v
            raise KeyError("k")
    except KeyError:
        log.append("handler")
    return total


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [loop_over_an_untraced_generator_breaks, loop_over_an_untraced_generator_raises])
def test_a_loop_run_by_the_driver_drops_its_iterator_where_the_loop_ends(backend, fn):
    """A `for` over an iterator the trace cannot step runs in `dynamo._loops.LoopDriver` (on
    3.12 and later); leaving it by `break` let the driver hold the generator while the code
    after the loop ran, so its `finally` ran after "after" instead of at the `break`."""
    want_log, got_log = [], []
    want = fn(torch.ones(2), want_log)
    dynamo.reset()
    got = dynamo.optimize(backend)(fn)(torch.ones(2), got_log)
    torch.testing.assert_close(got, want)
    assert got_log == want_log
