"""`dict(m)`, `d.update(m)`, `OrderedDict(m)` and `Counter(m)` of a mapping passed into the frame
(an OrderedDict, defaultdict or Counter, a user `Mapping`): CPython's `dict_update_arg` reads an
argument with a `keys` attribute through `keys()` and `m[key]`, anything else as pairs. The trace
read these as pairs, so an OrderedDict with the keys "zz" and "yy" became {"z": "z", "y": "y"}
and tuple keys (0, "a") were split into key and value, silently (issue 7 audit, F1)."""

import collections
import collections.abc

import pytest
import torch

import dynamo


class UserMapping(collections.abc.Mapping):
    def __init__(self, d):
        self.d = d

    def __getitem__(self, k):
        return self.d[k]

    def __iter__(self):
        return iter(self.d)

    def __len__(self):
        return len(self.d)


MAKERS = {
    "OrderedDict": collections.OrderedDict,
    "defaultdict": lambda kv: collections.defaultdict(int, kv),
    "Counter": lambda kv: collections.Counter(dict(kv)),
    "user_mapping": lambda kv: UserMapping(dict(kv)),
    "dict": dict,
}


def f(x, m):
    d = {}
    d.update(m)
    return x + 1, dict(m), d, collections.OrderedDict(m), collections.Counter(m), dict(m, extra=3)


def same(a, b):
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return type(a) is type(b) and a == b and list(a) == list(b)


@pytest.mark.parametrize("kind", sorted(MAKERS))
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_mapping_argument_read_as_a_mapping(kind, backend):
    graphs = []

    def count(gm, example_inputs):
        graphs.append(gm)
        return dynamo.lookup_backend(backend)(gm, example_inputs)

    dynamo.reset()
    g = dynamo.optimize(count)(f)
    x = torch.ones(2)
    for kv in ([("zz", 1), ("yy", 2)], [((0, "a"), 5), ((1, "b"), 6)], [("ab", 3)], [("zz", 1), ("yy", 2)]):
        m = MAKERS[kind](kv)
        want, got = f(x, m), g(x, m)
        assert all(same(a, b) for a, b in zip(want, got)), (kind, kv, want, got)
    assert len(graphs) >= 1
