"""TENSOR_MATCH guards take a C++ fast path (torch's ``TensorGuards``) once a value has passed
them (Note [fast tensor guards] in src/guards/mod.rs). Every property the guard pins must still
fail it after the fast path exists: sizes, strides, dtype, requires_grad and the tensor's type
each miss the cache (a recompile; a subclass runs eagerly), and the first input reuses the first
graph."""

import pytest
import torch

import dynamo


class MyTensor(torch.Tensor):
    pass


VARIANTS = {
    "sizes": lambda: torch.ones(4, 3),
    "strides": lambda: torch.ones(3, 4).t(),
    "dtype": lambda: torch.ones(3, 4, dtype=torch.float64),
    "requires_grad": lambda: torch.ones(3, 4, requires_grad=True),
    "type": lambda: torch.ones(3, 4).as_subclass(MyTensor),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_tensor_match_still_fails_after_the_fast_path_is_built(name):
    def fn(x):
        return x * 2 + 1

    cf = dynamo.optimize("eager")(fn)
    first = torch.arange(12.0).reshape(3, 4)
    for _ in range(3):  # the first call builds the fast check, the others use it
        assert torch.equal(cf(first), fn(first))
    misses = dynamo.counters()["cache_misses"]
    other = VARIANTS[name]()
    torch.testing.assert_close(cf(other).detach(), fn(other).detach())
    assert dynamo.counters()["cache_misses"] == misses + 1
    assert torch.equal(cf(first), fn(first))
    assert dynamo.counters()["cache_misses"] == misses + 1


def test_fast_path_with_a_parameter_and_grad():
    w = torch.nn.Parameter(torch.randn(5))

    def fn(x):
        return (x * w).sum()

    cf = dynamo.optimize("inductor")(fn)
    x = torch.randn(5)
    for _ in range(3):
        w.grad = None
        cf(x).backward()
        got = w.grad.clone()
        w.grad = None
        fn(x).backward()
        torch.testing.assert_close(got, w.grad)
    assert dynamo.counters()["recompiles"] == 0
