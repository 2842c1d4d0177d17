"""Advanced indexing by tensors (`table[index]`, `x[rows, cols]`) in a training graph: rule
`getitem` gives derivatives.yaml's `index_backward` (`dynamo.aot.index_backward`: the gradient
accumulated into zeros, repeated indices adding up) where torch's derivative of a recomputed
`getitem` ran before (`vjp_call`; swin_t's relative position bias table, 24 calls a step)."""

import pytest
import torch

import dynamo

CASES = {
    "one_index": lambda x, i, j: (x[i] * 2).sum(),
    "index_of_2_dims": lambda x, i, j: x[j].pow(2).sum(),
    "two_indices": lambda x, i, j: x[i[:4], i[4:8]].exp().sum(),
    "int32_index": lambda x, i, j: x[i.int()].cos().sum(),
    "bias_table": lambda x, i, j: (x.flatten()[j.flatten()].view(4, 3) * torch.arange(3.0)).sum(),
}


@pytest.mark.parametrize("case", CASES)
def test_index_gradient_equals_eager(case, monkeypatch):
    import dynamo._functional as functional

    calls = []
    real = functional.vjp_call
    monkeypatch.setattr(functional, "vjp_call", lambda *a: calls.append(a[:2]) or real(*a))
    f = CASES[case]
    torch.manual_seed(0)
    x = torch.randn(9, 9, requires_grad=True)
    i = torch.tensor([0, 3, 3, 8, 1, 0, 0, 2, 5])  # repeated indices: their gradients add up
    j = torch.randint(0, 9, (4, 3))
    want = f(x, i, j)
    (gx,) = torch.autograd.grad(want, x)
    x2 = x.detach().clone().requires_grad_()
    dynamo.reset()
    got = dynamo.optimize("inductor")(f)(x2, i, j)
    got.backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(x2.grad, gx)
    assert not calls, calls
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["aot_graphs"] == 1 and c["aot_eager_graphs"] == 0, c
