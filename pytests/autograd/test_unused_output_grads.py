"""An input whose gradient comes only from outputs the backward never reached gets None, as in
eager (Note [gradients of unused outputs] in python/dynamo/aot.py), not zeros: optimizers skip a
None gradient but step a zero one (AdamW's weight decay moved a parameter eager leaves alone)."""

import io
import contextlib

import pytest
import torch

import dynamo


def with_a_break(x, w):
    t0 = x * w
    t3 = x.t()
    print("break")
    return t3.sin(), t0.detach() * 3


def two_heads(x, w1, w2):
    return (x * w1).sin(), (x * w2).cos()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_parameter_only_an_unused_output_reads_gets_no_gradient(backend):
    def run(f):
        torch.manual_seed(0)
        x = torch.randn(3, 4, requires_grad=True)
        w = torch.nn.Parameter(torch.randn(3, 4))
        opt = torch.optim.AdamW([w], lr=0.1, weight_decay=0.1)
        with contextlib.redirect_stdout(io.StringIO()):
            a, _ = f(x * 1.0, w)
        a.sum().backward()
        before = w.detach().clone()
        opt.step()
        return w.grad, x.grad, (w - before).abs().max().item()

    want = run(with_a_break)
    dynamo.reset()
    got = run(dynamo.optimize(backend)(with_a_break))
    assert want[0] is None and got[0] is None
    torch.testing.assert_close(got[1], want[1])
    assert got[2] == want[2] == 0.0


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_one_head_trained(backend):
    def run(f):
        torch.manual_seed(0)
        x = torch.randn(5)
        w1 = torch.randn(5, requires_grad=True)
        w2 = torch.randn(5, requires_grad=True)
        a, b = f(x, w1, w2)
        a.sum().backward()  # only the first head
        return w1.grad, w2.grad

    want = run(two_heads)
    dynamo.reset()
    got = run(dynamo.optimize(backend)(two_heads))
    torch.testing.assert_close(got[0], want[0])
    assert want[1] is None and got[1] is None
    # Both heads trained: both get gradients.
    x = torch.randn(5)
    w1 = torch.randn(5, requires_grad=True)
    w2 = torch.randn(5, requires_grad=True)
    a, b = dynamo.optimize(backend)(two_heads)(x, w1, w2)
    (a.sum() + b.sum()).backward()
    assert w1.grad is not None and w2.grad is not None

