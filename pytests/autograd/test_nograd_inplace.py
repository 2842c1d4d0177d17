"""In-place ops run under `torch.no_grad()` on a tensor that requires grad change its values,
not its history (Note [in-place writes under no_grad] in src/autograd/joint.rs): the compiled
backward passes the gradient straight through, as eager's does. Before, the compiled backward
differentiated the op (`y.mul_(3)` tripled the gradient)."""

import pytest
import torch

import dynamo


def scale(w, x):
    y = (w * x).sin() * 1.0
    with torch.no_grad():
        y.mul_(3)
    return y


def relu_fix(w, x):
    y = w + x
    with torch.no_grad():
        y.relu_()
    return y * 2


def view_write(w, x):
    y = (w * x).cos() + 0.0
    with torch.no_grad():
        y[0].mul_(-2)
        y[:, 1].clamp_(max=0.1)
    return y.tanh()


def mixed(w, x):
    y = w * x
    with torch.no_grad():
        y.sub_(x)  # x does not require grad; y keeps its history
    z = y * y  # differentiated, with the written values
    return z


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("fn", [scale, relu_fix, view_write, mixed], ids=lambda f: f.__name__)
def test_gradient_ignores_no_grad_writes(fn, backend):
    def grads(f):
        torch.manual_seed(0)
        w = torch.randn(3, 4, requires_grad=True)
        x = torch.randn(3, 4)
        out = f(w, x)
        (out * torch.arange(12.0).view(3, 4)).sum().backward()
        return out.detach(), w.grad

    dynamo.reset()
    want = grads(fn)
    got = grads(dynamo.optimize(backend)(fn))
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])
    assert dynamo.counters()["graph_breaks"] == 0
