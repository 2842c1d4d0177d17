"""An input the forward reads and then writes in place (a running mean updated after use) is
saved for the backward as it was read (Note [saved inputs the forward writes] in
src/autograd/runtime.rs): before, the backward recomputed `x - mean` from the written mean
and the gradient was silently wrong."""

import pytest
import torch

import dynamo


def normalize_then_update(x, mean, w):
    y = (x - mean) * w
    mean.add_(1.0)
    return y.sum()


class RunningNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(4))
        self.w = torch.nn.Parameter(torch.ones(4))

    def forward(self, x):
        y = (x - self.mean) * self.w
        with torch.no_grad():
            self.mean.add_(x.mean(0))
        return y.sum()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_function_input_written_after_use(backend):
    def run(f):
        x = torch.arange(12.0).view(3, 4)
        mean = torch.zeros(4)
        w = torch.ones(4, requires_grad=True)
        f(x, mean, w).backward()
        return w.grad, mean

    want = run(normalize_then_update)
    dynamo.reset()
    got = run(dynamo.optimize(backend)(normalize_then_update))
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_buffer_updated_under_no_grad(backend):
    x = torch.arange(12.0).view(3, 4)
    eager, compiled = RunningNorm(), RunningNorm()
    step = dynamo.optimize(backend)(compiled)
    for _ in range(3):
        eager(x).backward()
        step(x).backward()
        torch.testing.assert_close(compiled.w.grad, eager.w.grad)
        torch.testing.assert_close(compiled.mean, eager.mean)
