"""Note [backward sum order] (src/inductor/decompositions.rs): the AOTAutograd backward graph is
compiled with `aten_sum_order=False`, so its sums (derivative rules: layer-norm and bias
gradients) are plain vectorized sums, while a user's `sum` in the forward graph keeps ATen's
order; the gradients still equal eager's within 1e-5."""

import copy

import torch
import torch.nn as nn

import dynamo
import dynamo._C as C


def test_plain_sums_keyword():
    """`inductor_compile(..., aten_sum_order=False)` lowers `sum` as a plain sum (`reduce_sum`),
    the default as ATen's order (`reduce_orderedsum`, bit-for-bit eager's)."""
    x = torch.randn(5, 64, generator=torch.Generator().manual_seed(0))
    gm = torch.fx.symbolic_trace(lambda t: t.sum(1))
    ordered = C.inductor_compile(gm, [x])
    plain = C.inductor_compile(gm, [x], aten_sum_order=False)
    assert "reduce_orderedsum" in ordered.kernel_ir and "reduce_sum(" not in ordered.kernel_ir
    assert "reduce_sum(" in plain.kernel_ir and "reduce_orderedsum" not in plain.kernel_ir
    assert torch.equal(ordered(x), x.sum(1))
    torch.testing.assert_close(plain(x), x.sum(1), rtol=1e-6, atol=1e-6)


def test_backward_graph_sums_are_plain_and_gradients_match_eager(monkeypatch):
    compiled = []
    compile_graph = C.inductor_compile

    def spy(gm, inputs, **kw):
        cg = compile_graph(gm, inputs, **kw)
        compiled.append((kw, cg))
        return cg

    monkeypatch.setattr(C, "inductor_compile", spy)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.LayerNorm(64))
    ref = copy.deepcopy(model)
    x = torch.randn(2, 16, 64)
    w = torch.randn(64)

    def loss_fn(m, x):
        return (m(x) * w).sum()

    loss_ref = loss_fn(ref, x)
    loss_ref.backward()
    loss = dynamo.optimize("inductor")(loss_fn)(model, x)
    loss.backward()
    torch.testing.assert_close(loss, loss_ref, rtol=1e-5, atol=1e-5)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        scale = max(1.0, q.grad.abs().max().item())
        assert (p.grad - q.grad).abs().max().item() <= 1e-5 * scale, name
    backward = [cg for kw, cg in compiled if kw.get("aten_sum_order") is False]
    forward = [cg for kw, cg in compiled if "aten_sum_order" not in kw]
    assert len(backward) == 1 and len(forward) == 1, compiled
    assert "reduce_sum(" in backward[0].kernel_ir and "reduce_orderedsum" not in backward[0].kernel_ir
    assert "reduce_orderedsum" in forward[0].kernel_ir
