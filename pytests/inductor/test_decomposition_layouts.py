"""Every decomposition against eager over the layouts real graphs feed it: contiguous,
transposed, strided (a slice with a step), channels_last (4-d), size-1 dims, zero-size tensors and
broadcast parameters, with NaN and +-inf among the values. Compiled results must equal eager's
(NaN where eager has NaN), with eager's dtype, shape and strides; a layout a decomposition does not
take must fall back, never give a different value."""

import warnings

import pytest
import torch
import torch.nn.functional as F

import dynamo._C as C


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def with_specials(x):
    """`x` with a NaN, +inf and -inf at fixed places (when it has room for them)."""
    x = x.clone()
    flat = x.view(-1) if x.is_contiguous() else None
    if flat is not None and flat.numel() >= 8:
        flat[1], flat[4], flat[7] = float("nan"), float("inf"), float("-inf")
    return x


def layouts4d(n, c, h, w, seed=0):
    """(name, tensor) pairs of one logical shape [n, c, h, w] in several memory layouts."""
    base = with_specials(randn(n, c, h, w, seed=seed))
    out = [("contiguous", base), ("channels_last", base.contiguous(memory_format=torch.channels_last))]
    out.append(("transposed", with_specials(randn(n, c, w, h, seed=seed)).transpose(2, 3)))
    out.append(("strided", with_specials(randn(n, c, h, 2 * w, seed=seed))[..., ::2]))
    return out


def check(fn, *inputs):
    C.inductor_reset_counters()
    compiled = C.inductor_compile(torch.fx.symbolic_trace(fn), list(inputs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # var() with no degrees of freedom warns in eager
        got, want = compiled(*inputs), fn(*inputs)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
    if want.numel():
        assert got.stride() == want.stride() or want.dim() == 0, (got.stride(), want.stride())
    torch.testing.assert_close(got, want, equal_nan=True, atol=1e-5, rtol=1e-5)
    return compiled


ROW_OPS = {
    "softmax": lambda x, d: torch.softmax(x, -1),
    "log_softmax": lambda x, d: F.log_softmax(x, dim=-1),
    "softmax_dim1": lambda x, d: torch.softmax(x, 1),
    "layer_norm": lambda x, d: F.layer_norm(x, (d,)),
    "rms_norm": lambda x, d: F.rms_norm(x, (d,)),
    "sum": lambda x, d: x.sum(-1),
    "mean": lambda x, d: x.mean(dim=(1, 2), keepdim=True),
    "amax": lambda x, d: x.amax(1),
    "amin": lambda x, d: x.amin(-1, keepdim=True),
    "var": lambda x, d: x.var(-1),
    "std": lambda x, d: x.std(1, correction=0),
    "gelu": lambda x, d: F.gelu(x) * 2,
    "gelu_tanh": lambda x, d: F.gelu(x, approximate="tanh") + 1,
    "silu": lambda x, d: F.silu(x) - 1,
    "hardswish": lambda x, d: F.hardswish(x) * 3,
    "hardsigmoid": lambda x, d: F.hardsigmoid(x) + 0.5,
    "hardtanh": lambda x, d: F.hardtanh(x, -0.5, 0.5) * 2,
    "relu6": lambda x, d: F.relu6(x) - 2,
    "clamp": lambda x, d: x.clamp(-1, 1) * 2,
    "dropout_eval": lambda x, d: F.dropout(x, 0.3, training=False) + 1,
    "adaptive_avg_pool2d": lambda x, d: F.adaptive_avg_pool2d(x, 1) * 2,
}


@pytest.mark.parametrize("op", sorted(ROW_OPS))
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "transposed", "strided"])
def test_decompositions_over_layouts_with_nan_and_inf(op, layout):
    x = dict(layouts4d(2, 3, 5, 6))[layout]
    if op.startswith("gelu"):
        # ATen's gelu gives nan for +inf in its vectorized loop (its vector erf) and inf in its
        # scalar tail: eager's own answer depends on the element's position, so only NaN here.
        x = torch.where(x.isinf(), torch.full_like(x, float("nan")), x)
    fn, d = ROW_OPS[op], x.shape[-1]  # the trailing size as a constant (not a traced x.shape)
    check(lambda t: fn(t, d), x)


@pytest.mark.parametrize("op", sorted(ROW_OPS))
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (2, 1, 1, 4), (1, 3, 4, 1)])
def test_decompositions_with_size_one_dims(op, shape):
    fn, d = ROW_OPS[op], shape[-1]
    x = with_specials(randn(*shape))
    if op.startswith("gelu"):
        x = torch.where(x.isinf(), torch.full_like(x, float("nan")), x)  # see above
    check(lambda t: fn(t, d), x)


@pytest.mark.parametrize(
    "op",
    ["gelu", "gelu_tanh", "silu", "hardswish", "hardsigmoid", "hardtanh", "relu6", "clamp", "dropout_eval", "softmax",
     "log_softmax", "layer_norm", "rms_norm", "sum", "mean", "amax"],
)
def test_decompositions_on_zero_size_tensors(op):
    x = randn(2, 3, 0, 6) if op not in ("sum", "amax") else randn(2, 0, 4, 6)
    fn = lambda t: ROW_OPS[op](t, 6)  # noqa: E731
    if op == "amax":
        with pytest.raises(Exception) as eager_error:
            fn(x)  # amax over an empty dim: eager raises, and so must the compiled call
        compiled = C.inductor_compile(torch.fx.symbolic_trace(fn), [x])
        with pytest.raises(type(eager_error.value)):
            compiled(x)
        return
    check(fn, x)


@pytest.mark.parametrize(
    "layout",
    [
        "contiguous",
        "channels_last",
        # torch's batch_norm meta function keeps a transposed input's order where its CPU
        # kernel returns contiguous: the layout pass gives the graph eager's strides
        # (layout.rs, eager_batch_norm_strides).
        "transposed",
        "strided",
    ],
)
def test_batch_norm_eval_with_broadcast_parameters(layout):
    x = dict(layouts4d(2, 4, 5, 6, seed=3))[layout]
    mean, var = randn(4, seed=1), randn(4, seed=2).abs() + 0.1
    w, b = randn(4, seed=4), randn(4, seed=5)
    check(lambda t, m, v, w, b: F.relu(F.batch_norm(t, m, v, w, b, training=False, eps=1e-5)), x, mean, var, w, b)


@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "transposed", "strided"])
def test_layer_norm_with_affine_parameters(layout):
    x = dict(layouts4d(2, 3, 5, 6, seed=7))[layout]
    w, b = randn(6, seed=8), randn(6, seed=9)
    check(lambda t, w, b: F.layer_norm(t, (6,), w, b, 1e-5), x, w, b)


@pytest.mark.parametrize("dim", [0, 1, 2, 3])
def test_softmax_over_every_dim_of_channels_last(dim):
    x = with_specials(randn(2, 3, 4, 5)).contiguous(memory_format=torch.channels_last)
    check(lambda t: torch.softmax(t, dim), x)


def test_max_min_clamp_propagate_nan_as_torch():
    x = torch.tensor([[float("nan"), 1.0, -2.0], [0.5, float("nan"), float("inf")]])
    y = torch.tensor([[0.0, float("nan"), 3.0], [float("-inf"), 2.0, float("nan")]])
    check(lambda a, b: torch.maximum(a, b) + torch.minimum(a, b), x, y)
    check(lambda a: a.clamp(-1, 1) + a.clamp(min=0) + a.clamp(max=0), x)
    check(lambda a: a.amax(1) + a.amin(0).sum(), x)
    check(lambda a, b: torch.clamp(a, min=b), x, y)
