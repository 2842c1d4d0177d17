"""Generated-kernel faults a report-only tester found this stop, each as its smallest program,
compared with eager:

- a decomposition's half-typed result (softmax, log_softmax, layer_norm, rms_norm, mean,
  hardswish, hardtanh, batch_norm, adaptive average pooling) read by a fused consumer
  (`.float()`, `* 1000`, `+ y`) gave the float32 value instead of the rounded half one (Note
  [half decomposition results] in src/inductor/lowering.rs);
- an int64 `alpha` past 2**53 went through a float64 and lost its low bits;
- a 0-d tensor as the first factor of a product with a half tensor was not rounded to the
  half type, as ATen rounds it there (only the second operand keeps its value)."""

import pytest
import torch
import torch.nn.functional as F

import dynamo

HALF = [torch.bfloat16, torch.float16]

DECOMPS = {
    "softmax": lambda x: x.softmax(-1),
    "log_softmax": lambda x: F.log_softmax(x, -1),
    "layer_norm": lambda x: F.layer_norm(x, (64,)),
    "rms_norm": lambda x: F.rms_norm(x, (64,)),
    "mean": lambda x: x.mean(-1, keepdim=True),
    "hardswish": lambda x: F.hardswish(x),
    "hardsigmoid": lambda x: F.hardsigmoid(x),
    "hardtanh": lambda x: F.hardtanh(x, -0.3, 0.7),
    "adaptive_avg_pool": lambda x: F.adaptive_avg_pool1d(x.unsqueeze(0), 1).squeeze(0),
    "batch_norm_eval": lambda x: F.batch_norm(x, torch.zeros(64, dtype=x.dtype), torch.ones(64, dtype=x.dtype) * 2, training=False),
}

CONSUMERS = {
    "float": lambda r: r.float(),
    "scaled_int": lambda r: (r.float() * 1000).int(),
    "double": lambda r: r.double(),
}


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("consumer", sorted(CONSUMERS))
@pytest.mark.parametrize("op", sorted(DECOMPS))
def test_half_decomposition_result_read_by_a_fused_consumer(op, consumer, dtype):
    f, c = DECOMPS[op], CONSUMERS[consumer]

    def fn(x):
        return c(f(x))

    x = (torch.randn(4, 64, generator=torch.Generator().manual_seed(0)) * 3).to(dtype)
    want = fn(x)
    dynamo.reset()
    got = dynamo.optimize("inductor")(fn)(x)
    assert got.dtype == want.dtype
    # The half result itself may differ from eager's by one half ulp (its float32 value may sit
    # on the other side of a rounding boundary); without the rounding it was off the half grid.
    half = f(x)
    tol = (half.float().abs() * (2 ** -7 if dtype == torch.bfloat16 else 2 ** -10)).max().item() + 1e-6
    if consumer == "scaled_int":
        tol = tol * 1000 + 1
    assert (got.double() - want.double()).abs().max().item() <= tol
    on_grid = got.double() if consumer != "scaled_int" else None
    if on_grid is not None:
        assert torch.equal(on_grid, on_grid.to(dtype).double())


@pytest.mark.parametrize("alpha", [2**53 + 1, -(2**60) - 3, 3])
@pytest.mark.parametrize("op", ["add", "sub", "add_"])
def test_integer_alpha_is_exact(op, alpha):
    def fn(x, y):
        if op == "add_":
            x = x.clone()
            x.add_(y, alpha=alpha)
            return x
        return getattr(torch, op)(x, y, alpha=alpha)

    x = torch.tensor([1, 2, 5])
    y = torch.tensor([1, 2, 5])
    dynamo.reset()
    assert torch.equal(dynamo.optimize("inductor")(fn)(x, y), fn(x, y))


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("scale", [10.0**6, 1.0004, 3.3])
@pytest.mark.parametrize("first", [True, False])
def test_zero_d_factor_of_a_half_product(dtype, scale, first):
    def fn(x, s):
        return s * x if first else x * s

    x = torch.tensor([0.0, 1e-3, 52.0, 65504.0 if dtype == torch.float16 else 3e38, -7.25]).to(dtype)
    s = torch.tensor(scale)
    want = fn(x, s)
    dynamo.reset()
    got = dynamo.optimize("inductor")(fn)(x, s)
    assert got.dtype == want.dtype
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(torch.nan_to_num(got.float()), torch.nan_to_num(want.float()))


# bfloat16 ** 3 and ** -2: ATen rounds x * x to bfloat16 before the last step (Note [bfloat16
# integer powers]); 8.5 ** 3 is 612 in eager.
@pytest.mark.parametrize("exponent", [3, -2, 2, 3.0, -2.0, 0.5, -1, 4])
@pytest.mark.parametrize("consumer", ["none", "float_div"])
def test_bfloat16_integer_powers(exponent, consumer):
    def fn(x):
        r = x**exponent
        return r if consumer == "none" else r.float() / 3

    x = (torch.randn(1000, generator=torch.Generator().manual_seed(0)) * 10).bfloat16()
    want = fn(x)
    dynamo.reset()
    got = dynamo.optimize("inductor")(fn)(x)
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(torch.nan_to_num(got), torch.nan_to_num(want))


# A float16 tensor with a 0-d bfloat16 tensor: LLVM narrowed the division to float16 and took
# the bfloat16 value (155648, past float16's range) as a float16 one, inf (Note [bfloat16
# widening by bits] in llvm/src/emit.rs).
@pytest.mark.parametrize("op", ["div", "mul", "div_float"])
@pytest.mark.parametrize("pair", ["f16_by_bf16", "bf16_by_f16"])
def test_half_tensor_with_a_zero_d_tensor_of_the_other_half_type(op, pair):
    if pair == "f16_by_bf16":
        x = torch.tensor([52.0, 3.0, -7.0, 65504.0, 1e-3], dtype=torch.float16)
        s = torch.tensor(155648.0, dtype=torch.bfloat16)
    else:
        x = torch.tensor([1000.0, 3.0, -7.0, 256.0, 3e38], dtype=torch.bfloat16)
        s = torch.tensor(1.0009765625, dtype=torch.float16)

    def fn(x, s):
        if op == "div":
            return x / s
        if op == "mul":
            return x * s
        return (x.float() / s.float()).to(x.dtype)

    want = fn(x, s)
    dynamo.reset()
    got = dynamo.optimize("inductor")(fn)(x, s)
    assert got.dtype == want.dtype and torch.equal(got, want)
