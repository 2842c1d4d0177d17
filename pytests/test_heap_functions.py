"""Note [heap functions] (python/dynamo/_polyfills.py): `heapq`'s C primitives run in the trace
as Python written comparison for comparison after Modules/_heapqmodule.c, and `nlargest` /
`nsmallest` run as `heapq`'s own Python over them. Before, the primitives were graph breaks and
`nlargest`/`nsmallest` were replaced by `sorted(...)[:n]`, which differs from CPython when the
items have no total order (NaN) and in the number of comparisons a user `__lt__` sees."""

import heapq
import random

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]

NAN = float("nan")


def _compare(fn, backend, *args):
    want = fn(torch.ones(2), *args)
    dynamo.reset()
    got = dynamo.optimize(backend)(fn)(torch.ones(2), *args)
    torch.testing.assert_close(got[0], want[0])
    assert repr(got[1:]) == repr(want[1:])
    c = dynamo.counters()
    assert (c["graph_breaks"], c["eager_fallbacks"]) == (0, 0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("items", [[1.0, NAN, 3.0, 2.0, 0.5], [3.0, 1.0, NAN, 2.0, 5.0, 0.1], [4, 1, 7, 3, 9, 2, 8]])
def test_nlargest_and_nsmallest_with_and_without_a_total_order(backend, items):
    def f(x, items):
        return x + 1, heapq.nlargest(2, items), heapq.nsmallest(3, items), heapq.nlargest(2, items, key=lambda v: -v)

    _compare(f, backend, items)


@pytest.mark.parametrize("backend", BACKENDS)
def test_primitives_on_a_list_built_in_the_frame(backend):
    def f(x, h):
        h = list(h)
        heapq.heapify(h)
        heapq.heappush(h, 7)
        a = heapq.heappop(h)
        b = heapq.heapreplace(h, 30)
        c = heapq.heappushpop(h, 1)
        d = heapq.heappushpop(h, 99)
        return x * a, h, (b, c, d)

    _compare(f, backend, random.Random(3).choices(range(50), k=20))


@pytest.mark.parametrize("backend", BACKENDS)
def test_comparisons_a_user_type_sees(backend):
    class Key:
        def __init__(self, v, log):
            self.v, self.log = v, log

        def __lt__(self, other):
            self.log.append((self.v, other.v))
            return self.v < other.v

    def f(x, values):
        log = []
        ks = [Key(v, log) for v in values]
        top = [k.v for k in heapq.nlargest(2, ks)]
        low = [k.v for k in heapq.nsmallest(2, ks)]
        return x - 1, top, low, log

    _compare(f, backend, [5, 3, 9, 1, 7, 2, 8])


@pytest.mark.parametrize("backend", BACKENDS)
def test_errors_as_the_c_functions_raise_them(backend):
    def f(x):
        out = []
        for call in (lambda: heapq.heappop([]), lambda: heapq.heapreplace([], 1), lambda: heapq.heappush((), 1), lambda: heapq.heapify(None)):
            try:
                call()
            except (IndexError, TypeError) as e:
                out.append((type(e).__name__, str(e)))
        return x + 2, out, heapq.heappushpop([], 5)

    _compare(f, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_heap_passed_in_is_mutated_as_in_eager(backend):
    def f(x, h):
        heapq.heappush(h, 0)
        return x * heapq.heappop(h), h

    want_h, got_h = [3, 5, 4], [3, 5, 4]
    want = f(torch.ones(2), want_h)
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(2), got_h)
    torch.testing.assert_close(got[0], want[0])
    assert got_h == want_h and got[1] is got_h
