"""AOTAutograd regressions found by the fuzzer and by new-user trials, each the smallest program."""

import pytest
import torch

import dynamo


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_input_overwritten_with_a_grad_value_requires_grad_as_in_eager(backend):
    """`x.add_(p)` with `p` requiring grad makes `x` require grad (and differentiate into `p`)
    in eager; the graph runs through torch's autograd so that it does here too (fuzzer)."""
    def f(x, p):
        x.add_(p * 2)
        return x.sum()

    p = torch.randn(3, requires_grad=True)
    xe, xc = torch.ones(3), torch.ones(3)
    f(xe, p)
    dynamo.reset()
    dynamo.optimize(backend)(f)(xc, p)
    assert xc.requires_grad == xe.requires_grad is True
    (xe * 3).sum().backward()
    ge, p.grad = p.grad.clone(), None
    (xc * 3).sum().backward()
    assert torch.equal(p.grad, ge)
    torch.testing.assert_close(xc, xe)
