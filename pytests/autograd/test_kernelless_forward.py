"""Note [forward without kernels] (python/dynamo/aot.py): a differentiated graph whose forward
inductor compiles to no kernel of ours runs through `gm.forward` under torch's autograd (no
`autograd.Function` around ATen ops), counted in `aot_kernelless_graphs`; a graph with a kernel
keeps the compiled forward and backward; `config.aot_eager_without_kernels = False` keeps the
compiled path for every graph. Results and gradients equal eager's in each case."""

import copy

import pytest
import torch
import torch.nn as nn

import dynamo


@pytest.fixture
def compiled_path():
    """Runs the test with `aot_eager_without_kernels` off, restoring it after."""
    old = dynamo.config.aot_eager_without_kernels
    dynamo.config.aot_eager_without_kernels = False
    yield
    dynamo.config.aot_eager_without_kernels = old


def _train_twice(model, x):
    """Two forward + backward calls (the second accumulates); returns (outputs, grads)."""
    outs = [model(x) for _ in range(2)]
    for o in outs:
        o.sum().backward()
    return outs, [p.grad.clone() for p in model.parameters()]


def _check_against_eager(make, x):
    torch.manual_seed(0)
    model = make()
    ref = copy.deepcopy(model)
    got_out, got_grads = _train_twice(dynamo.optimize("inductor")(model), x)
    want_out, want_grads = _train_twice(ref, x)
    for g, w in zip(got_out, want_out):
        torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)
        assert g.requires_grad and g.grad_fn is not None
    for g, w in zip(got_grads, want_grads):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    return dynamo.counters()


def test_linear_runs_under_torch_autograd():
    c = _check_against_eager(lambda: nn.Linear(16, 16), torch.randn(4, 16))
    assert c["aot_graphs"] == 1 and c["aot_kernelless_graphs"] == 1, c
    assert c["aot_backward_graphs"] == 0 and c["aot_eager_graphs"] == 0, c


def test_linear_output_carries_eager_grad_fn():
    lin = nn.Linear(16, 16)
    out = dynamo.optimize("inductor")(lin)(torch.randn(16))
    # What eager's F.linear records on a 1-d input, not the compiled Function's backward.
    assert type(out.grad_fn).__name__ == type(lin(torch.randn(16)).grad_fn).__name__
    assert "CompiledFunction" not in type(out.grad_fn).__name__


def test_graph_with_a_kernel_stays_compiled():
    c = _check_against_eager(lambda: nn.Sequential(nn.Linear(16, 16), nn.ReLU()), torch.randn(4, 16))
    assert c["aot_kernelless_graphs"] == 0 and c["aot_backward_graphs"] == 1, c


def test_switch_off_keeps_the_compiled_function(compiled_path):
    c = _check_against_eager(lambda: nn.Linear(16, 16), torch.randn(4, 16))
    assert c["aot_kernelless_graphs"] == 0 and c["aot_backward_graphs"] == 1, c


def test_aot_eager_backend_is_unaffected():
    lin = nn.Linear(8, 8)
    dynamo.optimize("aot_eager")(lin)(torch.randn(8)).sum().backward()
    c = dynamo.counters()
    assert c["aot_kernelless_graphs"] == 0 and c["aot_backward_graphs"] == 1, c

