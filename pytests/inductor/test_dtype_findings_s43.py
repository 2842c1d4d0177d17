"""Dtype faults a report-only tester found in generated kernels (each compared exactly with
eager, dtype included):

- `ones_like` / `zeros_like` / `full_like` / `new_*` of an int8, uint8 or int16 tensor folded
  to a float32 constant (constant_folding made its stand-in for an unmodelled dtype as
  float32), so a kernel reading it computed in float32;
- a bfloat16 / float16 `sum` read by a fused consumer gave the float32 accumulator, not the
  stored half value (codegen's reduction read now rounds to the buffer's dtype);
- an integer (or float32 / float64) tensor meeting a half tensor was not cast to the half type
  first (Note [half promotion] in src/inductor/lowering.rs)."""

import pytest
import torch

import dynamo


def _same(got, want):
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        assert g.shape == w.shape
        assert torch.equal(g, w) or (g.isnan() == w.isnan()).all() and torch.equal(g.nan_to_num(), w.nan_to_num())


def _run(fn, *args):
    want = fn(*args)
    dynamo.reset()
    got = dynamo.optimize("inductor")(fn)(*args)
    return got, want


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32])
def test_like_factories_keep_small_integer_dtypes(dtype):
    def f(x):
        return (
            torch.ones_like(x) * 100 * 2,
            torch.zeros_like(x) + x,
            x.new_full((3,), 7) - 8,
            x.new_zeros((3,)) + 1,
            x.new_ones((3,)) * 3,
            torch.full_like(x, 5) * x,
        )

    got, want = _run(f, torch.tensor([0, 3, 100], dtype=dtype))
    _same(got, want)


def test_full_like_overflow_raises_as_eager():
    def f(x, y):
        return torch.full_like(x, 200) + y

    x, y = torch.zeros(2, dtype=torch.int8), torch.ones(2)
    with pytest.raises(RuntimeError, match="overflow"):
        f(x, y)
    dynamo.reset()
    with pytest.raises(RuntimeError, match="overflow"):
        dynamo.optimize("inductor")(f)(x, y)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("keepdim", [None, False, True])
def test_half_sum_read_by_a_fused_consumer_is_the_stored_value(dtype, keepdim):
    def f(x):
        s = x.sum() if keepdim is None else x.sum(-1, keepdim=keepdim)
        return (s - 1) * 4096, s

    x = torch.tensor([[1.0, 2**-9, 2**-9, 2**-9], [1.0, 2**-11, 2**-11, 2**-11]], dtype=dtype)
    got, want = _run(f, x)
    _same(got, want)


OPS = {
    "add": lambda h, i: h + i,
    "sub": lambda h, i: h - i,
    "rsub": lambda h, i: i - h,
    "mul": lambda h, i: h * i,
    "div": lambda h, i: h / i,
    "rdiv": lambda h, i: i / h,
    "maximum": lambda h, i: torch.maximum(h, i.to(h.dtype)) + (h < i).to(h.dtype),
    "where": lambda h, i: torch.where(h > 0, h, i) * 1,
    "eq": lambda h, i: (h == i).to(h.dtype) + h,
}


@pytest.mark.parametrize("half", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("other", ["int64", "int32", "int64_0d", "float32_0d", "float64_0d"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_other_dtypes_meeting_half_are_cast_first(half, other, op):
    h = torch.tensor([256.0, 60000.0, -3.0, 0.5], dtype=half)
    name, _, zero_d = other.partition("_")
    dtype = getattr(torch, name)
    i = torch.tensor(257.0003 if dtype.is_floating_point else 257, dtype=dtype) if zero_d else torch.tensor([257, 70000, -70001, 3], dtype=dtype)
    fn = OPS[op]
    got, want = _run(lambda h, i: (fn(h, i),), h, i)
    _same(got, want)
