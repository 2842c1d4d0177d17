"""User iterators (Note [user iterators] in src/symbolic/variables/iter.rs): an object whose
class's `__iter__` returns an object with a Python `__next__` (itself, or a separate iterator
class) is stepped by calling that `__next__` in the trace; a StopIteration it raises ends a
`for` loop, `list()`, `sum()`, `enumerate()`, and gives `next(o, default)` its default. Before,
such a loop was a graph break and ran in Python."""

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]


class Counter:
    def __init__(self, n):
        self.i = 0
        self.n = n

    def __iter__(self):
        return self

    def __next__(self):
        self.i += 1
        if self.i > self.n:
            raise StopIteration
        return self.i


class Doubled:
    """`__next__` delegates to `next()` of an inner iterator (its StopIteration ends the step)."""

    def __init__(self, xs):
        self.it = iter(xs)

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.it) * 2


class Pairs:
    """`__iter__` returns a separate iterator object."""

    def __init__(self, xs):
        self.xs = xs

    def __iter__(self):
        return PairIterator(self.xs)


class PairIterator:
    def __init__(self, xs):
        self.xs = xs
        self.k = 0

    def __next__(self):
        if self.k >= len(self.xs) - 1:
            raise StopIteration()
        self.k += 1
        return self.xs[self.k - 1], self.xs[self.k]


def _same(a, b):
    assert type(a) is type(b)
    if isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, (Counter, Doubled)):
        assert vars(a).keys() == vars(b).keys()
    else:
        assert a == b


def _compare(fn, backend, breaks=0):
    want = fn(torch.ones(3))
    dynamo.reset()
    opt = dynamo.optimize(backend)(fn)
    for _ in range(2):
        _same(opt(torch.ones(3)), want)
    c = dynamo.counters()
    assert (c["graph_breaks"], c["eager_fallbacks"]) == (breaks, 0)
    assert c["graphs"] >= 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_for_loop_over_a_self_iterator(backend):
    def f(x):
        for v in Counter(3):
            x = x + v
        return x

    _compare(f, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_consumers_of_a_delegating_iterator(backend):
    def f(x):
        return x + sum(Doubled([1, 2, 3])), list(Doubled((4,))), list(enumerate(Counter(2)))

    _compare(f, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_iter_returning_another_iterator_object(backend):
    def f(x):
        return [x * a + b for a, b in Pairs([1, 2, 5])]

    _compare(f, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_iter_and_next_builtins(backend):
    def f(x):
        it = Counter(2)
        steps = (iter(it) is it, type(iter(it)).__name__, next(it), next(it), next(it, "done"), next(it, "again"))
        return x + 1, steps, it.i

    _compare(f, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_out_then_drain_the_rest(backend):
    def f(x):
        it = Counter(5)
        for v in it:
            if v == 2:
                break
        return x * v, list(it)

    _compare(f, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_stop_iteration_caught_in_the_frame(backend):
    def f(x):
        it = Counter(0)
        try:
            next(it)
        except StopIteration as e:
            return x - 1, e.value
        return x

    _compare(f, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_iterator_from_outside_is_advanced_for_real(backend):
    it = Counter(3)

    def f(x):
        for v in it:
            x = x * (v + 1)
        return x

    want = f(torch.ones(2))
    assert it.i == 4
    it.i = 0
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(2))
    torch.testing.assert_close(got, want)
    assert it.i == 4
    assert dynamo.counters()["graph_breaks"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_graph_break_inside_the_loop(backend):
    def f(x):
        it = Counter(3)
        total = x
        for v in it:
            total = total + v
            if v == 2:
                dynamo.graph_break()
        return total, it.i

    want = f(torch.ones(3))
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(3))
    _same(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_partly_stepped_iterator_is_returned(backend):
    def f(x):
        it = Counter(3)
        next(it)
        return x + 1, it

    want = f(torch.ones(3))
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(3))
    torch.testing.assert_close(got[0], want[0])
    assert type(got[1]) is Counter and list(got[1]) == list(want[1]) == [2, 3]
    assert dynamo.counters()["graph_breaks"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_error_in_next_reaches_the_caller(backend):
    class Bad:
        def __iter__(self):
            return self

        def __next__(self):
            raise ValueError("bad step")

    def f(x):
        for v in Bad():
            x = x + v
        return x

    with pytest.raises(ValueError, match="bad step"):
        f(torch.ones(2))
    dynamo.reset()
    with pytest.raises(ValueError, match="bad step"):
        dynamo.optimize(backend)(f)(torch.ones(2))
