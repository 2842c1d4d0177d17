"""Numerics: pointwise chains, reductions, broadcasting, matrix products."""

import math

import pytest
import torch
from torch.testing import assert_close


def test_pointwise_chain():
    x = torch.linspace(-2, 2, 64)
    assert_close(torch.sin(x) * torch.cos(x) + torch.exp(-x * x), torch.sin(2 * x) / 2 + torch.exp(-x * x), rtol=1e-5, atol=1e-6)


def test_softmax_rows_sum_to_one():
    x = torch.randn(4, 7)
    assert_close(torch.softmax(x, dim=1).sum(1), torch.ones(4))


def test_logsumexp_stable():
    x = torch.tensor([1000.0, 1000.0])
    assert_close(torch.logsumexp(x, 0), torch.tensor(1000.0 + math.log(2)))


def test_reductions():
    x = torch.arange(12.0).reshape(3, 4)
    return x.sum(0), x.mean(1), x.amax(0), x.var(1)


def test_broadcasting():
    a = torch.randn(3, 1)
    b = torch.randn(1, 4)
    out = a * b + a - b
    assert out.shape == (3, 4)
    return out


def test_where_and_clamp():
    x = torch.randn(10)
    return torch.where(x > 0, x, 0.1 * x).clamp(-0.05, 0.5)


def test_matmul_associative():
    a, b, c = torch.randn(3, 4), torch.randn(4, 5), torch.randn(5, 2)
    assert_close((a @ b) @ c, a @ (b @ c), rtol=1e-5, atol=1e-5)


def test_cumsum_returns():
    x = torch.arange(6.0)
    return torch.cumsum(x, 0) * 2


def test_sigmoid_tanh_identity():
    x = torch.randn(32)
    assert_close(torch.tanh(x), 2 * torch.sigmoid(2 * x) - 1, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("p", [1, 2])
def test_norms(p):
    x = torch.randn(5, 3)
    return torch.linalg.vector_norm(x, ord=p, dim=1)


def test_argmax_and_integer_ops():
    x = torch.tensor([[1, 5, 2], [7, 0, 3]])
    return x.argmax(1), x * 2 + 1, x // 2


def test_nan_propagation():
    x = torch.tensor([1.0, float("nan"), 3.0])
    out = x * 2 + 1
    assert torch.isnan(out[1])
    return out


def test_division_and_rsqrt():
    x = torch.rand(16) + 0.5
    assert_close(torch.rsqrt(x) * torch.sqrt(x), torch.ones(16), rtol=1e-5, atol=1e-6)
