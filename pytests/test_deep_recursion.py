"""Recursion thousands of frames deep under the frame hook (Note [deep recursion] in
src/eval_frame/hook.rs): with the recursion limit raised, eager Python returns; compiled code
must return the same instead of overflowing the C stack (breaker3 finding 08)."""

import subprocess
import sys

import pytest

PROG = r"""
import sys, torch, dynamo
sys.setrecursionlimit(4100)
def rec(x, n):
    return x if n == 0 else rec(x + 1, n - 1)
def f(x):
    return rec(x, 4000)
g = f if sys.argv[1] == "none" else dynamo.optimize(sys.argv[1])(f)
print(g(torch.zeros(1)).item())
print(g(torch.ones(1)).item())
"""


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_deep_recursion_returns_as_in_eager(backend):
    want = subprocess.run([sys.executable, "-c", PROG, "none"], capture_output=True, text=True, timeout=600)
    got = subprocess.run([sys.executable, "-c", PROG, backend], capture_output=True, text=True, timeout=600)
    assert want.returncode == 0, want.stderr
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout == want.stdout == "4000.0\n4001.0\n"
