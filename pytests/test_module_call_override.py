"""A module class whose Python `__call__` wraps `nn.Module.__call__` (transformers'
GradientCheckpointingLayer before 5.20: GPT-2's blocks) is traced through: the override is
inlined and its `super().__call__(...)` runs the module's `forward` (Note [module __call__
override] in src/symbolic/translator.rs). Before, each such call broke the graph and every block
was compiled as a frame of its own (one recompile per block, then eager)."""

import torch
import torch.nn as nn

import dynamo


class CheckpointLayer(nn.Module):
    gradient_checkpointing = False

    def __call__(self, *args, **kwargs):
        if self.gradient_checkpointing and self.training:
            raise RuntimeError("checkpointing is not exercised here")
        return super().__call__(*args, **kwargs)


class Block(CheckpointLayer):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x, scale=1.0):
        return self.lin(x).relu() * scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(4)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x, scale=0.5)
        return x


def test_python_call_override_is_inlined_into_one_graph():
    torch.manual_seed(0)
    net = Net()
    x = torch.randn(3, 8)
    dynamo.reset()
    want = net(x)
    got = dynamo.optimize("eager")(net)(x)
    torch.testing.assert_close(got, want)
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, c


def test_override_that_changes_the_result_is_honoured():
    class Doubling(nn.Module):
        def __call__(self, x):
            return super().__call__(x) * 2

        def forward(self, x):
            return x + 1

    m = Doubling()
    x = torch.randn(5)
    dynamo.reset()
    torch.testing.assert_close(dynamo.optimize("eager")(lambda x: m(x) - 1)(x), m(x) - 1)
    assert dynamo.counters()["graph_breaks"] == 0
