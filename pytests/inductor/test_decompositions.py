"""Decompositions and reductions (src/inductor/decompositions.rs, Reduction in ir.rs): compiled vs
eager over several shapes (size-1 dims, non-contiguous inputs, broadcasting, NaN/inf), with the
kernel and fallback counts that show the op ran on generated code.
"""

import operator
import warnings

import pytest
import torch
import torch.nn.functional as F

import dynamo._C as C


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def check(fn, *inputs, atol=1e-5, rtol=1e-5, max_kernels=None, fallbacks=0):
    C.inductor_reset_counters()
    compiled = C.inductor_compile(torch.fx.symbolic_trace(fn), list(inputs))
    got = compiled(*inputs)
    want = fn(*inputs)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, atol=atol, rtol=rtol, equal_nan=True)
    counters = C.inductor_counters()
    assert not compiled.is_eager, compiled.plan
    assert counters["kernels_compiled"] >= 1, compiled.plan
    if max_kernels is not None:
        assert counters["kernels_compiled"] <= max_kernels, compiled.plan
    assert counters["fallback_nodes"] == fallbacks, compiled.plan
    return compiled


SHAPES = [(64, 100), (1, 7), (5, 1), (3, 4, 33), (2, 3, 1, 9)]


def layouts(shape, seed=0):
    """A contiguous input and a non-contiguous one (transposed storage) of the same shape."""
    x = randn(*shape, seed=seed)
    y = randn(*reversed(shape), seed=seed + 1).permute(*reversed(range(len(shape))))
    return [x, y]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "name, fn",
    [
        ("softmax", lambda x: F.softmax(x, dim=-1)),
        ("softmax_dim0", lambda x: torch.softmax(x, 0)),
        ("log_softmax", lambda x: F.log_softmax(x, dim=-1)),
        ("sum_last", lambda x: x.sum(-1)),
        ("sum_all", lambda x: x.sum()),
        ("mean_keepdim", lambda x: x.mean(dim=0, keepdim=True)),
        ("amax", lambda x: torch.amax(x, dim=-1) * 2),
        ("amin", lambda x: x.amin(dim=(0, -1))),
        ("sum_then_pointwise", lambda x: (x * 2).sum(-1, keepdim=True) + x),
    ],
)
def test_reductions(name, fn, shape):
    for x in layouts(shape):
        check(fn, x, max_kernels=1)


@pytest.mark.parametrize("shape", [(8, 32), (2, 5, 16), (4, 1)])
def test_layer_norm(shape):
    n = shape[-1]
    w, b = randn(n, seed=3), randn(n, seed=4)
    for x in layouts(shape):
        check(lambda x, w, b: F.layer_norm(x, (n,), w, b, 1e-5), x, w, b, max_kernels=1)
        check(lambda x: F.layer_norm(x, (n,)), x, max_kernels=1)


def test_reductions_propagate_nan_and_inf():
    x = randn(4, 9)
    x[0, 3] = float("nan")
    x[1, 2] = float("inf")
    x[2, :] = float("-inf")
    check(lambda x: torch.amax(x, -1), x)
    check(lambda x: torch.amin(x, -1), x)
    check(lambda x: x.sum(-1), x)
    check(lambda x: F.softmax(x, -1), x)


@pytest.mark.parametrize("shape", [(2, 3, 5, 5), (1, 4, 1, 1), (2, 8, 7, 3)])
def test_batch_norm_eval_and_pool(shape):
    c = shape[1]
    rm, rv = randn(c, seed=1), randn(c, seed=2).abs() + 0.5
    w, b = randn(c, seed=3), randn(c, seed=4)
    for x in [randn(*shape), randn(*shape).contiguous(memory_format=torch.channels_last)]:
        check(lambda x, rm, rv, w, b: F.relu(F.batch_norm(x, rm, rv, w, b, False, 0.1, 1e-5)), x, rm, rv, w, b, max_kernels=1)
        check(lambda x: F.adaptive_avg_pool2d(x, 1), x, max_kernels=1)
        # The flatten is returned, so torch makes that view (as ResNet's head does before fc).
        check(lambda x: torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1), x, max_kernels=1, fallbacks=1)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.hardswish(x),
        lambda x: F.hardsigmoid(x),
        lambda x: F.hardtanh(x, -0.5, 0.5),
        lambda x: F.relu6(x * 4),
        lambda x: F.dropout(x, 0.3, False) + 1,
    ],
)
def test_activations(fn):
    x = randn(6, 7) * 4
    x[0, 0] = float("nan")
    check(fn, x, max_kernels=1)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.transpose(0, 1) * 2,
        lambda x: x.permute(1, 0).sin(),
        lambda x: x.t().unsqueeze(0) + 1,
        lambda x: x.view(4, 3, 10).sum(1),
        lambda x: x.reshape(12, 2, 5).softmax(-1),
        lambda x: x.unsqueeze(1).expand(12, 3, 10) * 1.5,
        lambda x: x[1:7:2, None, ..., ::3] * 2,
        lambda x: x[3] + x[-1],
        lambda x: x.view(12, 10, 1).squeeze(-1) - 1,
        lambda x: x.contiguous() * x.t().contiguous().t(),
    ],
)
def test_views_inline_into_kernels(fn):
    check(fn, randn(12, 10), max_kernels=1)


def test_view_as_output_keeps_torch_aliasing():
    # A view returned from the graph is made by torch (no copy), so it aliases its input as in eager.
    def fn(x):
        return (x * 2).view(-1)

    x = randn(3, 4)
    compiled = C.inductor_compile(torch.fx.symbolic_trace(fn), [x])
    out = compiled(x)
    torch.testing.assert_close(out, fn(x))


