"""Vectorized libm calls stay as exact as eager's where it shows: `tanh` saturates to exactly
+-1 for |x| > 9.02 (libmvec's AVX-512 `tanhf` gave +-0.99999994 there; `jit::AVX512_INEXACT`
in llvm/src/jit.rs keeps tanh and erf on their AVX2 variants)."""

import torch

import dynamo


def test_tanh_saturates_exactly_like_eager():
    x = torch.linspace(-30, 30, 4097).reshape(17, 241)
    got = dynamo.optimize("inductor")(torch.tanh)(x)
    want = torch.tanh(x)
    sat = want.abs() == 1
    assert sat.sum() > 1000
    assert torch.equal(got[sat], want[sat])
    torch.testing.assert_close(got, want, rtol=2e-7, atol=0)


def truncated_tanh(y):
    # Shrunk from fuzzer seed 720020, program 26: a saturated tanh scaled and truncated.
    x = (y * 7).round()
    return ((torch.tanh((x * 4).int() / 3) * 6).long().float() / 4).min(1)


def test_truncated_tanh_matches_eager():
    g = torch.Generator().manual_seed(1235)
    for _ in range(3):
        y = torch.randn(4, 4, generator=g)
        got, want = dynamo.optimize("inductor")(truncated_tanh)(y), truncated_tanh(y)
        assert torch.equal(got.values, want.values) and torch.equal(got.indices, want.indices)
