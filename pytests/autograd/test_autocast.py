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


@pytest.mark.parametrize("backend", BACKENDS)
def test_ambient_autocast_mixed_dtype_matmuls_stay_in_one_graph(backend):
    """Under autocast, eager casts a matmul's operands, so a bf16 activation times an fp32
    weight does not raise: the trace's mixed-dtype check (which breaks where eager raises) is
    off there. Before, the second Linear of every model under autocast broke the graph. A call
    outside autocast afterwards recompiles and computes in float32."""
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 4))

    @torch.autocast("cpu", dtype=torch.bfloat16)
    def decorated(x):
        return mlp(x) @ x.t()

    x = torch.randn(3, 4, requires_grad=True)
    compiled_mlp, compiled_decorated = dynamo.optimize(backend)(mlp), dynamo.optimize(backend)(decorated)
    for ambient in (True, False):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=ambient):
            pairs = [(mlp(x), compiled_mlp(x)), (decorated(x), compiled_decorated(x))]
        for want, got in pairs:
            assert got.dtype == want.dtype
            torch.testing.assert_close(got, want)
            (gw,) = torch.autograd.grad(want.float().sum(), x)
            (gg,) = torch.autograd.grad(got.float().sum(), x)
            torch.testing.assert_close(gg, gw)
    assert dynamo.counters()["graph_breaks"] == 0
