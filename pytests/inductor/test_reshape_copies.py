"""A reshape that must copy (its input's strides admit no view) is made explicit:
`x.contiguous().reshape(...)`, a copy kernel and an alias (Note [reshape copies] in
src/inductor/layout.rs); a reshape the graph returns keeps torch's copy (no `_base`)."""

import torch

import dynamo
import dynamo._C as C


def merge_heads(g, w):
    # Attention's backward: [B, H, S, D] gradients back to [B * S, H * D] for a weight gradient.
    t = (g * 2).transpose(1, 2).reshape(-1, 64)
    return torch.mm(t.t(), w)


def test_copying_reshape_is_a_kernel_and_an_alias():
    g, w = torch.randn(4, 2, 32, 32), torch.randn(128, 16)
    compiled = C.inductor_compile(torch.fx.symbolic_trace(merge_heads), [g, w])
    # One kernel computes `g * 2` and writes it transposed (the copy); the reshape and `t` of
    # its result are aliases; only the product is a torch call.
    assert len(compiled.kernel_names) == 1 and "(transpose_copy)" in compiled.plan, compiled.plan
    calls = [line for line in compiled.plan.splitlines() if line.startswith("fallback")]
    aliased = {line.split()[1] for line in compiled.plan.splitlines() if line.startswith("alias")}
    assert [line for line in calls if line.split()[1] not in aliased] == [line for line in calls if "torch.mm" in line], compiled.plan
    for _ in range(2):
        torch.testing.assert_close(compiled(g, w), merge_heads(g, w), rtol=1e-5, atol=1e-5)
    # A transposed input of another layout fails the input check and runs through torch.
    gt = torch.randn(4, 32, 2, 32).transpose(1, 2)
    torch.testing.assert_close(compiled(gt, w), merge_heads(gt, w), rtol=1e-5, atol=1e-5)


def returned(x):
    return x.transpose(0, 1).reshape(-1) + 0, x.t().reshape(-1)


def test_returned_reshape_keeps_torchs_copy():
    x = torch.randn(6, 5)
    opt = dynamo.optimize("inductor")(returned)
    got, want = opt(x), returned(x)
    for a, b in zip(got, want):
        assert torch.equal(a, b)
        assert a.stride() == b.stride() and (a._base is None) == (b._base is None)


def viewable(x, w):
    # A reshape torch makes as a view is left alone.
    return torch.mm(x.reshape(-1, 8), w)


def test_viewable_reshape_is_not_copied():
    x, w = torch.randn(3, 4, 8), torch.randn(8, 5)
    compiled = C.inductor_compile(torch.fx.symbolic_trace(viewable), [x, w])
    assert "copy" not in compiled.plan and compiled.kernel_names == [], compiled.plan
    torch.testing.assert_close(compiled(x, w), viewable(x, w))
