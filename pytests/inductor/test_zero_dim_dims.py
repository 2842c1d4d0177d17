"""Dim arguments on 0-d tensors (ATen's `maybe_wrap_dim` accepts -1 and 0 for a scalar):
`squeeze(dim)` and `transpose(0, -1)` panicked in the lowering, and `sum`/`mean` over a dim of a
0-d tensor panicked in the autograd rule; the frame then ran eagerly. Each now compiles, with
eager's values and gradients."""

import pytest
import torch

import dynamo

CASES = {
    "squeeze": lambda s: s.squeeze(-1) * 2,
    "squeeze0": lambda s: s.squeeze(0) + 1,
    "transpose": lambda s: s.transpose(0, -1) - 3,
    "sum_dim": lambda s: s.sum(-1) * 2,
    "sum_keepdim": lambda s: s.sum(0, keepdim=True) * 2,
    "mean_dims": lambda s: s.mean([0]) + 1,
    "mean_dim": lambda s: s.mean(-1) * s,
}


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_dims_of_a_zero_dim_tensor(case, grad):
    op = CASES[case]

    def f(x):
        return op((x * x).sum())

    x = torch.randn(3, 4)
    xe, xc = x.clone().requires_grad_(grad), x.clone().requires_grad_(grad)
    want = f(xe)
    dynamo.reset()
    got = dynamo.optimize("inductor")(f)(xc)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want)
    if grad:
        want.backward()
        got.backward()
        torch.testing.assert_close(xc.grad, xe.grad)
    c = dynamo.counters()
    assert (c["compile_errors"], c["eager_fallbacks"], c["graphs"]) == (0, 0, 1)
