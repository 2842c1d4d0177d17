"""Ops without a derivative rule of ours differentiate through torch's autograd inside the
joint graph (Note [torch's derivative for rule-less ops] in src/autograd/rules.rs): the graph
no longer splits around them, and every gradient equals eager's. Random ops still split."""

import pytest
import torch
import torch.nn.functional as F

import dynamo

A = torch.randn(4, 6, generator=torch.Generator().manual_seed(3))
B = torch.randn(6, 5, generator=torch.Generator().manual_seed(4))
T = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 1.0])
LABELS = torch.tensor([0, 2, 1, 5])

CASES = {
    # activations
    "softplus": lambda x, w: F.softplus(x * w, beta=2.0, threshold=5.0),
    "elu_selu_celu": lambda x, w: F.elu(x * w) + F.selu(x) + F.celu(w, 0.5),
    "mish_hardswish": lambda x, w: F.mish(x * w) + F.hardswish(x + w),
    "hardsigmoid_relu6": lambda x, w: F.hardsigmoid(x * w * 4) + F.relu6(x * 7),
    "logsigmoid_glu": lambda x, w: F.logsigmoid(x * w) + F.glu(torch.cat([x, w], 1), -1),
    # reductions and norms
    "var_std": lambda x, w: (x * w).var(1, keepdim=True) + (x + w).std(0),
    "var_mean": lambda x, w: torch.var_mean(x * w, 1)[0][:, None] + torch.var_mean(x, 1)[1][:, None],
    "norms": lambda x, w: (x * w).norm(dim=1)[:, None] + torch.linalg.vector_norm(x, dim=-1)[:, None],
    "normalize": lambda x, w: F.normalize(x * w, dim=1),
    "prod_cumprod": lambda x, w: (x * w).prod(1)[:, None] + torch.cumprod(x, 1),
    "max_ties": lambda x, w: torch.round(x.detach()).add(w * 0.1).max(1).values[:, None] + (x * w).max(),
    "topk_sort": lambda x, w: (x * w).topk(2, 1).values.sum(1, keepdim=True) + (x - w).sort(1).values,
    "cummax": lambda x, w: torch.cummax(x * w, 1).values,
    # views and indexing
    "select_narrow": lambda x, w: (x * w).select(1, 2)[:, None] + (x * w).narrow(1, 1, 3).sum(1, keepdim=True),
    "repeat_unbind": lambda x, w: (x * w).repeat(2, 1)[:4] + torch.stack((x * w).unbind(0)[::-1]),
    "adv_index": lambda x, w: (x * w)[torch.tensor([0, 2, 2, 3])],
    "expand_as_movedim": lambda x, w: (x * w)[:1].expand_as(x) + (x * w).movedim(0, 1).T,
    "diag_unfold": lambda x, w: torch.diag((x * w)[:, :4]).sum() + (x * w).unfold(1, 2, 2).sum(-1).repeat(1, 2),
    # losses
    "losses": lambda x, w: F.l1_loss(x * w, A) + F.smooth_l1_loss(x * w, A) + F.huber_loss(x, A, delta=0.5),
    "bce": lambda x, w: F.binary_cross_entropy_with_logits(x * w, A.sigmoid()) + F.binary_cross_entropy((x * w).sigmoid(), A.sigmoid()),
    "kl_ce_smooth": lambda x, w: F.kl_div((x * w).log_softmax(-1), A.softmax(-1), reduction="batchmean") + F.cross_entropy(x * w, LABELS, label_smoothing=0.1),
    "distances": lambda x, w: F.cosine_similarity(x, w, dim=1)[:, None] + torch.cdist(x, w).sum(1, keepdim=True) + F.pairwise_distance(x, w)[:, None],
    # binary and linear algebra
    "outer_einsum": lambda x, w: torch.outer((x * w)[0], (x * w)[1])[:4] + torch.einsum("ij,jk->ik", x * w, B).sum(1, keepdim=True),
    "atan2_lerp_pow": lambda x, w: torch.atan2(x * w, x + 2) + torch.lerp(x, w, 0.3) + torch.pow(x.abs() + 1, w),
    "addcmul_addcdiv": lambda x, w: torch.addcmul(x, x, w, value=0.5) + torch.addcdiv(x, x, w.abs() + 1, value=0.5),
    "baddbmm_mv_dot": lambda x, w: torch.baddbmm(x[None], (x * w)[None], torch.eye(6)[None])[0] + torch.mv(x * w, T)[:, None] + torch.dot(w[0], T),
    "trig": lambda x, w: torch.tan(x * w * 0.3) + torch.atan(x) + torch.asin((x * w).tanh() * 0.9) + torch.sinh(w) + torch.cosh(x),
    "fmod_remainder": lambda x, w: torch.fmod(x * w, 0.7) + torch.remainder(x * w, 0.7) + torch.nan_to_num(x * w),
    # layers
    "pools_interp": lambda x, w: F.avg_pool1d((x * w)[None], 2)[0].repeat(1, 2) + F.interpolate((x * w)[None], size=6, mode="linear")[0],
    "avg_pool2d": lambda x, w: F.avg_pool2d((x * w)[None, None], 2)[0, 0].repeat(2, 2),
    "group_instance_norm": lambda x, w: F.group_norm((x * w)[None], 2)[0] + F.instance_norm((x * w)[None])[0],
    "rms_norm": lambda x, w: F.rms_norm(x * w, (6,), weight=w[0]),
    "conv_transpose1d": lambda x, w: F.conv_transpose1d((x * w)[None], w[:, :2, None] * torch.ones(1, 1, 3))[0][:, :6],
    "embedding_bag": lambda x, w: F.embedding_bag(torch.tensor([[0, 2], [1, 3]]), x * w, mode="mean").repeat(2, 1),
    "logcumsumexp": lambda x, w: torch.logcumsumexp(x * w, 1),
}


