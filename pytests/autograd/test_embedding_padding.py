"""F.embedding's padding_idx in the backward: a negative index counts from the end (-1 is the
last row), and that row gets no gradient, as in eager (breaker round of stop 29: the rule took an
explicit -1 for "no padding")."""

import pytest
import torch
import torch.nn.functional as F

import dynamo


@pytest.mark.parametrize("padding_idx", [None, -1, -3, 2])
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_embedding_padding_row_gets_no_gradient(padding_idx, backend):
    def fn(w, i):
        return F.embedding(i, w, padding_idx=padding_idx) * 2

    weight = torch.randn(10, 4)
    idx = torch.tensor([9, 1, 9, 3, 7, 2])
    we = weight.clone().requires_grad_()
    fn(we, idx).sum().backward()
    dynamo.reset()
    wc = weight.clone().requires_grad_()
    dynamo.optimize(backend)(fn)(wc, idx).sum().backward()
    assert torch.equal(wc.grad, we.grad)
    assert dynamo.counters()["aot_graphs"] == 1
