"""Forward-mode AD through compiled frames: a dual tensor's tangent survives (Note [forward-AD
duals] in src/inductor/wrapper.rs); the same compiled graph still runs its kernels for plain
tensors. Issue #7, finding 11."""

import pytest
import torch
import torch.autograd.forward_ad as fwAD

import dynamo
import dynamo._C as C

# make_dual's first call loads torch's jvp decompositions, which torch.jit.script warns about.
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning:torch.jit._script")


def f(x):
    return x * 2


def g(x, w):
    return (x.sin() * w).exp().sum()


def tangent_of(fn, *extra):
    with fwAD.dual_level():
        x = fwAD.make_dual(torch.linspace(0, 1, 3), torch.ones(3))
        out = fn(x, *extra)
        p, t = fwAD.unpack_dual(out)
        return p, t


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("fn, extra", [(f, ()), (g, (torch.full((3,), 0.5),))], ids=["mul", "sin_exp_sum"])
def test_dual_keeps_tangent(backend, fn, extra):
    want_p, want_t = tangent_of(fn, *extra)
    dynamo.reset()
    got_p, got_t = tangent_of(dynamo.optimize(backend)(fn), *extra)
    torch.testing.assert_close(got_p, want_p)
    assert got_t is not None
    torch.testing.assert_close(got_t, want_t)


def test_same_graph_keeps_kernels_without_duals():
    """Compiled on a plain tensor, called with a dual, then plain again (and a plain tensor
    inside a dual level): only the dual call runs through torch."""
    dynamo.reset()
    compiled = dynamo.optimize("inductor")(f)
    x = torch.arange(3.0)
    C.inductor_reset_counters()
    assert torch.equal(compiled(x), f(x))
    kernel_calls = C.inductor_counters()["kernel_calls"]
    assert kernel_calls > 0
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, torch.ones(3))
        _, t = fwAD.unpack_dual(compiled(dual))
        assert torch.equal(t, torch.full((3,), 2.0))
        assert C.inductor_counters()["kernel_calls"] == kernel_calls
        assert torch.equal(compiled(x), f(x))  # no tangent: kernels
        assert C.inductor_counters()["kernel_calls"] == 2 * kernel_calls
    assert torch.equal(compiled(x), f(x))
    assert C.inductor_counters()["kernel_calls"] == 3 * kernel_calls


def test_dual_with_grad_input_matches_eager():
    """A dual input next to an input that requires grad (the AOTAutograd path): eager's tangent,
    or eager's error."""
    w = torch.full((3,), 0.5, requires_grad=True)

    def outcome(fn):
        try:
            p, t = tangent_of(fn, w)
            return p.detach(), None if t is None else t.detach(), None
        except Exception as e:
            return None, None, type(e)

    want = outcome(g)
    dynamo.reset()
    got = outcome(dynamo.optimize("inductor")(g))
    assert got[2] == want[2]
    if want[2] is None:
        torch.testing.assert_close(got[0], want[0])
        assert got[1] is not None
        torch.testing.assert_close(got[1], want[1])
