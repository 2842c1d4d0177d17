"""Note [lazy graph modules] (src/autograd/export.rs): the graph modules dynamo hands to a backend
(dynamo's graph, AOTAutograd's forward and backward graphs) write their Python code only when
something needs it. Inductor reads the nodes only, so a graph whose every op became a kernel or
an extern call never has its code written; a backend that calls ``gm.forward`` or reads
``gm.code`` gets it on first use, with eager's results."""

import pytest
import torch

import dynamo
from dynamo.backends import inductor

lazy = pytest.importorskip("torch.fx._lazy_graph_module")


def code_written(gm):
    return not (isinstance(gm, lazy._LazyGraphModule) and gm._needs_recompile())


def test_inductor_never_writes_the_code_of_graphs_it_compiles():
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return inductor(gm, example_inputs)

    w = torch.randn(8, 8, requires_grad=True)

    def f(x):
        return (torch.sin(x @ w) * 2).relu().sum()

    x = torch.randn(4, 8)
    expected = f(x)
    expected.backward()
    expected_grad = w.grad.clone()
    w.grad = None
    out = dynamo.optimize(backend)(f)(x)
    out.backward()
    assert torch.allclose(out, expected) and torch.allclose(w.grad, expected_grad)
    assert len(seen) == 1 and dynamo.counters()["aot_graphs"] == 1
    assert dynamo.counters()["inductor_kernel_calls"] > 0
    assert not code_written(seen[0])
    # Asked for, the code is there and runs the graph as eager does.
    assert "def forward" in seen[0].code
    assert code_written(seen[0])


def test_a_backend_that_runs_gm_forward_gets_eager_results():
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    def f(x):
        return torch.cos(x) + x.sum()

    x = torch.randn(5)
    out = dynamo.optimize(backend)(f)(x)
    assert torch.equal(out, f(x))
    assert code_written(seen[0])
