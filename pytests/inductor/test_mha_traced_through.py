"""nn.MultiheadAttention traced through (Note [torch functions traced through] in
src/symbolic/builder.rs): `F.multi_head_attention_forward` and its projection helpers are traced
like user code, so the graph holds their linears and `scaled_dot_product_attention` instead of
one leaf call, and training takes the derivative rules of those ops instead of torch's
derivative of a recomputed leaf (`dynamo._functional.vjp_call`).

Each case runs eagerly and compiled from the same seed and compares outputs (values, shapes,
strides), attention weights, parameter gradients and the random stream afterwards (dropout).
"""

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dynamo

CONFIGS = [
    dict(embed_dim=16, num_heads=4),
    dict(embed_dim=16, num_heads=4, batch_first=True),
    dict(embed_dim=16, num_heads=2, kdim=8, vdim=12),
    dict(embed_dim=16, num_heads=4, add_bias_kv=True, add_zero_attn=True),
    dict(embed_dim=16, num_heads=4, bias=False),
    dict(embed_dim=16, num_heads=4, dropout=0.3),
]
CALLS = {
    "self": dict(self_attention=True),
    "cross": dict(),
    "no_weights": dict(kw=dict(need_weights=False)),
    "per_head_weights": dict(kw=dict(average_attn_weights=False)),
    "key_padding_mask": dict(kw=dict(key_padding_mask=torch.tensor([[False] * 6 + [True]] * 3))),
    "bool_mask": dict(kw=dict(attn_mask=torch.triu(torch.ones(5, 7, dtype=torch.bool), 1), need_weights=False)),
    "float_mask": dict(kw=dict(attn_mask=torch.randn(5, 7))),
}


def run(cfg, call, train, grad, compiled):
    torch.manual_seed(0)
    m = nn.MultiheadAttention(**cfg).train(train)
    e, bf = cfg["embed_dim"], cfg.get("batch_first", False)
    shape = (lambda n, d: (3, n, d)) if bf else (lambda n, d: (n, 3, d))
    q = torch.randn(shape(5, e))
    k = torch.randn(shape(7, cfg.get("kdim") or e))
    v = torch.randn(shape(7, cfg.get("vdim") or e))
    if call.get("self_attention"):
        k = v = q
    kw = call.get("kw", {})

    def f(q, k, v):
        return m(q, k, v, **kw)

    fn = dynamo.optimize("inductor")(f) if compiled else f
    dynamo.reset()
    torch.manual_seed(1)
    with torch.set_grad_enabled(grad):
        out, w = fn(q, k, v)
        if grad:
            (out.sum() + (w.sum() if w is not None else 0)).backward()
    grads = [p.grad for p in m.parameters()] if grad else []
    return out, w, grads, torch.rand(3), dict(dynamo.counters())


@pytest.mark.parametrize(("cfg", "call", "train", "grad"), [
    pytest.param(cfg, CALLS[c], train, grad, id=f"{i}-{c}-{'train' if train else 'eval'}-{'grad' if grad else 'nograd'}")
    for (i, cfg), c, train, grad in itertools.product(enumerate(CONFIGS), CALLS, (True, False), (True, False))
    if not (c == "self" and "kdim" in cfg)
])
def test_multihead_attention_equals_eager(cfg, call, train, grad):
    o1, w1, g1, r1, _ = run(cfg, call, train, grad, compiled=False)
    o2, w2, g2, r2, _ = run(cfg, call, train, grad, compiled=True)
    torch.testing.assert_close(o2, o1, atol=1e-5, rtol=1e-4)
    assert o2.shape == o1.shape and o2.stride() == o1.stride()
    assert (w1 is None) == (w2 is None)
    if w1 is not None:
        torch.testing.assert_close(w2, w1, atol=1e-5, rtol=1e-4)
    for a, b in zip(g2, g1):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-3)
    assert torch.equal(r2, r1), "the random stream after the call differs from eager's"


def test_graph_holds_the_projections_and_attention_not_one_leaf():
    torch.manual_seed(0)
    m = nn.MultiheadAttention(16, 4, batch_first=True)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    x = torch.randn(2, 5, 16)
    dynamo.reset()
    out = dynamo.optimize(backend)(lambda x: m(x, x, x, need_weights=False)[0])(x)
    torch.testing.assert_close(out, m(x, x, x, need_weights=False)[0])
    assert len(graphs) == 1
    targets = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert F.multi_head_attention_forward not in targets
    assert F.scaled_dot_product_attention in targets
    assert sum(t is F.linear for t in targets) == 2, targets  # packed in-projection, out-projection


def test_training_step_takes_rules_not_a_recomputed_leaf(monkeypatch):
    # As one leaf, the attention's backward was `vjp_call`: a second forward of the whole
    # multi_head_attention_forward and torch.autograd.grad in every step.
    import dynamo._functional as functional

    calls = []
    real = functional.vjp_call
    monkeypatch.setattr(functional, "vjp_call", lambda *a: calls.append(a) or real(*a))
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    ref = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    ref.load_state_dict(layer.state_dict())
    x = torch.randn(2, 6, 16)

    def step(model):
        loss = model(x).pow(2).mean()
        loss.backward()
        return loss

    dynamo.reset()
    got = dynamo.optimize("inductor")(step)(layer)
    want = step(ref)
    torch.testing.assert_close(got, want)
    for (name, p), q in zip(layer.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4, msg=name)
    assert not calls
    c = dynamo.counters()
    assert c["aot_graphs"] == 1 and c["aot_eager_graphs"] == 0 and c["aot_graph_splits"] == 0, c


@pytest.mark.parametrize("form", ["method", "function", "inferred"])
def test_unflatten_is_a_view_kernel_with_a_rule(form, monkeypatch):
    # `_in_projection_packed` unflattens the packed projection: `unflatten` has a lowering (a
    # view, no copy) and the view rule of reshape (the gradient reshaped back), where it took
    # torch's derivative through `vjp_call` before.
    import dynamo._functional as functional

    calls = []
    real = functional.vjp_call
    monkeypatch.setattr(functional, "vjp_call", lambda *a: calls.append(a) or real(*a))

    def f(x):
        y = x.sin() * 2
        if form == "method":
            z = y.unflatten(-1, (3, 4))
        elif form == "function":
            z = torch.unflatten(y, 1, (3, 4))
        else:
            z = y.unflatten(1, (-1, 2))
        return (z.cos() * torch.arange(z.shape[-1])).sum(-2)

    x = torch.randn(5, 12, requires_grad=True)
    ref = x.detach().clone().requires_grad_()
    dynamo.reset()
    got = dynamo.optimize("inductor")(f)(x)
    want = f(ref)
    torch.testing.assert_close(got, want)
    assert got.shape == want.shape and got.stride() == want.stride()
    got.sum().backward()
    want.sum().backward()
    torch.testing.assert_close(x.grad, ref.grad)
    assert not calls
    c = dynamo.counters()
    assert c["aot_graphs"] == 1 and c["aot_eager_graphs"] == 0 and c["inductor_kernels_compiled"] >= 1, c
