"""An input that eager's backward does not read is never saved by the partitioner (Note [inputs
eager does not save] in src/autograd/partition.rs), so the user may update it in place between
the forward and `backward()`, as PPO-style observation normalization does."""

import pytest
import torch

import dynamo


def normalized_loss(x, mean, w):
    return ((x - mean) / 2.0 * w).sum()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_input_updated_between_forward_and_backward(backend):
    """`sub` and `div` by a constant save nothing of `mean` in eager; the min-cut saved `mean`
    (inputs cost nothing to save) to recompute `x - mean` in the backward, so `mean.add_(1)`
    before `backward()` raised autograd's "modified by an inplace operation"."""

    def run(f):
        x = torch.arange(12.0).view(3, 4)
        mean = torch.zeros(4)
        w = torch.linspace(-1.0, 1.0, 4, requires_grad=True)
        loss = f(x, mean, w)
        mean.add_(1.0)
        loss.backward()
        return loss.detach(), w.grad, mean

    want = run(normalized_loss)
    dynamo.reset()
    got = run(dynamo.optimize(backend)(normalized_loss))
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)
    assert dynamo.counters()["compiles"] == 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_input_eager_saves_still_raises_as_in_eager(backend):
    """`x * w` saves `x` in eager too: writing `x` before `backward()` raises there, and here."""

    def loss_of(x, w):
        return (x * w).sum()

    def run(f):
        x = torch.arange(4.0)
        w = torch.ones(4, requires_grad=True)
        loss = f(x, w)
        x.add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()

    run(loss_of)
    dynamo.reset()
    run(dynamo.optimize(backend)(loss_of))


class ObsNormPolicy(torch.nn.Module):
    """A policy with a running observation mean, updated after the loss is computed."""

    def __init__(self):
        super().__init__()
        self.register_buffer("obs_mean", torch.zeros(4))
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))

    def forward(self, obs):
        return self.net((obs - self.obs_mean) * 0.5)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_policy_with_a_running_observation_mean(backend):
    def run(compile_):
        torch.manual_seed(0)
        policy = ObsNormPolicy()
        opt = torch.optim.SGD(policy.parameters(), lr=0.1)
        step = dynamo.optimize(backend)(policy) if compile_ else policy
        for i in range(3):
            obs = torch.randn(5, 4) + i
            loss = step(obs).pow(2).mean()
            policy.obs_mean.mul_(0.9).add_(obs.mean(0), alpha=0.1)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return [p.detach().clone() for p in policy.parameters()] + [policy.obs_mean.clone()]

    want = run(False)
    dynamo.reset()
    got = run(True)
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)
    assert dynamo.counters()["compiles"] == 1
