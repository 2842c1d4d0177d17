"""`opt.step()` inside a compiled function when an LR scheduler wraps the optimizer's `step`.

torch's schedulers replace `optimizer.step` with a counting closure over a weak reference to the
optimizer (torch/optim/lr_scheduler.py). Graph ops are run on fake tensors while tracing, so a
torch function that closes over live state must not be treated as a graph op: it would run the
real optimizer step at trace time on fake values (no update of the parameters, fake tensors in
`opt.state`). These tests compare the parameters and optimizer state with eager exactly.
"""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor

import dynamo

OPTIMIZERS = [
    (torch.optim.SGD, {"momentum": 0.9}),
    (torch.optim.Adam, {}),
    (torch.optim.AdamW, {}),
    (torch.optim.RMSprop, {}),
]
SCHEDULERS = [
    lambda o: torch.optim.lr_scheduler.StepLR(o, 100),
    lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 10),
]


def train(backend, opt_cls, kwargs, make_sched, steps=3):
    """Parameters and optimizer state after `steps` compiled (or eager, backend None) steps."""
    w = torch.nn.Parameter(torch.ones(3))
    opt = opt_cls([w], lr=0.1, **kwargs)
    make_sched(opt)

    def step(x):
        opt.zero_grad()
        loss = (w * x).sum()
        loss.backward()
        opt.step()
        return loss.detach()

    dynamo.reset()
    fn = step if backend is None else dynamo.optimize(backend)(step)
    for _ in range(steps):
        fn(torch.ones(3))
    return w.detach().clone(), dict(opt.state[w])


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("opt_cls,kwargs", OPTIMIZERS, ids=[o.__name__ for o, _ in OPTIMIZERS])
@pytest.mark.parametrize("make_sched", SCHEDULERS, ids=["StepLR", "CosineAnnealingLR"])
def test_step_under_scheduler_matches_eager(backend, opt_cls, kwargs, make_sched):
    want_w, want_state = train(None, opt_cls, kwargs, make_sched)
    got_w, got_state = train(backend, opt_cls, kwargs, make_sched)
    assert torch.equal(got_w, want_w)
    assert got_state.keys() == want_state.keys()
    for k, v in got_state.items():
        assert not isinstance(v, FakeTensor), f"fake tensor leaked into opt.state[w][{k!r}]"
        assert torch.equal(v, want_state[k]), k


def test_torch_closure_over_live_state_is_not_run_at_trace_time():
    """The smallest form: a torch-module closure over an object, called with no arguments."""
    calls = []

    def make():
        box = [calls]

        def bump():
            box[0].append(1)

        bump.__module__ = "torch.optim.optimizer"  # what functools.wraps copies in the scheduler
        return bump

    bump = make()

    def f(x):
        y = x + 1
        bump()
        return y

    dynamo.reset()
    g = dynamo.optimize("eager")(f)
    for _ in range(2):
        assert torch.equal(g(torch.ones(2)), torch.full((2,), 2.0))
    assert calls == [1, 1]  # once per call, as eager: never at trace time only
