"""max_pool2d as a window reduction (decompositions.rs, Note [window reductions]; masked loads:
llvm/src/kernel.rs, Note [masked loads]).

Each case compiles a graph calling `F.max_pool2d` (or `torch.max_pool2d`) and checks that the
pool ran as a generated kernel (no fallback for it in the plan) and equals eager bit for bit:
padding, stride, dilation, ceil_mode, non-square windows, 3-d inputs, channels-last inputs,
half types, NaN and -inf in windows, signed zeros (the first of equal values is kept), and a
batch norm + ReLU fused before it. Arguments torch refuses raise as in eager.
"""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dynamo
import dynamo._C as C


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def compile_fn(fn, inputs):
    gm = torch.fx.symbolic_trace(fn)
    return C.inductor_compile(gm, list(inputs))


def check_pool(fn, *inputs, tol=0.0):
    """Compiles `fn`, asserts no fallback ran the pool, and compares with eager exactly (NaN
    equal to NaN, signed zeros by sign bit; `tol` for graphs whose other ops round differently)."""
    compiled = compile_fn(fn, inputs)
    assert not compiled.is_eager, compiled.plan
    assert "fallback" not in compiled.plan or "max_pool2d" not in compiled.plan.split("fallback", 1)[1], compiled.plan
    got = compiled(*inputs)
    want = fn(*inputs)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.stride() == want.stride(), (got.stride(), want.stride())
    torch.testing.assert_close(got, want, atol=tol, rtol=tol, equal_nan=True)
    if tol == 0.0:
        assert torch.equal(torch.signbit(got), torch.signbit(want))
    return compiled


ARGS = [
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=2),
    dict(kernel_size=3, stride=1, padding=1),
    dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0)),
    dict(kernel_size=3, stride=2, padding=1, dilation=2),
    dict(kernel_size=3, stride=2, padding=0, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=2, stride=3, ceil_mode=True),
    dict(kernel_size=(1, 3), stride=(1, 2), padding=(0, 1), dilation=(1, 2)),
]


@pytest.mark.parametrize("shape", [(2, 3, 11, 13), (1, 4, 8, 8), (3, 7, 9)])
@pytest.mark.parametrize("kw", ARGS)
def test_max_pool2d_matches_eager(shape, kw):
    x = randn(*shape)

    def f(x):
        return F.max_pool2d(x * 1.5, **kw)

    check_pool(f, x)


def test_torch_max_pool2d_positional():
    def f(x):
        return torch.max_pool2d(x + 1, [3, 3], [2, 2], [1, 1], [1, 1], False)

    check_pool(f, randn(2, 5, 14, 10))


def test_channels_last_input():
    x = randn(2, 8, 12, 12).contiguous(memory_format=torch.channels_last)

    def f(x):
        return F.max_pool2d(torch.relu(x), 3, 2, 1)

    check_pool(f, x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_other_float_dtypes(dtype):
    x = randn(2, 3, 10, 9).to(dtype)

    def f(x):
        return F.max_pool2d(x, 3, 2, 1)

    if dtype == torch.float64:
        # float64 pointwise kernels take only exact ops: the pool may run through torch.
        compiled = compile_fn(f, [x])
        torch.testing.assert_close(compiled(x), f(x), atol=0, rtol=0)
    else:
        check_pool(f, x)


def test_nan_and_inf_in_windows():
    x = randn(1, 2, 9, 9)
    x[0, 0, 0, 0] = float("nan")  # a padded corner window
    x[0, 0, 4, 4] = float("nan")
    x[0, 1, :3, :3] = float("-inf")  # a window of -inf (and padding)
    x[0, 1, 5, 5] = float("inf")
    x[0, 0, 8, 8] = float("-inf")

    def f(x):
        return F.max_pool2d(x, 3, 2, 1)

    check_pool(f, x)

    def g(x):
        return F.max_pool2d(x, 2, 1, 1, 1, True)

    check_pool(g, x)


def test_signed_zeros_keep_the_first():
    x = torch.zeros(1, 1, 4, 4)
    x[0, 0, 0, 0] = -0.0
    x[0, 0, 0, 2] = -0.0
    x[0, 0, 2, 2] = -0.0
    x[0, 0, 3, 3] = -0.0

    def f(x):
        return F.max_pool2d(x, 2, 2)

    check_pool(f, x)

    def g(x):
        return F.max_pool2d(-x, 3, 1, 1)

    check_pool(g, x)


def bn_relu_pool(x, mean, var, w, b):
    y = torch.relu(F.batch_norm(x, mean, var, w, b, False, 0.1, 1e-5))
    return F.max_pool2d(y, 3, 2, 1)


@pytest.mark.parametrize("channels_last", [False, True])
def test_batch_norm_relu_fuses_into_the_pool(channels_last):
    x = randn(2, 8, 15, 15)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    mean, var = randn(8, seed=1), randn(8, seed=2).abs() + 0.5
    w, b = randn(8, seed=3), randn(8, seed=4)
    C.inductor_reset_counters()
    # The batch norm rounds as the unfused lowering does (within an ulp of torch's kernel).
    compiled = check_pool(bn_relu_pool, x, mean, var, w, b, tol=1e-6)
    # One kernel: batch norm and ReLU are computed at each window position.
    assert C.inductor_counters()["kernels_compiled"] == 1, compiled.plan


def test_pool_of_pool():
    def f(x):
        return F.max_pool2d(F.max_pool2d(x, 3, 1, 1), 3, 2, 1)

    check_pool(f, randn(2, 3, 10, 10))


def test_return_indices_runs_through_torch():
    def f(x):
        v, i = F.max_pool2d(x, 3, 2, 1, return_indices=True)
        return v, i

    x = randn(1, 2, 7, 7)
    compiled = compile_fn(f, [x])
    got, want = compiled(x), f(x)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_bad_padding_raises_like_eager():
    def f(x):
        return F.max_pool2d(x, 2, 1, 2)

    x = randn(1, 1, 6, 6)
    with pytest.raises(RuntimeError) as eager:
        f(x)
    with pytest.raises(RuntimeError) as compiled:
        compile_fn(f, [x])(x)
    assert str(compiled.value) == str(eager.value)


def test_resnet_stem_through_optimize():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)).eval()
    with torch.no_grad():
        m[1].running_mean.uniform_(-0.5, 0.5)
        m[1].running_var.uniform_(0.5, 2.0)
    x = randn(2, 3, 33, 31)
    dynamo.reset()
    C.inductor_reset_counters()
    with torch.no_grad():
        want = m(x)
        with dynamo.optimize("inductor"):
            got = m(x)
            got = m(x)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    c = C.inductor_counters()
    assert c["eager_graphs"] == 0 and c["guard_failures"] == 0, c
