"""What calling a module depends on beyond the module object is guarded: the class's `forward`
(patched after compiling: `mock.patch.object(Attention, "forward", ...)`) and nn.Module's global
hook registries (a hook registered after compiling runs); the `optimize(b)(module)` wrapper runs
a global hook once, as eager does."""

from unittest import mock

import torch
import torch.nn as nn

import dynamo


class Attention(nn.Module):
    def forward(self, x):
        return x + 1


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attention()

    def forward(self, x):
        return self.attn(x) * 2


def patched(self, x):
    return x * 100


def test_forward_patched_on_the_class_after_compiling_is_seen():
    model = Block()
    fast = dynamo.optimize("eager")(model)
    x = torch.ones(1)
    assert fast(x).item() == 4.0
    with mock.patch.object(Attention, "forward", patched):
        assert fast(x).item() == model(x).item() == 200.0
    assert fast(x).item() == 4.0
    c = dynamo.counters()
    assert c["graph_breaks"] == 0 and c["recompiles"] == 1


def test_global_hook_registered_after_compiling_runs():
    m = nn.Linear(2, 2)

    def fn(x):
        return m(x) + 1

    cf = dynamo.optimize("eager")(fn)
    x = torch.ones(1, 2)
    cf(x)
    calls = []
    h = nn.modules.module.register_module_forward_hook(lambda mod, inp, out: (calls.append(type(mod).__name__), out * 10)[1])
    try:
        e = fn(x)
        assert calls == ["Linear"]
        calls.clear()
        c = cf(x)
        assert calls == ["Linear"]
    finally:
        h.remove()
    torch.testing.assert_close(c, e)
    torch.testing.assert_close(cf(x), fn(x))


def test_module_wrapper_runs_a_global_hook_once():
    m = nn.Linear(2, 2)
    x = torch.ones(1, 2)
    calls = []
    h = nn.modules.module.register_module_forward_hook(lambda mod, inp, out: (calls.append(type(mod).__name__), out * 10)[1])
    try:
        cm = dynamo.optimize("eager")(m)
        e = m(x)
        assert calls == ["Linear"]
        calls.clear()
        c = cm(x)
        assert calls == ["Linear"]
    finally:
        h.remove()
    torch.testing.assert_close(c, e)
