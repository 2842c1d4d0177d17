"""One ``torch.autograd.gradcheck`` (float64) per derivative rule of ``src/autograd/rules.rs``,
through the function dynamo compiled with AOTAutograd (``aot_eager`` and ``inductor``). Each case
also asserts that the compiled path ran: a joint graph was built (``aot_graphs``), none was left
to torch's autograd (``aot_eager_graphs``), and a backward graph was compiled."""

import pytest
import torch
import torch.nn.functional as F

import dynamo

D = torch.float64


def t(*shape, positive=False, low=None):
    x = torch.randn(*shape, dtype=D)
    if positive:
        x = x.abs() + 0.5
    return x.requires_grad_()


def idx(*shape, high):
    return torch.randint(0, high, shape)


# (name, function, inputs factory): the function is what dynamo captures.
CASES = [
    ("add_broadcast", lambda x, y: x + y, lambda: (t(3, 4), t(4))),
    ("add_alpha", lambda x, y: torch.add(x, y, alpha=2.0), lambda: (t(3, 4), t(3, 1))),
    ("sub_broadcast", lambda x, y: x - y, lambda: (t(3, 1), t(2, 3, 4))),
    ("rsub_scalar", lambda x: 2.0 - x, lambda: (t(5),)),
    ("mul_broadcast", lambda x, y: x * y * 3.0, lambda: (t(3, 4), t(1, 4))),
    ("div", lambda x, y: x / y, lambda: (t(3, 4), t(4, positive=True))),
    ("rdiv", lambda x: 1.5 / x, lambda: (t(3, 4, positive=True),)),
    ("neg", lambda x: -x, lambda: (t(3),)),
    ("abs", lambda x: torch.abs(x) + x.abs(), lambda: (t(3, 4),)),
    ("pow", lambda x: x**3, lambda: (t(3, 4),)),
    ("square", lambda x: torch.square(x), lambda: (t(3, 4),)),
    ("sqrt", lambda x: torch.sqrt(x), lambda: (t(3, 4, positive=True),)),
    ("rsqrt", lambda x: torch.rsqrt(x), lambda: (t(3, 4, positive=True),)),
    ("exp", lambda x: torch.exp(x), lambda: (t(3, 4),)),
    ("expm1", lambda x: torch.expm1(x), lambda: (t(3, 4),)),
    ("log", lambda x: torch.log(x), lambda: (t(3, 4, positive=True),)),
    ("log1p", lambda x: torch.log1p(x), lambda: (t(3, 4, positive=True),)),
    ("reciprocal", lambda x: torch.reciprocal(x), lambda: (t(3, 4, positive=True),)),
    ("sin_cos", lambda x: torch.sin(x) + torch.cos(x), lambda: (t(3, 4),)),
    ("tanh", lambda x: torch.tanh(x), lambda: (t(3, 4),)),
    ("sigmoid", lambda x: torch.sigmoid(x), lambda: (t(3, 4),)),
    ("relu", lambda x: F.relu(x), lambda: (t(3, 4),)),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2), lambda: (t(3, 4),)),
    ("silu", lambda x: F.silu(x), lambda: (t(3, 4),)),
    ("gelu", lambda x: F.gelu(x), lambda: (t(3, 4),)),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), lambda: (t(3, 4),)),
    ("views", lambda x: x.view(4, 3).t().reshape(2, 6).unsqueeze(0).transpose(1, 2).squeeze(0).flatten() * 2,
     lambda: (t(3, 4),)),
    ("permute", lambda x: x.permute(2, 0, 1) * 2, lambda: (t(2, 3, 4),)),
    ("expand", lambda x: x.expand(3, 4) * 2, lambda: (t(1, 4),)),
    ("sum", lambda x: x.sum(), lambda: (t(3, 4),)),
    ("sum_dim", lambda x: x.sum(1) + x.sum(0, keepdim=True).sum(), lambda: (t(3, 4),)),
    ("mean", lambda x: x.mean(dim=(0, 2)), lambda: (t(2, 3, 4),)),
    ("softmax", lambda x: torch.softmax(x, -1), lambda: (t(3, 4),)),
    ("log_softmax", lambda x: F.log_softmax(x, dim=0), lambda: (t(3, 4),)),
    ("layer_norm", lambda x, w, b: F.layer_norm(x, (4,), w, b), lambda: (t(2, 3, 4), t(4), t(4))),
    ("linear", lambda x, w, b: F.linear(x, w, b), lambda: (t(2, 3, 4), t(5, 4), t(5))),
    ("linear_no_bias", lambda x, w: F.linear(x, w), lambda: (t(3, 4), t(5, 4))),
    ("matmul", lambda a, b: a @ b, lambda: (t(3, 4), t(4, 5))),
    ("matmul_batched_broadcast", lambda a, b: torch.matmul(a, b), lambda: (t(2, 3, 4), t(4, 5))),
    ("mm", lambda a, b: torch.mm(a, b), lambda: (t(3, 4), t(4, 5))),
    ("bmm", lambda a, b: torch.bmm(a, b), lambda: (t(2, 3, 4), t(2, 4, 5))),
    ("addmm", lambda c, a, b: torch.addmm(c, a, b), lambda: (t(5), t(3, 4), t(4, 5))),
    ("conv2d", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), lambda: (t(2, 3, 6, 6), t(4, 3, 3, 3), t(4))),
    ("conv1d", lambda x, w: F.conv1d(x, w, None, 1, 1, 1, 1), lambda: (t(2, 3, 7), t(4, 3, 3))),
    ("embedding", lambda i, w: F.embedding(i, w), lambda: (idx(2, 5, high=6), t(6, 3))),
    ("mse_loss", lambda x, y: F.mse_loss(x, y), lambda: (t(3, 4), t(3, 4))),
    ("cross_entropy", lambda x, y: F.cross_entropy(x, y), lambda: (t(5, 4), idx(5, high=4))),
    ("nll_loss", lambda x, y: F.nll_loss(x, y, reduction="sum"), lambda: (t(5, 4), idx(5, high=4))),
    # Note [nll_loss gradient]: every reduction, ignored rows (ignore_index inside and outside
    # the class range), a 1-d input with a 0-d target, and a batch whose rows are all ignored.
    ("cross_entropy_ignored", lambda x, y: F.cross_entropy(x, y, ignore_index=1),
     lambda: (t(6, 4), torch.tensor([1, 0, 3, 1, 2, 0]))),
    ("cross_entropy_sum", lambda x, y: F.cross_entropy(x, y, reduction="sum"), lambda: (t(5, 4), idx(5, high=4))),
    ("cross_entropy_none", lambda x, y: F.cross_entropy(x, y, reduction="none", ignore_index=-100) * 1.5,
     lambda: (t(5, 4), torch.tensor([0, -100, 3, 3, 1]))),
    ("cross_entropy_1d", lambda x, y: F.cross_entropy(x, y), lambda: (t(4), torch.tensor(2))),
    ("cross_entropy_all_ignored", lambda x, y: F.cross_entropy(x, y, reduction="sum") + x.sum(),
     lambda: (t(3, 4), torch.full((3,), -100))),
    ("nll_loss_mean_ignored", lambda x, y: F.nll_loss(x, y, ignore_index=2),
     lambda: (t(5, 4), torch.tensor([2, 0, 3, 2, 1]))),
    ("nll_loss_none", lambda x, y: F.nll_loss(x, y, reduction="none") * 2.0, lambda: (t(5, 4), idx(5, high=4))),
    ("max_pool2d", lambda x: F.max_pool2d(x, 3, 2, 1), lambda: (t(1, 2, 6, 6),)),
    ("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (1, 1)), lambda: (t(2, 3, 4, 4),)),
    ("split", lambda x: x.split(2, dim=1)[0] * 2 + x.split(2, dim=1)[2], lambda: (t(3, 6),)),
    ("chunk", lambda x: torch.chunk(x, 3, 0)[1] * 3, lambda: (t(6, 2),)),
    ("getitem_basic", lambda x: x[:, 1] * 2 + x[1:, ::2].sum() + x[None, ..., -1].sum(), lambda: (t(3, 4),)),
    ("sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v), lambda: (t(2, 3, 4), t(2, 5, 4), t(2, 5, 3))),
    ("sdpa_causal_scale", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
     lambda: (t(1, 2, 4, 4), t(1, 2, 4, 4), t(1, 2, 4, 4))),
    ("sdpa_masks", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)
     + F.scaled_dot_product_attention(q, k, v, attn_mask=m > 0),
     lambda: (t(2, 4, 3), t(2, 4, 3), t(2, 4, 3), torch.randn(4, 4, dtype=D).abs() + torch.eye(4, dtype=D))),
    ("cat", lambda x, y: torch.cat([x, y * 2, x], dim=-1), lambda: (t(3, 2), t(3, 4))),
    ("radd_scalar", lambda x: 2.0 + x * 3.0, lambda: (t(5),)),
    ("contiguous", lambda x: x.t().contiguous() * 2, lambda: (t(3, 4),)),
    ("to_same_dtype", lambda x: x.to(torch.float64) * 2 + x.double(), lambda: (t(3, 4),)),
    ("dropout_p0_train", lambda x: F.dropout(x, 0.0, training=True) * 2, lambda: (t(3, 4),)),
    ("dropout_eval", lambda x: F.dropout(x, 0.5, training=False) * 2, lambda: (t(3, 4),)),
    ("batch_norm_train", lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
     lambda: (t(4, 3, 2, 2), t(3), t(3))),
    ("batch_norm_eval", lambda x, rm, rv, w, b: F.batch_norm(x, rm, rv, w, b, training=False),
     lambda: (t(4, 3, 2, 2), torch.randn(3, dtype=D), torch.rand(3, dtype=D) + 0.5, t(3), t(3))),
]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("name,fn,make", CASES, ids=[c[0] for c in CASES])
def test_gradcheck(backend, name, fn, make, monkeypatch):
    # Every rule runs through the compiled forward and backward graphs, including ops inductor
    # lowers to no kernel (Note [forward without kernels] in aot.py would run those eagerly).
    monkeypatch.setattr(dynamo.config, "aot_eager_without_kernels", False)
    inputs = make()
    compiled = dynamo.optimize(backend)(fn)
    assert torch.autograd.gradcheck(compiled, inputs, eps=1e-6, atol=1e-5, rtol=1e-4)
    c = dynamo.counters()
    assert c["aot_graphs"] >= 1, c
    assert c["aot_eager_graphs"] == 0, c
    assert c["aot_backward_graphs"] >= 1, c
    # The compiled forward equals eager.
    with torch.no_grad():
        expected = fn(*inputs)
    got = compiled(*inputs)
    torch.testing.assert_close(got, expected, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_sdpa_gradient_of_a_fully_masked_query_row(backend):
    """A query row whose every key is masked out: PyTorch returns zeros there and finite
    gradients; the rule's recomputed softmax was 0/0 and gave nan gradients to q, k and v."""
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    mask = torch.tensor([[True] * 5, [False] * 5, [True, False, True, False, False]])

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask) * 2

    grads = []
    for fn in (f, dynamo.optimize(backend)(f)):
        dynamo.reset()
        ins = [t.clone().requires_grad_() for t in (q, k, v)]
        out = fn(*ins)
        out.square().sum().backward()
        grads.append((out.detach(), *[t.grad for t in ins]))
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)
