"""Training steps: losses and parameters after a few optimizer steps."""

import torch
import torch.nn.functional as F
from torch.testing import assert_close


def test_sgd_step_changes_weights(mlp, batch):
    x, y = batch
    opt = torch.optim.SGD(mlp.parameters(), lr=0.1)
    before = mlp[0].weight.detach().clone()
    loss = F.mse_loss(mlp(x), y)
    loss.backward()
    opt.step()
    assert not torch.equal(before, mlp[0].weight)
    return mlp[0].weight.detach()


def test_training_loop_loss_decreases(mlp, batch):
    x, y = batch
    opt = torch.optim.SGD(mlp.parameters(), lr=0.05)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = F.mse_loss(mlp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    return losses


def test_adam_steps(mlp, batch):
    x, y = batch
    opt = torch.optim.Adam(mlp.parameters(), lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        F.mse_loss(mlp(x), y).backward()
        opt.step()
    return [p.detach() for p in mlp.parameters()]


def test_gradients_match_autograd_formula():
    torch.manual_seed(0)
    w = torch.randn(4, 3, requires_grad=True)
    x = torch.randn(5, 4)
    loss = (x @ w).pow(2).sum()
    loss.backward()
    assert_close(w.grad, 2 * x.t() @ (x @ w).detach())


def test_cross_entropy_step():
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 3)
    x = torch.randn(8, 6)
    target = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = F.cross_entropy(model(x), target)
    loss.backward()
    opt.step()
    return loss.detach(), model.weight.detach()


def test_no_grad_inference_after_training(mlp, batch):
    x, y = batch
    opt = torch.optim.SGD(mlp.parameters(), lr=0.1)
    F.mse_loss(mlp(x), y).backward()
    opt.step()
    with torch.no_grad():
        return mlp(x)
