"""Note [TensorIterator metas] (src/inductor/layout.rs): `copysign`, `xlogy`, `special.xlog1py`
and `floor_divide` lay their result out in the operands' memory order in eager, but torch's
meta functions answer contiguous, so a compiled graph returned other strides than eager (a
report-only tester's finding: a channels-last first operand with a contiguous second)."""

import pytest
import torch

import dynamo

OPS = {
    "copysign": lambda x, y: torch.copysign(x, y) + 1,
    "xlogy": lambda x, y: torch.xlogy(x.abs(), y.abs()) * 2,
    "xlog1py": lambda x, y: torch.special.xlog1py(x.abs(), y.abs()) - 1,
    "special_xlogy": lambda x, y: torch.special.xlogy(x.abs(), y.abs()),
    "floor_divide": lambda x, y: torch.floor_divide(x, y.abs() + 1) * 3,
    "floordiv": lambda x, y: (x // (y.abs() + 1)) + x,
    "method": lambda x, y: x.copysign(y).sin(),
    "rfloordiv": lambda x, y: 2.0 // (x.abs() + 1) + y,
}


@pytest.mark.parametrize("layouts", ["cl_first", "cl_second", "t_first"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_mixed_layout_results_keep_eager_strides(op, layouts):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(2, 3, 4, 5, generator=g), torch.randn(2, 3, 4, 5, generator=g)
    if layouts == "cl_first":
        x, y = a.to(memory_format=torch.channels_last), b
    elif layouts == "cl_second":
        x, y = a, b.to(memory_format=torch.channels_last)
    else:
        x, y = a.transpose(2, 3).contiguous().transpose(2, 3), b
    fn = OPS[op]
    want = fn(x, y)
    dynamo.reset()
    got = dynamo.optimize("inductor")(fn)(x, y)
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want)
