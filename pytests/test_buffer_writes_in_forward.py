"""Note [buffer writes in forward] (src/symbolic/object_protocol.rs): `self.ema = self.ema * 0.9
+ ...` in `forward` sets a registered buffer to a tensor the graph computed. It broke the graph
(GB0005, "a parameter, buffer, submodule or tensor"; issue 7 deliverable 7, audit B5); it is now
replayed after the graph as nn.Module.__setattr__, later reads in the trace see it, and a read of
`_buffers` after it (state_dict, buffers()) breaks so that it runs after the replay."""

import copy

import pytest
import torch

import dynamo


class EMA(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("ema", torch.zeros(4))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))
        self.register_buffer("maybe", torch.ones(2))

    def forward(self, x):
        y = self.lin(x)
        self.ema = self.ema * 0.9 + y.mean(0).detach() * 0.1
        self.count = self.count + 1
        seen = self.maybe
        self.maybe = None
        return y - self.ema, self.ema.sum(), seen, self.maybe


class ReadsTable(EMA):
    def forward(self, x):
        r = super().forward(x)
        return r, sorted(self.state_dict().keys()), [b.sum() for b in self.buffers()]


def same(a, b):
    return str(a) == str(b)


@pytest.mark.parametrize("cls,graphs,breaks", [(EMA, 1, 0), (ReadsTable, 2, 1)], ids=["ema", "reads_table"])
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_buffer_written_in_forward(cls, graphs, breaks, backend):
    torch.manual_seed(0)
    eager_m = cls()
    probe = copy.deepcopy(eager_m)
    compiled_m = copy.deepcopy(eager_m)
    dynamo.reset()
    explained = dynamo.explain(probe)(torch.randn(3, 4))
    assert (explained.graph_count, explained.graph_break_count) == (graphs, breaks), explained.break_reasons
    dynamo.reset()
    compiled = dynamo.optimize(backend)(compiled_m)
    for _ in range(4):
        x = torch.randn(3, 4)
        assert same(eager_m(x), compiled(x))
        for name in ("ema", "count", "maybe"):
            want, got = getattr(eager_m, name), getattr(compiled_m, name)
            assert (want is None and got is None) or torch.equal(want, got)
            assert compiled_m._buffers[name] is got
    # The first call saw `maybe` as a tensor, the later ones as None: one recompile per frame.
    assert dynamo.utils.counters()["recompiles"] <= graphs
