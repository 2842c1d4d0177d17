"""Torch function and dispatch modes the user makes active (Note [user modes] in
src/eval_frame/hook.rs): while one is on, frames run as ordinary Python, so the mode sees
exactly eager's calls (breaker3 finding 10). torch's own DeviceContext (set_default_device,
`with torch.device(...)`) is not such a mode: frames under it are still compiled."""

import torch
from torch.utils.flop_counter import FlopCounterMode

import dynamo


class Logger(torch.overrides.TorchFunctionMode):
    def __init__(self, log):
        super().__init__()
        self.log = log

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.log.append(getattr(func, "__name__", "?"))
        return func(*args, **(kwargs or {}))


def f(x):
    return torch.sin(x) * 2


def test_a_function_mode_sees_eagers_calls():
    want = []
    with Logger(want):
        ref = f(torch.ones(2))
    dynamo.reset()
    opt = dynamo.optimize("inductor")(f)
    for _ in range(2):
        got = []
        with Logger(got):
            out = opt(torch.ones(2))
        assert got == want and torch.equal(out, ref)
    # Outside the mode the same function is compiled as usual.
    torch.testing.assert_close(opt(torch.ones(2)), ref)
    assert dynamo.counters()["graphs"] == 1


def test_a_dispatch_mode_counts_eagers_flops():
    lin = torch.nn.Linear(8, 8)

    def g(x):
        return torch.relu(lin(x)) @ lin.weight

    with FlopCounterMode(display=False) as m:
        g(torch.ones(4, 8))
    want = m.get_total_flops()
    dynamo.reset()
    opt = dynamo.optimize("inductor")(g)
    for _ in range(2):
        with FlopCounterMode(display=False) as m:
            opt(torch.ones(4, 8))
        assert m.get_total_flops() == want


def test_frames_under_torch_device_contexts_are_compiled():
    dynamo.reset()
    opt = dynamo.optimize("inductor")(lambda x: torch.ones(2) + x.cos())
    with torch.device("cpu"):
        out = opt(torch.zeros(2))
    torch.set_default_device("cpu")
    try:
        out2 = opt(torch.zeros(2))
    finally:
        torch.set_default_device(None)
    assert torch.equal(out, torch.full((2,), 2.0)) and torch.equal(out2, out)
    c = dynamo.counters()
    assert c["graphs"] >= 1 and c["eager_fallbacks"] == 0, dict(c)
