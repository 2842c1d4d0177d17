"""The recompile limit counts the entries compiled for the same identity-guarded arguments, as
torch's cache_size.py does (Note [recompile limit per object] in src/eval_frame/hook.rs): a
module method whose trace uses its module's identity compiles once per instance, and a deep
model no longer runs its last layers eagerly after the eighth. A module method that does not
is compiled once for all instances (Note [modules guarded by type] in src/symbolic/builder.rs)."""

import pytest
import torch

import dynamo


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x).relu()
        print("", end="")  # a graph break inside every layer
        return h + x


class Deep(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer() for _ in range(n)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class CountingLayer(Layer):
    """A layer that writes to itself: its identity is pinned, one entry per instance."""

    def forward(self, x):
        self.seen = x.shape[0]
        h = self.fc(x).relu()
        print("", end="")  # a graph break inside every layer
        return h + x


def test_layer_instances_share_compiled_code():
    torch.manual_seed(0)
    model = Deep(12)
    x = torch.randn(2, 8)
    dynamo.reset()
    opt = dynamo.optimize("eager")(model)
    with torch.no_grad():
        torch.testing.assert_close(opt(x), model(x))
        torch.testing.assert_close(opt(x), model(x))
    c = dynamo.counters()
    # The model's frame, and one entry for each layer's frame and its resume function.
    assert c["compiles"] <= 5 and c["cache_limit_hits"] == 0, c


def test_every_pinned_layer_instance_is_compiled(recwarn):
    torch.manual_seed(0)
    model = Deep(12)
    for i, layer in enumerate(model.layers):
        layer.__class__ = CountingLayer
    x = torch.randn(2, 8)
    dynamo.reset()
    opt = dynamo.optimize("eager")(model)
    with torch.no_grad():
        torch.testing.assert_close(opt(x), model(x))
        c = dynamo.counters()
        assert c["cache_limit_hits"] == 0, c
        compiles = c["compiles"]
        assert compiles >= 12, c
        torch.testing.assert_close(opt(x), model(x))
    c = dynamo.counters()
    assert c["compiles"] == compiles, c  # the second call hits every layer's entry
    assert not [w for w in recwarn if "cache_size_limit" in str(w.message)]


class Scaled(torch.nn.Module):
    def forward(self, x, n):
        self.last = n  # a write to the module pins its identity
        return x * n


@pytest.mark.filterwarnings("ignore:dynamo. cache_size_limit:UserWarning")
def test_the_limit_is_per_object_and_the_accumulated_limit_is_per_code():
    a, b = Scaled(), Scaled()
    x = torch.ones(2)
    dynamo.reset()
    old = dynamo.config.cache_size_limit, dynamo.config.accumulated_cache_size_limit
    dynamo.config.cache_size_limit = 2
    try:
        fa = dynamo.optimize("eager", dynamic=False)(a.forward)
        fb = dynamo.optimize("eager", dynamic=False)(b.forward)
        for n in range(4):  # a: two compiles, then eager
            assert torch.equal(fa(x, n), x * n)
        assert dynamo.counters()["compiles"] == 2
        for n in range(2):  # b still compiles: its own two entries
            assert torch.equal(fb(x, n), x * n)
        assert dynamo.counters()["compiles"] == 4
        assert torch.equal(fa(x, 1), x)  # a's entries are still used
        assert dynamo.counters()["cache_hits"] >= 1
        dynamo.reset()
        dynamo.config.accumulated_cache_size_limit = 3
        scaled = [Scaled() for _ in range(5)]
        for m in scaled:
            f = dynamo.optimize("eager", dynamic=False)(m.forward)
            assert torch.equal(f(x, 2), x * 2)
        assert dynamo.counters()["compiles"] == 3
    finally:
        dynamo.config.cache_size_limit, dynamo.config.accumulated_cache_size_limit = old
    with pytest.raises(ValueError):
        dynamo.config.accumulated_cache_size_limit = -1
