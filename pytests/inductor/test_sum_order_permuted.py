"""Note [reduction memory order] (llvm/src/emit.rs): ATen sums a tensor in its memory order,
whatever its logical order, so a kernel summing a transposed or permuted operand walks its
reduction dims in that operand's memory order and takes ATen's order there (fuzzer seed
1500000, program 6695: `x = w.t() - w.t().mean(0, keepdim=True)` has a sum that is 0 up to
rounding, and `if x.sum() > 0` took the other branch than eager)."""

import pytest
import torch

import dynamo
import dynamo._C as C


def compiled(fn, *inputs):
    cg = C.inductor_compile(torch.fx.symbolic_trace(fn), list(inputs))
    return cg(*inputs)


# (name, function of x): full and partial sums and means of permuted reads.
CASES = {
    "t_centered_sum": lambda x: (x.t() - x.t().mean(0, keepdim=True)).sum(),
    "t_sum": lambda x: (x.t() * 2 + 1).sum(),
    "t_mean": lambda x: (x.t() - 0.5).mean(),
    # (Exact elementwise ops only: `sin` may differ from ATen's vectorized one in the last bit.
    # A partial sum whose kept dim is the unit-stride one is a column sum, whose order ATen
    # interleaves differently: not covered.)
    "permute3_sum": lambda x: (x.reshape(2, 2, -1).permute(2, 0, 1) * 2 - 1).sum(),
    "permute3_mean": lambda x: x.reshape(2, 2, -1).permute(1, 2, 0).mean(),
    "permute3_mean_12": lambda x: (x.reshape(2, 2, -1).permute(0, 2, 1) + 1).mean((1, 2)),
}


@pytest.mark.parametrize("case", sorted(CASES))
# At most ATEN_ORDER_MAX (64) elements: longer rows keep the reassociated sum.
@pytest.mark.parametrize("shape", [(4, 4), (6, 6), (6, 10), (8, 8)])
@pytest.mark.parametrize("seed", range(4))
def test_sum_of_a_permuted_read_is_eagers(case, shape, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g) * 3
    fn = CASES[case]
    got, want = compiled(fn, x), fn(x)
    assert torch.equal(got, want), (case, got, want)


def test_fuzzer_program_6695():
    # The fuzzer's `w` of its first call.
    g = torch.Generator().manual_seed(1234)
    w = [torch.randn(4, 4, generator=g) for _ in range(3)][2]

    def f(w):
        x = w.permute(1, 0) - w.permute(1, 0).mean(0, keepdim=True)
        if x.sum() > 0:
            x = w - w.mean(1, keepdim=True)
        x.relu_()
        return x

    want = f(w.clone())
    dynamo.reset()
    got = dynamo.optimize("inductor")(f)(w.clone())
    assert torch.equal(got, want) and got.stride() == want.stride()
