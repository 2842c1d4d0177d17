"""`dynamo.explain` on what `dynamo.optimize` returned: it looks through the wrapper to the
original function or module (as torch._dynamo.explain does), so it reports the original's graphs
instead of nothing (a decorated function runs under its own backend) or a false break at the
wrapper's `set_eval_frame` call (an OptimizedModule)."""

import torch

import dynamo


def f(x, y):
    return torch.sin(x) + torch.cos(y) * 2


def summary(out):
    return out.graph_count, out.graph_break_count, [len(ops) for ops in out.ops_per_graph], out.break_reasons


def test_explain_looks_through_an_optimized_function():
    x, y = torch.randn(4), torch.randn(4)
    want = summary(dynamo.explain(f)(x, y))
    assert want[0] == 1 and want[1] == 0
    for backend in ["inductor", "eager"]:
        fd = dynamo.optimize(backend)(f)
        assert summary(dynamo.explain(fd)(x, y)) == want
        assert summary(dynamo.explain(dynamo.optimize("eager")(fd))(x, y)) == want


def test_explain_looks_through_an_optimized_module():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    x = torch.randn(2, 3)
    want = summary(dynamo.explain(m)(x))
    assert want[0] == 1 and want[1] == 0
    got = summary(dynamo.explain(dynamo.optimize("inductor")(m))(x))
    assert got == want
    assert not any("set_eval_frame" in r for r in got[3])