def test_reshape_that_merges_dims_falls_back():
    check(lambda x: (x.t() * 2).reshape(-1).sin(), randn(4, 6), fallbacks=1)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.var(-1),
        lambda x: torch.var(x, dim=0, keepdim=True),
        lambda x: x.std(dim=(0, 1), correction=0),
        lambda x: torch.std(x, -1, unbiased=False) + 1,
    ],
)
@pytest.mark.parametrize("shape", [(6, 33), (1, 5), (4, 1)])
def test_variance(fn, shape):
    for x in layouts(shape):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            want = fn(x)
        if not any("degrees of freedom" in str(w.message) for w in seen):
            check(fn, x, max_kernels=1)
            continue
        # A reduction over one element with correction 1 is 0/0 = nan, and torch warns: the
        # op runs through torch, which does both.
        compiled = C.inductor_compile(torch.fx.symbolic_trace(fn), [x])
        with pytest.warns(UserWarning, match="degrees of freedom"):
            got = compiled(x)
        torch.testing.assert_close(got, want, equal_nan=True)


# Note [variance without overflow] (breaker5 finding 16): ATen accumulates var/std in double,
# so values whose squares overflow (or underflow) float32 still give eager's finite std.
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.std(),
        lambda x: x.var(),
        lambda x: x.std(-1),
        lambda x: x.var(0, keepdim=True),
        lambda x: torch.std(x, correction=0),
        lambda x: torch.var(x, -1, unbiased=False) + 1,
    ],
)
@pytest.mark.parametrize("scale", [1e20, 1e-25, 1e36, 1.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_variance_without_overflow(fn, scale, dtype):
    x = (randn(3, 8) * scale).to(dtype)
    if dtype == torch.float16 and scale != 1.0:
        x = randn(3, 8).to(dtype) * 300  # float16's range: squares of 300 overflow it
    want = fn(x)
    C.inductor_reset_counters()
    compiled = C.inductor_compile(torch.fx.symbolic_trace(fn), [x])
    got = compiled(x)
    assert not compiled.is_eager and C.inductor_counters()["fallback_nodes"] == 0, compiled.plan
    assert got.dtype == want.dtype
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=0, equal_nan=True)


def test_full_float32_variance_overflows_as_eager():
    # A full reduction of float32 takes ATen's std_var_all_cpu, whose float32 mean overflows.
    x = torch.tensor([[3e38, 3e38, 2e38], [3e38, 3e38, 2e38]])
    for fn in (lambda x: x.std(), lambda x: x.std(1), lambda x: x.var(1)):
        compiled = C.inductor_compile(torch.fx.symbolic_trace(fn), [x])
        torch.testing.assert_close(compiled(x), fn(x), equal_nan=True)


@pytest.mark.parametrize("shape", [(6, 33), (2, 3, 16), (4, 1)])
def test_rms_norm(shape):
    n = shape[-1]
    w = randn(n, seed=5)
    for x in layouts(shape):
        check(lambda x: F.rms_norm(x, (n,)), x, max_kernels=1)
        check(lambda x, w: F.rms_norm(x, (n,), w, 1e-6), x, w, max_kernels=1)


@pytest.mark.parametrize(
    "x",
    [
        torch.full((4_000_000,), 0.1),
        randn(2, 1_000_000) * 10 + 1000,
        randn(64, 33, 7, 5),
    ],
    ids=["constant_4M", "offset_rows_1M", "multi_dim"],
)
def test_large_sums_are_pairwise_accurate(x):
    # Note [pairwise sums]: block sums added pairwise keep float32 sums about as accurate as
    # torch's cascade sum (found by QA: a plain vectorized sum drifted by 1e-3 at 10M elements).
    exact = x.double().sum(-1)
    got = C.inductor_compile(torch.fx.symbolic_trace(lambda x: x.sum(-1)), [x])(x)
    want = x.sum(-1)
    err_got = ((got.double() - exact).abs() / exact.abs().clamp(min=1)).max().item()
    err_eager = ((want.double() - exact).abs() / exact.abs().clamp(min=1)).max().item()
    assert err_got <= max(4 * err_eager, 1e-6), (err_got, err_eager)
    full = x.reshape(-1)
    got_all = C.inductor_compile(torch.fx.symbolic_trace(lambda x: x.sum()), [full])(full)
    assert abs(got_all.double() - full.double().sum()) / max(abs(full.double().sum().item()), 1) < 1e-5


@pytest.mark.parametrize(
    "fn,x",
    [
        (lambda t: (t * 1).sum(0), torch.ones(2**25, 2)),
        (lambda t: t.mean(0), torch.ones(2**25, 2)),
        (lambda t: t.t().sum(1), torch.ones(2**25, 2)),
        (lambda t: t.sum(0), randn(100_000, 4) + 1),
    ],
    ids=["ones_column_sum", "ones_column_mean", "transposed_row_sum", "offset_columns"],
)
def test_long_column_sums_are_blocked(fn, x):
    """Column reductions (Note [column reductions]) longer than SUM_BLOCK sum in blocks: a plain
    float32 running sum of 2**25 ones stops at 2**24 (found by a new-user trial)."""
    got = C.inductor_compile(torch.fx.symbolic_trace(fn), [x])(x)
    exact = fn(x.double())
    err = ((got.double() - exact).abs() / exact.abs().clamp(min=1)).max().item()
    assert err < 1e-6, (err, got, exact)
