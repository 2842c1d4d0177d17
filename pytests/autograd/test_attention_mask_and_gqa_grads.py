"""Attention gradients that used torch's derivative of a recomputed op (`vjp_call`) and now
have rules (src/autograd/rules.rs, rule `sdpa` and `sdpa_math`):

- a float attention mask that requires grad (T5's learned relative position bias is the mask
  of every layer): its gradient is the scores' gradient summed to the mask's shape
  (`dynamo._functional.mask_gradient`), with and without attention dropout;
- `enable_gqa=True` (Llama/Mistral with fewer key/value heads): key and value heads repeated as
  torch repeats them, their gradients summed back per group.

Each case compares the loss and every gradient (mask included) with eager from the same seed,
and checks that no `vjp_call` ran and the training graph was one compiled graph.
"""

import pytest
import torch
import torch.nn.functional as F

import dynamo


def run(fn, args, compiled, monkeypatch=None):
    args = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    dynamo.reset()
    torch.manual_seed(3)
    f = dynamo.optimize("inductor")(fn) if compiled else fn
    out = f(*args)
    out.backward()
    return out.detach(), [a.grad for a in args], torch.rand(2)


def check(fn, args, monkeypatch):
    import dynamo._functional as functional

    calls = []
    real = functional.vjp_call
    monkeypatch.setattr(functional, "vjp_call", lambda *a: calls.append(a[:2]) or real(*a))
    want, gw, rw = run(fn, args, compiled=False)
    got, gg, rg = run(fn, args, compiled=True)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    for k, (a, b) in enumerate(zip(gg, gw)):
        assert (a is None) == (b is None), k
        if a is not None:
            assert a.shape == b.shape and a.dtype == b.dtype, k
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=f"gradient of argument {k}")
    assert torch.equal(rg, rw), "random stream after the step differs"
    assert not calls, calls
    c = dynamo.counters()
    assert c["aot_graphs"] == 1 and c["aot_eager_graphs"] == 0 and c["aot_graph_splits"] == 0, c


MASK_SHAPES = [(5, 7), (1, 2, 5, 7), (3, 1, 1, 7), (3, 2, 5, 7)]


@pytest.mark.parametrize("mask_shape", MASK_SHAPES)
def test_float_mask_gradient(mask_shape):
    monkeypatch = pytest.MonkeyPatch()
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 5, 4), torch.randn(3, 2, 7, 4), torch.randn(3, 2, 7, 6)
    bias = torch.randn(mask_shape)

    def f(q, k, v, bias, w):
        mask = bias * w  # the mask is computed in the graph from a parameter, as T5's
        out = F.scaled_dot_product_attention(q.sin(), k, v, attn_mask=mask)
        return (out * out).sum()

    w = torch.tensor(1.5)
    with monkeypatch.context() as m:
        check(f, [q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), bias.requires_grad_(), w.requires_grad_()], m)


@pytest.mark.parametrize("mask_shape", [(5, 7), (3, 1, 5, 7)])
def test_float_mask_gradient_with_dropout(mask_shape):
    # Attention dropout goes through `sdpa_math` (noise drawn in the graph); its backward now
    # also returns the mask's gradient.
    monkeypatch = pytest.MonkeyPatch()
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 5, 4), torch.randn(3, 2, 7, 4), torch.randn(3, 2, 7, 4)
    bias = torch.randn(mask_shape)

    def f(q, k, v, bias):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias + 0.5, dropout_p=0.3)
        return out.square().sum()

    with monkeypatch.context() as m:
        check(f, [q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), bias.requires_grad_()], m)


@pytest.mark.parametrize("mask", [None, "bool", "float"])
@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_attention_gradient(mask, causal):
    monkeypatch = pytest.MonkeyPatch()
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 6, 5, 4), torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 3)
    masks = {None: None, "bool": torch.rand(5, 5) > 0.3, "float": torch.randn(2, 1, 5, 5)}
    m_ = masks[mask]

    def f(q, k, v):
        out = F.scaled_dot_product_attention(q, k * 2, v, attn_mask=m_, is_causal=causal and m_ is None, enable_gqa=True)
        return (out.cos() * torch.arange(3.0)).sum()

    with monkeypatch.context() as m:
        check(f, [q.requires_grad_(), k.requires_grad_(), v.requires_grad_()], m)


def test_t5_position_bias_takes_the_rule(monkeypatch):
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    cfg = transformers.T5Config(num_layers=2, num_decoder_layers=2, num_heads=2, d_model=32, d_kv=16, d_ff=64, vocab_size=64)
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration(cfg).train()
    import copy

    ref = copy.deepcopy(model)
    ids = torch.randint(0, 64, (2, 8))
    import dynamo._functional as functional

    calls = []
    real = functional.vjp_call
    monkeypatch.setattr(functional, "vjp_call", lambda *a: calls.append(a[:2]) or real(*a))
    dynamo.reset()
    torch.manual_seed(1)
    got = dynamo.optimize("inductor")(model)(input_ids=ids, labels=ids, decoder_input_ids=ids).loss
    torch.manual_seed(1)
    want = ref(input_ids=ids, labels=ids, decoder_input_ids=ids).loss
    torch.testing.assert_close(got, want)
    got.backward()
    want.backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        if q.grad is not None:
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)
    assert not calls, calls
