"""Smallest failing inputs of what a new user's real programs found at stop 35 (each fixed
kind with its test; the reproducers were torchvision MobileNetV3 and FPN training steps)."""

import torch
import torch.nn.functional as F

import dynamo


def test_split_graph_with_inplace_activation_on_a_norm_output_backpropagates():
    # A graph split around an op that keeps its own segment (rrelu draws random slopes) where
    # a later segment writes a layer_norm output in place: the saved-result check filled a
    # missing gradient from example meta that such an output does not have (Note [stale segment
    # outputs]) and raised TypeError in backward.
    def f(x):
        a = F.rrelu(x, training=True) * x
        z = F.layer_norm(a, (4,)).relu_()
        return (z * F.rrelu(z.sum() * 0.01, training=True) + a).sum()

    x = (torch.rand(2, 4, generator=torch.Generator().manual_seed(0)) * 0.1).requires_grad_()
    torch.manual_seed(0)
    f(x).backward()
    want = x.grad.clone()
    for backend in ("aot_eager", "inductor"):
        x.grad = None
        dynamo.reset()
        torch.manual_seed(0)
        dynamo.optimize(backend)(f)(x).backward()
        torch.testing.assert_close(x.grad, want)
        assert dynamo.counters()["aot_graph_splits"] >= 1


THREADED_FIRST_CALLS = r"""
import concurrent.futures as cf, torch, torch.nn as nn, dynamo
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).eval()
fm = dynamo.optimize("inductor")(m)

def work(i):
    with torch.no_grad():
        for t in (3, 5, 7, 9):
            x = torch.randn(t, 16)
            assert torch.allclose(fm(x), m(x), atol=1e-5)
    return True

with cf.ThreadPoolExecutor(4) as ex:
    assert all(ex.map(work, range(8)))
print("done")
"""


def test_first_calls_from_several_threads_do_not_deadlock():
    # Note [once-only inits that call Python] (src/inductor/mod.rs): a std Once around a probe
    # that runs torch deadlocked threads compiling at the same time (11 of 12 runs hung). A fresh
    # process, so the once-only init has not run yet.
    import subprocess
    import sys

    for _ in range(3):
        r = subprocess.run([sys.executable, "-c", THREADED_FIRST_CALLS], capture_output=True, text=True, timeout=240)
        assert r.returncode == 0 and r.stdout.strip() == "done", r.stderr[-2000:]
