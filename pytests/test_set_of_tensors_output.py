"""A set holding tensors that outlives the graph (`return x + 1, {x, x * 2}`) is rebuilt after
the graph as `set((...))` of its members, where it broke with a reason that spoke of "modules
or functions" (issue 7 audit B3; deliverable 5: sets of tensors and ints come back with eager's
type). A tensor hashes by identity, so the rebuilt set's order follows the real tensors'
addresses as eager's does; the comparison is by members."""

import pytest
import torch

import dynamo


def returned(x):
    return x + 1, {x, x * 2}


def mixed_members(x):
    s = {x, 1, "a"}
    s.add(x * 3)
    return s, len(s), x in s


def canon(v, x):
    if isinstance(v, (set, frozenset)):
        tensors = sorted(m.tolist() for m in v if isinstance(m, torch.Tensor))
        others = sorted(repr(m) for m in v if not isinstance(m, torch.Tensor))
        return type(v).__name__, tensors, others, any(m is x for m in v)
    if isinstance(v, tuple):
        return tuple(canon(a, x) for a in v)
    if isinstance(v, torch.Tensor):
        return v.tolist()
    return repr(v)


@pytest.mark.parametrize("fn", [returned, mixed_members], ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_set_of_tensors_comes_back(fn, backend):
    x = torch.arange(3.0)
    dynamo.reset()
    explained = dynamo.explain(fn)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    dynamo.reset()
    want = canon(fn(x), x)
    for _ in range(2):
        assert canon(dynamo.optimize(backend)(fn)(x), x) == want
