"""Reads of nn.Module attributes by guards and transformed code (``dynamo._C.load_attr``, the
fast path of src/py/getattr.rs that answers ``module.weight`` from ``_parameters``/``_buffers``/
``_modules`` without running ``nn.Module.__getattr__``): every case gives eager's value, and a
changed attribute is seen by the guards."""

import pytest
import torch
import torch.nn as nn

import dynamo
from dynamo import _C


class Custom(nn.Module):
    """A module whose ``__getattr__`` answers names nn.Module does not know."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def __getattr__(self, name):
        if name == "scale":
            return 3.0
        return super().__getattr__(name)


class WithProperty(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_parameter("w", nn.Parameter(torch.ones(4)))

    @property
    def doubled(self):
        return self.w * 2


def test_load_attr_matches_getattr():
    lin = nn.Linear(4, 3)
    lin.register_buffer("buf", torch.zeros(2))
    lin.register_parameter("none_param", None)
    lin.plain = 5
    seq = nn.Sequential(lin)
    for obj, name in [(lin, "weight"), (lin, "bias"), (lin, "buf"), (lin, "none_param"), (lin, "plain"),
                      (lin, "training"), (lin, "in_features"), (seq, "0"), (Custom(), "scale"), (Custom(), "lin"),
                      (WithProperty(), "doubled"), (3, "real")]:
        got = _C.load_attr(obj, name)
        expected = getattr(obj, name)
        if isinstance(expected, torch.Tensor):
            torch.testing.assert_close(got, expected)
        else:
            assert got is expected or got == expected, name
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        _C.load_attr(lin, "missing")
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        _C.load_attr(Custom(), "missing")


def test_instance_dict_shadows_parameters():
    """A name in the instance ``__dict__`` wins over ``_parameters`` (generic lookup first)."""
    lin = nn.Linear(4, 4)
    other = torch.full((4, 4), 7.0)
    lin.__dict__["weight"] = other
    assert _C.load_attr(lin, "weight") is other


def test_replaced_parameter_is_seen():
    lin = nn.Linear(4, 4)
    x = torch.randn(2, 4)

    def f(x):
        return lin(x) * 2

    opt = dynamo.optimize("eager")(f)
    torch.testing.assert_close(opt(x), f(x))
    with torch.no_grad():
        lin.weight = nn.Parameter(torch.randn(8, 4))
        lin.bias = nn.Parameter(torch.randn(8))
    torch.testing.assert_close(opt(x), f(x))
    assert dynamo.counters()["recompiles"] == 1


def test_module_with_custom_getattr_and_property():
    m = Custom()
    p = WithProperty()
    x = torch.randn(2, 4)

    def f(x):
        return m.lin(x) * m.scale + p.doubled.sum()

    torch.testing.assert_close(dynamo.optimize("eager")(f)(x), f(x))


def test_optimized_module_hooks_still_run():
    """OptimizedModule.__call__'s fast path steps aside when the wrapper has a hook."""
    lin = nn.Linear(4, 4)
    opt = dynamo.optimize("eager")(lin)
    x = torch.randn(2, 4)
    torch.testing.assert_close(opt(x), lin(x))
    seen = []
    handle = opt.register_forward_hook(lambda mod, args, out: seen.append(out.shape))
    opt(x)
    handle.remove()
    opt(x)
    assert seen == [torch.Size([2, 4])]
    glob = nn.modules.module.register_module_forward_pre_hook(lambda mod, args: seen.append(type(mod).__name__))
    try:
        opt(x)
    finally:
        glob.remove()
    # Once, for the original module, as `lin(x)` runs it eagerly (torch.compile's wrapper also
    # runs it for itself; breaker finding 03b counts that as a wrong result).
    assert seen == [torch.Size([2, 4]), "Linear"]
