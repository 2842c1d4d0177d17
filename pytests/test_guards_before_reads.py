"""Note [guards before reads] (src/guards/mod.rs): a cache entry checks each guard as soon as the
values it reads are fetched, so a guard on an argument's type fails before any read through the
argument runs code of another type. Before, every read of every entry ran first: calling with a
defaultdict after an entry for a plain dict inserted the key (`__missing__`), a property ran
three times a call, and an entry for a list iterator drained a `zip` passed later (an infinite
`enumerate(map(...))` hung)."""

import collections
import itertools

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_defaultdict_after_a_plain_dict_entry(backend):
    def f(x, d):
        return x + d.get("a", 0)

    dynamo.reset()
    opt = dynamo.optimize(backend)(f)
    opt(torch.ones(1), {"a": 1})
    eager_d, d = collections.defaultdict(int), collections.defaultdict(int)
    want = f(torch.ones(1), eager_d)
    got = opt(torch.ones(1), d)
    torch.testing.assert_close(got, want)
    assert dict(d) == dict(eager_d) == {}


@pytest.mark.parametrize("backend", BACKENDS)
def test_property_runs_once_per_call_with_two_entries(backend):
    class Plain:
        def __init__(self):
            self.v = 1

    class Counted:
        def __init__(self):
            self.reads = 0

        @property
        def v(self):
            self.reads += 1
            return 1

    def f(x, o):
        return x + o.v

    dynamo.reset()
    opt = dynamo.optimize(backend)(f)
    opt(torch.ones(1), Plain())
    opt(torch.ones(1), Counted())
    eager_o, o = Counted(), Counted()
    f(torch.ones(1), eager_o)
    opt(torch.ones(1), o)
    assert o.reads == eager_o.reads == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_getitem_override_runs_once_per_call(backend):
    class Counting(dict):
        reads = 0

        def __getitem__(self, k):
            type(self).reads += 1
            return dict.__getitem__(self, k)

    def f(x, d):
        return x + d["a"]

    dynamo.reset()
    opt = dynamo.optimize(backend)(f)
    opt(torch.ones(1), {"a": 1})
    d = Counting(a=2)
    for _ in range(3):
        Counting.reads = 0
        torch.testing.assert_close(opt(torch.ones(1), d), torch.full((1,), 3.0))
        assert Counting.reads == 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make", ["zip", "enumerate", "islice"])
def test_iterator_of_another_type_is_not_consumed(backend, make):
    def f(x, it):
        return x + 1, next(it)

    def fresh():
        if make == "zip":
            return zip("abc", "xyz")
        if make == "enumerate":
            return enumerate("abc")
        return itertools.islice("abcdef", 1, None)

    dynamo.reset()
    opt = dynamo.optimize(backend)(f)
    opt(torch.ones(2), iter([10, 20, 30]))
    want_it, it = fresh(), fresh()
    want = f(torch.ones(2), want_it)
    got = opt(torch.ones(2), it)
    assert got[1] == want[1]
    assert list(it) == list(want_it)


@pytest.mark.parametrize("backend", BACKENDS)
def test_endless_iterator_is_not_drained(backend):
    pulled = []

    def noisy(c):
        pulled.append(c)
        if len(pulled) > 1000:
            raise RuntimeError("the guard drained the iterator")
        return c

    def f(x, it):
        out = []
        for v in it:
            out.append(v)
            if len(out) == 2:
                break
        return x + 1, out

    dynamo.reset()
    opt = dynamo.optimize(backend)(f)
    opt(torch.ones(2), iter([10, 20, 30]))
    got = opt(torch.ones(2), enumerate(map(noisy, itertools.count())))
    assert got[1] == [(0, 0), (1, 1)]
    assert pulled == [0, 1]
