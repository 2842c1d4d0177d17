"""torch._dynamo API that user code calls inside compiled functions (tester 7 #5):
`graph_break()` (torch's and ours) is a graph break, `is_compiling()` answers True while
traced, `allow_in_graph(fn)` puts `fn` in the graph as one node, and `dynamo.utils.counters`
is indexed by category as `torch._dynamo.utils.counters` is (and still called for the flat
counters)."""

import torch
import torch._dynamo

import dynamo


def test_torch_graph_break_breaks_the_graph():
    def f(x):
        y = x + 1
        torch._dynamo.graph_break()
        z = y * 2
        dynamo.graph_break("second")
        return z - 1

    dynamo.reset()
    out = dynamo.explain(f)(torch.ones(2))
    assert out.graph_count == 3 and out.graph_break_count == 2, out.break_reasons
    assert "[GB0028 explicit_graph_break] graph_break() called (at" in out.break_reasons[0]
    assert "graph_break() called: second" in out.break_reasons[1]
    dynamo.reset()
    x = torch.randn(3)
    torch.testing.assert_close(dynamo.optimize("inductor")(f)(x), f(x))


def test_is_compiling_answers_true_while_traced():
    def h(x):
        return x + 1 if dynamo.is_compiling() else x - 1

    dynamo.reset()
    x = torch.zeros(2)
    assert torch.equal(h(x), torch.full((2,), -1.0))
    assert torch.equal(dynamo.optimize("eager")(h)(x), torch.ones(2))
    assert dynamo.counters()["graphs"] == 1 and dynamo.counters()["graph_breaks"] == 0


def test_allow_in_graph_is_one_node():
    calls = []

    @dynamo.allow_in_graph
    def myop(a, b):
        calls.append(1)
        return a * b + a.sin()

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def k(x):
        return myop(x, x + 1).cos()

    dynamo.reset()
    x = torch.randn(3)
    torch.testing.assert_close(dynamo.optimize(backend)(k)(x), k(x))
    assert len(graphs) == 1
    assert myop in [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    # Gradients flow through the node (torch's derivative of the function).
    xg = x.clone().requires_grad_()
    dynamo.reset()
    dynamo.optimize("inductor")(k)(xg).sum().backward()
    xr = x.clone().requires_grad_()
    k(xr).sum().backward()
    torch.testing.assert_close(xg.grad, xr.grad)


def test_counters_by_category():
    def f(x):
        y = x.sin()
        print("side effect")
        return y + 1

    dynamo.reset()
    dynamo.optimize("eager")(f)(torch.ones(2))
    c = dynamo.utils.counters
    flat = c()
    assert flat["graphs"] == 2 and flat["graph_breaks"] == 1
    assert c["stats"]["unique_graphs"] == 2
    assert c["frames"]["total"] == flat["frames_seen"] and c["frames"]["ok"] == flat["compiles"]
    breaks = c["graph_break"]
    assert sum(breaks.values()) == 1 and "GB0001 unsupported_builtin" in next(iter(breaks))
    assert c["no_such_category"] == {} and "stats" in c
    c.clear()
    assert c["stats"]["unique_graphs"] == 0 and dynamo.counters()["graphs"] == 0


def test_unknown_backend_is_invalid_backend():
    # torch raises torch._dynamo.exc.InvalidBackend (a RuntimeError); dynamo raised KeyError.
    import pytest

    from dynamo.exc import InvalidBackend

    with pytest.raises(InvalidBackend, match="Invalid backend: 'no_such_backend'") as info:
        dynamo.optimize("no_such_backend")
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, KeyError)
