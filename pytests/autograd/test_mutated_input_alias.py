"""A mutated graph input that shares storage with another input, when an input requires grad
(the AOTAutograd path): eager sees the write through both names, so the graph runs through torch
(`AotRuntime`'s `mutated_input_aliases`, as the inductor runtime already does for inference)."""

import pytest
import torch

import dynamo


def mutate_other(a, b):
    b.mul_(2)
    return a + 1


def mutate_data(x):
    x.data.mul_(2)
    return x + 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_mutation_through_a_detached_alias(backend):
    def run(fn):
        a = torch.arange(4.0, requires_grad=True)
        out = fn(a, a.detach())
        out.sum().backward()
        return out.detach(), a.detach().clone(), a.grad

    want = run(mutate_other)
    dynamo.reset()
    got = run(dynamo.optimize(backend)(mutate_other))
    for g, w in zip(got, want):
        assert torch.equal(g, w)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_mutation_through_data(backend):
    def run(fn):
        x = torch.arange(3.0, requires_grad=True)
        out = fn(x)
        out.sum().backward()
        return out.detach(), x.detach().clone(), x.grad

    want = run(mutate_data)
    dynamo.reset()
    got = run(dynamo.optimize(backend)(mutate_data))
    for g, w in zip(got, want):
        assert torch.equal(g, w)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_fallback_is_per_call(backend):
    """Separate storages take the compiled forward; the aliased call of the same compiled graph
    runs through torch (its grad_fn is torch's, not the compiled Function's)."""
    dynamo.reset()
    opt = dynamo.optimize(backend)(mutate_other)
    a = torch.arange(4.0, requires_grad=True)
    b = torch.arange(4.0)
    out = opt(a, b)
    assert torch.equal(out.detach(), torch.arange(4.0) + 1)
    assert torch.equal(b, torch.arange(4.0) * 2)
    # The compiled Function's node, named as eager's node (Note [grad_fn names] in aot.py).
    assert getattr(type(out.grad_fn), "_forward_cls", None).__name__ == "CompiledFunction"
    assert type(out.grad_fn).__name__ == "AddBackward0"
    a = torch.arange(4.0, requires_grad=True)
    out = opt(a, a.detach())
    assert torch.equal(out.detach(), torch.arange(4.0) * 2 + 1)
    assert type(out.grad_fn).__name__ == "AddBackward0"
    assert not hasattr(type(out.grad_fn), "_forward_cls")
    assert dynamo.counters()["compiles"] == 1
