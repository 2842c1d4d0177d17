"""Half-precision dtypes in generated kernels: bfloat16 and float16 buffers load as float32,
compute in float32 and round to nearest even on store (as torch's CPU kernels do per op; a fused
chain rounds once, so results agree within the half type's tolerance)."""

import pytest
import torch

import dynamo._C as C


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


TOL = {torch.bfloat16: dict(atol=2e-2, rtol=2e-2), torch.float16: dict(atol=2e-3, rtol=2e-3)}


def check(fn, *inputs, dtype, kernels=1):
    C.inductor_reset_counters()
    compiled = C.inductor_compile(torch.fx.symbolic_trace(fn), list(inputs))
    got, want = compiled(*inputs), fn(*inputs)
    assert got.dtype == want.dtype and got.shape == want.shape and got.stride() == want.stride()
    if want.dtype in TOL:
        torch.testing.assert_close(got, want, equal_nan=True, **TOL[want.dtype])
    else:
        torch.testing.assert_close(got, want, equal_nan=True, **TOL[dtype])
    counters = C.inductor_counters()
    assert not compiled.is_eager and counters["kernels_compiled"] == kernels, compiled.plan
    assert counters["fallback_nodes"] == 0, compiled.plan


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a * b + torch.sin(a),
        lambda a, b: torch.relu(a - 1.5) * 2 + b.t().t(),
        lambda a, b: torch.where(a > b, a, b * 0.5),
        lambda a, b: (a.sigmoid() * b.tanh()).transpose(0, 1) * 1.0,
        lambda a, b: a[::2] + b[1::2],
    ],
)
def test_half_pointwise(fn, dtype):
    a, b = randn(8, 12, dtype=dtype), randn(8, 12, seed=1, dtype=dtype)
    a[0, 0] = float("nan")
    check(fn, a, b, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_mixed_with_float32_promotes(dtype):
    a = randn(6, 7, dtype=dtype)
    b = randn(6, 7, seed=1)
    check(lambda a, b: a * b + 1, a, b, dtype=dtype)  # float32 result
    check(lambda a, b: (a > 0) & (b > 0), a, b, dtype=dtype)  # bool result


def test_bfloat16_with_float16_gives_float32():
    a, b = randn(5, 5, dtype=torch.bfloat16), randn(5, 5, seed=1, dtype=torch.float16)
    check(lambda a, b: a + b, a, b, dtype=torch.bfloat16)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.softmax(x, -1),
        lambda x: torch.log_softmax(x, 0),
        lambda x: x.sum(-1),
        lambda x: x.mean(0, keepdim=True) + x,
        lambda x: x.amax(-1),
        lambda x: x.var(-1),
        lambda x: torch.nn.functional.layer_norm(x, (12,)),
        lambda x: torch.nn.functional.rms_norm(x, (12,)),
        lambda x: torch.nn.functional.hardswish(x),
    ],
)
def test_half_reductions_and_norms(fn, dtype):
    # Accumulated in float32, rounded once at the end, as torch's CPU kernels do.
    x = randn(10, 12, dtype=dtype)
    check(fn, x, dtype=dtype)


def test_half_batch_norm_eval():
    x = randn(2, 3, 4, 4, dtype=torch.bfloat16)
    stats = [randn(3, seed=s, dtype=torch.bfloat16) for s in (1, 2, 3, 4)]
    stats[1] = stats[1].abs() + 0.5
    check(lambda x, m, v, w, b: torch.nn.functional.batch_norm(x, m, v, w, b, False, 0.1, 1e-5), x, *stats,
          dtype=torch.bfloat16)


@pytest.mark.parametrize(
    "fn, dtype",
    [
        (lambda x: (x * 2).to(torch.bfloat16) + 1, torch.bfloat16),
        (lambda x: x.half().sigmoid(), torch.float16),
        (lambda x: (x.bfloat16() * 3).float() - x, torch.bfloat16),
        (lambda x: (x > 0).to(torch.float32) * x, torch.bfloat16),
        (lambda x: x.to(dtype=torch.float16) * 2, torch.float16),
        (lambda x: (x * 1).to(torch.float32) + 1, torch.bfloat16),  # same dtype: a view in torch
    ],
)
def test_conversions_are_pointwise_casts(fn, dtype):
    check(fn, randn(9, 7), dtype=dtype)


def test_half_rounding_happens_per_op_as_in_eager():
    # `(w.half() * 3).float()`: eager rounds to float16 after the cast and after the multiply;
    # fusing must not keep the float32 intermediates (found by the differential fuzzer).
    def fn(w, x):
        h = (w.half() * 3).float()
        return (h > x) + h

    w, x = randn(16, 16), randn(16, 16, seed=1)
    compiled = C.inductor_compile(torch.fx.symbolic_trace(fn), [w, x])
    torch.testing.assert_close(compiled(w, x), fn(w, x), atol=0, rtol=0)
    a, b = randn(32, dtype=torch.bfloat16), randn(32, seed=1, dtype=torch.bfloat16)
    g = lambda a, b: (a * b + a) * b - a
    compiled = C.inductor_compile(torch.fx.symbolic_trace(g), [a, b])
    torch.testing.assert_close(compiled(a, b), g(a, b), atol=0, rtol=0)
