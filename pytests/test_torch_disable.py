"""`torch.compiler.disable` / `torch._dynamo.disable` functions run as ordinary Python under
dynamo, as under torch.compile (Note [torch's disable] in src/eval_frame/hook.rs): their ops are
not captured, `torch.compiler.is_compiling()` is False inside, and what they call is not compiled
either; the trace breaks at the call."""

import pytest
import torch

import dynamo


@torch.compiler.disable
def disabled(x):
    return x * 2, torch.compiler.is_compiling()


def helper(x):
    return x + 1, torch.compiler.is_compiling()


@torch._dynamo.disable
def disabled_calling_a_helper(x):
    return helper(x)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_disabled_function_runs_eagerly(backend):
    def fn(x):
        a, inside = disabled(x)
        b, inside_helper = disabled_calling_a_helper(x)
        return a + b, inside, inside_helper, torch.compiler.is_compiling()

    x = torch.ones(3)
    expected = fn(x)
    dynamo.reset()
    got = dynamo.optimize(backend)(fn)(x)
    torch.testing.assert_close(got[0], expected[0])
    # Inside the disabled functions (and what they call) nothing is compiling; in fn itself the
    # trace answers True, as torch.compile's does.
    assert got[1:] == (False, False, True)
    reasons = " ".join(str(r) for r in dynamo.explain(fn)(x).break_reasons)
    assert "torch.compiler.disable" in reasons


def test_dynamo_disable_survives_reset():
    def inner(x):
        return x + 1, torch.compiler.is_compiling()

    dynamo.disable(inner, recursive=False)
    dynamo.reset()

    def fn(x):
        return inner(x)

    assert dynamo.optimize("eager")(fn)(torch.ones(2))[1] is False
