"""Derivative rules for ops that split training graphs (the op ran through torch's autograd
between two compiled segments): where, masked_fill, clamp/hardtanh, erf, minimum/maximum,
stack, index_select, gather, cumsum, flip, roll, tril/triu, amax/amin, logsumexp and constant
pad. Each formula is derivatives.yaml's; gradients are compared with eager's on inputs with
ties, broadcasting, NaNs and negative dims, and the graph must not split."""

import pytest
import torch
import torch.nn.functional as F

import dynamo

IDX = torch.tensor([2, 0, 2, 1])
GIDX = torch.tensor([[0, 2, 2], [1, 1, 0], [2, 0, 1], [2, 2, 2]])

CASES = {
    "where_broadcast": lambda x, w: torch.where(x > 0, x * 2, w[0]).sum() + torch.where(w[:1] > 0, 1.0, x).sum(),
    "masked_fill_broadcast": lambda x, w: (x * w).masked_fill(w[0] > 0.5, -1.0).pow(2).sum(),
    "masked_fill_method_scores": lambda x, w: (x @ w.T).masked_fill(torch.ones(4, 4, dtype=torch.bool).triu(1), float("-inf")).softmax(-1).sum(-1).mul(w[:, 0]).sum(),
    "clamp_both": lambda x, w: (x * 3).clamp(-1.0, 1.0).mul(w).sum(),
    "clamp_min_only": lambda x, w: torch.clamp(x * 3, min=-0.5).mul(w).sum(),
    "clamp_at_bounds": lambda x, w: (torch.round(x.detach() * 2) + x * 0).clamp(-1, 1).mul(w).sum() + (x * 0 + 1).clamp(max=1.0).mul(w).sum(),
    "clamp_min_method": lambda x, w: (x - w).clamp_min(0.1).sum() + (x - w).clamp_max(0.2).sum(),
    "hardtanh_bounds": lambda x, w: F.hardtanh(torch.round(x.detach() * 2) + w * 0, -1.0, 1.0).mul(w).sum(),
    "round_sign_floor": lambda x, w: (torch.round(x * 2) + x.sign() + (x * w).floor() + x.trunc()).mul(w).sum(),
    "transposes": lambda x, w: (x @ w.T).sin().sum() + (x[None] @ w.mT[None]).sum(),
    "erf": lambda x, w: torch.erf(x * w).sum(),
    "minimum_ties": lambda x, w: torch.minimum(torch.round(x.detach()) + x * 0, torch.round(w.detach()) + w * 0).mul(x + w).sum(),
    "maximum_broadcast": lambda x, w: torch.maximum(x, w[0]).pow(2).sum(),
    "stack_negative_dim": lambda x, w: torch.stack([x, w * 2, x * w], dim=-1).sin().sum(),
    "index_select_repeats": lambda x, w: torch.index_select(x * w, 0, IDX).pow(2).sum() + (x * 2).index_select(1, IDX[:2]).sum(),
    "gather": lambda x, w: torch.gather(x * w, 1, GIDX).pow(2).sum() + (x + w).gather(0, GIDX[:, :2] % 3).sum(),
    "cumsum_last_dim": lambda x, w: (x * w).cumsum(-1).sin().sum() + torch.cumsum(x, 0).pow(2).sum(),
    "flip_forms": lambda x, w: (x * w).flip(0, 1).mul(w).sum() + torch.flip(x, [1]).mul(w).sum() + x.flip(dims=(0,)).mul(w).sum(),
    "roll": lambda x, w: (x * w).roll(1, 1).mul(w).sum() + torch.roll(x, (1, -2), (0, 1)).mul(w).sum(),
    "tril_triu": lambda x, w: (x * w).tril(1).sin().sum() + torch.triu(x, -1).pow(2).sum(),
    "amax_ties_keepdim": lambda x, w: torch.round(x.detach()).add(w * 1.0).amax(1, keepdim=True).mul(2).sum() + (x + w).amin((0, 1)),
    "logsumexp": lambda x, w: (x * w).logsumexp(1).sum() + torch.logsumexp(x, (0, 1), keepdim=True).sum(),
    "pad_constant": lambda x, w: F.pad(x * w, (1, 2)).sin().sum() + F.pad(x, (0, 0, 2, 1), value=3.0).pow(2).sum(),
}


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_matches_eager_without_a_split(backend, name):
    f = CASES[name]

    def grads(fn):
        torch.manual_seed(0)
        x = torch.randn(4, 3, requires_grad=True)
        w = torch.randn(4, 3, requires_grad=True)
        loss = fn(x, w)
        loss.backward()
        return loss.detach(), x.grad, w.grad

    want = grads(f)
    dynamo.reset()
    got = grads(dynamo.optimize(backend)(f))
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e, equal_nan=True)
    c = dynamo.counters()
    assert (c["graphs"], c["aot_graphs"], c["aot_eager_graphs"], c["aot_graph_splits"]) == (1, 1, 0, 0), c


def test_clamp_of_nan_passes_no_gradient():
    def f(x):
        return (x * 1.0).clamp(-1.0, 1.0).sum()

    x = torch.tensor([float("nan"), 0.5, 3.0], requires_grad=True)
    f(x).backward()
    want = x.grad.clone()
    x.grad = None
    dynamo.reset()
    dynamo.optimize("inductor")(f)(x).backward()
    torch.testing.assert_close(x.grad, want, equal_nan=True)
