"""Compiling a graph leaves torch's global state as it found it (Note [propagation leaves no
trace] in src/inductor/fx_import.rs): the random numbers a program draws, and grad mode, are
eager's whether or not a graph was compiled on the way."""

import torch

import dynamo


def randn_then_no_grad(lin):
    # A factory op, then a region under no_grad: the graph's meta propagation used to call
    # torch.randn for real, shifting the generator.
    x = torch.randn(2, 4)
    with torch.no_grad():
        return x, lin(x), torch.randn(3)


def test_compiling_does_not_draw_random_numbers():
    lin = torch.nn.Linear(4, 3).eval()
    torch.manual_seed(0)
    ref = randn_then_no_grad(lin)
    after_ref = torch.randn(2)
    torch.manual_seed(0)
    out = dynamo.optimize("inductor")(randn_then_no_grad)(lin)
    after = torch.randn(2)
    assert dynamo.counters()["inductor_graphs_compiled"] == 1
    for a, b in zip(out, ref):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(after, after_ref)
    assert torch.is_grad_enabled()
