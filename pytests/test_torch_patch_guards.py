"""A torch function or Tensor method replaced after compiling (`F.gelu = ...`,
`torch.relu = ...`, `torch.Tensor.relu = ...`) is seen: attributes the trace reads from torch's
modules and classes without a guard each are guarded together by one version check per module
dict or class (Note [attribute version guards]); a write to that dict or class recompiles only
when a name the trace read changed."""

import pytest
import torch
import torch.nn.functional as F

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]

CASES = [
    ("F.gelu", lambda x: F.gelu(x), F, "gelu", lambda x: x * 7),
    ("torch.relu", lambda x: torch.relu(x) + 1, torch, "relu", lambda x: x * 7),
    ("Tensor.relu", lambda x: x.relu() + 1, torch.Tensor, "relu", lambda self: self * 7),
    ("torch.Tensor.relu(x)", lambda x: torch.Tensor.relu(x) + 1, torch.Tensor, "relu", lambda self: self * 7),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_patch_after_compiling_is_seen(backend, case):
    _, fn, owner, attr, new = case
    cf = dynamo.optimize(backend)(fn)
    x = -torch.ones(2)
    assert torch.allclose(cf(x), fn(x))
    old = getattr(owner, attr)
    setattr(owner, attr, new)
    try:
        e, c = fn(x), cf(x)
    finally:
        setattr(owner, attr, old)
    assert torch.allclose(c, e)
    # Patched back: the first entry serves again.
    assert torch.allclose(cf(x), fn(x))
    c = dynamo.counters()
    assert c["recompiles"] == 1 and c["graph_breaks"] == 0


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_unrelated_write_to_the_module_does_not_recompile(backend):
    cf = dynamo.optimize(backend)(lambda x: F.gelu(x) + torch.relu(x))
    x = torch.randn(3)
    cf(x)
    F._dynamo_test_unrelated = 1
    torch._dynamo_test_unrelated = 1
    try:
        assert torch.allclose(cf(x), F.gelu(x) + torch.relu(x))
        assert torch.allclose(cf(x), F.gelu(x) + torch.relu(x))
    finally:
        del F._dynamo_test_unrelated
        del torch._dynamo_test_unrelated
    assert dynamo.counters()["recompiles"] == 0


def test_patched_torch_global_inside_an_inlined_torch_function():
    # F.silu is Python code in torch.nn.functional that calls torch._C._nn.silu through the
    # module's globals; F.normalize reads `torch` and calls torch.linalg.vector_norm.
    fn = lambda x: F.normalize(x, dim=0)
    cf = dynamo.optimize("eager")(fn)
    x = torch.randn(4)
    assert torch.allclose(cf(x), fn(x))
    old = torch.linalg.vector_norm
    torch.linalg.vector_norm = lambda *a, **k: old(*a, **k) * 0 + 2.0
    try:
        assert torch.allclose(cf(x), fn(x))
    finally:
        torch.linalg.vector_norm = old
    assert torch.allclose(cf(x), fn(x))
