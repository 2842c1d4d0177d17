"""F.cross_entropy with class-index targets lowered to kernels: log_softmax's reductions and
the target's logit read by an indirect load (Note [indirect loads] in llvm/src/kernel.rs);
`ignore_index` rows count for nothing; a target out of range runs the graph eagerly, raising
eager's error (Note [index checks] in src/inductor/ir.rs)."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dynamo
import dynamo._C as C


def head(x, w, t):
    # The logits come from a matrix product (a fallback: in memory), as a model's LM head.
    return F.cross_entropy(torch.mm(x, w), t)


def head_sum(x, w, t):
    return F.cross_entropy(torch.mm(x, w), t, reduction="sum", ignore_index=3)


def head_none(x, w, t):
    return F.cross_entropy(torch.mm(x, w), t, reduction="none", ignore_index=-1)


def lowered(fn, args):
    C.inductor_reset_counters()
    compiled = C.inductor_compile(torch.fx.symbolic_trace(fn), args)
    fallbacks = [line for line in compiled.plan.splitlines() if line.startswith("fallback")]
    assert not [line for line in fallbacks if "cross_entropy" in line], compiled.plan
    assert "indirect_load" in compiled.kernel_ir
    return compiled


@pytest.mark.parametrize("fn", [head, head_sum, head_none])
@pytest.mark.parametrize("n,c", [(1, 2), (7, 5), (64, 128), (33, 1000)])
def test_equals_eager(fn, n, c):
    g = torch.Generator().manual_seed(n * c)
    x, w = torch.randn(n, 16, generator=g), torch.randn(16, c, generator=g) * 3
    t = torch.randint(0, c, (n,), generator=g)
    t[::3] = {head: -100, head_sum: 3 % c, head_none: -1}[fn]
    compiled = lowered(fn, [x, w, t])
    for _ in range(2):
        got, want = compiled(x, w, t), fn(x, w, t)
        assert got.shape == want.shape and got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=2e-6, atol=2e-6, equal_nan=True)


def test_every_row_ignored_gives_eagers_nan():
    x, w = torch.randn(4, 8), torch.randn(8, 6)
    t = torch.full((4,), -100)
    compiled = lowered(head, [x, w, t])
    assert torch.isnan(compiled(x, w, t)) and torch.isnan(head(x, w, t))


@pytest.mark.parametrize("bad", [6, 100, -2, -101])
def test_target_out_of_range_raises_eagers_error(bad):
    x, w = torch.randn(5, 8), torch.randn(8, 6)
    t = torch.tensor([0, 1, 2, 3, 4])
    compiled = lowered(head, [x, w, t])
    t[3] = bad
    with pytest.raises(Exception) as eager:
        head(x, w, t)
    with pytest.raises(type(eager.value)) as got:
        compiled(x, w, t)
    assert str(got.value) == str(eager.value)


def test_training_step_matches_eager():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.Linear(32, 50))
    ref = nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.Linear(32, 50))
    ref.load_state_dict(model.state_dict())
    x, t = torch.randn(20, 12), torch.randint(0, 50, (20,))
    t[4] = -100

    def loss_fn(m, x, t):
        return F.cross_entropy(m(x), t)

    want = loss_fn(ref, x, t)
    want.backward()
    got = dynamo.optimize("inductor")(loss_fn)(model, x, t)
    got.backward()
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    for a, b in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-6)


def label_smoothing(x, w, t):
    return F.cross_entropy(torch.mm(x, w), t, label_smoothing=0.1)


def test_unsupported_arguments_run_through_torch():
    x, w = torch.randn(6, 8), torch.randn(8, 5)
    t = torch.randint(0, 5, (6,))
    compiled = C.inductor_compile(torch.fx.symbolic_trace(label_smoothing), [x, w, t])
    assert any("cross_entropy" in line for line in compiled.plan.splitlines() if line.startswith("fallback"))
    torch.testing.assert_close(compiled(x, w, t), label_smoothing(x, w, t))


def test_int32_targets_raise_eagers_error():
    x, w = torch.randn(5, 8), torch.randn(8, 6)
    t = torch.tensor([0, 1, 2, 3, 4], dtype=torch.int32)
    with pytest.raises(RuntimeError) as eager:
        head(x, w, t)
    with pytest.raises(RuntimeError) as got:
        dynamo.optimize("inductor")(head)(x, w, t)
    assert str(got.value) == str(eager.value)
