"""Note [activation checkpointing] (src/autograd/partition.rs): `torch.utils.checkpoint.checkpoint`
with `use_reentrant=False` is inlined into the graph, its nodes tagged `recompute`, and the
min-cut partitioner recomputes the region in the compiled backward instead of saving its
activations. Gradients equal eager's; the forward saves only the region's inputs. The reentrant
form (and the default, which warns and is reentrant) runs through torch, as eager."""

import copy
import warnings

import pytest
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

import dynamo

BACKENDS = ["aot_eager", "inductor"]


def _blocks():
    torch.manual_seed(0)
    return nn.ModuleList(nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16)) for _ in range(3))


def _run(blocks, x, ck, **ck_kwargs):
    for b in blocks:
        x = x + (checkpoint(b, x, **ck_kwargs) if ck else b(x))
    return x.tanh().sum()


def _saved_activation_bytes(fn, x, params):
    """Bytes of the tensors autograd keeps for the backward of one forward, parameters aside
    (read off the autograd graph: under saved-tensor hooks the graph would run through torch)."""
    from conftest import saved_tensors_of

    ids = {id(p) for p in params}
    out = fn(x)
    packed = [t.numel() * t.element_size() for t in saved_tensors_of(out)
              if id(t) not in ids and not any(t.data_ptr() == p.data_ptr() for p in params)]
    return out, sum(packed)


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_reentrant_checkpoint_is_captured_and_recomputed_in_the_backward(backend):
    blocks = _blocks()
    ref = copy.deepcopy(blocks)
    x = torch.randn(8, 16, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    dynamo.reset()
    opt = dynamo.optimize(backend)(lambda x: _run(blocks, x, True, use_reentrant=False))
    out, saved_ck = _saved_activation_bytes(opt, x, list(blocks.parameters()))
    out.backward()
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_breaks"] == 0 and c["aot_backward_graphs"] == 1, dict(c)
    want = _run(ref, x_ref, True, use_reentrant=False)
    want.backward()
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close([p.grad for p in blocks.parameters()], [p.grad for p in ref.parameters()], rtol=1e-5, atol=1e-5)
    # Without the checkpoint, the same compiled model saves its hidden activations.
    dynamo.reset()
    plain = dynamo.optimize(backend)(lambda x: _run(blocks, x, False))
    _, saved_plain = _saved_activation_bytes(plain, x, list(blocks.parameters()))
    hidden = 3 * 8 * 64 * 4  # one (8, 64) float32 hidden activation per block
    assert saved_plain >= hidden, saved_plain
    assert saved_ck < saved_plain - hidden, (saved_ck, saved_plain)


@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpoint_passes_keyword_arguments_and_tuples(backend):
    lin = nn.Linear(4, 4)

    def region(a, b, *, scale):
        return lin(a) * scale, (a + b).relu()

    def f(a, b):
        u, v = checkpoint(region, a, b, scale=3.0, use_reentrant=False, preserve_rng_state=False)
        return (u * v).sum()

    a = torch.randn(2, 4, requires_grad=True)
    b = torch.randn(2, 4, requires_grad=True)
    dynamo.reset()
    dynamo.optimize(backend)(f)(a, b).backward()
    got = [a.grad.clone(), b.grad.clone(), lin.weight.grad.clone()]
    a.grad = b.grad = lin.weight.grad = None
    f(a, b).backward()
    torch.testing.assert_close(got, [a.grad, b.grad, lin.weight.grad])
    assert dynamo.counters()["graph_breaks"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_random_op_inside_the_region_draws_once(backend):
    # Eager recomputes dropout under the saved RNG state; the compiled region saves its mask:
    # the same values and gradients for the same seed, and the generator ends in the same state.
    lin = nn.Linear(8, 8)

    def region(x):
        return nn.functional.dropout(lin(x), 0.5, training=True).tanh()

    def f(x):
        return checkpoint(region, x, use_reentrant=False).sum()

    x = torch.randn(4, 8, requires_grad=True)
    dynamo.reset()
    torch.manual_seed(7)
    dynamo.optimize(backend)(f)(x).backward()
    after = torch.rand(3)
    got = [x.grad.clone(), lin.weight.grad.clone()]
    x.grad = lin.weight.grad = None
    torch.manual_seed(7)
    f(x).backward()
    torch.testing.assert_close(got, [x.grad, lin.weight.grad])
    torch.testing.assert_close(after, torch.rand(3))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reentrant", [True, None])
def test_reentrant_checkpoint_runs_through_torch(backend, reentrant):
    blocks = _blocks()
    x = torch.randn(8, 16, requires_grad=True)
    kwargs = {} if reentrant is None else {"use_reentrant": True}
    dynamo.reset()
    with warnings.catch_warnings(record=True) as got_w:
        warnings.simplefilter("always")
        dynamo.optimize(backend)(lambda x: _run(blocks, x, True, **kwargs))(x).backward()
    got = [p.grad.clone() for p in blocks.parameters()]
    assert dynamo.counters()["graph_breaks"] >= 1
    blocks.zero_grad()
    with warnings.catch_warnings(record=True) as want_w:
        warnings.simplefilter("always")
        _run(blocks, x, True, **kwargs).backward()
    torch.testing.assert_close(got, [p.grad for p in blocks.parameters()])
    assert [str(w.message) for w in got_w if "use_reentrant" in str(w.message)] == [
        str(w.message) for w in want_w if "use_reentrant" in str(w.message)
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_requires_grad_true_on_a_tensor_that_requires_grad_stays_in_the_graph(backend):
    # transformers' `enable_input_require_grads` hook: `output.requires_grad_(True)` on an
    # embedding output, which already requires grad, changes nothing.
    emb = nn.Embedding(10, 4)
    handle = emb.register_forward_hook(lambda m, i, o: o.requires_grad_(True))
    try:
        def f(ids):
            return emb(ids).square().sum()

        ids = torch.tensor([[1, 2, 3]])
        dynamo.reset()
        dynamo.optimize(backend)(f)(ids).backward()
        got = emb.weight.grad.clone()
        c = dynamo.counters()
        assert c["graphs"] == 1 and c["aot_graphs"] == 1 and c["aot_eager_graphs"] == 0, dict(c)
        emb.weight.grad = None
        f(ids).backward()
        torch.testing.assert_close(got, emb.weight.grad)
    finally:
        handle.remove()


def test_transformers_gradient_checkpointing_is_one_graph():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=32,
                                  attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    ref = copy.deepcopy(model)
    ids = torch.randint(0, 64, (2, 8))
    dynamo.reset()
    dynamo.optimize("inductor")(model)(input_ids=ids, labels=ids).loss.backward()
    ref(input_ids=ids, labels=ids).loss.backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-5, msg=name)
    c = dynamo.counters()
    assert c["aot_graphs"] == 1 and c["aot_backward_graphs"] == 1 and c["graph_breaks"] == 0, dict(c)
