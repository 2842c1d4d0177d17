"""A compiled graph's per-call input checks take a C++ fast path (torch's ``TensorGuards``) once
inputs have passed them (Note [fast input checks] in src/inductor/wrapper.rs). Inputs that
differ afterwards in sizes, strides or dtype must still fail the checks (the graph then runs
through ``gm.forward``) and give eager's result."""

import pytest
import torch

import dynamo._C as C


def f(a, b):
    return a * b + 1


VARIANTS = {
    "strides": lambda: (torch.randn(4, 3).t(), torch.randn(3, 4)),
    "dtype": lambda: (torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)),
    "second input": lambda: (torch.randn(3, 4), torch.randn(1, 4).expand(3, 4)),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_checks_still_fail_after_the_fast_path_is_built(name):
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    compiled = C.inductor_compile(torch.fx.symbolic_trace(f), [a, b])
    assert compiled.kernel_names
    for _ in range(3):
        torch.testing.assert_close(compiled(a, b), f(a, b))
    C.inductor_reset_counters()
    other = VARIANTS[name]()
    got = compiled(*other)
    torch.testing.assert_close(got, f(*other))
    assert got.dtype == f(*other).dtype
    assert C.inductor_counters()["guard_failures"] == 1
    torch.testing.assert_close(compiled(a, b), f(a, b))
    assert C.inductor_counters()["guard_failures"] == 1
