"""torch.cat lowered to a kernel of masked loads (Note [masked loads] in llvm/src/kernel.rs):
each output element reads the input whose segment holds it; inputs of shape [0] are skipped as
torch skips them (transformers' empty key/value cache), so the views before a cat fuse into it."""

import pytest
import torch

import dynamo
import dynamo._C as C


def no_torch_cat(compiled):
    calls = [line for line in compiled.plan.splitlines() if line.startswith("fallback")]
    return not [line for line in calls if "torch.cat" in line]


@pytest.mark.parametrize("dim", [0, 1, -1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16, torch.bool])
def test_cat_equals_eager(dim, dtype):
    g = torch.Generator().manual_seed(dim + 7)
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    d = dim % 3
    for k, n in enumerate((1, 5, 2)):
        shapes[k][d] = n
    xs = [(torch.randn(s, generator=g) * 4).to(dtype) for s in shapes]

    def f(a, b, c):
        return torch.cat([a, b * 1 if dtype != torch.bool else b, c], dim)

    compiled = C.inductor_compile(torch.fx.symbolic_trace(f), xs)
    # Several parts along the innermost dim stay torch's cat (a kernel would load every part).
    assert no_torch_cat(compiled) == (d != 2), compiled.plan
    got, want = compiled(*xs), f(*xs)
    assert got.dtype == want.dtype and got.shape == want.shape and got.stride() == want.stride()
    assert torch.equal(got, want)


def kv_append(qkv):
    # GPT-2's attention with an empty cache: split, view as heads, transpose, cat after [].
    q, k, v = qkv.split(64, dim=2)
    k = k.view(4, 32, 2, 32).transpose(1, 2)
    v = v.view(4, 32, 2, 32).transpose(1, 2)
    empty = torch.tensor([], dtype=torch.float32)
    return torch.cat([empty, k], dim=-2), torch.cat([empty, v], dim=-2), q


def test_empty_cache_append_is_one_copy_kernel():
    qkv = torch.randn(4, 32, 192)
    compiled = C.inductor_compile(torch.fx.symbolic_trace(kv_append), [qkv])
    assert no_torch_cat(compiled), compiled.plan
    for a, b in zip(compiled(qkv), kv_append(qkv)):
        assert torch.equal(a, b) and a.stride() == b.stride()


def mixed(a, b):
    return torch.cat([a, b], 0)


def test_mixed_dtypes_run_through_torch():
    a, b = torch.randn(2, 3), torch.randint(0, 5, (4, 3))
    compiled = C.inductor_compile(torch.fx.symbolic_trace(mixed), [a, b])
    assert not no_torch_cat(compiled), compiled.plan
    assert torch.equal(compiled(a, b), mixed(a, b))


def test_cat_under_dynamo_in_a_loop():
    def f(xs):
        out = xs[0]
        for x in xs[1:]:
            out = torch.cat([out, x.relu()], dim=1)
        return out.sum(1)

    opt = dynamo.optimize("inductor")(f)
    xs = [torch.randn(3, i + 1) for i in range(4)]
    torch.testing.assert_close(opt(xs), f(xs))
