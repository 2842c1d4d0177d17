"""A function torch.compile wrapped, called inside a dynamo region (Note [torch.compile inside
a region] in python/dynamo/eval_frame.py): torch's Dynamo alone handles its frames. With both
frame hooks on, ours transformed the frames under torch's wrapper and torch's Dynamo then
compiled our generated code: InternalTorchDynamoError ("unhashable type: 'slice'") on 3.11, a
segfault on 3.12 (tester 7 #1)."""

import pytest
import torch

import dynamo
from test_side_effects import compile_count


def test_called_in_an_optimize_block():
    @torch.compile(backend="eager")
    def tc(x):
        return x + 1

    dynamo.reset()
    torch._dynamo.reset()
    with dynamo.optimize("inductor"):
        got = tc(torch.ones(2))
    assert torch.equal(got, torch.full((2,), 2.0))


def test_called_from_a_compiled_function():
    tc = torch.compile(lambda x: x.cos() + 1, backend="eager")

    def g(x):
        return tc(x) * 2 + x

    dynamo.reset()
    torch._dynamo.reset()
    x = torch.randn(5)
    got = dynamo.optimize("inductor")(g)(x)
    torch.testing.assert_close(got, g(x))
    # Called again: the cached code runs, torch's compiled function too.
    torch.testing.assert_close(dynamo.optimize("inductor")(g)(x + 1), g(x + 1))


def test_optimize_wrapping_a_torch_compiled_function():
    dynamo.reset()
    torch._dynamo.reset()
    inner = torch.compile(lambda x: x.sin() * 3, backend="eager")
    x = torch.randn(4)
    torch.testing.assert_close(dynamo.optimize("eager")(inner)(x), x.sin() * 3)


# torch warns on CPython 3.13.0 that its guards run slower there; pytest's "error" filter made
# that an InternalTorchDynamoError inside torch's compile.
@pytest.mark.filterwarnings("ignore:Guards may run slower")
def test_torch_compiled_module_in_a_region():
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    cm = torch.compile(m, backend="eager")
    x = torch.randn(4, 3)
    dynamo.reset()
    torch._dynamo.reset()
    with dynamo.optimize("inductor"):
        got = cm(x)
    torch.testing.assert_close(got, m(x))



def _bad_backend(gm, example_inputs):
    raise RuntimeError("backend boom")


@pytest.mark.parametrize("inside", [True, False], ids=["raised_in_region", "raised_outside"])
def test_dynamo_still_compiles_after_torch_compile_raised(inside):
    # Note [a stale foreign hook] (src/eval_frame/hook.rs): a torch.compile'd call that raised
    # left torch's PEP 523 function installed with its callback off; after one that raised
    # inside our region every later frame ran the default way and nothing compiled for the rest
    # of the process (on CPython 3.13.0 in CI, after the test above, 232 tests failed).
    tc = torch.compile(lambda x: x + 1, backend=_bad_backend)
    dynamo.reset()
    torch._dynamo.reset()
    with pytest.raises(Exception, match="backend boom"):
        with torch._dynamo.config.patch(suppress_errors=False):
            if inside:
                with dynamo.optimize("eager"):
                    tc(torch.ones(2))
            else:
                tc(torch.ones(2))
    x = torch.arange(3.0)
    for _ in range(2):
        dynamo.reset()
        out, n, _ = compile_count(lambda t: t * 2 - 1, x)
        assert n == 1 and torch.equal(out, x * 2 - 1)
    # torch.compile itself keeps working afterwards, inside a region and outside.
    ok = torch.compile(lambda t: t.cos() + 1, backend="eager")
    torch.testing.assert_close(ok(x), x.cos() + 1)
    with dynamo.optimize("eager"):
        torch.testing.assert_close(ok(x), x.cos() + 1)
    out, n, _ = compile_count(lambda t: t.sin() * 3, x)
    assert n == 1 and torch.equal(out, x.sin() * 3)


def test_our_compiles_leave_distribution_validation_on():
    """Marking torch.compile's wrapper (above) once ran torch's TorchPatcher.patch, which turns
    off ``torch.distributions`` argument validation for the whole process: after any dynamo
    compile, ``Normal(0., -1.)`` built a distribution instead of raising ValueError. Checked in a
    fresh interpreter, since a torch.compile in an earlier test turns it off legitimately."""
    import subprocess
    import sys

    program = (
        "import torch, dynamo\n"
        "f = dynamo.optimize('inductor')(lambda x: x.sin() + 1)\n"
        "f(torch.ones(3))\n"
        "dynamo.reset()\n"
        "f(torch.ones(3))\n"
        "try:\n"
        "    torch.distributions.Normal(0.0, -1.0)\n"
        "except ValueError:\n"
        "    print('validated')\n"
    )
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "validated"
