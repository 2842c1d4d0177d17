"""F.pad in constant mode lowered to a kernel: masked loads where the output lies inside the
input, the fill value elsewhere (Note [masked loads] in llvm/src/kernel.rs); negative counts
crop; other modes and fills torch would cast run through torch."""

import pytest
import torch
import torch.nn.functional as F

import dynamo
import dynamo._C as C


def compiled_pad(pad, value, x):
    def f(x):
        return F.pad(x, pad, value=value)

    gm = torch.fx.symbolic_trace(f)
    return C.inductor_compile(gm, [x]), f


@pytest.mark.parametrize(
    "shape,pad",
    [((4, 32), (0, 1)), ((4, 32), (2, 3)), ((3, 5, 7), (1, 1, 2, 0)), ((2, 3, 4, 5), (1, 2, 3, 4, 0, 1)), ((6, 9), (-2, 1)), ((6, 9), (-3, -4, 1, -1))],
)
@pytest.mark.parametrize("dtype,value", [(torch.int64, -100), (torch.float32, 0.5), (torch.float32, None), (torch.bfloat16, -2.0), (torch.int32, 7)])
def test_constant_pad_equals_eager(shape, pad, dtype, value):
    g = torch.Generator().manual_seed(len(shape) * 10 + len(pad))
    x = (torch.randn(shape, generator=g) * 50).to(dtype)
    compiled, f = compiled_pad(pad, value, x)
    assert not [line for line in compiled.plan.splitlines() if line.startswith("fallback")], compiled.plan
    got, want = compiled(x), f(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got, want)


def shift_labels(ids):
    # transformers' causal-LM loss: labels shifted left, padded with ignore_index.
    return F.pad(ids, (0, 1), value=-100)[..., 1:].contiguous().view(-1)


def test_label_shift_under_dynamo():
    ids = torch.randint(0, 128, (4, 32))
    opt = dynamo.optimize("inductor")(shift_labels)
    for _ in range(2):
        assert torch.equal(opt(ids), shift_labels(ids))


@pytest.mark.parametrize("kwargs", [{"mode": "reflect"}, {"mode": "replicate"}, {"value": 1.5}])
def test_other_modes_and_cast_fills_run_through_torch(kwargs):
    x = torch.randn(2, 3, 6) if "mode" in kwargs else torch.randint(0, 9, (2, 6))

    def f(x):
        return F.pad(x, (2, 1), **kwargs)

    compiled = C.inductor_compile(torch.fx.symbolic_trace(f), [x])
    assert any("pad" in line for line in compiled.plan.splitlines() if line.startswith("fallback")), compiled.plan
    assert torch.equal(compiled(x), f(x))