def run(fn):
    torch.manual_seed(0)
    x = torch.randn(4, 6, requires_grad=True)
    w = torch.randn(4, 6, requires_grad=True)
    loss = (fn(x, w).sin() * torch.arange(1.0, 7.0)).sum()
    loss.backward()
    return loss.detach(), x.grad, w.grad


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_less_op_differentiates_in_the_joint_graph(backend, name):
    f = CASES[name]
    want = run(f)
    dynamo.reset()
    got = run(dynamo.optimize(backend)(f))
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5, equal_nan=True)
    c = dynamo.counters()
    assert (c["aot_graphs"], c["aot_graph_splits"], c["aot_eager_graphs"]) == (1, 0, 0), c


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x + 1  # deliberately not the true derivative: its own backward must run


def test_user_autograd_function_keeps_its_backward():
    def f(x):
        return Cube.apply(x.sin() * 2).sum()

    x = torch.randn(5, requires_grad=True)
    f(x).backward()
    want = x.grad.clone()
    x.grad = None
    dynamo.reset()
    dynamo.optimize("inductor")(f)(x).backward()
    torch.testing.assert_close(x.grad, want)


def test_op_error_is_eagers():
    # A bad argument raises in the forward, with eager's exception and message.
    def f(x, w):
        return torch.atan2(x * w, torch.zeros(3))

    x, w = torch.randn(4, requires_grad=True), torch.randn(4)
    with pytest.raises(RuntimeError) as eager:
        f(x, w)
    dynamo.reset()
    with pytest.raises(RuntimeError) as compiled:
        dynamo.optimize("inductor")(f)(x, w)
    assert str(compiled.value) == str(eager.value)


@pytest.mark.parametrize("case", ["rrelu", "bernoulli_on_copy"])
def test_ops_a_second_run_would_change_keep_the_split(case):
    # Their backward cannot run them again (other random numbers), so they still run through
    # torch's autograd between compiled segments, and the gradients are eager's.
    def f(x, w):
        h = x * w
        if case == "rrelu":
            h = F.rrelu(h, training=True)
        else:
            h = h * torch.ones_like(h).bernoulli_(0.5).mul(h)
        return h.sin().sum()

    def grads(fn):
        torch.manual_seed(0)
        x = torch.randn(4, 6, requires_grad=True)
        w = torch.randn(4, 6, requires_grad=True)
        torch.manual_seed(7)
        fn(x, w).backward()
        return x.grad, w.grad, torch.rand(3)

    want = grads(f)
    dynamo.reset()
    got = grads(dynamo.optimize("inductor")(f))
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)
    c = dynamo.counters()
    assert c["aot_eager_graphs"] == 0 and (c["aot_graph_splits"] >= 1 or case == "bernoulli_on_copy"), c


ATTENTION = {
    "plain": dict(),
    "causal": dict(is_causal=True),
    "bool_mask_scale": dict(attn_mask=torch.rand(6, 6, generator=torch.Generator().manual_seed(5)) > 0.3, scale=0.3),
    "float_mask": dict(attn_mask=torch.randn(6, 6, generator=torch.Generator().manual_seed(6))),
    "gqa": dict(enable_gqa=True),
}


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("case", sorted(ATTENTION))
def test_attention_dropout_keeps_one_graph(backend, case):
    # Note [attention dropout as a product] (src/inductor/fx_import.rs): transformers' training
    # attention, F.scaled_dot_product_attention with dropout_p, no longer splits the graph; its
    # dropout draws are eager's (same values, same generator state after).
    kw = ATTENTION[case]

    def f(x, w):
        h = (x * w).reshape(2, 2, 6, 3).tanh()
        k = h[:, :1] if case == "gqa" else h
        return (F.scaled_dot_product_attention(h, k, k * 2, dropout_p=0.3, **kw).sin() * 3).sum()

    def run(fn):
        torch.manual_seed(0)
        x = torch.randn(4, 18, requires_grad=True)
        w = torch.randn(4, 18, requires_grad=True)
        torch.manual_seed(11)
        loss = fn(x, w)
        loss.backward()
        return loss.detach(), x.grad, w.grad, torch.rand(3)

    want = run(f)
    dynamo.reset()
    got = run(dynamo.optimize(backend)(f))
    assert torch.equal(got[3], want[3])
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)
    c = dynamo.counters()
    assert (c["aot_graphs"], c["aot_graph_splits"], c["aot_eager_graphs"]) == (1, 0, 0), c
