"""The type of a generator the trace runs (a generator function's or a generator expression's):
`types.GeneratorType`. The trace did not know it, so `isinstance(gen, Mapping)` (which
`Counter.update` asks) broke, and with the generator live across that break the whole frame ran
eagerly: `Counter(len(v) for v in lst)` compiled nothing (issue 7 audit B4)."""

import collections
import collections.abc
import types

import pytest
import torch

import dynamo


def counter_of_genexpr(x, lst):
    return x + 1, collections.Counter(len(v) for v in lst)


def counter_update(x, lst):
    c = collections.Counter()
    c.update(len(v) for v in lst)
    return x + 1, c


def gen_fn(lst):
    for v in lst:
        yield len(v)


def type_queries(x, lst):
    g = gen_fn(lst)
    e = (v for v in lst)
    return (x * 2, type(g).__name__, isinstance(g, types.GeneratorType), isinstance(e, collections.abc.Iterator),
            isinstance(g, collections.abc.Mapping), g.__class__ is types.GeneratorType, sum(g), list(e) == lst)


@pytest.mark.parametrize("fn", [counter_of_genexpr, counter_update, type_queries], ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_generator_type_known(fn, backend):
    lst = [[1], [1, 2], [3]]
    x = torch.ones(2)
    dynamo.reset()
    explained = dynamo.explain(fn)(x, lst)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    dynamo.reset()
    want = fn(x, lst)
    for _ in range(2):
        got = dynamo.optimize(backend)(fn)(x, lst)
        assert torch.equal(got[0], want[0])
        assert [(type(a), a) for a in got[1:]] == [(type(a), a) for a in want[1:]]
