"""Instances of `types.ModuleType` subclasses are modules to the tracer: `torch.backends` is a
`GenericModule` (its flags are properties), and `nn.TransformerEncoderLayer.forward` reads
`torch.backends.mha.get_fastpath_enabled()` through it."""

import types

import torch

import dynamo


class FlagModule(types.ModuleType):
    """A module whose `scale` is a property, like torch.backends' flags."""

    factor = 3.0

    @property
    def scale(self):
        return FlagModule.factor


flags = FlagModule("flags")
flags.offset = 1.0


def uses_backends(x):
    if torch.backends.mha.get_fastpath_enabled():
        return x * 2 + flags.scale
    return x - flags.offset


def test_module_subclass_attributes_are_traced_and_guarded():
    x = torch.randn(4, 5)
    dynamo.reset()
    want = uses_backends(x)
    with dynamo.optimize("eager"):
        got = uses_backends(x)
    torch.testing.assert_close(got, want)
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, c
    # The property's value is guarded: changing it recompiles and gives eager's answer.
    FlagModule.factor = 5.0
    try:
        with dynamo.optimize("eager"):
            got = uses_backends(x)
        torch.testing.assert_close(got, uses_backends(x))
    finally:
        FlagModule.factor = 3.0
