"""Graphs captured under CPU autocast(bfloat16) (Note [autocast] in dynamo/aot.py): forward and
backward follow autocast's dtypes as in eager, on every backend."""

import pytest
import torch

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]


def matmul_in_autocast(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
    return y.float().sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_of_a_matmul_under_autocast(backend):
    we = torch.ones(4, 4, requires_grad=True)
    le = matmul_in_autocast(torch.ones(2, 4), we)
    le.backward()
    dynamo.reset()
    wc = torch.ones(4, 4, requires_grad=True)
    lc = dynamo.optimize(backend)(matmul_in_autocast)(torch.ones(2, 4), wc)
    assert (lc.dtype, lc.requires_grad, lc.grad_fn is not None) == (le.dtype, True, True)
    assert torch.equal(lc, le)
    lc.backward()
    assert wc.grad.dtype == we.grad.dtype and torch.equal(wc.grad, we.grad)
    # autocast's `__enter__` is not traced: a break before the block, then the block's graph
    # and the rest.
    assert dynamo.counters()["graphs"] >= 1


def train_step(model, x, target):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, target)
    loss.backward()
    return loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_bf16_autocast_training_step_of_an_mlp(backend):
    torch.manual_seed(0)
    model_e = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    model_c = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    model_c.load_state_dict(model_e.state_dict())
    x, target = torch.randn(5, 8), torch.tensor([0, 1, 2, 3, 1])
    le = train_step(model_e, x, target)
    dynamo.reset()
    lc = dynamo.optimize(backend)(train_step)(model_c, x, target)
    assert lc.dtype == le.dtype
    torch.testing.assert_close(lc, le, atol=1e-2, rtol=1.6e-2)
    for pe, pc in zip(model_e.parameters(), model_c.parameters()):
        assert pc.grad.dtype == pe.grad.dtype == torch.float32
        torch.testing.assert_close(pc.grad, pe.grad, atol=1e-2, rtol=1.6e-2)
