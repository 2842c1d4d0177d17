"""Python numbers meet tensors as torch converts them (Note [half scalars] in
src/inductor/lowering.rs): to the operands' common dtype, so a half type rounds them first
(`x.half() - 65520.0` subtracts inf, `x.half() ** 1.0004` raises to the power 1) except as the
second operand of a product or a division, which ATen reads in float32; and a pad value beyond the
tensor dtype's range raises torch's overflow error (breaker round of stop 29)."""

import pytest
import torch
import torch.nn.functional as F

import dynamo


def compiled(fn):
    dynamo.reset()
    return dynamo.optimize("inductor")(fn)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x + 65520.0,
        lambda x: x - 65520.0,
        lambda x: x * 1.0004 - x,
        lambda x: 1.0004 * x - x,
        lambda x: x / 1.0004 - x,
        lambda x: 1.0004 / x,
        lambda x: x.pow(1.0004),
        lambda x: torch.where(x > 0, x, 3.0e38) * 0.5,
        lambda x: (x < 65519.0) & (x > -1.00049),
    ],
    ids=["add_big", "sub_big", "mul_near_one", "rmul_near_one", "div_near_one", "rdiv_near_one", "pow_near_one", "where_huge", "compare"],
)
def test_half_scalars_round_like_eager(fn, dtype):
    x = torch.tensor([1000.0, -5.0, 3.0, -20.0, 0.5, -1.0]).to(dtype)
    got, want = compiled(fn)(x), fn(x)
    assert got.dtype == want.dtype
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got[~got.isnan()], want[~want.isnan()]), (got, want)
    assert dynamo.counters()["inductor_kernels_compiled"] > 0


@pytest.mark.parametrize(
    "dtype, value",
    [(torch.float16, 1e6), (torch.float16, -70000.0), (torch.bfloat16, 1e39), (torch.float32, 1e39)],
)
def test_pad_value_overflow_raises_like_eager(dtype, value):
    def fn(x):
        return F.pad(x * 2, (1, 1), value=value)

    x = torch.randn(2, 3).to(dtype)
    with pytest.raises(RuntimeError) as eager:
        fn(x)
    with pytest.raises(RuntimeError) as ours:
        compiled(fn)(x)
    assert str(ours.value) == str(eager.value)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_pad_value_rounds_to_half_like_eager(dtype):
    def fn(x):
        return F.pad(x * 2, (2, 1), value=1.0004) + 0

    x = torch.randn(2, 3).to(dtype)
    got, want = compiled(fn)(x), fn(x)
    assert torch.equal(got, want)
    assert dynamo.counters()["inductor_kernels_compiled"] > 0


@pytest.mark.parametrize(
    "fn",
    [lambda t: 3.7 / t, lambda t: t.__rtruediv__(3.7), lambda t: (2 / (t + 1)) * 3, lambda t: 3.7 / t.int()],
    ids=["operator", "method", "fused", "integer"],
)
def test_number_over_tensor_is_reciprocal_times_number(fn):
    # Note [reciprocal division]: torch's __rtruediv__ is `reciprocal() * number`, two roundings;
    # one division differed from eager in about a quarter of these elements.
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0)) * 3
    got, want = compiled(fn)(x), fn(x)
    assert got.dtype == want.dtype and torch.equal(got, want)
    assert dynamo.counters()["inductor_fallback_nodes"] == 0
