"""A graph split around an op without a derivative rule (Note [segments] in
python/dynamo/aot.py) hands each segment the values it reads by name; torch.fx's namespace
once turned two values named `sum_1` and `sum_2` into the same tensor (Note [segment value
names]). Shrunk from fuzzer seed 730019, program 192."""

import pytest
import torch

import dynamo


def gap_reads_two_sums(x, p):
    # torch.maximum has no derivative rule here: it runs in its own segment.
    return torch.maximum(torch.stack([p * 1, x]).sum(0), torch.stack([x + x[1], x]).sum(0))


def gap_reads_numbered_values(x, p):
    a, b, c = p * 2, x * 3, (p + x) * 4
    return torch.maximum(torch.maximum(a, b), c) + a - b


@pytest.mark.parametrize("fn", [gap_reads_two_sums, gap_reads_numbered_values])
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_segments_receive_the_values_they_name(fn, backend):
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(4, 4, generator=g)
    p = torch.randn(4, 4, generator=g).requires_grad_()
    p2 = p.detach().clone().requires_grad_()
    want = fn(x, p)
    want.sum().backward()
    got = dynamo.optimize(backend)(fn)(x, p2)
    got.sum().backward()
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(p2.grad, p.grad)
