"""Outputs of a compiled autograd graph that are views of an intermediate (fuzzer seed 70012,
program 312): eager lets the caller write them in place; a view returned from the graph's
``torch.autograd.Function`` is one made inside a custom Function, which autograd forbids to
modify in place. The runtime returns a copy of such a view when no other output shares its
storage (src/autograd/runtime.rs, ``own_view_outputs``)."""

import pytest
import torch

import dynamo


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_view_of_an_intermediate_written_in_place_after_the_graph(backend, capsys):
    def f(p):
        x = (p * 1).permute(1, 0)
        print("break")
        x.mul_(2)
        return (x * x).sum()

    p_eager = torch.randn(2, 3, requires_grad=True)
    p_comp = p_eager.detach().clone().requires_grad_()
    expected = f(p_eager)
    expected.backward()
    out = dynamo.optimize(backend)(f)(p_comp)
    out.backward()
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(p_comp.grad, p_eager.grad)
    c = dynamo.counters()
    assert c["graphs"] == 2 and c["aot_graphs"] >= 1 and c["eager_fallbacks"] == 0


@pytest.mark.xfail(strict=True, raises=RuntimeError, reason="a view sharing storage with another output is kept as the Function's view")
@pytest.mark.parametrize("backend", ["aot_eager"])
def test_two_outputs_sharing_an_intermediate(backend, capsys):
    def f(p):
        y = p * 1
        x = y.permute(1, 0)
        print("break")
        x.mul_(2)
        return y.sum()

    p = torch.randn(2, 3, requires_grad=True)
    expected = f(p)
    torch.testing.assert_close(dynamo.optimize(backend)(f)(p), expected)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_expanded_view_output_keeps_its_broadcast(backend):
    # Found by the fuzzer (seed 73010, program 192): an expanded view returned from a graph
    # whose input requires grad was copied densely, so the caller's in-place write succeeded
    # where eager's raises.
    def f(p):
        return (p * 2).amax(1, keepdim=True).expand(4, 4)

    p = torch.randn(4, 4, requires_grad=True)
    want = f(p)
    got = dynamo.optimize(backend)(f)(p)
    assert got.stride() == want.stride() == (1, 0)
    torch.testing.assert_close(got, want)
    with torch.no_grad():
        with pytest.raises(RuntimeError, match="single memory location"):
            want.add_(1)
        with pytest.raises(RuntimeError, match="single memory location"):
            got.add_(1)
